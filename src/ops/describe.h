// The ops' argument structs as their families' descriptors (src/ops/families.h): what every
// backend's kernels take. The arguments must have passed the op's check.
#pragma once

#include <initializer_list>
#include <utility>

#include "opreg/ops.h"
#include "ops/families.h"

namespace opreg::family {

// x's (or a parameter's) dtype as an Elem; an opreg::Error (internal) for any other dtype, which
// the op's check refuses first.
Elem elem_of(DType dtype);
DType dtype_of(Elem elem);
const char* elem_name(Elem elem);
Mode mode_of(Casting casting);
// What a gated unit of `elem` runs: torch only where it rounds something (a 16-bit dtype).
GluRounding rounding_of(Rounding rounding, Elem elem);

// ---- Each argument struct's descriptor (a backend's variants take these, built once per call).

namespace detail {

inline const void* in(const Tensor& t) { return t.defined() ? t.data() : nullptr; }
inline void* out(const Tensor& t) { return t.defined() ? t.data() : nullptr; }
// A row's length: the last dimension (1 for a scalar).
inline std::int64_t last_dim(const Tensor& t) { return t.shape().ndim() == 0 ? 1 : t.shape()[t.shape().ndim() - 1]; }
// The parameters' dtype: the first defined of `params`, f32 when none is.
inline Elem param_type(std::initializer_list<const Tensor*> params) {
  for (const Tensor* p : params) {
    if (p->defined()) return elem_of(p->dtype());
  }
  return Elem::f32;
}

inline NormSets layer_sets(const Shape& x) {
  const RowsHidden s = rows_hidden(x);
  return {.sets = s.rows, .groups = 1, .channels = s.hidden, .spread = 1};
}
inline NormSets group_sets(const Shape& x, std::int64_t groups) {
  std::int64_t spread = 1;
  for (int d = 2; d < x.ndim(); ++d) spread *= x[d];
  return {.sets = x[0] * groups, .groups = groups, .channels = x[1] / groups, .spread = spread};
}

// A row norm's descriptors; the fused op adds its residual and sum (forward) or ds_out (backward).
template <class Args>
inline RowNormFwd row_fwd(const Args& a, const void* residual, void* sum) {
  const RowsHidden s = rows_hidden(a.x.shape());
  return {.x = a.x.data(), .residual = residual, .weight = in(a.weight), .y = a.y.data(), .s = sum,
          .rstd = a.rstd.template data_as<float>(), .rows = s.rows, .hidden = s.hidden, .eps = a.eps,
          .offset = a.offset, .mode = mode_of(a.casting), .x_type = elem_of(a.x.dtype()),
          .w_type = param_type({&a.weight})};
}
template <class Args>
inline RowNormBwd row_bwd(const Args& a, const Tensor& x, const void* ds_out) {
  const RowsHidden s = rows_hidden(x.shape());
  return {.dy = a.dy.data(), .ds_out = ds_out, .x = x.data(), .weight = in(a.weight),
          .rstd = a.rstd.template data_as<const float>(), .dx = a.dx.data(), .dweight = out(a.dweight),
          .rows = s.rows, .hidden = s.hidden, .offset = a.offset, .mode = mode_of(a.casting),
          .x_type = elem_of(x.dtype()), .w_type = param_type({&a.weight})};
}

template <class Args>
inline NormFwd norm_fwd(const Args& a, const NormSets& shape) {
  return {.x = a.x.data(), .weight = in(a.weight), .bias = in(a.bias), .y = a.y.data(),
          .mean = a.mean.template data_as<float>(), .rstd = a.rstd.template data_as<float>(), .shape = shape,
          .eps = a.eps, .x_type = elem_of(a.x.dtype()), .p_type = param_type({&a.weight, &a.bias})};
}
template <class Args>
inline NormBwd norm_bwd(const Args& a, const NormSets& shape) {
  return {.dy = a.dy.data(), .x = a.x.data(), .weight = in(a.weight), .mean = a.mean.template data_as<const float>(),
          .rstd = a.rstd.template data_as<const float>(), .dx = a.dx.data(), .dweight = out(a.dweight),
          .dbias = out(a.dbias), .shape = shape, .x_type = elem_of(a.x.dtype()),
          .p_type = param_type({&a.weight, &a.dweight, &a.dbias})};
}

inline RopeSide rope_side(const Tensor& in, const Tensor& out) {
  return {.in = in.data(), .out = out.data(), .heads = in.size(1),
          .in_stride = {in.stride(0), in.stride(1), in.stride(2)},
          .out_stride = {out.stride(0), out.stride(1), out.stride(2)}};
}
// A table's (b, t) strides: b's 0 for a 2-D table, or a 3-D one of batch 1.
inline void table_strides(const Tensor& t, std::int64_t (&out)[2]) {
  const int n = t.ndim();
  out[0] = n == 3 && t.size(0) > 1 ? t.stride(0) : 0;
  out[1] = t.stride(n - 2);
}
inline Rope rope(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                 const Tensor& q_out, const Tensor& k_out, RopeStyle style, bool backward) {
  Rope d{.q = rope_side(q, q_out), .k = rope_side(k, k_out), .cos = cos.data(), .sin = sin.data(),
         .table_rows = cos.size(cos.ndim() - 2), .positions = positions.defined() ? positions.data_as<const std::int64_t>() : nullptr,
         .batch = q.size(0), .seq = q.size(2), .dim = q.size(3),
         .pairing = style == RopeStyle::interleaved ? Pairing::interleaved : Pairing::half, .backward = backward,
         .type = elem_of(q.dtype()), .table_type = elem_of(cos.dtype())};
  table_strides(cos, d.cos_stride);
  table_strides(sin, d.sin_stride);
  d.table_step = style == RopeStyle::interleaved && cos.size(cos.ndim() - 1) == d.dim ? 2 : 1;
  if (positions.defined()) {
    d.pos_stride[0] = positions.ndim() == 2 && positions.size(0) > 1 ? positions.stride(0) : 0;
    d.pos_stride[1] = positions.stride(positions.ndim() - 1);
  }
  return d;
}

}  // namespace detail

inline RowNormFwd describe(const RmsNormFwdArgs& a) { return detail::row_fwd(a, nullptr, nullptr); }
inline RowNormFwd describe(const FusedAddRmsNormFwdArgs& a) {
  return detail::row_fwd(a, a.residual.data(), a.s.data());
}
inline RowNormBwd describe(const RmsNormBwdArgs& a) { return detail::row_bwd(a, a.x, nullptr); }
// The fused op's backward reads the forward's sum s where rms_norm's reads x.
inline RowNormBwd describe(const FusedAddRmsNormBwdArgs& a) { return detail::row_bwd(a, a.s, a.ds_out.data()); }
inline NormFwd describe(const LayerNormFwdArgs& a) { return detail::norm_fwd(a, detail::layer_sets(a.x.shape())); }
inline NormFwd describe(const GroupNormFwdArgs& a) {
  return detail::norm_fwd(a, detail::group_sets(a.x.shape(), a.num_groups));
}
inline NormBwd describe(const LayerNormBwdArgs& a) { return detail::norm_bwd(a, detail::layer_sets(a.x.shape())); }
inline NormBwd describe(const GroupNormBwdArgs& a) {
  return detail::norm_bwd(a, detail::group_sets(a.x.shape(), a.num_groups));
}

inline GluFwd describe(const GluFwdArgs& a) {
  const Elem type = elem_of(a.a.dtype());
  return {.a = a.a.data(), .b = a.b.data(), .c = a.c.data(), .n = a.a.numel(), .hidden = detail::last_dim(a.a),
          .type = type, .rounding = rounding_of(a.rounding, type)};
}
inline GluBwd describe(const GluBwdArgs& a) {
  const Elem type = elem_of(a.a.dtype());
  return {.dc = a.dc.data(), .a = a.a.data(), .b = a.b.data(), .da = a.da.data(), .db = a.db.data(), .n = a.a.numel(),
          .hidden = detail::last_dim(a.a), .type = type, .rounding = rounding_of(a.rounding, type)};
}

inline Rope describe(const RopeFwdArgs& a) {
  return detail::rope(a.q, a.k, a.cos, a.sin, a.position_ids, a.q_out, a.k_out, a.style, false);
}
inline Rope describe(const RopeBwdArgs& a) {
  return detail::rope(a.dq_out, a.dk_out, a.cos, a.sin, a.position_ids, a.dq, a.dk, a.style, true);
}

// The descriptor type of an argument struct.
template <class Args>
using Descriptor = decltype(describe(std::declval<const Args&>()));

}  // namespace opreg::family
