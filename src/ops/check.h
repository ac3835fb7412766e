// The building blocks of the ops' checking functions. Each check runs on every call, so the
// passing path is a few inline compares and every message is built out of line, only on failure.
// Messages name the op, the tensor, the offending value and what is accepted.
#pragma once

#include <cstdint>
#include <initializer_list>

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
[[noreturn]] void bad_groups(const char* op, std::int64_t groups, std::int64_t channels);
[[noreturn]] void unexpected(const char* op, const char* name, const char* because);
[[noreturn]] void offset_without_weight(const char* op, double offset);
[[noreturn]] void read_only_output(const char* op, const char* name);
struct Item;
// Two tensors whose spans meet: fine when `may_alias` and they are the very same elements, or
// when they live on different devices (addresses of two devices say nothing); else an error.
void check_overlap(const char* op, const Item& out, const Item& other, bool may_alias);

inline bool is_activation_dtype(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

// A defined tensor of f32, f16 or bf16 with at least `min_rank` dims.
inline void activation(const char* op, const char* name, const Tensor& t, int min_rank = 1,
                       const char* layout = "(..., hidden)") {
  if (!t.defined()) missing(op, name);
  if (!is_activation_dtype(t.dtype())) bad_activation_dtype(op, name, t.dtype());
  if (t.ndim() < min_rank) bad_rank(op, name, t, min_rank, layout);
}

// Defined, with ref's shape and dtype.
inline void like(const char* op, const char* name, const Tensor& t, const char* ref_name, const Tensor& ref) {
  if (!t.defined()) missing(op, name);
  if (t.dtype() != ref.dtype() || !(t.shape() == ref.shape())) not_like(op, name, t, ref_name, ref);
}

// A 1-D tensor of `length` elements in the activation's dtype or f32 (`x_name`: the activation,
// x or s).
inline void weight(const char* op, const char* name, const Tensor& w, std::int64_t length, const char* length_of,
                   const char* x_name, DType x_dtype) {
  if (!w.defined()) missing(op, name);
  if (w.ndim() != 1 || w.size(0) != length || (w.dtype() != x_dtype && w.dtype() != DType::f32)) {
    bad_weight(op, name, w, length, length_of, x_name, x_dtype);
  }
}

// An optional parameter (weight, or a bias without a weight): undefined, or as weight() says.
inline void optional_weight(const char* op, const char* name, const Tensor& w, std::int64_t length,
                            const char* length_of, const char* x_name, DType x_dtype) {
  if (w.defined()) weight(op, name, w, length, length_of, x_name, x_dtype);
}

// A bias (or dbias) beside an optional weight: undefined, or like the weight when there is one,
// or as weight() says when there is none.
inline void optional_bias(const char* op, const char* name, const Tensor& b, const Tensor& w, std::int64_t length,
                          const char* length_of, const char* x_name, DType x_dtype) {
  if (!b.defined()) return;
  if (w.defined()) {
    like(op, name, b, "weight", w);
  } else {
    weight(op, name, b, length, length_of, x_name, x_dtype);
  }
}

// A parameter's gradient: required (like the parameter) when the parameter is given, and
// undefined when it is not (there is nothing to differentiate).
inline void param_grad(const char* op, const char* name, const Tensor& g, const char* param_name,
                       const Tensor& param) {
  if (param.defined()) {
    like(op, name, g, param_name, param);
  } else if (g.defined()) {
    unexpected(op, name, "weight is undefined (no weight, no dweight)");
  }
}

// Per-row statistics: f32 of shape {rows}, or x's shape without its last dim.
inline void row_stats(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  if (!t.defined()) missing(op, name);
  const Shape& xs = x.shape();
  const Shape& ts = t.shape();
  bool ok = t.dtype() == DType::f32;
  if (ok) {
    if (ts.ndim() == 1 && xs.ndim() != 2) {
      ok = ts[0] == rows_hidden(xs).rows;  // x's numel fits, so this product does too
    } else {
      ok = ts.ndim() == xs.ndim() - 1;
      for (int i = 0; ok && i < ts.ndim(); ++i) ok = ts[i] == xs[i];
    }
  }
  if (!ok) {
    Shape leading(std::span<const std::int64_t>(xs.dims().data(), static_cast<std::size_t>(xs.ndim() - 1)));
    const Shape flat{rows_hidden(xs).rows};
    bad_stats(op, name, t, flat, leading == flat ? nullptr : &leading);
  }
}

// Per-(n, group) statistics: f32 of shape {N, groups}.
inline void group_stats(const char* op, const char* name, const Tensor& t, std::int64_t n, std::int64_t groups) {
  if (!t.defined()) missing(op, name);
  if (t.dtype() != DType::f32 || t.ndim() != 2 || t.size(0) != n || t.size(1) != groups) {
    bad_stats(op, name, t, Shape{n, groups}, nullptr);
  }
}

inline void eps(const char* op, double value) {
  if (!(value >= 0.0 && value <= 1e300)) bad_scalar(op, "eps", value, "a finite number >= 0");
}
inline void offset(const char* op, double value) {
  if (!(value >= -1e300 && value <= 1e300)) bad_scalar(op, "offset", value, "a finite number");
}
// rms_norm's scale is (offset + w): without a weight there is no scale, so no offset either.
inline void offset(const char* op, double value, const Tensor& weight) {
  offset(op, value);
  if (value != 0.0 && !weight.defined()) offset_without_weight(op, value);
}
inline void casting(const char* op, Casting c) {
  if (c != Casting::llama && c != Casting::gemma && c != Casting::none) bad_casting(op, c);
}
inline void groups(const char* op, std::int64_t groups, std::int64_t channels) {
  if (groups < 1 || channels % groups != 0) bad_groups(op, groups, channels);
}

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

// No output (items from `first_output` on) may be a read-only view, nor share a byte with any other tensor of the call,
// except its `alias` when that is exactly the output's elements (same address, shape, strides,
// dtype). Spans are computed once, so a call costs a few compares per pair.
template <std::size_t N>
inline void outputs_apart(const char* op, const Item (&items)[N], std::size_t first_output) {
  // Contiguous tensors span [data, data + nbytes); undefined and empty ones span nothing and so
  // meet nothing. Strided ones (rare: no built-in variant takes them yet) take the slow path.
  // Addresses as integers: tensors of a call need not be parts of one object.
  std::uintptr_t lo[N];
  std::uintptr_t hi[N];
  bool strided = false;
  for (std::size_t i = 0; i < N; ++i) {
    const Tensor& t = *items[i].tensor;
    lo[i] = reinterpret_cast<std::uintptr_t>(t.data());
    hi[i] = lo[i] + t.nbytes();
    strided |= !t.is_contiguous();
  }
  if (strided) [[unlikely]] {
    for (std::size_t i = 0; i < N; ++i) {
      const Tensor& t = *items[i].tensor;
      if (!t.defined()) continue;
      const Span s = span(t);
      lo[i] = reinterpret_cast<std::uintptr_t>(s.lo);
      hi[i] = reinterpret_cast<std::uintptr_t>(s.hi);
    }
  }
  for (std::size_t o = first_output; o < N; ++o) {
    if (items[o].tensor->read_only()) [[unlikely]] read_only_output(op, items[o].name);
    for (std::size_t j = 0; j < o; ++j) {  // inputs, and the outputs before this one
      if (lo[j] < hi[o] && lo[o] < hi[j]) [[unlikely]] {
        check_overlap(op, items[o], items[j], static_cast<int>(j) == items[o].alias);
      }
    }
  }
}

}  // namespace opreg::op_check
