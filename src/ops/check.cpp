// The failure half of the ops' checks: messages naming the op, the value and what is accepted.
#include "ops/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "registry/fail.h"

namespace opreg::op_check {
namespace {

std::string describe(const Tensor& t) { return fmt::format("{} [{}]", to_string(t.dtype()), t.shape().str()); }

}  // namespace

void missing(const char* op, const char* name) {
  fail(ErrorKind::invalid_argument, "{}: {} is required but undefined", op, name);
}

void bad_activation_dtype(const char* op, const char* name, DType dtype) {
  fail(ErrorKind::invalid_argument, "{}: {} has dtype {}; accepted: f32, f16, bf16", op, name, to_string(dtype));
}

void bad_rank(const char* op, const char* name, const Tensor& t, int min_rank, const char* layout) {
  fail(ErrorKind::invalid_argument, "{}: {} has {} dims (shape [{}]); accepted: {} with at least {} dims", op, name,
       t.ndim(), t.shape().str(), layout, min_rank);
}

void not_like(const char* op, const char* name, const Tensor& t, const char* ref_name, const Tensor& ref) {
  fail(ErrorKind::invalid_argument, "{}: {} is {}; accepted: like {}, {}", op, name, describe(t), ref_name,
       describe(ref));
}

void bad_weight(const char* op, const char* name, const Tensor& w, std::int64_t length, const char* length_of,
                const char* x_name, DType x_dtype) {
  if (w.ndim() != 1 || w.size(0) != length) {
    fail(ErrorKind::invalid_argument, "{}: {} has shape [{}]; accepted: 1-D of length {} ({})", op, name,
         w.shape().str(), length, length_of);
  }
  fail(ErrorKind::invalid_argument, "{}: {} dtype {} with {} dtype {} is not an accepted pair; accepted: {} {}", op,
       name, to_string(w.dtype()), x_name, to_string(x_dtype), name,
       x_dtype == DType::f32 ? std::string("f32") : fmt::format("{} or f32", to_string(x_dtype)));
}

void bad_stats(const char* op, const char* name, const Tensor& t, const Shape& want, const Shape* also) {
  fail(ErrorKind::invalid_argument, "{}: {} is {}; accepted: f32 [{}]{}", op, name, describe(t), want.str(),
       also != nullptr ? fmt::format(" or f32 [{}]", also->str()) : std::string());
}

void flat_row_stats(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  const Shape& xs = x.shape();
  const Shape& ts = t.shape();
  if (t.dtype() == DType::f32 && ts.ndim() == 1 && xs.ndim() != 2 && ts[0] == rows_hidden(xs).rows) return;
  Shape leading(std::span<const std::int64_t>(xs.dims().data(), static_cast<std::size_t>(xs.ndim() - 1)));
  const Shape flat{rows_hidden(xs).rows};
  bad_stats(op, name, t, flat, leading == flat ? nullptr : &leading);
}

void bad_scalar(const char* op, const char* name, double value, const char* accepted) {
  fail(ErrorKind::invalid_argument, "{}: {} = {} is not accepted; accepted: {}", op, name, value, accepted);
}

void bad_casting(const char* op, Casting casting) {
  fail(ErrorKind::invalid_argument, "{}: casting mode {} is not accepted; accepted: llama, gemma, none", op,
       static_cast<int>(casting));
}

void bad_rounding(const char* op, Rounding rounding) {
  fail(ErrorKind::invalid_argument, "{}: rounding mode {} is not accepted; accepted: once, torch", op,
       static_cast<int>(rounding));
}

void bad_groups(const char* op, std::int64_t groups, std::int64_t channels) {
  fail(ErrorKind::invalid_argument, "{}: num_groups = {} with {} channels; accepted: num_groups >= 1 dividing the "
       "channel count (x's dim 1)", op, groups, channels);
}

void unexpected(const char* op, const char* name, const char* because) {
  fail(ErrorKind::invalid_argument, "{}: {} is given but must be undefined: {}", op, name, because);
}

void offset_without_weight(const char* op, double offset) {
  fail(ErrorKind::invalid_argument, "{}: offset = {} without a weight; the scale is (offset + weight), so a call "
       "without a weight takes offset 0", op, offset);
}

void read_only_output(const char* op, const char* name) {
  fail(ErrorKind::invalid_argument, "{}: output {} is a read-only view (Tensor::wrap of const memory); pass "
       "writable memory for outputs", op, name);
}

void check_overlap(const char* op, const Item& out, const Item& other, bool may_alias) {
  const Tensor& o = *out.tensor;
  const Tensor& t = *other.tensor;
  if (o.device() != t.device()) return;
  if (may_alias && o.data() == t.data() && o.dtype() == t.dtype() && o.shape() == t.shape() &&
      std::equal(o.strides().begin(), o.strides().end(), t.strides().begin())) {
    return;
  }
  fail(ErrorKind::invalid_argument, "{}: output {} overlaps {}; outputs may not overlap other tensors of the call{}",
       op, out.name, other.name,
       may_alias ? fmt::format(" ({} = {} is allowed only as the very same elements)", out.name, other.name)
                 : std::string());
}

std::uint32_t outputs_apart_slow(const char* op, const Item* items, std::size_t n, std::size_t first_output) {
  std::uint32_t strided = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (items[i].tensor->defined() && !items[i].tensor->is_contiguous()) strided |= 1U << i;
  }
  // As integers: tensors of a call need not be parts of one object. Undefined ones span nothing.
  std::array<std::uintptr_t, kMaxOpTensors> lo{};
  std::array<std::uintptr_t, kMaxOpTensors> hi{};
  for (std::size_t i = 0; i < n; ++i) {
    if (!items[i].tensor->defined()) continue;
    const Span s = span(*items[i].tensor);
    lo[i] = reinterpret_cast<std::uintptr_t>(s.lo);
    hi[i] = reinterpret_cast<std::uintptr_t>(s.hi);
  }
  for (std::size_t o = first_output; o < n; ++o) {
    if (items[o].tensor->read_only()) read_only_output(op, items[o].name);
    for (std::size_t j = 0; j < o; ++j) {  // inputs, and the outputs before this one
      if (lo[j] < hi[o] && lo[o] < hi[j]) {
        check_overlap(op, items[o], items[j], static_cast<int>(j) == items[o].alias);
      }
    }
  }
  return strided;
}

namespace {

constexpr const char* kHeadsLayout = "[B, heads, T, D]";

// rope's tensors are read along their last dim with unit stride.
void unit_last_stride(const char* op, const char* name, const Tensor& t, const char* dim) {
  if (t.numel() > 0 && t.stride(t.ndim() - 1) != 1) {
    fail(ErrorKind::invalid_argument, "{}: {} has strides [{}]; accepted: the last dim{} contiguous, stride 1", op,
         name, fmt::join(t.strides(), ", "), dim);
  }
}

// rope's tensors are read through their strides, which must not be negative.
void forward_strides(const char* op, const char* name, const Tensor& t) {
  for (auto st : t.strides()) {
    if (st < 0) {
      fail(ErrorKind::invalid_argument, "{}: {} has strides [{}]; accepted: strides >= 0", op, name,
           fmt::join(t.strides(), ", "));
    }
  }
}

// q, k and their outputs: 4-D, D even and > 0 with stride 1.
void rope_heads(const char* op, const char* name, const Tensor& t) {
  activation(op, name, t, 0);
  if (t.ndim() != 4) {
    fail(ErrorKind::invalid_argument, "{}: {} has {} dims (shape [{}]); accepted: {}", op, name, t.ndim(),
         t.shape().str(), kHeadsLayout);
  }
  if (t.size(3) < 2 || t.size(3) % 2 != 0) {
    fail(ErrorKind::invalid_argument, "{}: {} has head dim D = {} (shape [{}]); accepted: an even D >= 2 (rotate an odd "
         "D's first D - 1 elements and pass the last through, as Liger-Kernel does)", op, name, t.size(3),
         t.shape().str());
  }
  unit_last_stride(op, name, t, " (D)");
  forward_strides(op, name, t);
}

// Whether two elements of `t` share memory: strides (absolute) sorted, each must step past the
// whole extent of the ones below it.
bool self_overlapping(const Tensor& t) {
  if (t.numel() <= 1) return false;
  std::array<std::pair<std::int64_t, std::int64_t>, kMaxDims> dims{};  // |stride|, extent
  int n = 0;
  for (int i = 0; i < t.ndim(); ++i) {
    if (t.size(i) > 1) dims[static_cast<std::size_t>(n++)] = {t.stride(i) < 0 ? -t.stride(i) : t.stride(i), t.size(i)};
  }
  for (int i = 1; i < n; ++i) {  // insertion sort: at most kMaxDims entries
    for (int j = i; j > 0 && dims[static_cast<std::size_t>(j)] < dims[static_cast<std::size_t>(j - 1)]; --j) {
      std::swap(dims[static_cast<std::size_t>(j)], dims[static_cast<std::size_t>(j - 1)]);
    }
  }
  std::int64_t reach = 1;  // elements spanned by the dims so far
  for (int i = 0; i < n; ++i) {
    const auto [stride, extent] = dims[static_cast<std::size_t>(i)];
    if (stride < reach) return true;
    reach = stride * extent;
  }
  return false;
}

void rope_output(const char* op, const char* name, const Tensor& t, const char* in_name, const Tensor& in) {
  like(op, name, t, in_name, in);
  forward_strides(op, name, t);
  unit_last_stride(op, name, t, " (D)");
  if (self_overlapping(t)) {
    fail(ErrorKind::invalid_argument, "{}: output {} has strides [{}] for shape [{}], which put two elements in one "
         "place; accepted: an output whose elements are apart", op, name, fmt::join(t.strides(), ", "),
         t.shape().str());
  }
}

}  // namespace

void rope(const char* op, const RopeCall& c) {
  rope_heads(op, c.q_name, c.q);
  rope_heads(op, c.k_name, c.k);
  const std::int64_t B = c.q.size(0);
  const std::int64_t T = c.q.size(2);
  const std::int64_t D = c.q.size(3);
  if (c.k.dtype() != c.q.dtype() || c.k.size(0) != B || c.k.size(2) != T || c.k.size(3) != D) {
    fail(ErrorKind::invalid_argument, "{}: {} is {} [{}]; accepted: {}'s dtype, batch, T and D ({} [{}, Hk, {}, {}]), "
         "any head count", op, c.k_name, to_string(c.k.dtype()), c.k.shape().str(), c.q_name,
         to_string(c.q.dtype()), B, T, D);
  }
  // The tables.
  const bool positions = c.positions.defined();
  const std::string forms =
      positions ? fmt::format("[max_pos, W] or [1, max_pos, W] with W = {} or {} (with position_ids)", D, D / 2)
                : fmt::format("[T', W], [1, T', W] or [{}, T', W] with T' >= T = {} and W = {} or {}", B, T, D, D / 2);
  if (!c.cos.defined()) missing(op, "cos");
  if (c.cos.dtype() != c.q.dtype() && c.cos.dtype() != DType::f32) {
    fail(ErrorKind::invalid_argument, "{}: cos has dtype {} with {} dtype {}; accepted: {}", op,
         to_string(c.cos.dtype()), c.q_name, to_string(c.q.dtype()),
         c.q.dtype() == DType::f32 ? std::string("f32") : fmt::format("{} or f32", to_string(c.q.dtype())));
  }
  const Tensor& cos = c.cos;
  const int nd = cos.ndim();
  bool ok = (nd == 2 || nd == 3) && (cos.size(nd - 1) == D || cos.size(nd - 1) == D / 2);
  if (ok && nd == 3) ok = cos.size(0) == 1 || (!positions && cos.size(0) == B);
  if (ok && !positions) ok = cos.size(nd - 2) >= T;
  if (!ok) {
    fail(ErrorKind::invalid_argument, "{}: cos has shape [{}]{}; accepted: {}", op, cos.shape().str(),
         !positions && (nd == 2 || nd == 3) && cos.size(nd - 2) < T
             ? fmt::format(" ({} rows, too short for T = {})", cos.size(nd - 2), T)
             : std::string(),
         forms);
  }
  like(op, "sin", c.sin, "cos", cos);
  for (const auto* t : {&c.cos, &c.sin}) {
    unit_last_stride(op, t == &c.cos ? "cos" : "sin", *t, "");
    forward_strides(op, t == &c.cos ? "cos" : "sin", *t);
  }
  if (positions) {
    const Tensor& p = c.positions;
    const bool shape_ok = p.dtype() == DType::i64 && ((p.ndim() == 1 && p.size(0) == T) ||
                                                      (p.ndim() == 2 && (p.size(0) == 1 || p.size(0) == B) &&
                                                       p.size(1) == T));
    if (!shape_ok) {
      fail(ErrorKind::invalid_argument, "{}: position_ids is {} [{}]; accepted: i64 [{}], [1, {}] or [{}, {}]", op,
           to_string(p.dtype()), p.shape().str(), T, T, B, T);
    }
    forward_strides(op, "position_ids", p);
  }
  rope_output(op, c.q_out_name, c.q_out, c.q_name, c.q);
  rope_output(op, c.k_out_name, c.k_out, c.k_name, c.k);
  if (c.style != RopeStyle::half && c.style != RopeStyle::interleaved) {
    fail(ErrorKind::invalid_argument, "{}: rope style {} is not accepted; accepted: half, interleaved", op,
         static_cast<int>(c.style));
  }
}

Span strided_span(const Tensor& t) {
  // Offsets of the lowest and highest element; negative strides reach below data().
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  for (int i = 0; i < t.ndim(); ++i) {
    const std::int64_t reach = (t.size(i) - 1) * t.stride(i);
    lo += std::min<std::int64_t>(reach, 0);
    hi += std::max<std::int64_t>(reach, 0);
  }
  const auto es = static_cast<std::int64_t>(element_size(t.dtype()));
  const char* p = static_cast<const char*>(t.data());
  return {p + lo * es, p + (hi + 1) * es};
}

}  // namespace opreg::op_check
