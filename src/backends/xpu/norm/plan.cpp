// The xpu norm family's plans (plan.h): made once per problem by supports(), from the
// descriptor's sets, dtypes and the parameters present (what the choice key holds) and the
// device's geometry.
#include "backends/xpu/norm/plan.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "backends/xpu/launch.h"

namespace opreg::xpu::norm {
namespace {

// A team aims at this many elements per work-item: short sets share a work-group.
constexpr std::uint64_t kSetElements = 4;
// Parameter-gradient partials: at most this many bytes of workspace (both gradients), and at
// least this many elements summed into each partial.
constexpr std::uint64_t kPartialBudget = 32ull << 20;
constexpr std::uint64_t kMinElementsPerSlot = 8;
// rows, backward: per group, c1 and c2 of a block of kRowBlock rows, then a tile's dweight and
// dbias block sums.
constexpr std::uint64_t kRowCoefficientBytes = 2 * sizeof(float) * (kRowBlock + kTile);
// split: a part gives each work-item of its group at least this many elements.
constexpr std::uint64_t kPartElementsPerItem = 8;
// Kernels index a set's elements and the parameters with 32-bit integers.
constexpr std::uint64_t kMaxIndex = std::numeric_limits<std::int32_t>::max();

struct Sets {
  std::uint64_t sets, groups, channels, spread;
  std::uint64_t size() const { return channels * spread; }
  std::uint64_t params() const { return groups * channels; }
};
Sets sets_of(const family::NormSets& s) {
  return {static_cast<std::uint64_t>(s.sets), static_cast<std::uint64_t>(s.groups),
          static_cast<std::uint64_t>(s.channels), static_cast<std::uint64_t>(s.spread)};
}

// Work-items per set: a power of two near size / kSetElements, at most L.
std::uint64_t team_for(std::uint64_t group, const Sets& s) {
  return std::min(group, ceil_pow2(ceil_div(std::max<std::uint64_t>(s.size(), 1), kSetElements)));
}

// The kernel of a stage for x's format and the parameters' (x's where there are none).
const char* pair_kernel(const char* stage, Elem x, bool params, Elem p) {
  return kernel_name(fmt::format("norm_{}_{}_{}", stage, format_name(x), format_name(params ? p : x)));
}
const char* stage_kernel(const char* stage, Layout layout, Elem x, bool params, Elem p) {
  const char* suffix = layout == Layout::rows ? "_rows" : layout == Layout::split ? "_split" : "";
  return pair_kernel(fmt::format("{}{}", stage, suffix).c_str(), x, params, p);
}

// split: the parts a set is cut into, enough for every work-group of a launch to have a part
// (max_groups / sets) while each part gives each work-item at least kPartElementsPerItem elements.
// One part when the sets alone fill the device or are short.
std::uint64_t split_parts(const Sets& s, std::uint64_t group, std::uint64_t max_groups) {
  if (s.sets == 0) return 1;
  const std::uint64_t by_device = ceil_div(max_groups, s.sets);
  const std::uint64_t by_size = s.size() / (kPartElementsPerItem * group);
  return std::max<std::uint64_t>(1, std::min(by_device, by_size));
}

// Elements per part for the parts wanted, and the parts that leaves non-empty (at least one);
// the work-groups of the phases.
void plan_split(const Sets& s, const Geometry& g, Plan& p) {
  const std::uint64_t wanted = split_parts(s, g.group, g.max_groups);
  p.span = ceil_div(s.size(), wanted);
  p.parts = p.span == 0 ? 1 : ceil_div(s.size(), p.span);
  p.groups = g.groups_for(s.sets * p.parts);
  p.set_groups = g.groups_for(ceil_div(s.sets, g.group));
}

// dweight and dbias (those wanted) from per-chunk partials of the batch, by the column kernel.
void plan_columns(const NormBwd& d, const Sets& s, const Geometry& g, Plan& p) {
  const std::uint64_t items = s.sets / s.groups;                        // rows (layer_norm) or N (group_norm), > 0 here
  const std::uint64_t slot_bytes = 2 * 2 * sizeof(float) * s.params();  // (sum, comp) x (dweight, dbias)
  Columns& c = p.columns;
  c.tiles = ceil_div(s.params(), g.group);
  std::uint64_t chunks = std::max<std::uint64_t>(1, ceil_div(g.max_groups, c.tiles));
  chunks = std::min({chunks, ceil_div(items * s.spread, kMinElementsPerSlot),
                     std::max<std::uint64_t>(1, kPartialBudget / slot_bytes)});
  chunks = std::max<std::uint64_t>(1, std::min(chunks, items));
  c.per_chunk = ceil_div(items, chunks);
  c.slots = ceil_div(items, c.per_chunk);
  c.bytes = c.slots * slot_bytes;
  c.groups = g.groups_for(c.tiles * c.slots);
  p.columns_kernel = kernel_name(fmt::format("norm_dw_columns_{}", format_name(d.x_type)));
}

// What both directions plan alike: the sizes' limit, and the main kernel's work-groups (rows: a
// work-item per set, team 1, unused by the kernel; set: teams; split: parts).
Sets start(const family::NormSets& shape, const Geometry& g, Plan& p) {
  const Sets s = sets_of(shape);
  p.group = g.group;
  p.too_large = s.size() > kMaxIndex || s.params() > kMaxIndex;
  p.team = p.layout == Layout::rows ? 1 : team_for(g.group, s);
  p.groups = g.groups_for(ceil_div(s.sets, g.group / p.team));
  if (p.layout == Layout::split) plan_split(s, g, p);
  return s;
}

}  // namespace

void make_plan(const NormFwd& d, const Geometry& g, Plan& p) {
  const Sets s = start(d.shape, g, p);
  p.has_weight = d.weight != nullptr;
  p.has_bias = d.bias != nullptr;
  p.kernel = stage_kernel("fwd", p.layout, d.x_type, p.has_weight || p.has_bias, d.p_type);
  if (p.layout == Layout::split) p.scratch_bytes = 3 * sizeof(float) * s.sets * p.parts;  // per part and set
}

void make_plan(const NormBwd& d, const Geometry& g, Plan& p) {
  const Sets s = start(d.shape, g, p);
  p.has_weight = d.weight != nullptr;
  p.want_w = d.dweight != nullptr;
  p.want_b = d.dbias != nullptr;
  p.kernel = stage_kernel("bwd", p.layout, d.x_type, p.has_weight || p.want_w || p.want_b, d.p_type);
  p.reduce_cols = std::min(g.group, ceil_pow2(s.params()));
  p.reduce_groups = g.groups_for(ceil_div(s.params(), p.reduce_cols));
  p.reduce_kernel = kernel_name(fmt::format("norm_dw_reduce_{}", format_name(d.p_type)));
  if (s.sets == 0 || s.size() == 0) return;  // the run zeroes the parameter gradients
  const bool want = p.want_w || p.want_b;
  const std::uint64_t slot_bytes = 2 * 2 * sizeof(float) * s.params();  // (sum, comp) x (dweight, dbias)
  if (p.layout == Layout::set) {
    if (want) plan_columns(d, s, g, p);
  } else if (p.layout == Layout::rows) {
    // dx, dweight and dbias in one pass over the sets, a block of sets per group; with a parameter
    // gradient wanted, the group's first work-item walks the block into the group's slots. A
    // slot's sums are re-read by the reduction: each should take at least kMinElementsPerSlot
    // elements per parameter.
    p.groups = g.groups_for(s.sets);
    p.fused = want;
    if (!want) return;
    p.groups = std::min({p.groups, g.groups_for(ceil_div(s.sets * s.size(), s.params() * kMinElementsPerSlot)),
                         std::max<std::uint64_t>(1, kPartialBudget / slot_bytes)});
    p.slots = p.groups;
    p.scratch_bytes = p.groups * (slot_bytes + kRowCoefficientBytes);
    p.pb_offset = p.groups * slot_bytes / 2;
    p.coef_offset = p.groups * slot_bytes;
  } else {
    // A slot per (batch item, part), each 2 params floats for dweight and as many for dbias:
    // within kPartialBudget, else the parameter gradients come from the column kernel as in set
    // (many sets, where one part per set leaves a slot per batch item).
    p.slots = (s.sets / s.groups) * p.parts;
    p.fused = want && p.slots * slot_bytes <= kPartialBudget;
    if (want && !p.fused) plan_columns(d, s, g, p);
    const std::uint64_t stats_bytes = 2 * sizeof(float) * (s.sets * p.parts + s.sets);
    const std::uint64_t partial_bytes = p.fused ? p.slots * slot_bytes : 0;
    p.scratch_bytes = stats_bytes + partial_bytes;
    p.pw_offset = stats_bytes;
    p.pb_offset = stats_bytes + partial_bytes / 2;
  }
}

template <class Desc>
Verdict plan_norm(const Desc& d, const DeviceInfo& device, Layout layout, Plan& plan) {
  plan.layout = layout;
  make_plan(d, Geometry::of(device), plan);
  if (layout == Layout::rows) return cpu_device_only(device, "one work-item per set does not coalesce", "set fits");
  // split pays where the sets leave work-groups idle and are long enough to cut: on a GPU it takes
  // only those problems (set takes the rest). On a CPU device rows comes first and takes every
  // problem, so split accepts every problem there: it never changes the choice, and the
  // conformance harness runs it over the whole grid (one part per set where cutting does not pay).
  if (layout == Layout::set || !device.gpu) return Verdict::accept();
  const Sets s = sets_of(d.shape);
  if (split_parts(s, device.work_group_size, device.max_groups) >= 2) return Verdict::accept();
  return Verdict::reject(
      fmt::format("{} sets of {} elements: the sets fill {} work-groups or are too short to cut "
                  "into parts of {} elements; set takes it",
                  s.sets, s.size(), device.max_groups, kPartElementsPerItem * device.work_group_size));
}
template Verdict plan_norm(const NormFwd&, const DeviceInfo&, Layout, Plan&);
template Verdict plan_norm(const NormBwd&, const DeviceInfo&, Layout, Plan&);

}  // namespace opreg::xpu::norm
