// Issue 14's finding for the fast rms_norm, as a test of its own (the conformance grid's
// `large` values cover every kernel): f32 rows of |x| ~ 6e17 at hidden 4096 overflowed the f32
// sum of squares, and the kernel returned y = 0 and rstd = 0 where the reference gives |y| = 1.
// 3e18 makes even a 512-element chunk's f32 sum overflow.
#include <gtest/gtest.h>

#include "op_case.h"

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

}  // namespace
}  // namespace opreg::cpu_test
