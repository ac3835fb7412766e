// Views of caller memory: typed and const Tensor::wrap, spans, alignment, read-only views refused
// as outputs.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "opreg/ops.h"
#include "support/throws_error.h"

namespace opreg {
namespace {

using testing::ThrowsError;

TEST(TensorViews, TypedWrapTakesTheDtypeFromTheElementType) {
  std::vector<float> f(6);
  std::vector<double> d(6);
  std::vector<std::int32_t> i(6);
  std::vector<std::int64_t> l(6);
  std::vector<half> h(6);
  std::vector<bfloat16> b(6);
  EXPECT_EQ(Tensor::wrap(f.data(), {2, 3}).dtype(), DType::f32);
  EXPECT_EQ(Tensor::wrap(d.data(), {2, 3}).dtype(), DType::f64);
  EXPECT_EQ(Tensor::wrap(i.data(), {2, 3}).dtype(), DType::i32);
  EXPECT_EQ(Tensor::wrap(l.data(), {2, 3}).dtype(), DType::i64);
  EXPECT_EQ(Tensor::wrap(h.data(), {2, 3}).dtype(), DType::f16);
  EXPECT_EQ(Tensor::wrap(b.data(), {2, 3}).dtype(), DType::bf16);
  EXPECT_FALSE(Tensor::wrap(f.data(), {2, 3}).read_only());
}

TEST(TensorViews, ConstMemoryGivesReadOnlyViews) {
  const std::vector<float> x(6, 1.0f);
  const Tensor typed = Tensor::wrap(x.data(), {2, 3});
  const Tensor untyped = Tensor::wrap(static_cast<const void*>(x.data()), {2, 3}, DType::f32);
  EXPECT_TRUE(typed.read_only());
  EXPECT_TRUE(untyped.read_only());
  EXPECT_TRUE(Tensor::wrap(std::span<const float>(x), {6}).read_only());
  Tensor copy = typed;
  EXPECT_TRUE(copy.read_only());
  EXPECT_TRUE(typed.reshape({3, 2}).read_only());
  EXPECT_TRUE(ThrowsError([&] { copy.fill(0.0); }, ErrorKind::invalid_argument, {"fill()", "read-only view"}));
  EXPECT_TRUE(
      ThrowsError([&] { copy.copy_from(typed); }, ErrorKind::invalid_argument, {"copy_from()", "read-only view"}));
}

// An input may be read-only; an output may not, and the op's check says which and why.
TEST(TensorViews, OpsReadConstInputsAndRefuseConstOutputs) {
  const std::vector<float> x(6, 2.0f);
  const std::vector<float> w(3, 0.5f);
  std::vector<float> y(6);
  std::vector<float> rstd(2);
  const Tensor xt = Tensor::wrap(x.data(), {2, 3});
  const Tensor wt = Tensor::wrap(w.data(), {3});
  rms_norm_fwd({.x = xt, .weight = wt, .y = Tensor::wrap(y.data(), {2, 3}), .rstd = Tensor::wrap(rstd.data(), {2})});
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  const std::vector<float> frozen(6);
  EXPECT_TRUE(ThrowsError(
      [&] {
        rms_norm_fwd(
            {.x = xt, .weight = wt, .y = Tensor::wrap(frozen.data(), {2, 3}), .rstd = Tensor::wrap(rstd.data(), {2})});
      },
      ErrorKind::invalid_argument, {"rms_norm.fwd", "output y is a read-only view"}));
}

TEST(TensorViews, SpanWrapChecksTheElementCount) {
  std::vector<float> v(12);
  EXPECT_EQ(Tensor::wrap(std::span<float>(v), {3, 4}).numel(), 12);
  EXPECT_TRUE(ThrowsError([&] { Tensor::wrap(std::span<float>(v), {5, 4}); }, ErrorKind::invalid_argument,
                          {"a span of 12 elements cannot be viewed as [5x4] (20 elements)"}));
}

TEST(TensorViews, MisalignedDataIsRefused) {
  alignas(8) std::array<unsigned char, 64> bytes{};
  EXPECT_TRUE(ThrowsError([&] { Tensor::wrap(bytes.data() + 1, {4}, DType::f32); }, ErrorKind::invalid_argument,
                          {"not aligned", "4 bytes"}));
  EXPECT_TRUE(ThrowsError([&] { Tensor::wrap(bytes.data() + 2, {4}, DType::f64); }, ErrorKind::invalid_argument,
                          {"not aligned", "8 bytes"}));
  EXPECT_EQ(Tensor::wrap(bytes.data() + 2, {4}, DType::bf16).numel(), 4);  // 2-byte elements
}

// Sizes are overflow-checked with zero extents too: 2^32 x 2^32 x 0 has no elements but 2^64
// rows, which nothing downstream (rows x hidden, statistics shapes) could represent.
TEST(TensorViews, ShapesCheckTheirProductsZeroExtentsIncluded) {
  EXPECT_TRUE(ThrowsError([] { Shape{4294967296, 4294967296, 0}; }, ErrorKind::invalid_argument,
                          {"[4294967296x4294967296x0]", "exceeds"}));
  EXPECT_TRUE(ThrowsError([] { Shape{15, 6148914691236517272, 0}; }, ErrorKind::invalid_argument, {"exceeds"}));
  EXPECT_TRUE(ThrowsError([] { Shape::parse("4294967296x4294967296x0"); }, ErrorKind::invalid_argument, {"exceeds"}));
  EXPECT_EQ((Shape{4294967296, 0, 7}.numel()), 0);
  // operator[] bypasses the constructor's check: rows_hidden checks its own product.
  Shape wide{2, 0};
  wide[0] = INT64_MAX;
  EXPECT_EQ(rows_hidden(wide).rows, INT64_MAX);
  Shape overflowing{2, 2, 0};
  overflowing[0] = INT64_MAX;
  overflowing[1] = 2;
  EXPECT_TRUE(ThrowsError([&] { rows_hidden(overflowing); }, ErrorKind::invalid_argument, {"rows"}));
}

// Strided views whose byte reach overflows (strides times the element size) are refused when
// made, so the overlap rule's byte arithmetic cannot overflow.
TEST(TensorViews, StridesAreCheckedInBytes) {
  alignas(8) static float buffer[8] = {};
  const std::int64_t huge[] = {std::int64_t{1} << 61, 1};
  EXPECT_TRUE(ThrowsError([&] { Tensor::wrap(buffer, {2, 2}, Device{}, huge); }, ErrorKind::invalid_argument,
                          {"int64 range of f32 bytes"}));
  const std::int64_t negative[] = {-(std::int64_t{1} << 62), 1};
  EXPECT_TRUE(ThrowsError([&] { Tensor::wrap(buffer, {2, 2}, Device{}, negative); }, ErrorKind::invalid_argument,
                          {"int64 range"}));
  const std::int64_t fine[] = {std::int64_t{1} << 40, 1};
  EXPECT_FALSE(Tensor::wrap(buffer, {2, 2}, Device{}, fine).is_contiguous());
}

// A view whose bytes fit int64 but whose elements would lie below address 0 describes no memory;
// the op checks' overlap rule did pointer arithmetic over it (UBSan: pointer overflow, found by
// fuzz_op_check).
TEST(TensorViews, ViewsReachingOutsideTheAddressSpaceAreRefused) {
  alignas(8) static float buffer[8] = {};
  const std::int64_t below[] = {-(std::int64_t{1} << 60), 1};
  EXPECT_TRUE(ThrowsError([&] { Tensor::wrap(buffer, {2, 2}, Device{}, below); }, ErrorKind::invalid_argument,
                          {"reaches outside the address space", "4611686018427387904 bytes below it"}));
  const std::int64_t reversed[] = {-2, 1};  // rows 4..5 then 2..3: inside the buffer
  EXPECT_FALSE(Tensor::wrap(buffer + 4, {2, 2}, Device{}, reversed).is_contiguous());
}

}  // namespace
}  // namespace opreg
