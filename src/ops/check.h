// The building blocks of the ops' checking functions. Each check runs on every call, so the
// passing path is a few inline compares and every message is built out of line, only on failure.
// Messages name the op, the tensor, the offending value and what is accepted.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <tuple>

#include "opreg/ops.h"

namespace opreg::op_check {

[[noreturn]] void missing(const char* op, const char* name);
[[noreturn]] void bad_activation_dtype(const char* op, const char* name, DType dtype);
[[noreturn]] void bad_rank(const char* op, const char* name, const Tensor& t, int min_rank, const char* layout);
[[noreturn]] void not_like(const char* op, const char* name, const Tensor& t, const char* ref_name, const Tensor& ref);
[[noreturn]] void bad_weight(const char* op, const char* name, const Tensor& w, std::int64_t length,
                             const char* length_of, const char* x_name, DType x_dtype);
[[noreturn]] void bad_stats(const char* op, const char* name, const Tensor& t, const Shape& want, const Shape* also);
[[noreturn]] void bad_scalar(const char* op, const char* name, double value, const char* accepted);
[[noreturn]] void bad_casting(const char* op, Casting casting);
[[noreturn]] void bad_rounding(const char* op, Rounding rounding);
[[noreturn]] void bad_groups(const char* op, std::int64_t groups, std::int64_t channels);
[[noreturn]] void unexpected(const char* op, const char* name, const char* because);
[[noreturn]] void offset_without_weight(const char* op, double offset);
[[noreturn]] void read_only_output(const char* op, const char* name);
// row_stats' other accepted form, f32 {rows} for an x that is not 2-D; else its error.
void flat_row_stats(const char* op, const char* name, const Tensor& t, const Tensor& x);
struct Item;
// Two tensors whose spans meet: fine when `may_alias` and they are the very same elements, or
// when they live on different devices (addresses of two devices say nothing); else an error.
void check_overlap(const char* op, const Item& out, const Item& other, bool may_alias);

[[gnu::always_inline]] inline bool is_activation_dtype(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16;
}

// A defined tensor of f32, f16 or bf16 with at least `min_rank` dims.
[[gnu::always_inline]] inline void activation(const char* op, const char* name, const Tensor& t, int min_rank = 1,
                                              const char* layout = "(..., hidden)") {
  if (!t.defined()) missing(op, name);
  if (!is_activation_dtype(t.dtype())) bad_activation_dtype(op, name, t.dtype());
  if (t.ndim() < min_rank) bad_rank(op, name, t, min_rank, layout);
}

// Defined, with ref's shape and dtype.
[[gnu::always_inline]] inline void like(const char* op, const char* name, const Tensor& t, const char* ref_name,
                                        const Tensor& ref) {
  if (!t.defined()) missing(op, name);
  if (t.dtype() != ref.dtype() || !(t.shape() == ref.shape())) not_like(op, name, t, ref_name, ref);
}

// A 1-D tensor of `length` elements in the activation's dtype or f32 (`x_name`: the activation,
// x or s).
[[gnu::always_inline]] inline void weight(const char* op, const char* name, const Tensor& w, std::int64_t length,
                                          const char* length_of, const char* x_name, DType x_dtype) {
  if (!w.defined()) missing(op, name);
  if (w.ndim() != 1 || w.size(0) != length || (w.dtype() != x_dtype && w.dtype() != DType::f32)) {
    bad_weight(op, name, w, length, length_of, x_name, x_dtype);
  }
}

// An optional parameter (weight, or a bias without a weight): undefined, or as weight() says.
[[gnu::always_inline]] inline void optional_weight(const char* op, const char* name, const Tensor& w,
                                                   std::int64_t length, const char* length_of, const char* x_name,
                                                   DType x_dtype) {
  if (w.defined()) weight(op, name, w, length, length_of, x_name, x_dtype);
}

// A bias (or dbias) beside an optional weight: undefined, or like the weight when there is one,
// or as weight() says when there is none.
[[gnu::always_inline]] inline void optional_bias(const char* op, const char* name, const Tensor& b, const Tensor& w,
                                                 std::int64_t length, const char* length_of, const char* x_name,
                                                 DType x_dtype) {
  if (!b.defined()) return;
  if (w.defined()) {
    like(op, name, b, "weight", w);
  } else {
    weight(op, name, b, length, length_of, x_name, x_dtype);
  }
}

// A parameter's gradient: required (like the parameter) when the parameter is given, and
// undefined when it is not (there is nothing to differentiate).
[[gnu::always_inline]] inline void param_grad(const char* op, const char* name, const Tensor& g, const char* param_name,
                                              const Tensor& param) {
  if (param.defined()) {
    like(op, name, g, param_name, param);
  } else if (g.defined()) {
    unexpected(op, name, "weight is undefined (no weight, no dweight)");
  }
}

// Per-row statistics: f32 of shape {rows}, or x's shape without its last dim. Inline: the
// leading-dims form (which a 2-D x's {rows} is) is compared here, the rest out of line.
[[gnu::always_inline]] inline void row_stats(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  if (!t.defined()) missing(op, name);
  const Shape& xs = x.shape();
  const Shape& ts = t.shape();
  bool ok = t.dtype() == DType::f32 && ts.ndim() == xs.ndim() - 1;
  if (ok) {
    for (int i = 0; i < ts.ndim(); ++i) {
      if (ts[i] != xs[i]) {
        ok = false;
        break;
      }
    }
  }
  if (!ok) [[unlikely]] {
    flat_row_stats(op, name, t, x);
  }
}

// Per-(n, group) statistics: f32 of shape {N, groups}.
[[gnu::always_inline]] inline void group_stats(const char* op, const char* name, const Tensor& t, std::int64_t n,
                                               std::int64_t groups) {
  if (!t.defined()) missing(op, name);
  if (t.dtype() != DType::f32 || t.ndim() != 2 || t.size(0) != n || t.size(1) != groups) {
    bad_stats(op, name, t, Shape{n, groups}, nullptr);
  }
}

// eps and offset: finite, and small enough that a kernel's double arithmetic on them (squares
// included) stays finite.
inline constexpr double kMaxScalar = 1e300;
[[gnu::always_inline]] inline void eps(const char* op, double value) {
  if (!(value >= 0.0 && value <= kMaxScalar)) bad_scalar(op, "eps", value, "a finite number >= 0 and <= 1e300");
}
[[gnu::always_inline]] inline void offset(const char* op, double value) {
  if (!(value >= -kMaxScalar && value <= kMaxScalar)) {
    bad_scalar(op, "offset", value, "a finite number from -1e300 to 1e300");
  }
}
// rms_norm's scale is (offset + w): without a weight there is no scale, so no offset either.
[[gnu::always_inline]] inline void offset(const char* op, double value, const Tensor& weight) {
  offset(op, value);
  if (value != 0.0 && !weight.defined()) offset_without_weight(op, value);
}
[[gnu::always_inline]] inline void casting(const char* op, Casting c) {
  if (c != Casting::llama && c != Casting::gemma && c != Casting::none) bad_casting(op, c);
}
[[gnu::always_inline]] inline void rounding(const char* op, Rounding r) {
  if (r != Rounding::once && r != Rounding::torch) bad_rounding(op, r);
}
[[gnu::always_inline]] inline void groups(const char* op, std::int64_t groups, std::int64_t channels) {
  if (groups < 1 || channels % groups != 0) bad_groups(op, groups, channels);
}

// rope's whole rule set (its layouts have many forms, so it is checked out of line): q and k
// [B, H, T, D] of one dtype with D even and the last dim contiguous, the tables, position_ids'
// shape (not its values: a check reads metadata only; the kernels deal with a value outside the
// table), the outputs like their inputs and writable without two elements in one place, the
// style.
struct RopeCall {
  const char* q_name;
  const Tensor& q;
  const char* k_name;
  const Tensor& k;
  const Tensor& cos;
  const Tensor& sin;
  const Tensor& positions;
  const char* q_out_name;
  const Tensor& q_out;
  const char* k_out_name;
  const Tensor& k_out;
  RopeStyle style;
};
void rope(const char* op, const RopeCall& call);

// The bytes a tensor's elements can touch, for the overlap rule.
struct Span {
  const char* lo;
  const char* hi;  // one past the last byte; lo == hi when the tensor is empty
};
Span strided_span(const Tensor& t);
inline Span span(const Tensor& t) {
  const char* p = static_cast<const char*>(t.data());
  if (t.numel() == 0) return {p, p};
  if (t.is_contiguous()) return {p, p + t.nbytes()};
  return strided_span(t);
}

// One tensor of a call for the overlap rule; `alias`: the index of the input this output may be
// exactly (its in-place form), -1 for none.
struct Item {
  const char* name;
  const Tensor* tensor;
  int alias = -1;
};
template <std::size_t N>
std::array<Item, N> items(const Item (&list)[N]) {
  return std::to_array(list);
}

// The overlap rule's slow path: spans of strided tensors, outputs that meet another tensor (an
// error, or an allowed in-place alias), read-only outputs. Throws the rule's error, if any, and
// returns CallFacts::strided.
std::uint32_t outputs_apart_slow(const char* op, const Item* items, std::size_t n, std::size_t first_output);
template <class Items>
[[gnu::noinline, gnu::cold]] std::uint32_t outputs_apart_slow(const char* op, const Items& items,
                                                              std::size_t first_output) {
  const auto list = items();
  return outputs_apart_slow(op, list.data(), list.size(), first_output);
}

// No output (items from `first_output` on) may be a read-only view, nor share a byte with any
// other tensor of the call, except its `alias` when that is exactly the output's elements (same
// address, shape, strides, dtype). `items()` gives every tensor of the call, in the order the
// op's `tensors` lists them (a std::array of Item), so the pass also makes the call's facts for
// dispatch. Inline and unrolled, the passing path is a few loads and compares per tensor and
// pair; anything else (a strided tensor, a meeting pair, a read-only output) is decided out of
// line. (`items` is a function so that the names need not be stored unless that happens.)
[[gnu::always_inline]] inline unsigned bit(bool b) { return b ? 1U : 0U; }

template <class Items>
[[gnu::always_inline]] inline CallFacts outputs_apart(const char* op, std::size_t first_output, const Items& items) {
  const auto list = items();
  constexpr std::size_t N = std::tuple_size_v<decltype(list)>;
  static_assert(N <= 32, "CallFacts::strided holds 32 tensors");
  // Contiguous tensors span [data, data + nbytes); undefined and empty ones span nothing and so
  // meet nothing. Addresses as integers: tensors of a call need not be parts of one object.
  std::uintptr_t lo[N];
  std::uintptr_t hi[N];
  bool unusual = false;
  const Tensor& first = *list[0].tensor;
  const Device device = first.device();
  bool mixed = false;
#pragma GCC unroll 16
  for (std::size_t i = 0; i < N; ++i) {
    const Tensor& t = *list[i].tensor;
    lo[i] = reinterpret_cast<std::uintptr_t>(t.data());
    hi[i] = lo[i] + t.nbytes();
    unusual |= !t.is_contiguous();
    // As bits (& and |, not && and ||): no branch per tensor.
    if (i > 0)
      mixed |= bit(t.defined()) & (bit(t.device().backend != device.backend) | bit(t.device().index != device.index));
  }
#pragma GCC unroll 16
  for (std::size_t o = first_output; o < N; ++o) {
    unusual |= list[o].tensor->read_only();
#pragma GCC unroll 16
    for (std::size_t j = 0; j < o; ++j) unusual |= bit(lo[j] < hi[o]) & bit(lo[o] < hi[j]);
  }
  CallFacts facts;
  facts.device = device;
  facts.first_defined = first.defined();
  facts.mixed_devices = mixed;
  if (unusual) [[unlikely]] {
    facts.strided = outputs_apart_slow(op, items, first_output);
  }
  return facts;
}

}  // namespace opreg::op_check
