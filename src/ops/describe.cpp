// The families' descriptors of the ops' argument structs (describe.h).
#include "ops/describe.h"

#include <initializer_list>

#include "registry/fail.h"

namespace opreg::family {

Elem elem_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return Elem::f32;
    case DType::f16: return Elem::f16;
    case DType::bf16: return Elem::bf16;
    default: break;
  }
  fail(ErrorKind::internal, "dtype {} reached a kernel (the op's check refuses it)", to_string(dtype));
}

DType dtype_of(Elem elem) {
  switch (elem) {
    case Elem::f16: return DType::f16;
    case Elem::bf16: return DType::bf16;
    case Elem::f32: break;
  }
  return DType::f32;
}

const char* elem_name(Elem elem) { return elem == Elem::f32 ? "f32" : elem == Elem::f16 ? "f16" : "bf16"; }

Mode mode_of(Casting casting) {
  switch (casting) {
    case Casting::gemma: return Mode::gemma;
    case Casting::none: return Mode::none;
    case Casting::llama: break;
  }
  return Mode::llama;
}

GluRounding rounding_of(Rounding rounding, Elem elem) {
  return rounding == Rounding::torch && elem != Elem::f32 ? GluRounding::torch : GluRounding::once;
}

namespace {

const void* in(const Tensor& t) { return t.defined() ? t.data() : nullptr; }
void* out(const Tensor& t) { return t.defined() ? t.data() : nullptr; }
// A row's length: the last dimension (1 for a scalar).
std::int64_t last_dim(const Tensor& t) { return t.shape().ndim() == 0 ? 1 : t.shape()[t.shape().ndim() - 1]; }
// The parameters' dtype: the first defined of `params`, f32 when none is.
Elem param_type(std::initializer_list<const Tensor*> params) {
  for (const Tensor* p : params) {
    if (p->defined()) return elem_of(p->dtype());
  }
  return Elem::f32;
}

NormSets layer_sets(const Shape& x) {
  const RowsHidden s = rows_hidden(x);
  return {.sets = s.rows, .groups = 1, .channels = s.hidden, .spread = 1};
}
NormSets group_sets(const Shape& x, std::int64_t groups) {
  std::int64_t spread = 1;
  for (int d = 2; d < x.ndim(); ++d) spread *= x[d];
  return {.sets = x[0] * groups, .groups = groups, .channels = x[1] / groups, .spread = spread};
}

template <class Args>
NormFwd norm_fwd(const Args& a, const NormSets& shape) {
  return {.x = a.x.data(), .weight = in(a.weight), .bias = in(a.bias), .y = a.y.data(),
          .mean = a.mean.template data_as<float>(), .rstd = a.rstd.template data_as<float>(), .shape = shape,
          .eps = a.eps, .x_type = elem_of(a.x.dtype()), .p_type = param_type({&a.weight, &a.bias})};
}
template <class Args>
NormBwd norm_bwd(const Args& a, const NormSets& shape) {
  return {.dy = a.dy.data(), .x = a.x.data(), .weight = in(a.weight), .mean = a.mean.template data_as<const float>(),
          .rstd = a.rstd.template data_as<const float>(), .dx = a.dx.data(), .dweight = out(a.dweight),
          .dbias = out(a.dbias), .shape = shape, .x_type = elem_of(a.x.dtype()),
          .p_type = param_type({&a.weight, &a.dweight, &a.dbias})};
}

}  // namespace

RowNormFwd describe(const RmsNormFwdArgs& a) {
  const RowsHidden s = rows_hidden(a.x.shape());
  return {.x = a.x.data(), .weight = in(a.weight), .y = a.y.data(), .rstd = a.rstd.data_as<float>(),
          .rows = s.rows, .hidden = s.hidden, .eps = a.eps, .offset = a.offset, .mode = mode_of(a.casting),
          .x_type = elem_of(a.x.dtype()), .w_type = param_type({&a.weight})};
}
RowNormFwd describe(const FusedAddRmsNormFwdArgs& a) {
  const RowsHidden s = rows_hidden(a.x.shape());
  return {.x = a.x.data(), .residual = a.residual.data(), .weight = in(a.weight), .y = a.y.data(), .s = a.s.data(),
          .rstd = a.rstd.data_as<float>(), .rows = s.rows, .hidden = s.hidden, .eps = a.eps, .offset = a.offset,
          .mode = mode_of(a.casting), .x_type = elem_of(a.x.dtype()), .w_type = param_type({&a.weight})};
}
RowNormBwd describe(const RmsNormBwdArgs& a) {
  const RowsHidden s = rows_hidden(a.x.shape());
  return {.dy = a.dy.data(), .x = a.x.data(), .weight = in(a.weight), .rstd = a.rstd.data_as<const float>(),
          .dx = a.dx.data(), .dweight = out(a.dweight), .rows = s.rows, .hidden = s.hidden, .offset = a.offset,
          .mode = mode_of(a.casting), .x_type = elem_of(a.x.dtype()), .w_type = param_type({&a.weight})};
}
RowNormBwd describe(const FusedAddRmsNormBwdArgs& a) {
  const RowsHidden s = rows_hidden(a.s.shape());
  return {.dy = a.dy.data(), .ds_out = a.ds_out.data(), .x = a.s.data(), .weight = in(a.weight),
          .rstd = a.rstd.data_as<const float>(), .dx = a.dx.data(), .dweight = out(a.dweight), .rows = s.rows,
          .hidden = s.hidden, .offset = a.offset, .mode = mode_of(a.casting), .x_type = elem_of(a.s.dtype()),
          .w_type = param_type({&a.weight})};
}
NormFwd describe(const LayerNormFwdArgs& a) { return norm_fwd(a, layer_sets(a.x.shape())); }
NormFwd describe(const GroupNormFwdArgs& a) { return norm_fwd(a, group_sets(a.x.shape(), a.num_groups)); }
NormBwd describe(const LayerNormBwdArgs& a) { return norm_bwd(a, layer_sets(a.x.shape())); }
NormBwd describe(const GroupNormBwdArgs& a) { return norm_bwd(a, group_sets(a.x.shape(), a.num_groups)); }

GluFwd describe(const GluFwdArgs& a) {
  const Elem type = elem_of(a.a.dtype());
  return {.a = a.a.data(), .b = a.b.data(), .c = a.c.data(), .n = a.a.numel(), .hidden = last_dim(a.a), .type = type,
          .rounding = rounding_of(a.rounding, type)};
}
GluBwd describe(const GluBwdArgs& a) {
  const Elem type = elem_of(a.a.dtype());
  return {.dc = a.dc.data(), .a = a.a.data(), .b = a.b.data(), .da = a.da.data(), .db = a.db.data(),
          .n = a.a.numel(), .hidden = last_dim(a.a), .type = type, .rounding = rounding_of(a.rounding, type)};
}

}  // namespace opreg::family
