// Each argument struct's rules: what its check enforces beyond what the manifest says. One
// overload per struct, called with the op's name (geglu and swiglu share theirs); the overlap
// rule and the call's facts come after, from the manifest's tensor list (ops.cpp). Inline: an
// op's entry point runs its check inline, and the passing path is compares (check.h).
#pragma once

#include <cstdint>

#include "ops/check.h"

namespace opreg::op_check {

[[gnu::always_inline]] inline std::int64_t hidden(const Tensor& x) { return x.size(x.ndim() - 1); }

inline constexpr const char* kGroupLayout = "(N, C, spatial...)";

// ---- rms_norm and fused_add_rms_norm

[[gnu::always_inline]] inline void args(const char* op, const RmsNormFwdArgs& a) {
  activation(op, "x", a.x);
  optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  like(op, "y", a.y, "x", a.x);
  row_stats(op, "rstd", a.rstd, a.x);
  eps(op, a.eps);
  offset(op, a.offset, a.weight);
  casting(op, a.casting);
}

[[gnu::always_inline]] inline void args(const char* op, const RmsNormBwdArgs& a) {
  activation(op, "x", a.x);
  like(op, "dy", a.dy, "x", a.x);
  optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  row_stats(op, "rstd", a.rstd, a.x);
  like(op, "dx", a.dx, "x", a.x);
  param_grad(op, "dweight", a.dweight, "weight", a.weight);
  offset(op, a.offset, a.weight);
  casting(op, a.casting);
}

[[gnu::always_inline]] inline void args(const char* op, const FusedAddRmsNormFwdArgs& a) {
  activation(op, "x", a.x);
  like(op, "residual", a.residual, "x", a.x);
  optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  like(op, "y", a.y, "x", a.x);
  like(op, "s", a.s, "x", a.x);
  row_stats(op, "rstd", a.rstd, a.x);
  eps(op, a.eps);
  offset(op, a.offset, a.weight);
  casting(op, a.casting);
}

[[gnu::always_inline]] inline void args(const char* op, const FusedAddRmsNormBwdArgs& a) {
  activation(op, "s", a.s);
  like(op, "dy", a.dy, "s", a.s);
  like(op, "ds_out", a.ds_out, "s", a.s);
  optional_weight(op, "weight", a.weight, hidden(a.s), "s's last dim", "s", a.s.dtype());
  row_stats(op, "rstd", a.rstd, a.s);
  like(op, "dx", a.dx, "s", a.s);
  param_grad(op, "dweight", a.dweight, "weight", a.weight);
  offset(op, a.offset, a.weight);
  casting(op, a.casting);
}

// ---- layer_norm

[[gnu::always_inline]] inline void args(const char* op, const LayerNormFwdArgs& a) {
  activation(op, "x", a.x);
  optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  optional_bias(op, "bias", a.bias, a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  like(op, "y", a.y, "x", a.x);
  row_stats(op, "mean", a.mean, a.x);
  row_stats(op, "rstd", a.rstd, a.x);
  eps(op, a.eps);
}

[[gnu::always_inline]] inline void args(const char* op, const LayerNormBwdArgs& a) {
  activation(op, "x", a.x);
  like(op, "dy", a.dy, "x", a.x);
  optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  row_stats(op, "mean", a.mean, a.x);
  row_stats(op, "rstd", a.rstd, a.x);
  like(op, "dx", a.dx, "x", a.x);
  param_grad(op, "dweight", a.dweight, "weight", a.weight);
  optional_bias(op, "dbias", a.dbias, a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
}

// ---- group_norm

[[gnu::always_inline]] inline void args(const char* op, const GroupNormFwdArgs& a) {
  activation(op, "x", a.x, 2, kGroupLayout);
  groups(op, a.num_groups, a.x.size(1));
  optional_weight(op, "weight", a.weight, a.x.size(1), "x's channel dim", "x", a.x.dtype());
  optional_bias(op, "bias", a.bias, a.weight, a.x.size(1), "x's channel dim", "x", a.x.dtype());
  like(op, "y", a.y, "x", a.x);
  group_stats(op, "mean", a.mean, a.x.size(0), a.num_groups);
  group_stats(op, "rstd", a.rstd, a.x.size(0), a.num_groups);
  eps(op, a.eps);
}

[[gnu::always_inline]] inline void args(const char* op, const GroupNormBwdArgs& a) {
  activation(op, "x", a.x, 2, kGroupLayout);
  groups(op, a.num_groups, a.x.size(1));
  like(op, "dy", a.dy, "x", a.x);
  optional_weight(op, "weight", a.weight, a.x.size(1), "x's channel dim", "x", a.x.dtype());
  group_stats(op, "mean", a.mean, a.x.size(0), a.num_groups);
  group_stats(op, "rstd", a.rstd, a.x.size(0), a.num_groups);
  like(op, "dx", a.dx, "x", a.x);
  param_grad(op, "dweight", a.dweight, "weight", a.weight);
  optional_bias(op, "dbias", a.dbias, a.weight, a.x.size(1), "x's channel dim", "x", a.x.dtype());
}

// ---- geglu and swiglu

[[gnu::always_inline]] inline void args(const char* op, const GluFwdArgs& a) {
  activation(op, "a", a.a);
  like(op, "b", a.b, "a", a.a);
  like(op, "c", a.c, "a", a.a);
}

[[gnu::always_inline]] inline void args(const char* op, const GluBwdArgs& a) {
  activation(op, "a", a.a);
  like(op, "dc", a.dc, "a", a.a);
  like(op, "b", a.b, "a", a.a);
  like(op, "da", a.da, "a", a.a);
  like(op, "db", a.db, "a", a.a);
}

}  // namespace opreg::op_check
