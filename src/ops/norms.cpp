// The allocating wrappers of the four normalisations (rms_norm, fused_add_rms_norm, layer_norm,
// group_norm): outputs made on the input's device, then the op's entry point. Their checks,
// handles and entry points come from the manifest (ops.cpp).
#include <optional>

#include "ops/checks.h"
#include "ops/common.h"

namespace opreg {

namespace c = op_check;
using op_check::hidden;

// ---- Allocating wrappers

namespace {

// What the row normalisations' forwards return: y like x, s like x for the fused op, the mean
// where the op keeps it, and rstd, one per row.
NormOut row_outputs(const char* op, const Tensor& x, bool s, bool mean) {
  ops_detail::input(op, "x", x, 1);
  NormOut out;
  out.y = ops_detail::like(x);
  if (s) out.s = ops_detail::like(x);
  if (mean) out.mean = ops_detail::row_stats(x);
  out.rstd = ops_detail::row_stats(x);
  return out;
}

// What the backwards return: dx like the normalised input (x, or the fused op's s), dweight where
// there is a weight, and where the op has a bias dbias, one per channel of x's dimension
// `bias_dim` (-1: the last).
NormGrads grads(const char* op, const Tensor& x, const char* name, int min_dims, const Tensor& weight,
                std::optional<int> bias_dim) {
  ops_detail::input(op, name, x, min_dims);
  NormGrads g;
  g.dx = ops_detail::like(x);
  g.dweight = ops_detail::weight_grad(weight);
  if (bias_dim) g.dbias = ops_detail::bias_grad(weight, x, *bias_dim < 0 ? hidden(x) : x.size(*bias_dim));
  return g;
}
constexpr std::optional<int> kNoBias;

}  // namespace

NormOut rms_norm(const Tensor& x, const Tensor& weight, double eps, double offset, Casting casting,
                 const ExecContext* ctx) {
  NormOut out = row_outputs("rms_norm.fwd", x, false, false);
  rms_norm_fwd({x, weight, out.y, out.rstd, eps, offset, casting}, ctx);
  return out;
}

NormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                            double offset, Casting casting, const ExecContext* ctx) {
  NormGrads g = grads("rms_norm.bwd", x, "x", 1, weight, kNoBias);
  rms_norm_bwd({dy, x, weight, rstd, g.dx, g.dweight, offset, casting}, ctx);
  return g;
}

NormOut fused_add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps, double offset,
                           Casting casting, const ExecContext* ctx) {
  NormOut out = row_outputs("fused_add_rms_norm.fwd", x, true, false);
  fused_add_rms_norm_fwd({x, residual, weight, out.y, out.s, out.rstd, eps, offset, casting}, ctx);
  return out;
}

NormGrads fused_add_rms_norm_backward(const Tensor& dy, const Tensor& ds_out, const Tensor& s, const Tensor& weight,
                                      const Tensor& rstd, double offset, Casting casting, const ExecContext* ctx) {
  NormGrads g = grads("fused_add_rms_norm.bwd", s, "s", 1, weight, kNoBias);
  fused_add_rms_norm_bwd({dy, ds_out, s, weight, rstd, g.dx, g.dweight, offset, casting}, ctx);
  return g;
}

NormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const ExecContext* ctx) {
  NormOut out = row_outputs("layer_norm.fwd", x, false, true);
  layer_norm_fwd({x, weight, bias, out.y, out.mean, out.rstd, eps}, ctx);
  return out;
}

NormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, const ExecContext* ctx) {
  NormGrads g = grads("layer_norm.bwd", x, "x", 1, weight, -1);
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
  NormGrads g = grads("group_norm.bwd", x, "x", 2, weight, 1);
  group_norm_bwd({dy, x, weight, mean, rstd, g.dx, g.dweight, g.dbias, num_groups}, ctx);
  return g;
}

}  // namespace opreg
