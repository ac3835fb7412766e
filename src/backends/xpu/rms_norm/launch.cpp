// The xpu rms_norm family's runs (plan.h): the plan's kernels launched on the call's tensors
// (kernels.cl). Nothing is decided here; a message is made only when the run fails.
#include <cstdint>
#include <limits>

#include "backends/xpu/launch.h"
#include "backends/xpu/rms_norm/plan.h"
#include "registry/fail.h"

namespace opreg::xpu::rms_norm {
namespace {

[[noreturn]] void refuse(const Launch& l, const Plan& p) {
  if (p.refusal == Refusal::too_wide) {
    fail(ErrorKind::unsupported, "{}: hidden {} on {}: the kernels take at most {} columns", l.variant, p.hidden,
         l.rt.label(), std::numeric_limits<std::int32_t>::max());
  }
  fail(ErrorKind::unsupported,
       "{}: hidden {} needs {} dweight columns per work-item on {} (work-group {}, team {}), the fused path "
       "keeps at most {}; xpu.rms_norm.bwd.split takes any hidden",
       l.variant, p.hidden, ceil_div(p.hidden, p.team), l.rt.label(), p.group, p.team, l.rt.info().fused_columns);
}

}  // namespace

void fwd_run(const RowNormFwd& d, const Plan& planned, const KernelContext& ctx) {
  const Launch l(ctx);
  const Plan p = l.current(d, planned);
  if (p.refusal != Refusal::none) refuse(l, p);
  if (p.rows == 0) return;
  const std::uint64_t bytes = p.rows * p.hidden * elem_bytes(d.x_type);
  const DevicePointer x = l.at(d.x, bytes, "tensor x");
  const DevicePointer res = p.fused_op ? l.at(d.residual, bytes, "tensor residual") : x;
  const DevicePointer w = p.has_weight ? l.at(d.weight, p.hidden * elem_bytes(d.w_type), "tensor weight") : x;
  const DevicePointer y = l.at(d.y, bytes, "tensor y");
  const DevicePointer s = p.fused_op ? l.at(d.s, bytes, "tensor s") : y;  // not written unless fused
  const DevicePointer rstd = l.at(d.rstd, p.rows * sizeof(float), "tensor rstd");
  l.rt.launch(l.queue, l.kernel(p.kernel), p.groups * p.group, p.group, x, res, w, y, s, rstd,
              static_cast<cl_ulong>(p.rows), static_cast<cl_uint>(p.hidden), static_cast<cl_uint>(p.team),
              static_cast<cl_float>(d.eps), static_cast<cl_float>(d.offset), static_cast<cl_int>(d.mode),
              static_cast<cl_int>(p.has_weight), static_cast<cl_int>(p.fused_op),
              LocalArg{2 * sizeof(float) * p.group});
}

void bwd_run(const RowNormBwd& d, const Plan& planned, const KernelContext& ctx) {
  const Launch l(ctx);
  const Plan p = l.current(d, planned);
  if (p.refusal != Refusal::none) refuse(l, p);
  const std::uint64_t dw_bytes = p.hidden * elem_bytes(d.w_type);
  if (p.rows == 0 || p.hidden == 0) {
    // No rows: dweight is a sum of nothing. No columns: nothing to write.
    if (p.has_weight) l.zero(d.dweight, dw_bytes, d.w_type);
    return;
  }
  const std::uint64_t bytes = p.rows * p.hidden * elem_bytes(d.x_type);
  const DevicePointer dy = l.at(d.dy, bytes, "tensor dy");
  const DevicePointer ds = p.fused_op ? l.at(d.ds_out, bytes, "tensor ds_out") : dy;
  const DevicePointer x = l.at(d.x, bytes, "tensor x");
  const DevicePointer w = p.has_weight ? l.at(d.weight, dw_bytes, "tensor weight") : x;
  const DevicePointer rstd = l.at(d.rstd, p.rows * sizeof(float), "tensor rstd");
  const DevicePointer dx = l.at(d.dx, bytes, "tensor dx");
  Workspace::Lease lease;
  DevicePointer partial = x;  // not read without dweight
  if (p.slots != 0) {
    lease = acquire_scratch(ctx, p.scratch_bytes);
    partial = l.rt.locate(lease.data(), lease.bytes(), "dweight partials");
  }
  const auto reduce = [&] {
    const DevicePointer dw = l.at(d.dweight, dw_bytes, "tensor dweight");
    l.rt.launch(l.queue, l.kernel(p.reduce_kernel), p.reduce_groups * p.group, p.group, partial, dw,
                static_cast<cl_uint>(p.slots), static_cast<cl_uint>(p.hidden), static_cast<cl_uint>(p.reduce_cols),
                LocalArg{2 * sizeof(float) * p.group});
  };
  if (p.columns_kernel != nullptr) {
    // split: dweight first, column by column (dx may be dy: it is written last).
    l.rt.launch(l.queue, l.kernel(p.columns_kernel), p.column_groups * p.group, p.group, dy, x, rstd, partial,
                static_cast<cl_ulong>(p.rows), static_cast<cl_uint>(p.hidden), static_cast<cl_uint>(p.tiles),
                static_cast<cl_uint>(p.slots), static_cast<cl_ulong>(p.rows_per_chunk), static_cast<cl_int>(d.mode));
    reduce();
  }
  l.rt.launch(l.queue, l.kernel(p.kernel), p.groups * p.group, p.group, dy, ds, x, w, rstd, dx, partial,
              static_cast<cl_ulong>(p.rows), static_cast<cl_uint>(p.hidden), static_cast<cl_uint>(p.team),
              static_cast<cl_float>(d.offset), static_cast<cl_int>(d.mode), static_cast<cl_int>(p.has_weight),
              static_cast<cl_int>(p.dw_fused), static_cast<cl_int>(p.fused_op), LocalArg{sizeof(float) * p.group});
  if (p.dw_fused) reduce();
}

}  // namespace opreg::xpu::rms_norm
