// The four normalisations: rms_norm, fused_add_rms_norm, layer_norm, group_norm (fwd and bwd):
// their checks, tensor lists, choice keys, entry points and allocating wrappers.
#include <array>

#include "ops/check.h"
#include "ops/common.h"

namespace opreg {
namespace {

namespace c = op_check;

std::int64_t hidden(const Tensor& x) { return x.size(x.ndim() - 1); }

void key_casting(Casting casting, ProblemKey& key) { key.add(static_cast<std::uint64_t>(casting)); }

// ---- rms_norm

[[gnu::always_inline]] inline CallFacts check_rms_fwd(const RmsNormFwdArgs& a) {
  constexpr const char* op = "rms_norm.fwd";
  c::activation(op, "x", a.x);
  c::optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  c::like(op, "y", a.y, "x", a.x);
  c::row_stats(op, "rstd", a.rstd, a.x);
  c::eps(op, a.eps);
  c::offset(op, a.offset, a.weight);
  c::casting(op, a.casting);
  return c::outputs_apart(op, 2, [&] {
    return c::items({{"x", &a.x}, {"weight", &a.weight}, {"y", &a.y}, {"rstd", &a.rstd}});
  });
}
void tensors_rms_fwd(RmsNormFwdArgs& a, TensorList& l) {
  l.add("x", a.x, Role::in);
  l.add("weight", a.weight, Role::in);
  l.add("y", a.y, Role::out);
  l.add("rstd", a.rstd, Role::out);
}

[[gnu::always_inline]] inline CallFacts check_rms_bwd(const RmsNormBwdArgs& a) {
  constexpr const char* op = "rms_norm.bwd";
  c::activation(op, "x", a.x);
  c::like(op, "dy", a.dy, "x", a.x);
  c::optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  c::row_stats(op, "rstd", a.rstd, a.x);
  c::like(op, "dx", a.dx, "x", a.x);
  c::param_grad(op, "dweight", a.dweight, "weight", a.weight);
  c::offset(op, a.offset, a.weight);
  c::casting(op, a.casting);
  return c::outputs_apart(op, 4, [&] {
    return c::items({{"dy", &a.dy},
                     {"x", &a.x},
                     {"weight", &a.weight},
                     {"rstd", &a.rstd},
                     {"dx", &a.dx, 0},
                     {"dweight", &a.dweight}});
  });
}
void tensors_rms_bwd(RmsNormBwdArgs& a, TensorList& l) {
  l.add("dy", a.dy, Role::in);
  l.add("x", a.x, Role::in);
  l.add("weight", a.weight, Role::in);
  l.add("rstd", a.rstd, Role::in);
  l.add("dx", a.dx, Role::out);
  l.add("dweight", a.dweight, Role::out);
}

// ---- fused_add_rms_norm

[[gnu::always_inline]] inline CallFacts check_fused_fwd(const FusedAddRmsNormFwdArgs& a) {
  constexpr const char* op = "fused_add_rms_norm.fwd";
  c::activation(op, "x", a.x);
  c::like(op, "residual", a.residual, "x", a.x);
  c::optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  c::like(op, "y", a.y, "x", a.x);
  c::like(op, "s", a.s, "x", a.x);
  c::row_stats(op, "rstd", a.rstd, a.x);
  c::eps(op, a.eps);
  c::offset(op, a.offset, a.weight);
  c::casting(op, a.casting);
  return c::outputs_apart(op, 3, [&] {
    return c::items(
        {{"x", &a.x}, {"residual", &a.residual}, {"weight", &a.weight}, {"y", &a.y}, {"s", &a.s}, {"rstd", &a.rstd}});
  });
}
void tensors_fused_fwd(FusedAddRmsNormFwdArgs& a, TensorList& l) {
  l.add("x", a.x, Role::in);
  l.add("residual", a.residual, Role::in);
  l.add("weight", a.weight, Role::in);
  l.add("y", a.y, Role::out);
  l.add("s", a.s, Role::out);
  l.add("rstd", a.rstd, Role::out);
}

[[gnu::always_inline]] inline CallFacts check_fused_bwd(const FusedAddRmsNormBwdArgs& a) {
  constexpr const char* op = "fused_add_rms_norm.bwd";
  c::activation(op, "s", a.s);
  c::like(op, "dy", a.dy, "s", a.s);
  c::like(op, "ds_out", a.ds_out, "s", a.s);
  c::optional_weight(op, "weight", a.weight, hidden(a.s), "s's last dim", "s", a.s.dtype());
  c::row_stats(op, "rstd", a.rstd, a.s);
  c::like(op, "dx", a.dx, "s", a.s);
  c::param_grad(op, "dweight", a.dweight, "weight", a.weight);
  c::offset(op, a.offset, a.weight);
  c::casting(op, a.casting);
  return c::outputs_apart(op, 5, [&] {
    return c::items({{"dy", &a.dy},
                     {"ds_out", &a.ds_out},
                     {"s", &a.s},
                     {"weight", &a.weight},
                     {"rstd", &a.rstd},
                     {"dx", &a.dx, 0},
                     {"dweight", &a.dweight}});
  });
}
void tensors_fused_bwd(FusedAddRmsNormBwdArgs& a, TensorList& l) {
  l.add("dy", a.dy, Role::in);
  l.add("ds_out", a.ds_out, Role::in);
  l.add("s", a.s, Role::in);
  l.add("weight", a.weight, Role::in);
  l.add("rstd", a.rstd, Role::in);
  l.add("dx", a.dx, Role::out);
  l.add("dweight", a.dweight, Role::out);
}

// ---- layer_norm and group_norm share their tensors (and their order)

template <class Args>
std::array<c::Item, 6> affine_fwd_items(const Args& a) {
  return c::items(
      {{"x", &a.x}, {"weight", &a.weight}, {"bias", &a.bias}, {"y", &a.y}, {"mean", &a.mean}, {"rstd", &a.rstd}});
}
template <class Args>
void tensors_affine_fwd(Args& a, TensorList& l) {
  l.add("x", a.x, Role::in);
  l.add("weight", a.weight, Role::in);
  l.add("bias", a.bias, Role::in);
  l.add("y", a.y, Role::out);
  l.add("mean", a.mean, Role::out);
  l.add("rstd", a.rstd, Role::out);
}

template <class Args>
std::array<c::Item, 8> affine_bwd_items(const Args& a) {
  return c::items({{"dy", &a.dy},
                   {"x", &a.x},
                   {"weight", &a.weight},
                   {"mean", &a.mean},
                   {"rstd", &a.rstd},
                   {"dx", &a.dx, 0},
                   {"dweight", &a.dweight},
                   {"dbias", &a.dbias}});
}
template <class Args>
void tensors_affine_bwd(Args& a, TensorList& l) {
  l.add("dy", a.dy, Role::in);
  l.add("x", a.x, Role::in);
  l.add("weight", a.weight, Role::in);
  l.add("mean", a.mean, Role::in);
  l.add("rstd", a.rstd, Role::in);
  l.add("dx", a.dx, Role::out);
  l.add("dweight", a.dweight, Role::out);
  l.add("dbias", a.dbias, Role::out);
}

// ---- layer_norm

[[gnu::always_inline]] inline CallFacts check_layer_fwd(const LayerNormFwdArgs& a) {
  constexpr const char* op = "layer_norm.fwd";
  c::activation(op, "x", a.x);
  c::optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  c::optional_bias(op, "bias", a.bias, a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  c::like(op, "y", a.y, "x", a.x);
  c::row_stats(op, "mean", a.mean, a.x);
  c::row_stats(op, "rstd", a.rstd, a.x);
  c::eps(op, a.eps);
  return c::outputs_apart(op, 3, [&] { return affine_fwd_items(a); });
}

[[gnu::always_inline]] inline CallFacts check_layer_bwd(const LayerNormBwdArgs& a) {
  constexpr const char* op = "layer_norm.bwd";
  c::activation(op, "x", a.x);
  c::like(op, "dy", a.dy, "x", a.x);
  c::optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  c::row_stats(op, "mean", a.mean, a.x);
  c::row_stats(op, "rstd", a.rstd, a.x);
  c::like(op, "dx", a.dx, "x", a.x);
  c::param_grad(op, "dweight", a.dweight, "weight", a.weight);
  c::optional_bias(op, "dbias", a.dbias, a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  return c::outputs_apart(op, 5, [&] { return affine_bwd_items(a); });
}

// ---- group_norm

constexpr const char* kGroupLayout = "(N, C, spatial...)";

[[gnu::always_inline]] inline CallFacts check_group_fwd(const GroupNormFwdArgs& a) {
  constexpr const char* op = "group_norm.fwd";
  c::activation(op, "x", a.x, 2, kGroupLayout);
  c::groups(op, a.num_groups, a.x.size(1));
  c::optional_weight(op, "weight", a.weight, a.x.size(1), "x's channel dim", "x", a.x.dtype());
  c::optional_bias(op, "bias", a.bias, a.weight, a.x.size(1), "x's channel dim", "x", a.x.dtype());
  c::like(op, "y", a.y, "x", a.x);
  c::group_stats(op, "mean", a.mean, a.x.size(0), a.num_groups);
  c::group_stats(op, "rstd", a.rstd, a.x.size(0), a.num_groups);
  c::eps(op, a.eps);
  return c::outputs_apart(op, 3, [&] { return affine_fwd_items(a); });
}

[[gnu::always_inline]] inline CallFacts check_group_bwd(const GroupNormBwdArgs& a) {
  constexpr const char* op = "group_norm.bwd";
  c::activation(op, "x", a.x, 2, kGroupLayout);
  c::groups(op, a.num_groups, a.x.size(1));
  c::like(op, "dy", a.dy, "x", a.x);
  c::optional_weight(op, "weight", a.weight, a.x.size(1), "x's channel dim", "x", a.x.dtype());
  c::group_stats(op, "mean", a.mean, a.x.size(0), a.num_groups);
  c::group_stats(op, "rstd", a.rstd, a.x.size(0), a.num_groups);
  c::like(op, "dx", a.dx, "x", a.x);
  c::param_grad(op, "dweight", a.dweight, "weight", a.weight);
  c::optional_bias(op, "dbias", a.dbias, a.weight, a.x.size(1), "x's channel dim", "x", a.x.dtype());
  return c::outputs_apart(op, 5, [&] { return affine_bwd_items(a); });
}

template <class Args>
void key_groups(const Args& a, ProblemKey& key) {
  key.add(static_cast<std::uint64_t>(a.num_groups));
}
template <class Args>
void key_rms(const Args& a, ProblemKey& key) {
  key_casting(a.casting, key);
}

}  // namespace

const Op<RmsNormFwdArgs>& rms_norm_fwd_op() {
  static const Op<RmsNormFwdArgs> op =
      ops_detail::make_op<RmsNormFwdArgs>("rms_norm.fwd", &check_rms_fwd, &tensors_rms_fwd, &key_rms<RmsNormFwdArgs>);
  return op;
}
const Op<RmsNormBwdArgs>& rms_norm_bwd_op() {
  static const Op<RmsNormBwdArgs> op =
      ops_detail::make_op<RmsNormBwdArgs>("rms_norm.bwd", &check_rms_bwd, &tensors_rms_bwd, &key_rms<RmsNormBwdArgs>);
  return op;
}
const Op<FusedAddRmsNormFwdArgs>& fused_add_rms_norm_fwd_op() {
  static const Op<FusedAddRmsNormFwdArgs> op = ops_detail::make_op<FusedAddRmsNormFwdArgs>(
      "fused_add_rms_norm.fwd", &check_fused_fwd, &tensors_fused_fwd, &key_rms<FusedAddRmsNormFwdArgs>);
  return op;
}
const Op<FusedAddRmsNormBwdArgs>& fused_add_rms_norm_bwd_op() {
  static const Op<FusedAddRmsNormBwdArgs> op = ops_detail::make_op<FusedAddRmsNormBwdArgs>(
      "fused_add_rms_norm.bwd", &check_fused_bwd, &tensors_fused_bwd, &key_rms<FusedAddRmsNormBwdArgs>);
  return op;
}
const Op<LayerNormFwdArgs>& layer_norm_fwd_op() {
  static const Op<LayerNormFwdArgs> op =
      ops_detail::make_op<LayerNormFwdArgs>("layer_norm.fwd", &check_layer_fwd, &tensors_affine_fwd<LayerNormFwdArgs>);
  return op;
}
const Op<LayerNormBwdArgs>& layer_norm_bwd_op() {
  static const Op<LayerNormBwdArgs> op =
      ops_detail::make_op<LayerNormBwdArgs>("layer_norm.bwd", &check_layer_bwd, &tensors_affine_bwd<LayerNormBwdArgs>);
  return op;
}
const Op<GroupNormFwdArgs>& group_norm_fwd_op() {
  static const Op<GroupNormFwdArgs> op = ops_detail::make_op<GroupNormFwdArgs>(
      "group_norm.fwd", &check_group_fwd, &tensors_affine_fwd<GroupNormFwdArgs>, &key_groups<GroupNormFwdArgs>);
  return op;
}
const Op<GroupNormBwdArgs>& group_norm_bwd_op() {
  static const Op<GroupNormBwdArgs> op = ops_detail::make_op<GroupNormBwdArgs>(
      "group_norm.bwd", &check_group_bwd, &tensors_affine_bwd<GroupNormBwdArgs>, &key_groups<GroupNormBwdArgs>);
  return op;
}

DispatchResult rms_norm_fwd(const RmsNormFwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_rms_fwd>(&rms_norm_fwd_op, args, ctx);
}
DispatchResult rms_norm_bwd(const RmsNormBwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_rms_bwd>(&rms_norm_bwd_op, args, ctx);
}
DispatchResult fused_add_rms_norm_fwd(const FusedAddRmsNormFwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_fused_fwd>(&fused_add_rms_norm_fwd_op, args, ctx);
}
DispatchResult fused_add_rms_norm_bwd(const FusedAddRmsNormBwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_fused_bwd>(&fused_add_rms_norm_bwd_op, args, ctx);
}
DispatchResult layer_norm_fwd(const LayerNormFwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_layer_fwd>(&layer_norm_fwd_op, args, ctx);
}
DispatchResult layer_norm_bwd(const LayerNormBwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_layer_bwd>(&layer_norm_bwd_op, args, ctx);
}
DispatchResult group_norm_fwd(const GroupNormFwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_group_fwd>(&group_norm_fwd_op, args, ctx);
}
DispatchResult group_norm_bwd(const GroupNormBwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_group_bwd>(&group_norm_bwd_op, args, ctx);
}

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
