// Issue 14's finding for the fast rms_norm, as a test of its own (the conformance grid's
// `large` values cover every kernel): f32 rows of |x| ~ 6e17 at hidden 4096 overflowed the f32
// sum of squares, and the kernel returned y = 0 and rstd = 0 where the reference gives |y| = 1.
// 3e18 makes even a 512-element chunk's f32 sum overflow.
#include <gtest/gtest.h>

#include <limits>

#include "op_case.h"
#include "opreg/registry.h"

namespace opreg::cpu_test {
namespace {

TEST(RmsNormLargeRows, KeepTheirScale) {
  for (const double magnitude : {6e17, 3e18}) {
    CaseSpec s;
    s.op = "rms_norm.fwd";
    s.shape = Shape{4, 4096};
    const OpCase problem(s, [magnitude](std::string_view tensor, std::int64_t i) {
      return tensor == "weight" ? 1.0 : ((i & 1) != 0 ? -magnitude : magnitude);
    });
    for (const std::string_view impl : {"generic", "avx2"}) {
      const std::string variant = "cpu.rms_norm.fwd." + std::string(impl);
      if (!registered(variant)) continue;  // avx2 on aarch64
      bool ok = false;
      const std::vector<Output> out = problem.run(variant, &ok);
      if (!ok) continue;
      const Tensor& y = output(out, "y");
      const Tensor& rstd = output(out, "rstd");
      EXPECT_NEAR(y.data_as<float>()[0], 1.0, 1e-6) << impl << " at " << magnitude;
      EXPECT_NEAR(y.data_as<float>()[1], -1.0, 1e-6) << impl << " at " << magnitude;
      EXPECT_NEAR(rstd.data_as<float>()[0] * magnitude, 1.0, 1e-6) << impl << " at " << magnitude;
    }
  }
}

// The 16-bit rms_norm backward's dweight term x * rstd is rounded to odd in registers (vec.h's
// mul_odd). Where that product is infinite its error term is NaN (inf - inf), which the vector
// version once took for an inexact result, turning dweight's -inf into a NaN. A caller's rstd of
// 1 with x = -inf (a forward on the same row would give rstd 0, so the tensors are made here,
// not by the harness) must give dweight = -inf; the row is long enough for whole blocks and a tail.
TEST(RmsNormBackward16, InfiniteProductKeepsItsInfinityInDweight) {
  Registry& reg = default_registry();
  const double inf = std::numeric_limits<double>::infinity();
  const std::int64_t rows = 2;
  const std::int64_t cols = 40;
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const auto filled = [&](Shape shape, DType d, auto value) {
      Tensor t = Tensor::empty(shape, d, Device{}, reg);
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        const double v = value(i);
        if (d == DType::bf16) t.data_as<bfloat16>()[i] = to_bfloat16(v);
        if (d == DType::f16) t.data_as<half>()[i] = to_half(v);
        if (d == DType::f32) t.data_as<float>()[i] = static_cast<float>(v);
      }
      return t;
    };
    const auto at = [&](const Tensor& t, std::int64_t i) {
      return dtype == DType::bf16 ? to_double(t.data_as<bfloat16>()[i]) : to_double(t.data_as<half>()[i]);
    };
    for (const std::string_view impl : {"generic", "avx2"}) {
      const std::string variant = "cpu.rms_norm.bwd." + std::string(impl);
      if (!registered(variant)) continue;  // avx2 on aarch64
      RmsNormBwdArgs a;
      a.dy = filled({rows, cols}, dtype, [](std::int64_t) { return 1.0; });
      a.x = filled({rows, cols}, dtype, [inf](std::int64_t i) { return i == 3 ? -inf : (i == 21 ? inf : 1.5); });
      a.weight = filled({cols}, dtype, [](std::int64_t) { return 1.0; });
      a.rstd = filled({rows}, DType::f32, [](std::int64_t) { return 1.0; });
      a.dx = Tensor::empty({rows, cols}, dtype, Device{}, reg);
      a.dweight = Tensor::empty({cols}, dtype, Device{}, reg);
      const Verdict v = reg.call_variant(rms_norm_bwd_op(), variant, a);
      if (!v.ok) continue;  // avx2 on a CPU without it
      EXPECT_EQ(at(a.dweight, 3), -inf) << impl << " " << to_string(dtype);
      EXPECT_EQ(at(a.dweight, 21), inf) << impl << " " << to_string(dtype);
      EXPECT_EQ(at(a.dweight, 0), 3.0) << impl << " " << to_string(dtype);  // 1.5 in both rows
    }
  }
}

}  // namespace
}  // namespace opreg::cpu_test
