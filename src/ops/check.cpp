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
