// Each argument struct's rules: what its check enforces beyond what the manifest says. One
// overload per family and direction, called with the op's name (geglu and swiglu share theirs);
// the overlap rule and the call's facts come after, from the manifest's tensor list (ops.cpp).
// Inline: an op's entry point runs its check inline, and the passing path is compares (check.h).
// The order of the rules is the order errors are reported in.
#pragma once

#include <concepts>
#include <cstdint>

#include "ops/check.h"

namespace opreg::op_check {

[[gnu::always_inline]] inline std::int64_t hidden(const Tensor& x) { return x.size(x.ndim() - 1); }

inline constexpr const char* kGroupLayout = "(N, C, spatial...)";

// ---- rms_norm and fused_add_rms_norm (the fused op adds residual and s forward, ds_out
// backward, and its backward normalises s where rms_norm's does x).

template <class Args, class... Ops>
concept one_of = (std::same_as<Args, Ops> || ...);
template <class Args> concept RowNormFwdArgs = one_of<Args, RmsNormFwdArgs, FusedAddRmsNormFwdArgs>;
template <class Args> concept RowNormBwdArgs = one_of<Args, RmsNormBwdArgs, FusedAddRmsNormBwdArgs>;

template <RowNormFwdArgs Args>
[[gnu::always_inline]] inline void args(const char* op, const Args& a) {
  constexpr bool kFused = std::same_as<Args, FusedAddRmsNormFwdArgs>;
  activation(op, "x", a.x);
  if constexpr (kFused) like(op, "residual", a.residual, "x", a.x);
  optional_weight(op, "weight", a.weight, hidden(a.x), "x's last dim", "x", a.x.dtype());
  like(op, "y", a.y, "x", a.x);
  if constexpr (kFused) like(op, "s", a.s, "x", a.x);
  row_stats(op, "rstd", a.rstd, a.x);
  eps(op, a.eps);
  offset(op, a.offset, a.weight);
  casting(op, a.casting);
}

template <RowNormBwdArgs Args>
[[gnu::always_inline]] inline void args(const char* op, const Args& a) {
  constexpr bool kFused = std::same_as<Args, FusedAddRmsNormBwdArgs>;
  // What the backward normalises: x, or the fused op's s.
  const char* name = kFused ? "s" : "x";
  const Tensor& x = [&]() -> const Tensor& {
    if constexpr (kFused) {
      return a.s;
    } else {
      return a.x;
    }
  }();
  activation(op, name, x);
  like(op, "dy", a.dy, name, x);
  if constexpr (kFused) like(op, "ds_out", a.ds_out, name, x);
  optional_weight(op, "weight", a.weight, hidden(x), kFused ? "s's last dim" : "x's last dim", name, x.dtype());
  row_stats(op, "rstd", a.rstd, x);
  like(op, "dx", a.dx, name, x);
  param_grad(op, "dweight", a.dweight, "weight", a.weight);
  offset(op, a.offset, a.weight);
  casting(op, a.casting);
}

// ---- layer_norm and group_norm: statistics per row, or per (n, group) with parameters per
// channel.

template <class Args> concept AffineFwdArgs = one_of<Args, LayerNormFwdArgs, GroupNormFwdArgs>;
template <class Args> concept AffineBwdArgs = one_of<Args, LayerNormBwdArgs, GroupNormBwdArgs>;

// x, and for group_norm the group count: what sizes the parameters and the statistics.
template <class Args>
[[gnu::always_inline]] inline void affine_input(const char* op, const Args& a) {
  if constexpr (requires { a.num_groups; }) {
    activation(op, "x", a.x, 2, kGroupLayout);
    groups(op, a.num_groups, a.x.size(1));
  } else {
    activation(op, "x", a.x);
  }
}
// A parameter (or its gradient, or the bias without a weight): of x's channels or last dim.
template <class Args>
[[gnu::always_inline]] inline std::int64_t params(const Args& a) {
  if constexpr (requires { a.num_groups; }) {
    return a.x.size(1);
  } else {
    return hidden(a.x);
  }
}
template <class Args>
inline constexpr const char* kParamsOf = requires(Args a) { a.num_groups; } ? "x's channel dim" : "x's last dim";
template <class Args>
[[gnu::always_inline]] inline void stats(const char* op, const char* name, const Tensor& t, const Args& a) {
  if constexpr (requires { a.num_groups; }) {
    group_stats(op, name, t, a.x.size(0), a.num_groups);
  } else {
    row_stats(op, name, t, a.x);
  }
}

template <AffineFwdArgs Args>
[[gnu::always_inline]] inline void args(const char* op, const Args& a) {
  affine_input(op, a);
  optional_weight(op, "weight", a.weight, params(a), kParamsOf<Args>, "x", a.x.dtype());
  optional_bias(op, "bias", a.bias, a.weight, params(a), kParamsOf<Args>, "x", a.x.dtype());
  like(op, "y", a.y, "x", a.x);
  stats(op, "mean", a.mean, a);
  stats(op, "rstd", a.rstd, a);
  eps(op, a.eps);
}

template <AffineBwdArgs Args>
[[gnu::always_inline]] inline void args(const char* op, const Args& a) {
  affine_input(op, a);
  like(op, "dy", a.dy, "x", a.x);
  optional_weight(op, "weight", a.weight, params(a), kParamsOf<Args>, "x", a.x.dtype());
  stats(op, "mean", a.mean, a);
  stats(op, "rstd", a.rstd, a);
  like(op, "dx", a.dx, "x", a.x);
  param_grad(op, "dweight", a.dweight, "weight", a.weight);
  optional_bias(op, "dbias", a.dbias, a.weight, params(a), kParamsOf<Args>, "x", a.x.dtype());
}

// ---- geglu and swiglu

[[gnu::always_inline]] inline void args(const char* op, const GluFwdArgs& a) {
  activation(op, "a", a.a);
  like(op, "b", a.b, "a", a.a);
  like(op, "c", a.c, "a", a.a);
  rounding(op, a.rounding);
}

[[gnu::always_inline]] inline void args(const char* op, const GluBwdArgs& a) {
  activation(op, "a", a.a);
  like(op, "dc", a.dc, "a", a.a);
  like(op, "b", a.b, "a", a.a);
  like(op, "da", a.da, "a", a.a);
  like(op, "db", a.db, "a", a.a);
  rounding(op, a.rounding);
}

// ---- rope (out of line: check.cpp)

[[gnu::always_inline]] inline void args(const char* op, const RopeFwdArgs& a) {
  rope(op, {"q", a.q, "k", a.k, a.cos, a.sin, a.position_ids, "q_out", a.q_out, "k_out", a.k_out, a.style});
}

[[gnu::always_inline]] inline void args(const char* op, const RopeBwdArgs& a) {
  rope(op, {"dq_out", a.dq_out, "dk_out", a.dk_out, a.cos, a.sin, a.position_ids, "dq", a.dq, "dk", a.dk, a.style});
}

}  // namespace opreg::op_check
