// The xpu rms_norm family's plans (plan.h): made once per problem by supports(), from the
// descriptor's shape, dtypes and presence of a weight (what the choice key holds) and the device's
// geometry.
#include "backends/xpu/rms_norm/plan.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "backends/xpu/launch.h"

namespace opreg::xpu::rms_norm {
namespace {

// A packed team aims at this many elements per work-item: enough to amortise the team's tree
// sum, few enough that short rows still fill the group with several rows.
constexpr std::uint64_t kPackedElements = 4;
// dweight partials: at most this many bytes of workspace, and at least this many rows summed
// into each partial row (fewer would make the final reduction re-read more than the rows did).
constexpr std::uint64_t kPartialBudget = 32ull << 20;
constexpr std::uint64_t kMinRowsPerSlot = 8;
// A slot keeps each column's compensated sum: two floats.
constexpr std::uint64_t kSlotBytesPerColumn = 2 * sizeof(float);
// Kernels index columns with 32-bit integers.
constexpr std::uint64_t kMaxHidden = std::numeric_limits<std::int32_t>::max();

// The team size of a packed launch: a power of two near hidden / kPackedElements, at most half
// the group (so a group always holds two rows or more).
std::uint64_t packed_team(std::uint64_t hidden, std::uint64_t group) {
  return std::min(ceil_pow2(ceil_div(std::max<std::uint64_t>(hidden, 1), kPackedElements)), group / 2);
}

// Work-items per row: rows (CPU-shaped) gives each work-item a row of its own.
std::uint64_t team_of(Layout layout, std::uint64_t hidden, std::uint64_t group) {
  if (layout == Layout::rows) return 1;
  return layout == Layout::packed ? packed_team(hidden, group) : group;
}

// The kernel for an (x, weight) pair; without a weight, the pair (x, x).
const char* pair_kernel(const char* stage, Elem x, const void* weight, Elem w) {
  return kernel_name(fmt::format("rms_norm_{}_{}_{}", stage, format_name(x), format_name(weight ? w : x)));
}

template <class Desc>
void start(const Desc& d, const Geometry& g, Plan& plan) {
  plan.group = g.group;
  plan.rows = static_cast<std::uint64_t>(d.rows);
  plan.hidden = static_cast<std::uint64_t>(d.hidden);
  plan.refusal = plan.hidden > kMaxHidden ? Refusal::too_wide : Refusal::none;
  plan.has_weight = d.weight != nullptr;
  plan.team = team_of(plan.layout, plan.hidden, g.group);
}

Verdict packed_fits(std::uint64_t hidden, const DeviceInfo& device) {
  const std::uint64_t group = device.work_group_size;
  if (ceil_pow2(ceil_div(std::max<std::uint64_t>(hidden, 1), kPackedElements)) > group / 2) {
    return Verdict::reject(fmt::format("hidden {} > {}: such rows fill a work-group of {} on their own", hidden,
                                       group / 2 * kPackedElements, group));
  }
  return Verdict::accept();
}

// The layout's rule on the device's advertised geometry.
Verdict rule(Layout layout, std::uint64_t hidden, const DeviceInfo& device) {
  if (layout == Layout::rows) {
    return cpu_device_only(device, "one work-item per row does not coalesce", "packed and group fit");
  }
  return layout == Layout::packed ? packed_fits(hidden, device) : Verdict::accept();
}

}  // namespace

void make_plan(const RowNormFwd& d, const Geometry& g, Plan& plan) {
  start(d, g, plan);
  plan.groups = g.groups_for(ceil_div(plan.rows, g.group / plan.team));
  plan.kernel = pair_kernel(plan.layout == Layout::rows ? "fwd_rows" : "fwd", d.x_type, d.weight, d.w_type);
}

void make_plan(const RowNormBwd& d, const Geometry& g, Plan& plan) {
  start(d, g, plan);
  plan.kernel = pair_kernel(plan.layout == Layout::rows ? "bwd_rows" : "bwd", d.x_type, d.weight, d.w_type);
  const std::uint64_t rows = plan.rows;
  const std::uint64_t hidden = plan.hidden;
  const bool has_dw = plan.has_weight;
  const std::uint64_t per_group = g.group / plan.team;
  // rows: a group per row, or (with dweight, below) per block of rows.
  plan.groups = g.groups_for(plan.layout == Layout::rows ? rows : ceil_div(rows, per_group));
  plan.dw_fused = has_dw;
  plan.reduce = has_dw;
  if (rows == 0 || hidden == 0 || !has_dw) return;  // no partials: dweight is zeroed, or there is none

  if (plan.layout == Layout::split) {
    // dweight first, column by column (dx may be dy: it is written last).
    plan.dw_fused = false;
    plan.tiles = ceil_div(hidden, g.group);
    std::uint64_t chunks = std::max<std::uint64_t>(1, ceil_div(g.max_groups, plan.tiles));
    chunks = std::min({chunks, ceil_div(rows, kMinRowsPerSlot),
                       std::max<std::uint64_t>(1, kPartialBudget / (hidden * kSlotBytesPerColumn))});
    plan.rows_per_chunk = ceil_div(rows, chunks);
    plan.slots = ceil_div(rows, plan.rows_per_chunk);
    plan.scratch_bytes = plan.slots * hidden * kSlotBytesPerColumn;
    plan.column_groups = g.groups_for(plan.tiles * plan.slots);
    plan.columns_kernel = kernel_name(fmt::format("rms_norm_dw_columns_{}", format_name(d.x_type)));
  } else if (plan.layout == Layout::rows) {
    // A group per block of rows, one slot per group, kept by its first work-item. 16-bit x with
    // llama or none casting: the group's f32 block sums after the slots (the kernel's
    // RMS_ROW_BLOCK), a float a column.
    const bool blocked = d.x_type != Elem::f32 && d.mode != family::Mode::gemma;
    const std::uint64_t per_column = kSlotBytesPerColumn + (blocked ? sizeof(float) : 0);
    plan.groups = std::min(g.groups_for(ceil_div(rows, kMinRowsPerSlot)),
                           std::max<std::uint64_t>(1, kPartialBudget / (hidden * per_column)));
    plan.slots = plan.groups;
    plan.scratch_bytes = plan.slots * hidden * per_column;
  } else {
    if (ceil_div(hidden, plan.team) > g.fused_columns && plan.refusal == Refusal::none) {
      plan.refusal = Refusal::fused_columns;
    }
    plan.groups = std::min({plan.groups, std::max<std::uint64_t>(1, ceil_div(rows, per_group * kMinRowsPerSlot)),
                            std::max<std::uint64_t>(1, kPartialBudget / (per_group * hidden * kSlotBytesPerColumn))});
    plan.slots = plan.groups * per_group;
    plan.scratch_bytes = plan.slots * hidden * kSlotBytesPerColumn;
  }
  plan.reduce_cols = std::min(g.group, ceil_pow2(hidden));
  plan.reduce_groups = g.groups_for(ceil_div(hidden, plan.reduce_cols));
  plan.reduce_kernel = kernel_name(fmt::format("rms_norm_dw_reduce_{}", format_name(d.w_type)));
}

Verdict plan_fwd(const RowNormFwd& d, const DeviceInfo& device, Layout layout, bool fused_op, Plan& plan) {
  plan.layout = layout;
  plan.fused_op = fused_op;
  make_plan(d, Geometry::of(device), plan);
  return rule(layout, plan.hidden, device);
}

Verdict plan_bwd(const RowNormBwd& d, const DeviceInfo& device, Layout layout, bool fused_op, Plan& plan) {
  plan.layout = layout;
  plan.fused_op = fused_op;
  make_plan(d, Geometry::of(device), plan);
  if (layout == Layout::group && plan.has_weight) {
    const std::uint64_t group = device.work_group_size;
    const auto most = static_cast<std::uint64_t>(device.fused_columns);
    if (ceil_div(plan.hidden, group) > most) {
      return Verdict::reject(fmt::format("hidden {} > {}: dweight would need more than {} columns per work-item",
                                         plan.hidden, group * most, most));
    }
  }
  return rule(layout, plan.hidden, device);
}

}  // namespace opreg::xpu::rms_norm
