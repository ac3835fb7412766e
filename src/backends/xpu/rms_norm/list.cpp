// The xpu rms_norm and fused_add_rms_norm lists and their launch planning (kernels in
// kernels.cl): which kernel, how many work-groups, how rows pack into them, and where dweight's
// partials go. The fused op has the same five variants on the same kernels (`fused` set: s is
// stored and normalised, ds_out added to dx), xpu.fused_add_rms_norm.<dir>.<impl>.
//   xpu.rms_norm.fwd.rows    OpenCL CPU devices only: a work-item per row, eight columns a step
//   xpu.rms_norm.fwd.packed  several short rows per work-group (hidden <= 2 L)
//   xpu.rms_norm.fwd.row     one row per work-group at a time, groups striding over the rows
//   xpu.rms_norm.bwd.rows    OpenCL CPU devices only: a block of rows per group; with dweight its
//                            first work-item walks them into the group's partial slot
//   xpu.rms_norm.bwd.packed  as fwd.packed, dweight per team in private memory (fused)
//   xpu.rms_norm.bwd.row     as fwd.row, dweight fused while a row fits ceil(hidden / L) <= F
//   xpu.rms_norm.bwd.split   any hidden: dweight by a column-parallel kernel, then dx
// L (work-group size) and F (fused dweight columns per work-item) are the device's facts
// (DeviceInfo: work_group_size, fused_columns); the launch itself is sized by the device's
// runtime, which knows the kernels' own limits once built. dweight is always per-slot partials
// from the backend's workspace, summed by a second kernel in a fixed order: no atomics, the same
// bits every run.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "backends/xpu/launch.h"
#include "opreg/ops.h"
#include "opreg/variants.h"
#include "registry/fail.h"

namespace opreg::xpu {
namespace {

enum class Layout : std::uint8_t { packed, row, split, rows };

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

// The kernel for an (x, weight) pair; without a weight, the pair (x, x).
std::string kernel_name(const char* direction, const Tensor& x, const Tensor& weight) {
  const DType w = weight.defined() ? weight.dtype() : x.dtype();
  return fmt::format("rms_norm_{}_{}_{}", direction, format_name(x.dtype()), format_name(w));
}

struct Call : Launch {
  std::uint64_t rows;
  std::uint64_t hidden;

  Call(const KernelContext& ctx, const Tensor& x, const char* name) : Launch(ctx, name) {
    const RowsHidden shape = rows_hidden(x.shape());
    rows = static_cast<std::uint64_t>(shape.rows);
    hidden = static_cast<std::uint64_t>(shape.hidden);
    if (hidden > kMaxHidden) {
      fail(ErrorKind::unsupported, "{}: hidden {} on {}: the kernels take at most {} columns", variant, hidden,
           rt.label(), kMaxHidden);
    }
  }

  // Work-items per row: rows (CPU-shaped) gives each work-item a row of its own.
  std::uint64_t team(Layout layout) const {
    if (layout == Layout::rows) return 1;
    return layout == Layout::packed ? packed_team(hidden, group) : group;
  }

  // dweight = the column sums of `slots` partial rows, in the weight's format.
  void reduce(const DevicePointer& partial, std::uint64_t slots, const Tensor& dweight) {
    const std::uint64_t cols = std::min(group, ceil_pow2(hidden));
    const DevicePointer dw = at(dweight, "dweight");
    rt.launch(queue, rt.kernel(fmt::format("rms_norm_dw_reduce_{}", format_name(dweight.dtype()))),
              groups_for(ceil_div(hidden, cols)) * group, group, SvmArg{partial.base}, partial.offset, SvmArg{dw.base},
              dw.offset, static_cast<cl_uint>(slots), static_cast<cl_uint>(hidden), static_cast<cl_uint>(cols),
              LocalArg{2 * sizeof(float) * group});
  }
};

// The tensors the kernels see: rms_norm's, or fused_add_rms_norm's with its residual and s
// (forward) or ds_out (backward); `x` is the normalised input (s for the fused backward).
const Tensor kNone;
struct FwdTensors {
  const Tensor& x;
  const Tensor& residual;  // undefined for rms_norm
  const Tensor& weight;
  const Tensor& y;
  const Tensor& s;  // undefined for rms_norm
  const Tensor& rstd;
  double eps;
  double offset;
  Casting casting;
};
FwdTensors tensors(const RmsNormFwdArgs& a) {
  return {a.x, kNone, a.weight, a.y, kNone, a.rstd, a.eps, a.offset, a.casting};
}
FwdTensors tensors(const FusedAddRmsNormFwdArgs& a) {
  return {a.x, a.residual, a.weight, a.y, a.s, a.rstd, a.eps, a.offset, a.casting};
}
struct BwdTensors {
  const Tensor& dy;
  const Tensor& ds_out;  // undefined for rms_norm
  const Tensor& x;
  const Tensor& weight;
  const Tensor& rstd;
  const Tensor& dx;
  const Tensor& dweight;
  double offset;
  Casting casting;
};
BwdTensors tensors(const RmsNormBwdArgs& a) {
  return {a.dy, kNone, a.x, a.weight, a.rstd, a.dx, a.dweight, a.offset, a.casting};
}
BwdTensors tensors(const FusedAddRmsNormBwdArgs& a) {
  return {a.dy, a.ds_out, a.s, a.weight, a.rstd, a.dx, a.dweight, a.offset, a.casting};
}

void forward(const FwdTensors& a, const KernelContext& ctx, Layout layout, const char* variant) {
  Call c(ctx, a.x, variant);
  if (c.rows == 0) return;
  const std::uint64_t team = c.team(layout);
  const std::uint64_t per_group = c.group / team;
  const bool has_weight = a.weight.defined();
  const bool fused = a.residual.defined();
  const DevicePointer x = c.at(a.x, "x");
  const DevicePointer res = fused ? c.at(a.residual, "residual") : x;
  const DevicePointer w = has_weight ? c.at(a.weight, "weight") : x;
  const DevicePointer y = c.at(a.y, "y");
  const DevicePointer s = fused ? c.at(a.s, "s") : y;  // not written unless fused
  const DevicePointer rstd = c.at(a.rstd, "rstd");
  c.rt.launch(c.queue, c.rt.kernel(kernel_name(layout == Layout::rows ? "fwd_rows" : "fwd", a.x, a.weight)),
              c.groups_for(ceil_div(c.rows, per_group)) * c.group, c.group, SvmArg{x.base}, x.offset,
              SvmArg{res.base}, res.offset, SvmArg{w.base}, w.offset, SvmArg{y.base}, y.offset, SvmArg{s.base},
              s.offset, SvmArg{rstd.base}, rstd.offset, static_cast<cl_ulong>(c.rows),
              static_cast<cl_uint>(c.hidden), static_cast<cl_uint>(team), static_cast<cl_float>(a.eps),
              static_cast<cl_float>(a.offset), static_cast<cl_int>(a.casting), static_cast<cl_int>(has_weight),
              static_cast<cl_int>(fused), LocalArg{2 * sizeof(float) * c.group});
}

void backward(const BwdTensors& a, const KernelContext& ctx, Layout layout, const char* variant) {
  Call c(ctx, a.x, variant);
  const bool has_dw = a.weight.defined();
  const bool has_ds = a.ds_out.defined();
  if (c.rows == 0 || c.hidden == 0) {
    // No rows: dweight is a sum of nothing. No columns: nothing to write.
    if (has_dw) c.zero(a.dweight);
    return;
  }
  const DevicePointer dy = c.at(a.dy, "dy");
  const DevicePointer ds = has_ds ? c.at(a.ds_out, "ds_out") : dy;
  const DevicePointer x = c.at(a.x, "x");
  const DevicePointer w = has_dw ? c.at(a.weight, "weight") : x;
  const DevicePointer rstd = c.at(a.rstd, "rstd");
  const DevicePointer dx = c.at(a.dx, "dx");
  Workspace::Lease lease;
  DevicePointer partial = x;  // not read without dweight
  std::uint64_t slots = 0;
  std::uint64_t team = c.team(layout == Layout::split ? Layout::row : layout);
  std::uint64_t per_group = c.group / team;
  std::uint64_t groups = c.groups_for(ceil_div(c.rows, per_group));
  bool fused = has_dw;

  if (has_dw && layout == Layout::split) {
    // dweight first, column by column (dx may be dy: it is written last).
    fused = false;
    const std::uint64_t tiles = ceil_div(c.hidden, c.group);
    std::uint64_t chunks = std::max<std::uint64_t>(1, ceil_div(c.rt.info().max_groups, tiles));
    chunks = std::min({chunks, ceil_div(c.rows, kMinRowsPerSlot),
                       std::max<std::uint64_t>(1, kPartialBudget / (c.hidden * kSlotBytesPerColumn))});
    const std::uint64_t rows_per_chunk = ceil_div(c.rows, chunks);
    slots = ceil_div(c.rows, rows_per_chunk);
    lease = acquire_scratch(ctx, slots * c.hidden * kSlotBytesPerColumn);
    partial = c.rt.locate(lease.data(), lease.bytes(), "dweight partials");
    c.rt.launch(c.queue, c.rt.kernel(fmt::format("rms_norm_dw_columns_{}", format_name(a.x.dtype()))),
                c.groups_for(tiles * slots) * c.group, c.group, SvmArg{dy.base}, dy.offset, SvmArg{x.base},
                x.offset, SvmArg{rstd.base}, rstd.offset, SvmArg{partial.base}, partial.offset,
                static_cast<cl_ulong>(c.rows), static_cast<cl_uint>(c.hidden), static_cast<cl_uint>(tiles),
                static_cast<cl_uint>(slots), static_cast<cl_ulong>(rows_per_chunk), static_cast<cl_int>(a.casting));
    c.reduce(partial, slots, a.dweight);
  } else if (layout == Layout::rows) {
    // A group per block of rows; with dweight one slot per group, kept by its first work-item.
    groups = c.groups_for(has_dw ? ceil_div(c.rows, kMinRowsPerSlot) : c.rows);
    if (has_dw) {
      // 16-bit x with llama or none casting: the group's f32 block sums after the slots (the kernel's
      // RMS_ROW_BLOCK), a float a column.
      const bool blocked = a.x.dtype() != DType::f32 && a.casting != Casting::gemma;
      const std::uint64_t per_column = kSlotBytesPerColumn + (blocked ? sizeof(float) : 0);
      groups = std::min(groups, std::max<std::uint64_t>(1, kPartialBudget / (c.hidden * per_column)));
      slots = groups;
      lease = acquire_scratch(ctx, slots * c.hidden * per_column);
      partial = c.rt.locate(lease.data(), lease.bytes(), "dweight partials");
    }
  } else if (fused) {
    const std::uint64_t columns = ceil_div(c.hidden, team);
    const auto most = static_cast<std::uint64_t>(c.rt.info().fused_columns);
    if (columns > most) {
      fail(ErrorKind::unsupported,
           "{}: hidden {} needs {} dweight columns per work-item on {} (work-group {}, team {}), the fused path "
           "keeps at most {}; xpu.rms_norm.bwd.split takes any hidden",
           variant, c.hidden, columns, c.rt.label(), c.group, team, most);
    }
    groups = std::min({groups, std::max<std::uint64_t>(1, ceil_div(c.rows, per_group * kMinRowsPerSlot)),
                       std::max<std::uint64_t>(1, kPartialBudget / (per_group * c.hidden * kSlotBytesPerColumn))});
    slots = groups * per_group;
    lease = acquire_scratch(ctx, slots * c.hidden * kSlotBytesPerColumn);
    partial = c.rt.locate(lease.data(), lease.bytes(), "dweight partials");
  }
  c.rt.launch(c.queue, c.rt.kernel(kernel_name(layout == Layout::rows ? "bwd_rows" : "bwd", a.x, a.weight)), groups * c.group, c.group, SvmArg{dy.base},
              dy.offset, SvmArg{ds.base}, ds.offset, SvmArg{x.base}, x.offset, SvmArg{w.base}, w.offset, SvmArg{rstd.base}, rstd.offset,
              SvmArg{dx.base}, dx.offset, SvmArg{partial.base}, partial.offset, static_cast<cl_ulong>(c.rows),
              static_cast<cl_uint>(c.hidden), static_cast<cl_uint>(team), static_cast<cl_float>(a.offset),
              static_cast<cl_int>(a.casting), static_cast<cl_int>(has_dw), static_cast<cl_int>(fused),
              static_cast<cl_int>(has_ds), LocalArg{sizeof(float) * c.group});
  if (fused) c.reduce(partial, slots, a.dweight);
}

// supports() rules, on the device's advertised geometry.
Verdict packed_fits(const Tensor& x, const DeviceInfo& device) {
  const std::uint64_t group = device.work_group_size;
  const auto hidden = static_cast<std::uint64_t>(rows_hidden(x.shape()).hidden);
  if (ceil_pow2(ceil_div(std::max<std::uint64_t>(hidden, 1), kPackedElements)) > group / 2) {
    return Verdict::reject(fmt::format("hidden {} > {}: such rows fill a work-group of {} on their own", hidden,
                                       group / 2 * kPackedElements, group));
  }
  return Verdict::accept();
}

template <class Args>
Verdict row_fused_fits(const Args& args, const DeviceInfo& device) {
  const BwdTensors a = tensors(args);
  if (!a.weight.defined()) return Verdict::accept();
  const std::uint64_t group = device.work_group_size;
  const auto most = static_cast<std::uint64_t>(device.fused_columns);
  const auto hidden = static_cast<std::uint64_t>(rows_hidden(a.x.shape()).hidden);
  if (ceil_div(hidden, group) > most) {
    return Verdict::reject(fmt::format("hidden {} > {}: dweight would need more than {} columns per work-item",
                                       hidden, group * most, most));
  }
  return Verdict::accept();
}

std::vector<Tunable> tunables(Layout layout) {
  std::vector<Tunable> out{{"work_group", "device work_group_size"}};
  if (layout == Layout::packed) out.push_back({"elements_per_item", std::to_string(kPackedElements)});
  out.push_back({"max_groups", "compute_units*4"});
  return out;
}

template <class Args, Layout L>
void fwd_run(const Args& a, const KernelContext& ctx) {
  forward(tensors(a), ctx, L, ctx.variant->name.c_str());
}
template <class Args, Layout L>
void bwd_run(const Args& a, const KernelContext& ctx) {
  backward(tensors(a), ctx, L, ctx.variant->name.c_str());
}
// rows is for OpenCL CPU devices (PoCL): on a GPU a work-item per row would read addresses a row
// apart across neighbouring work-items (uncoalesced) and leave most of the device idle (the
// backward with dweight runs one work-item per group).
template <class Args>
Verdict cpu_device_only(const Args&, const DeviceInfo& device) {
  if (device.gpu) return Verdict::reject("a GPU device: one work-item per row does not coalesce; packed and row fit");
  return Verdict::accept();
}
template <class Args>
Verdict packed_supports(const Args& a, const DeviceInfo& device) {
  return packed_fits(tensors(a).x, device);
}

// The forward and backward lists of one op of the family (rms_norm or fused_add_rms_norm).
template <class Fwd, class Bwd>
void register_op(Registry& r, const Op<Fwd>& fwd, const Op<Bwd>& bwd) {
  register_list(r, fwd, "xpu",
                {{"rows", &cpu_device_only<Fwd>, &fwd_run<Fwd, Layout::rows>, tunables(Layout::rows)},
                 {"packed", &packed_supports<Fwd>, &fwd_run<Fwd, Layout::packed>, tunables(Layout::packed)},
                 {"row", &fwd_run<Fwd, Layout::row>, tunables(Layout::row)}});
  register_list(r, bwd, "xpu",
                {{"rows", &cpu_device_only<Bwd>, &bwd_run<Bwd, Layout::rows>, tunables(Layout::rows)},
                 {"packed", &packed_supports<Bwd>, &bwd_run<Bwd, Layout::packed>, tunables(Layout::packed)},
                 {"row", &row_fused_fits<Bwd>, &bwd_run<Bwd, Layout::row>, tunables(Layout::row)},
                 {"split", &bwd_run<Bwd, Layout::split>, tunables(Layout::split)}});
}

}  // namespace

void register_rms_norm(Registry& r) {
  register_op(r, rms_norm_fwd_op(), rms_norm_bwd_op());
  register_op(r, fused_add_rms_norm_fwd_op(), fused_add_rms_norm_bwd_op());
}

}  // namespace opreg::xpu
