// What the ops' files share: making an op's handle, an op's entry point (its check inline, then
// the registry's hot path), and the helpers of the allocating wrappers (validate what the
// allocation needs, then allocate on the input's device; the full check runs when the wrapper
// dispatches).
#pragma once

#include <cstdint>

#include "ops/check.h"
#include "registry/dispatch.h"

namespace opreg::ops_detail {

// An op handle, made on the first call of the op's getter. Out of line, so that what the getter
// does on every later call (each dispatch calls it) is the guard's test alone.
template <class Args>
[[gnu::noinline, gnu::cold]] Op<Args> make_op(const char* name, CallFacts (*check)(const Args&),
                                              void (*tensors)(Args&, TensorList&),
                                              void (*key)(const Args&, ProblemKey&) = nullptr) {
  return Op<Args>({.name = name, .tensors = tensors, .key = key, .check_facts = check});
}

// An op's entry point on the default registry: Registry::call with the op's check called
// directly (inlined here) rather than through the op's table.
template <auto Check, class Args>
inline DispatchResult call(const Op<Args>& (*op)(), const Args& args, const ExecContext* ctx) {
  // Held here, each behind a guard's test: cheaper than the calls. (default_registry() may throw
  // on a bad environment; then nothing is held and the next call asks again, as it would.)
  static Registry& registry = default_registry();
  static const detail::OpDef& def = op().def();
  return detail::dispatch_checked(registry, def, &args, Check(args), ctx);
}

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
