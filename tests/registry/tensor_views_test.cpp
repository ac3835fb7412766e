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

}  // namespace
}  // namespace opreg
