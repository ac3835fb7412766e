// The xpu norm family's runs (plan.h): the plan's kernels launched on the call's tensors
// (kernels.cl, rows.cl). Nothing is decided here; a message is made only when the run fails.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "backends/xpu/launch.h"
#include "backends/xpu/norm/plan.h"
#include "registry/fail.h"

namespace opreg::xpu::norm {
namespace {

[[noreturn]] void too_large(const Launch& l, const family::NormSets& s) {
  fail(ErrorKind::unsupported,
       "{}: a normalisation set of {} elements ({} parameters) on {}: the kernels take at most {}", l.variant,
       s.channels * s.spread, s.groups * s.channels, l.rt.label(), std::numeric_limits<std::int32_t>::max());
}

std::uint64_t set_bytes(const NormBwd& d) {
  return static_cast<std::uint64_t>(d.shape.sets * d.shape.channels * d.shape.spread) * elem_bytes(d.x_type);
}
std::uint64_t param_bytes(const family::NormSets& s, Elem p) {
  return static_cast<std::uint64_t>(s.groups * s.channels) * elem_bytes(p);
}

// A parameter gradient = the column sums of `slots` partial slots (2 params floats each), summed
// in a fixed order.
void reduce(const Launch& l, const Plan& p, const DevicePointer& partial, std::uint64_t slots, const NormBwd& d,
            void* grad, const char* what) {
  const DevicePointer out = l.at(grad, param_bytes(d.shape, d.p_type), what);
  l.rt.launch(l.queue, l.kernel(p.reduce_kernel), p.reduce_groups * p.group, p.group, partial, out,
              static_cast<cl_uint>(slots), static_cast<cl_uint>(d.shape.groups * d.shape.channels),
              static_cast<cl_uint>(p.reduce_cols), LocalArg{2 * sizeof(float) * p.group});
}
void reduce_both(const Launch& l, const Plan& p, const DevicePointer& pw, const DevicePointer& pb, std::uint64_t slots,
                 const NormBwd& d) {
  if (p.want_w) reduce(l, p, pw, slots, d, d.dweight, "tensor dweight");
  if (p.want_b) reduce(l, p, pb, slots, d, d.dbias, "tensor dbias");
}

// What every backward kernel reads and writes, located on the device (the weight stands in for a
// missing one as x: the kernels do not read it then).
struct BwdOperands {
  DevicePointer dy, x, w, mean, rstd, dx;
};
BwdOperands bwd_operands(const Launch& l, const Plan& p, const NormBwd& d) {
  const std::uint64_t bytes = set_bytes(d);
  const std::uint64_t stats = static_cast<std::uint64_t>(d.shape.sets) * sizeof(float);
  const DevicePointer x = l.at(d.x, bytes, "tensor x");
  return {l.at(d.dy, bytes, "tensor dy"),
          x,
          p.has_weight ? l.at(d.weight, param_bytes(d.shape, d.p_type), "tensor weight") : x,
          l.at(d.mean, stats, "tensor mean"),
          l.at(d.rstd, stats, "tensor rstd"),
          l.at(d.dx, bytes, "tensor dx")};
}

// dweight and dbias from the column kernel's per-chunk partials of the batch (plan.columns).
void column_grads(const Launch& l, const Plan& p, const NormBwd& d, const BwdOperands& o, const KernelContext& ctx) {
  const Columns& c = p.columns;
  Workspace::Lease lease = acquire_scratch(ctx, c.bytes);
  const DevicePointer pw = l.rt.locate(lease.data(), lease.bytes(), "parameter-gradient partials");
  const DevicePointer pb{pw.base, pw.offset + c.bytes / 2};
  l.rt.launch(l.queue, l.kernel(p.columns_kernel), c.groups * p.group, p.group, o.dy, o.x, o.mean, o.rstd, pw, pb,
              static_cast<cl_ulong>(d.shape.sets / d.shape.groups), static_cast<cl_uint>(d.shape.groups),
              static_cast<cl_uint>(d.shape.channels), static_cast<cl_uint>(d.shape.spread),
              static_cast<cl_uint>(c.tiles), static_cast<cl_uint>(c.slots), static_cast<cl_ulong>(c.per_chunk),
              static_cast<cl_int>(p.want_w), static_cast<cl_int>(p.want_b));
  reduce_both(l, p, pw, pb, c.slots, d);
}

}  // namespace

void fwd_run(const NormFwd& d, const Plan& planned, const KernelContext& ctx) {
  const Launch l(ctx);
  const Plan p = l.current(d, planned);
  const family::NormSets& s = d.shape;
  if (s.sets == 0) return;
  if (p.too_large) too_large(l, s);
  const std::uint64_t bytes = static_cast<std::uint64_t>(s.sets * s.channels * s.spread) * elem_bytes(d.x_type);
  const std::uint64_t stats = static_cast<std::uint64_t>(s.sets) * sizeof(float);
  const DevicePointer x = l.at(d.x, bytes, "tensor x");
  const DevicePointer w = p.has_weight ? l.at(d.weight, param_bytes(s, d.p_type), "tensor weight") : x;
  const DevicePointer b = p.has_bias ? l.at(d.bias, param_bytes(s, d.p_type), "tensor bias") : x;
  const DevicePointer y = l.at(d.y, bytes, "tensor y");
  const DevicePointer mean = l.at(d.mean, stats, "tensor mean");
  const DevicePointer rstd = l.at(d.rstd, stats, "tensor rstd");
  if (p.layout != Layout::split) {
    l.rt.launch(l.queue, l.kernel(p.kernel), p.groups * p.group, p.group, x, w, b, y, mean, rstd,
                static_cast<cl_ulong>(s.sets), static_cast<cl_uint>(s.groups), static_cast<cl_uint>(s.channels),
                static_cast<cl_uint>(s.spread), static_cast<cl_uint>(p.team), static_cast<cl_float>(d.eps),
                static_cast<cl_int>(p.has_weight), static_cast<cl_int>(p.has_bias),
                LocalArg{2 * sizeof(float) * p.group});
    return;
  }
  Workspace::Lease lease = acquire_scratch(ctx, p.scratch_bytes);
  const DevicePointer st = l.rt.locate(lease.data(), lease.bytes(), "split statistics");
  Kernel& kernel = l.kernel(p.kernel);
  for (int phase = 0; phase < 3; ++phase) {
    // phase 1 is a work-item per set; 0 and 2 a work-group per part.
    const std::uint64_t groups = phase == 1 ? p.set_groups : p.groups;
    l.rt.launch(l.queue, kernel, groups * p.group, p.group, x, w, b, y, mean, rstd, st, static_cast<cl_ulong>(s.sets),
                static_cast<cl_uint>(s.groups), static_cast<cl_uint>(s.channels), static_cast<cl_uint>(s.spread),
                static_cast<cl_uint>(p.parts), static_cast<cl_uint>(p.span), static_cast<cl_float>(d.eps),
                static_cast<cl_int>(p.has_weight), static_cast<cl_int>(p.has_bias), static_cast<cl_int>(phase),
                LocalArg{2 * sizeof(float) * p.group});
  }
}

void bwd_run(const NormBwd& d, const Plan& planned, const KernelContext& ctx) {
  const Launch l(ctx);
  const Plan p = l.current(d, planned);
  const family::NormSets& s = d.shape;
  if (p.too_large) too_large(l, s);
  if (s.sets == 0 || s.channels * s.spread == 0) {
    // No sets: the parameter gradients are sums of nothing; empty sets: nothing else to write.
    if (p.want_w) l.zero(d.dweight, param_bytes(s, d.p_type), d.p_type);
    if (p.want_b) l.zero(d.dbias, param_bytes(s, d.p_type), d.p_type);
    return;
  }
  const BwdOperands o = bwd_operands(l, p, d);
  // The column kernel's parameter gradients first: dx may be dy.
  if (p.columns.slots != 0) column_grads(l, p, d, o, ctx);
  if (p.layout == Layout::set) {
    l.rt.launch(l.queue, l.kernel(p.kernel), p.groups * p.group, p.group, o.dy, o.x, o.w, o.mean, o.rstd, o.dx,
                static_cast<cl_ulong>(s.sets), static_cast<cl_uint>(s.groups), static_cast<cl_uint>(s.channels),
                static_cast<cl_uint>(s.spread), static_cast<cl_uint>(p.team), static_cast<cl_int>(p.has_weight),
                LocalArg{2 * sizeof(float) * p.group});
    return;
  }
  Workspace::Lease lease;
  DevicePointer base = o.x;  // rows without a parameter gradient: no scratch, nothing touched
  if (p.scratch_bytes != 0) {
    lease = acquire_scratch(ctx, p.scratch_bytes);
    base = l.rt.locate(lease.data(), lease.bytes(),
                       p.layout == Layout::rows ? "parameter-gradient partials" : "split statistics");
  }
  const auto at = [&](std::uint64_t offset) {
    return p.scratch_bytes != 0 ? DevicePointer{base.base, base.offset + offset} : base;
  };
  const bool want_w = p.fused && p.want_w;  // split's unfused gradients came from the column kernel
  const bool want_b = p.fused && p.want_b;
  if (p.layout == Layout::rows) {
    const DevicePointer pw = at(0);
    const DevicePointer pb = at(p.pb_offset);
    const DevicePointer coef = at(p.coef_offset);
    l.rt.launch(l.queue, l.kernel(p.kernel), p.groups * p.group, p.group, o.dy, o.x, o.w, o.mean, o.rstd, o.dx, pw, pb,
                coef, static_cast<cl_ulong>(s.sets), static_cast<cl_uint>(s.groups), static_cast<cl_uint>(s.channels),
                static_cast<cl_uint>(s.spread), static_cast<cl_uint>(kRowBlock), static_cast<cl_uint>(kTile),
                static_cast<cl_int>(p.has_weight), static_cast<cl_int>(want_w), static_cast<cl_int>(want_b));
    if (p.fused) reduce_both(l, p, pw, pb, p.slots, d);
    return;
  }
  // split: the statistics, then (fused) the dweight and dbias slots, whose channels outside a
  // part must read as zero.
  const DevicePointer pw = p.fused ? at(p.pw_offset) : base;  // not touched without fused gradients
  const DevicePointer pb = p.fused ? at(p.pb_offset) : base;
  if (p.fused) {
    const std::uint32_t zero = 0;
    l.rt.fill(l.queue, static_cast<std::byte*>(lease.data()) + p.pw_offset, p.scratch_bytes - p.pw_offset, &zero,
              sizeof(zero));
  }
  Kernel& kernel = l.kernel(p.kernel);
  for (int phase = 0; phase < 3; ++phase) {
    const std::uint64_t groups = phase == 1 ? p.set_groups : p.groups;
    l.rt.launch(l.queue, kernel, groups * p.group, p.group, o.dy, o.x, o.w, o.mean, o.rstd, o.dx, pw, pb, base,
                static_cast<cl_ulong>(s.sets), static_cast<cl_uint>(s.groups), static_cast<cl_uint>(s.channels),
                static_cast<cl_uint>(s.spread), static_cast<cl_uint>(p.parts), static_cast<cl_uint>(p.span),
                static_cast<cl_int>(p.has_weight), static_cast<cl_int>(want_w), static_cast<cl_int>(want_b),
                static_cast<cl_int>(phase), LocalArg{2 * sizeof(float) * p.group});
  }
  if (p.fused) reduce_both(l, p, pw, pb, p.slots, d);
}

}  // namespace opreg::xpu::norm
