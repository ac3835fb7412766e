// The allocating wrappers of the four normalisations (rms_norm, fused_add_rms_norm, layer_norm,
// group_norm): outputs made on the input's device, then the op's entry point. Their checks,
// handles and entry points come from the manifest (ops.cpp).
#include "ops/checks.h"
#include "ops/common.h"

namespace opreg {

namespace c = op_check;
using op_check::hidden;

// ---- Allocating wrappers

NormOut rms_norm(const Tensor& x, const Tensor& weight, double eps, double offset, Casting casting,
                 const ExecContext* ctx) {
  constexpr const char* op = "rms_norm.fwd";
  ops_detail::input(op, "x", x, 1);
  NormOut out;
  out.y = ops_detail::like(x);
  out.rstd = ops_detail::row_stats(x);
  rms_norm_fwd({x, weight, out.y, out.rstd, eps, offset, casting}, ctx);
  return out;
}

NormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                            double offset, Casting casting, const ExecContext* ctx) {
  constexpr const char* op = "rms_norm.bwd";
  ops_detail::input(op, "x", x, 1);
  NormGrads g;
  g.dx = ops_detail::like(x);
  g.dweight = ops_detail::weight_grad(weight);
  rms_norm_bwd({dy, x, weight, rstd, g.dx, g.dweight, offset, casting}, ctx);
  return g;
}

NormOut fused_add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps, double offset,
                           Casting casting, const ExecContext* ctx) {
  constexpr const char* op = "fused_add_rms_norm.fwd";
  ops_detail::input(op, "x", x, 1);
  NormOut out;
  out.y = ops_detail::like(x);
  out.s = ops_detail::like(x);
  out.rstd = ops_detail::row_stats(x);
  fused_add_rms_norm_fwd({x, residual, weight, out.y, out.s, out.rstd, eps, offset, casting}, ctx);
  return out;
}

NormGrads fused_add_rms_norm_backward(const Tensor& dy, const Tensor& ds_out, const Tensor& s, const Tensor& weight,
                                      const Tensor& rstd, double offset, Casting casting, const ExecContext* ctx) {
  constexpr const char* op = "fused_add_rms_norm.bwd";
  ops_detail::input(op, "s", s, 1);
  NormGrads g;
  g.dx = ops_detail::like(s);
  g.dweight = ops_detail::weight_grad(weight);
  fused_add_rms_norm_bwd({dy, ds_out, s, weight, rstd, g.dx, g.dweight, offset, casting}, ctx);
  return g;
}

NormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const ExecContext* ctx) {
  constexpr const char* op = "layer_norm.fwd";
  ops_detail::input(op, "x", x, 1);
  NormOut out;
  out.y = ops_detail::like(x);
  out.mean = ops_detail::row_stats(x);
  out.rstd = ops_detail::row_stats(x);
  layer_norm_fwd({x, weight, bias, out.y, out.mean, out.rstd, eps}, ctx);
  return out;
}

NormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, const ExecContext* ctx) {
  constexpr const char* op = "layer_norm.bwd";
  ops_detail::input(op, "x", x, 1);
  NormGrads g;
  g.dx = ops_detail::like(x);
  g.dweight = ops_detail::weight_grad(weight);
  g.dbias = ops_detail::bias_grad(weight, x, hidden(x));
  layer_norm_bwd({dy, x, weight, mean, rstd, g.dx, g.dweight, g.dbias}, ctx);
  return g;
}

NormOut group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, std::int64_t num_groups, double eps,
                   const ExecContext* ctx) {
  constexpr const char* op = "group_norm.fwd";
  ops_detail::input(op, "x", x, 2);
  c::groups(op, num_groups, x.size(1));
  NormOut out;
  out.y = ops_detail::like(x);
  out.mean = ops_detail::group_stats(x, num_groups);
  out.rstd = ops_detail::group_stats(x, num_groups);
  group_norm_fwd({x, weight, bias, out.y, out.mean, out.rstd, num_groups, eps}, ctx);
  return out;
}

NormGrads group_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, std::int64_t num_groups, const ExecContext* ctx) {
  constexpr const char* op = "group_norm.bwd";
  ops_detail::input(op, "x", x, 2);
  NormGrads g;
  g.dx = ops_detail::like(x);
  g.dweight = ops_detail::weight_grad(weight);
  g.dbias = ops_detail::bias_grad(weight, x, x.size(1));
  group_norm_bwd({dy, x, weight, mean, rstd, g.dx, g.dweight, g.dbias, num_groups}, ctx);
  return g;
}

}  // namespace opreg
