// Helpers of the allocating wrappers: validate what the allocation needs, then allocate on the
// input's device. The full check runs when the wrapper dispatches.
#pragma once

#include <cstdint>

#include "ops/check.h"

namespace opreg::ops_detail {

// Defined, an accepted activation dtype (or any dtype when min_rank is 0: a weight), min_rank dims.
inline void input(const char* op, const char* name, const Tensor& t, int min_rank) {
  if (!t.defined()) op_check::missing(op, name);
  if (min_rank > 0) op_check::activation(op, name, t, min_rank, min_rank > 1 ? "(N, C, spatial...)" : "(..., hidden)");
}

inline Tensor like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }

// dweight: like the weight, or undefined when there is none.
inline Tensor weight_grad(const Tensor& weight) { return weight.defined() ? like(weight) : Tensor{}; }

// dbias: like the weight, or (without one) `length` elements in x's dtype.
inline Tensor bias_grad(const Tensor& weight, const Tensor& x, std::int64_t length) {
  return weight.defined() ? like(weight) : Tensor::empty(Shape{length}, x.dtype(), x.device());
}

inline Tensor row_stats(const Tensor& x) {
  return Tensor::empty(Shape{rows_hidden(x.shape()).rows}, DType::f32, x.device());
}

inline Tensor group_stats(const Tensor& x, std::int64_t groups) {
  return Tensor::empty(Shape{x.size(0), groups}, DType::f32, x.device());
}

}  // namespace opreg::ops_detail
