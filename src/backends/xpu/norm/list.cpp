// The xpu layer_norm and group_norm lists (kernels in kernels.cl): one family, the ops' sets as
// src/ops/families.h describes them (layer_norm: a row is a set of H channels of spread 1;
// group_norm: an (n, group) is a set of C / G channels of spread S).
//   xpu.<layer_norm|group_norm>.fwd.set   teams of work-items per set (several short sets per
//                                         work-group), two-pass statistics, then y
//   xpu.<layer_norm|group_norm>.bwd.set   dweight and dbias first (a column kernel's per-chunk
//                                         partials, reduced in a fixed order), then dx per set
//   xpu.<layer_norm|group_norm>.fwd.split few large sets: each set cut into parts, a work-group per
//                                         part; per-part statistics merged per set in part order
//   xpu.<layer_norm|group_norm>.bwd.split the same for c1 and c2, with per-part dweight/dbias
//                                         partials reduced in a fixed order
//   xpu.<layer_norm|group_norm>.<fwd|bwd>.rows   OpenCL CPU devices only: a work-item per set,
//                                         eight elements a step; the backward fuses dx with
//                                         per-group dweight/dbias slots, reduced in a fixed order
// Every problem is accepted; the launch is sized at the call from the device's work-group size
// L and max_groups.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "backends/xpu/launch.h"
#include "opreg/ops.h"
#include "opreg/variants.h"
#include "ops/describe.h"
#include "registry/fail.h"

namespace opreg::xpu {
namespace {

// A team aims at this many elements per work-item: short sets share a work-group.
constexpr std::uint64_t kSetElements = 4;
// Parameter-gradient partials: at most this many bytes of workspace (both gradients), and at
// least this many elements summed into each partial.
constexpr std::uint64_t kPartialBudget = 32ull << 20;
constexpr std::uint64_t kMinElementsPerSlot = 8;
// rows, layer_norm backward: rows summed in f32 between two updates of a slot entry, and the
// columns of a tile, whose block sums and slot entries stay in L1 while the block's rows pass.
constexpr std::uint64_t kRowBlock = 16;
constexpr std::uint64_t kTile = 512;
// split: a part gives each work-item of its group at least this many elements.
constexpr std::uint64_t kPartElementsPerItem = 8;
// Kernels index a set's elements and the parameters with 32-bit integers.
constexpr std::uint64_t kMaxIndex = std::numeric_limits<std::int32_t>::max();

struct Geometry {
  std::uint64_t sets = 0;
  std::uint64_t groups = 1;
  std::uint64_t channels = 0;
  std::uint64_t spread = 1;
  std::uint64_t size() const { return channels * spread; }
  std::uint64_t params() const { return groups * channels; }
};

Geometry geometry(const family::NormSets& s) {
  return {static_cast<std::uint64_t>(s.sets), static_cast<std::uint64_t>(s.groups),
          static_cast<std::uint64_t>(s.channels), static_cast<std::uint64_t>(s.spread)};
}

void check_size(const Launch& l, const Geometry& g) {
  if (g.size() > kMaxIndex || g.params() > kMaxIndex) {
    fail(ErrorKind::unsupported, "{}: a normalisation set of {} elements ({} parameters) on {}: the kernels take at most {}",
         l.variant, g.size(), g.params(), l.rt.label(), kMaxIndex);
  }
}

// Work-items per set: a power of two near size / kSetElements, at most L.
std::uint64_t team_for(const Launch& l, const Geometry& g) {
  return std::min(l.group, ceil_pow2(ceil_div(std::max<std::uint64_t>(g.size(), 1), kSetElements)));
}

std::string kernel_name(const char* direction, const Tensor& x, DType params) {
  return fmt::format("norm_{}_{}_{}", direction, format_name(x.dtype()), format_name(params));
}

// The parameters' dtype: the first defined of `tensors`, else x's (a pair the kernels have).
DType param_dtype(const Tensor& x, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t->defined()) return t->dtype();
  }
  return x.dtype();
}

template <class Args, bool Rows>
void fwd_run(const Args& a, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const Geometry g = geometry(family::describe(a).shape);
  if (g.sets == 0) return;
  check_size(l, g);
  // rows: a work-item per set (team 1, unused by the kernel).
  const std::uint64_t team = Rows ? 1 : team_for(l, g);
  const bool has_weight = a.weight.defined();
  const bool has_bias = a.bias.defined();
  const DevicePointer x = l.at(a.x, "x");
  const DevicePointer w = has_weight ? l.at(a.weight, "weight") : x;
  const DevicePointer b = has_bias ? l.at(a.bias, "bias") : x;
  const DevicePointer y = l.at(a.y, "y");
  const DevicePointer mean = l.at(a.mean, "mean");
  const DevicePointer rstd = l.at(a.rstd, "rstd");
  l.rt.launch(l.queue, l.kernel(kernel_name(Rows ? "fwd_rows" : "fwd", a.x, param_dtype(a.x, {&a.weight, &a.bias}))),
              l.groups_for(ceil_div(g.sets, l.group / team)) * l.group, l.group, SvmArg{x.base}, x.offset,
              SvmArg{w.base}, w.offset, SvmArg{b.base}, b.offset, SvmArg{y.base}, y.offset, SvmArg{mean.base},
              mean.offset, SvmArg{rstd.base}, rstd.offset, static_cast<cl_ulong>(g.sets),
              static_cast<cl_uint>(g.groups), static_cast<cl_uint>(g.channels), static_cast<cl_uint>(g.spread),
              static_cast<cl_uint>(team), static_cast<cl_float>(a.eps), static_cast<cl_int>(has_weight),
              static_cast<cl_int>(has_bias), LocalArg{2 * sizeof(float) * l.group});
}

// A parameter gradient = the column sums of `slots` partial slots (2 params floats each), summed
// in a fixed order.
void reduce(const Launch& l, const DevicePointer& partial, std::uint64_t slots, std::uint64_t params,
            const Tensor& grad, const char* what) {
  const std::uint64_t cols = std::min(l.group, ceil_pow2(params));
  const DevicePointer out = l.at(grad, what);
  l.rt.launch(l.queue, l.kernel(fmt::format("norm_dw_reduce_{}", format_name(grad.dtype()))),
              l.groups_for(ceil_div(params, cols)) * l.group, l.group, SvmArg{partial.base}, partial.offset,
              SvmArg{out.base}, out.offset, static_cast<cl_uint>(slots), static_cast<cl_uint>(params),
              static_cast<cl_uint>(cols), LocalArg{2 * sizeof(float) * l.group});
}

// dweight and dbias (those wanted) from per-chunk partials of the batch, reduced in a fixed order.
template <class Args>
void parameter_grads(const Args& a, const Launch& l, const Geometry& g, const DevicePointer& dy,
                     const DevicePointer& x, const DevicePointer& mean, const DevicePointer& rstd,
                     const KernelContext& ctx) {
  const bool want_w = a.dweight.defined();
  const bool want_b = a.dbias.defined();
  const std::uint64_t items = g.sets / g.groups;  // rows (layer_norm) or N (group_norm)
  const std::uint64_t params = g.params();
  if (items == 0 || g.spread == 0) {
    l.zero(a.dweight);
    l.zero(a.dbias);
    return;
  }
  const std::uint64_t slot_bytes = 2 * 2 * sizeof(float) * params;  // (sum, comp) x (dweight, dbias)
  const std::uint64_t tiles = ceil_div(params, l.group);
  std::uint64_t chunks = std::max<std::uint64_t>(1, ceil_div(l.rt.info().max_groups, tiles));
  chunks = std::min({chunks, ceil_div(items * g.spread, kMinElementsPerSlot),
                     std::max<std::uint64_t>(1, kPartialBudget / slot_bytes)});
  chunks = std::max<std::uint64_t>(1, std::min(chunks, items));
  const std::uint64_t per_chunk = ceil_div(items, chunks);
  const std::uint64_t slots = ceil_div(items, per_chunk);
  Workspace::Lease lease = acquire_scratch(ctx, slots * slot_bytes);
  const DevicePointer pw = l.rt.locate(lease.data(), lease.bytes(), "parameter-gradient partials");
  const DevicePointer pb{pw.base, pw.offset + slots * slot_bytes / 2};
  l.rt.launch(l.queue, l.kernel(fmt::format("norm_dw_columns_{}", format_name(a.x.dtype()))),
              l.groups_for(tiles * slots) * l.group, l.group, SvmArg{dy.base}, dy.offset, SvmArg{x.base}, x.offset,
              SvmArg{mean.base}, mean.offset, SvmArg{rstd.base}, rstd.offset, SvmArg{pw.base}, pw.offset,
              SvmArg{pb.base}, pb.offset, static_cast<cl_ulong>(items), static_cast<cl_uint>(g.groups),
              static_cast<cl_uint>(g.channels), static_cast<cl_uint>(g.spread), static_cast<cl_uint>(tiles),
              static_cast<cl_uint>(slots), static_cast<cl_ulong>(per_chunk), static_cast<cl_int>(want_w),
              static_cast<cl_int>(want_b));
  if (want_w) reduce(l, pw, slots, params, a.dweight, "dweight");
  if (want_b) reduce(l, pb, slots, params, a.dbias, "dbias");
}

// What both backward kernels read and write, located on the device (the weight stands in for a
// missing one as x: the kernels do not read it then).
struct BwdOperands {
  bool has_weight;
  DevicePointer dy, x, w, mean, rstd, dx;
};

template <class Args>
BwdOperands bwd_operands(const Args& a, Launch& l) {
  const bool has_weight = a.weight.defined();
  const DevicePointer x = l.at(a.x, "x");
  return {has_weight, l.at(a.dy, "dy"),     x, has_weight ? l.at(a.weight, "weight") : x,
          l.at(a.mean, "mean"), l.at(a.rstd, "rstd"), l.at(a.dx, "dx")};
}

// No sets: the parameter gradients are sums of nothing; empty sets: nothing else to write.
template <class Args>
bool bwd_nothing_to_do(const Args& a, Launch& l, const Geometry& g) {
  if (g.sets != 0 && g.size() != 0) return false;
  l.zero(a.dweight);
  l.zero(a.dbias);
  return true;
}

template <class Args>
void bwd_run(const Args& a, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const Geometry g = geometry(family::describe(a).shape);
  check_size(l, g);
  if (bwd_nothing_to_do(a, l, g)) return;
  const auto [has_weight, dy, x, w, mean, rstd, dx] = bwd_operands(a, l);
  // The parameter gradients first: dx may be dy.
  if (a.dweight.defined() || a.dbias.defined()) parameter_grads(a, l, g, dy, x, mean, rstd, ctx);
  const std::uint64_t team = team_for(l, g);
  l.rt.launch(l.queue, l.kernel(kernel_name("bwd", a.x, param_dtype(a.x, {&a.weight, &a.dweight, &a.dbias}))),
              l.groups_for(ceil_div(g.sets, l.group / team)) * l.group, l.group, SvmArg{dy.base}, dy.offset,
              SvmArg{x.base}, x.offset, SvmArg{w.base}, w.offset, SvmArg{mean.base}, mean.offset, SvmArg{rstd.base},
              rstd.offset, SvmArg{dx.base}, dx.offset, static_cast<cl_ulong>(g.sets), static_cast<cl_uint>(g.groups),
              static_cast<cl_uint>(g.channels), static_cast<cl_uint>(g.spread), static_cast<cl_uint>(team),
              static_cast<cl_int>(has_weight), LocalArg{2 * sizeof(float) * l.group});
}

// rows: dx, dweight and dbias in one pass over the sets, a block of sets per group; with a
// parameter gradient wanted, the group's first work-item walks the block into the group's slots
// (layer_norm: kRowBlock rows at a time, kTile columns at a time; rows.cl's layer_block).
template <class Args>
void bwd_rows_run(const Args& a, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const Geometry g = geometry(family::describe(a).shape);
  check_size(l, g);
  if (bwd_nothing_to_do(a, l, g)) return;
  const bool want_w = a.dweight.defined();
  const bool want_b = a.dbias.defined();
  const std::uint64_t params = g.params();
  const auto [has_weight, dy, x, w, mean, rstd, dx] = bwd_operands(a, l);
  std::uint64_t groups = l.groups_for(g.sets);
  Workspace::Lease lease;
  DevicePointer pw = x;  // not touched without a parameter gradient
  DevicePointer pb = x;
  DevicePointer coef = x;
  const std::uint64_t slot_bytes = 2 * 2 * sizeof(float) * params;  // (sum, comp) x (dweight, dbias)
  // Per group: c1 and c2 of a block's rows, then a tile's dweight and dbias block sums.
  const std::uint64_t coef_bytes = 2 * sizeof(float) * (kRowBlock + kTile);
  if (want_w || want_b) {
    // A slot's sums are re-read by the reduction: each should take at least kMinElementsPerSlot
    // elements per parameter.
    groups = std::min({groups, l.groups_for(ceil_div(g.sets * g.size(), params * kMinElementsPerSlot)),
                       std::max<std::uint64_t>(1, kPartialBudget / slot_bytes)});
    lease = acquire_scratch(ctx, groups * (slot_bytes + coef_bytes));
    pw = l.rt.locate(lease.data(), lease.bytes(), "parameter-gradient partials");
    pb = DevicePointer{pw.base, pw.offset + groups * slot_bytes / 2};
    coef = DevicePointer{pw.base, pw.offset + groups * slot_bytes};
  }
  l.rt.launch(l.queue, l.kernel(kernel_name("bwd_rows", a.x, param_dtype(a.x, {&a.weight, &a.dweight, &a.dbias}))),
              groups * l.group, l.group, SvmArg{dy.base}, dy.offset, SvmArg{x.base}, x.offset, SvmArg{w.base},
              w.offset, SvmArg{mean.base}, mean.offset, SvmArg{rstd.base}, rstd.offset, SvmArg{dx.base}, dx.offset,
              SvmArg{pw.base}, pw.offset, SvmArg{pb.base}, pb.offset, SvmArg{coef.base}, coef.offset,
              static_cast<cl_ulong>(g.sets), static_cast<cl_uint>(g.groups), static_cast<cl_uint>(g.channels),
              static_cast<cl_uint>(g.spread), static_cast<cl_uint>(kRowBlock), static_cast<cl_uint>(kTile),
              static_cast<cl_int>(has_weight), static_cast<cl_int>(want_w), static_cast<cl_int>(want_b));
  if (want_w) reduce(l, pw, groups, params, a.dweight, "dweight");
  if (want_b) reduce(l, pb, groups, params, a.dbias, "dbias");
}

// split: the parts a set is cut into, enough for every work-group of a launch to have a part
// (max_groups / sets) while each part gives each work-item at least kPartElementsPerItem elements.
// One part when the sets alone fill the device or are short.
std::uint64_t split_parts(const Geometry& g, std::uint64_t group, std::uint64_t max_groups) {
  if (g.sets == 0) return 1;
  const std::uint64_t by_device = ceil_div(max_groups, g.sets);
  const std::uint64_t by_size = g.size() / (kPartElementsPerItem * group);
  return std::max<std::uint64_t>(1, std::min(by_device, by_size));
}

// Elements per part for `parts` parts, and the parts that leaves non-empty (at least one).
struct Parts {
  std::uint64_t count = 1;
  std::uint64_t span = 0;
};

Parts split_of(const Launch& l, const Geometry& g) {
  const std::uint64_t wanted = split_parts(g, l.group, l.rt.info().max_groups);
  Parts p;
  p.span = ceil_div(g.size(), wanted);
  p.count = p.span == 0 ? 1 : ceil_div(g.size(), p.span);
  return p;
}

// The scratch of a split call: its `floats` per-part and per-set values, then (backward) the
// dweight and dbias slots.
DevicePointer scratch_at(const Launch& l, const Workspace::Lease& lease) {
  return l.rt.locate(lease.data(), lease.bytes(), "split statistics");
}

template <class Args>
void fwd_split_run(const Args& a, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const Geometry g = geometry(family::describe(a).shape);
  if (g.sets == 0) return;
  check_size(l, g);
  const Parts parts = split_of(l, g);
  const std::uint64_t units = g.sets * parts.count;
  const bool has_weight = a.weight.defined();
  const bool has_bias = a.bias.defined();
  const DevicePointer x = l.at(a.x, "x");
  const DevicePointer w = has_weight ? l.at(a.weight, "weight") : x;
  const DevicePointer b = has_bias ? l.at(a.bias, "bias") : x;
  const DevicePointer y = l.at(a.y, "y");
  const DevicePointer mean = l.at(a.mean, "mean");
  const DevicePointer rstd = l.at(a.rstd, "rstd");
  Workspace::Lease lease = acquire_scratch(ctx, 3 * sizeof(float) * units);
  const DevicePointer stats = scratch_at(l, lease);
  Kernel& kernel = l.kernel(kernel_name("fwd_split", a.x, param_dtype(a.x, {&a.weight, &a.bias})));
  for (int phase = 0; phase < 3; ++phase) {
    // phase 1 is a work-item per set; 0 and 2 a work-group per part.
    const std::uint64_t groups = phase == 1 ? l.groups_for(ceil_div(g.sets, l.group)) : l.groups_for(units);
    l.rt.launch(l.queue, kernel, groups * l.group, l.group, SvmArg{x.base}, x.offset, SvmArg{w.base}, w.offset,
                SvmArg{b.base}, b.offset, SvmArg{y.base}, y.offset, SvmArg{mean.base}, mean.offset,
                SvmArg{rstd.base}, rstd.offset, SvmArg{stats.base}, stats.offset, static_cast<cl_ulong>(g.sets),
                static_cast<cl_uint>(g.groups), static_cast<cl_uint>(g.channels), static_cast<cl_uint>(g.spread),
                static_cast<cl_uint>(parts.count), static_cast<cl_uint>(parts.span), static_cast<cl_float>(a.eps),
                static_cast<cl_int>(has_weight), static_cast<cl_int>(has_bias), static_cast<cl_int>(phase),
                LocalArg{2 * sizeof(float) * l.group});
  }
}

template <class Args>
void bwd_split_run(const Args& a, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const Geometry g = geometry(family::describe(a).shape);
  check_size(l, g);
  if (bwd_nothing_to_do(a, l, g)) return;
  const auto [has_weight, dy, x, w, mean, rstd, dx] = bwd_operands(a, l);
  const Parts parts = split_of(l, g);
  const std::uint64_t units = g.sets * parts.count;
  const std::uint64_t params = g.params();
  bool want_w = a.dweight.defined();
  bool want_b = a.dbias.defined();
  // A slot per (batch item, part), each 2 params floats for dweight and as many for dbias: within
  // kPartialBudget, else the parameter gradients come from parameter_grads's column kernel as in
  // set (many sets, where one part per set leaves a slot per batch item).
  const std::uint64_t slots = (g.sets / g.groups) * parts.count;
  const std::uint64_t slot_bytes = 2 * 2 * sizeof(float) * params;
  const bool fused = (want_w || want_b) && slots * slot_bytes <= kPartialBudget;
  if ((want_w || want_b) && !fused) {
    parameter_grads(a, l, g, dy, x, mean, rstd, ctx);
    want_w = want_b = false;
  }
  const std::uint64_t stats_bytes = 2 * sizeof(float) * (units + g.sets);
  const std::uint64_t partial_bytes = fused ? slots * slot_bytes : 0;
  Workspace::Lease lease = acquire_scratch(ctx, stats_bytes + partial_bytes);
  const DevicePointer stats = scratch_at(l, lease);
  DevicePointer pw = stats;  // not touched without a fused parameter gradient
  DevicePointer pb = stats;
  if (fused) {
    // Each part writes its own channels; the rest of its slot must read as zero.
    pw = DevicePointer{stats.base, stats.offset + stats_bytes};
    pb = DevicePointer{stats.base, stats.offset + stats_bytes + partial_bytes / 2};
    const std::uint32_t zero = 0;
    l.rt.fill(l.queue, static_cast<std::byte*>(lease.data()) + stats_bytes, partial_bytes, &zero, sizeof(zero));
  }
  Kernel& kernel = l.kernel(kernel_name("bwd_split", a.x, param_dtype(a.x, {&a.weight, &a.dweight, &a.dbias})));
  for (int phase = 0; phase < 3; ++phase) {
    const std::uint64_t groups = phase == 1 ? l.groups_for(ceil_div(g.sets, l.group)) : l.groups_for(units);
    l.rt.launch(l.queue, kernel, groups * l.group, l.group, SvmArg{dy.base}, dy.offset, SvmArg{x.base}, x.offset,
                SvmArg{w.base}, w.offset, SvmArg{mean.base}, mean.offset, SvmArg{rstd.base}, rstd.offset,
                SvmArg{dx.base}, dx.offset, SvmArg{pw.base}, pw.offset, SvmArg{pb.base}, pb.offset,
                SvmArg{stats.base}, stats.offset, static_cast<cl_ulong>(g.sets), static_cast<cl_uint>(g.groups),
                static_cast<cl_uint>(g.channels), static_cast<cl_uint>(g.spread), static_cast<cl_uint>(parts.count),
                static_cast<cl_uint>(parts.span), static_cast<cl_int>(has_weight), static_cast<cl_int>(want_w),
                static_cast<cl_int>(want_b), static_cast<cl_int>(phase), LocalArg{2 * sizeof(float) * l.group});
  }
  if (want_w) reduce(l, pw, slots, params, a.dweight, "dweight");
  if (want_b) reduce(l, pb, slots, params, a.dbias, "dbias");
}

// split pays where the sets leave work-groups idle and are long enough to cut: on a GPU it takes
// only those problems (set takes the rest). On a CPU device rows comes first and takes every
// problem, so split accepts every problem there: it never changes the choice, and the
// conformance harness runs it over the whole grid (one part per set where cutting does not pay).
template <class Args>
Verdict split_pays(const Args& a, const DeviceInfo& device) {
  if (!device.gpu) return Verdict::accept();
  const Geometry g = geometry(family::describe(a).shape);
  if (split_parts(g, device.work_group_size, device.max_groups) >= 2) return Verdict::accept();
  return Verdict::reject(fmt::format("{} sets of {} elements: the sets fill {} work-groups or are too short to cut "
                                     "into parts of {} elements; set takes it",
                                     g.sets, g.size(), device.max_groups, kPartElementsPerItem * device.work_group_size));
}

// rows is for OpenCL CPU devices (PoCL): a work-item per set reads addresses a set apart across
// neighbouring work-items, which a GPU does not coalesce.
template <class Args>
Verdict cpu_device_only(const Args&, const DeviceInfo& device) {
  if (device.gpu) return Verdict::reject("a GPU device: one work-item per set does not coalesce; set fits");
  return Verdict::accept();
}

std::vector<Tunable> tunables(bool backward) {
  std::vector<Tunable> out{{"work_group", "device work_group_size"},
                           {"elements_per_item", std::to_string(kSetElements)},
                           {"max_groups", "compute_units*4"}};
  if (backward) out.push_back({"min_elements_per_partial", std::to_string(kMinElementsPerSlot)});
  return out;
}

std::vector<Tunable> split_tunables() {
  return {{"work_group", "device work_group_size"},
          {"max_groups", "compute_units*4"},
          {"parts", "min(ceil(max_groups/sets), size/(" + std::to_string(kPartElementsPerItem) + "*work_group))"}};
}

}  // namespace

void register_norm(Registry& r) {
  const std::vector<Tunable> rows{{"work_group", "device work_group_size"}, {"max_groups", "compute_units*4"}};
  register_list(r, layer_norm_fwd_op(), "xpu",
                {{"rows", &cpu_device_only<LayerNormFwdArgs>, &fwd_run<LayerNormFwdArgs, true>, rows},
                 {"split", &split_pays<LayerNormFwdArgs>, &fwd_split_run<LayerNormFwdArgs>, split_tunables()},
                 {"set", &fwd_run<LayerNormFwdArgs, false>, tunables(false)}});
  register_list(r, layer_norm_bwd_op(), "xpu",
                {{"rows", &cpu_device_only<LayerNormBwdArgs>, &bwd_rows_run<LayerNormBwdArgs>, rows},
                 {"split", &split_pays<LayerNormBwdArgs>, &bwd_split_run<LayerNormBwdArgs>, split_tunables()},
                 {"set", &bwd_run<LayerNormBwdArgs>, tunables(true)}});
  register_list(r, group_norm_fwd_op(), "xpu",
                {{"rows", &cpu_device_only<GroupNormFwdArgs>, &fwd_run<GroupNormFwdArgs, true>, rows},
                 {"split", &split_pays<GroupNormFwdArgs>, &fwd_split_run<GroupNormFwdArgs>, split_tunables()},
                 {"set", &fwd_run<GroupNormFwdArgs, false>, tunables(false)}});
  register_list(r, group_norm_bwd_op(), "xpu",
                {{"rows", &cpu_device_only<GroupNormBwdArgs>, &bwd_rows_run<GroupNormBwdArgs>, rows},
                 {"split", &split_pays<GroupNormBwdArgs>, &bwd_split_run<GroupNormBwdArgs>, split_tunables()},
                 {"set", &bwd_run<GroupNormBwdArgs>, tunables(true)}});
}

}  // namespace opreg::xpu
