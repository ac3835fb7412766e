// What the ops' files share: making an op's handle, an op's entry point (its check inline, then
// the registry's hot path), and the helpers of the allocating wrappers (validate what the
// allocation needs, then allocate on the input's device; the full check runs when the wrapper
// dispatches).
#pragma once

#include <cstdint>

#include "ops/check.h"
#include "ops/manifest.h"
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

// The choice key of a call whose tensors are contiguous on `device` (the check said so), from the
// manifest's tensor list, unrolled: what dispatch.cpp's build_key makes of the same call.
// Returns the key's hash (detail::key_hash), made on the way.
template <class Args, std::size_t... I>
[[gnu::always_inline]] inline std::uint64_t contiguous_key(const Args& args, Device device, ProblemKey& key,
                                                           std::index_sequence<I...>) {
  using S = manifest::Spec<Args>;
  detail::TensorBits bits;
  (bits.add_contiguous(static_cast<int>(I), args.*S::members[I]), ...);
  bits.contiguous = bits.defined;
  std::uint64_t h = bits.start_key(key, device, static_cast<int>(sizeof...(I)), args.*S::members[0]);
  S::key(args, key);
  for (int i = key.size - S::key_words; i < key.size; ++i) h = detail::hash_word(h, key.words[static_cast<std::size_t>(i)]);
  return detail::hash_finish(h, key.size);
}
template <class Args>
[[gnu::always_inline]] inline std::uint64_t contiguous_key(const Args& args, Device device, ProblemKey& key) {
  return contiguous_key(args, device, key, std::make_index_sequence<manifest::Spec<Args>::fields.size()>{});
}

// An op's entry point on the default registry: Registry::call with the op's check called
// directly (inlined here) rather than through the op's table.
template <auto Check, class Args>
inline DispatchResult call(const Op<Args>& (*op)(), const Args& args, const ExecContext* ctx) {
  // Held here, each behind a guard's test: cheaper than the calls. (default_registry() may throw
  // on a bad environment; then nothing is held and the next call asks again, as it would.)
  static Registry& registry = default_registry();
  static const detail::OpDef& def = op().def();
  return detail::dispatch_checked(registry, def, &args, Check(args), ctx, [&](ProblemKey& key, Device device) {
    return contiguous_key(args, device, key);
  });
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
