// The in-process custom backend of examples/custom_backend (the toy accelerator): its variants
// against the reference through the conformance harness, and OPREG_DEVICE=toy picking it (ctest
// sets OPREG_DEVICE=toy for this program; the toy registers after the environment was read).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "conformance/harness.h"
#include "opreg/ops.h"
#include "toy_backend.h"

namespace opreg::conformance {
namespace {

// Every dtype pair, casting mode, offset, optional weight and in-place form on small and odd shapes ...
Grid toy_grid() {
  Grid g;
  g.variants = variants_of("toy");
  g.dtypes = kAllPairs;
  g.shapes = {Shape{1, 1}, Shape{3, 5}, Shape{17, 1031}, Shape{2, 3, 5, 7}, Shape{0, 7}, Shape{4, 0}};
  g.rms_modes = {{Casting::llama, 0.0}, {Casting::gemma, 1.0}, {Casting::none, 0.5}};
  g.in_place_too = true;
  g.affine = {{true, false}, {false, false}};
  g.seed = 17;
  return g;
}

// ... and rows longer than an NPU's Unified Buffer, in the two common precisions.
Grid toy_long_rows_grid() {
  Grid g;
  g.variants = variants_of("toy");
  g.dtypes = {{DType::f32, DType::f32}, {DType::bf16, DType::f32}};
  g.shapes = {Shape{2, 200003}};
  g.seed = 19;
  return g;
}

INSTANTIATE_TEST_SUITE_P(toy, ConformanceTest, ::testing::ValuesIn(expand(toy_grid(), "toy")), case_name);
INSTANTIATE_TEST_SUITE_P(toy_long_rows, ConformanceTest, ::testing::ValuesIn(expand(toy_long_rows_grid(), "toy")),
                         case_name);

TEST(ToyBackend, OpregDeviceToyMakesItTheInferredDeviceAndItsVariantsRun) {
  Registry& reg = default_registry();
  ASSERT_STREQ(std::getenv("OPREG_DEVICE"), "toy");
  const Inference inferred = reg.infer_device();
  EXPECT_EQ(reg.device_name(inferred.device), "toy:0");
  EXPECT_EQ(reg.device_label(inferred.device), "toy:0 (emulated)");
  // x = 1.5 everywhere: y = x * rstd * w = w = 2.
  RmsNormFwdArgs a;
  a.x = Tensor::empty({4, 6}, DType::f32, inferred.device);
  a.weight = Tensor::empty({6}, DType::f32, inferred.device);
  a.y = Tensor::empty({4, 6}, DType::f32, inferred.device);
  a.rstd = Tensor::empty({4}, DType::f32, inferred.device);
  a.x.fill(1.5);
  a.weight.fill(2.0);
  const DispatchResult r = rms_norm_fwd(a);
  ASSERT_NE(r.variant, nullptr);
  EXPECT_EQ(r.variant->name, "toy.rms_norm.fwd.simple");
  EXPECT_FALSE(r.fell_back);
  std::vector<float> y(24);
  Tensor::wrap(y.data(), {4, 6}, DType::f32).copy_from(a.y);
  EXPECT_NEAR(y[23], 2.0F, 1e-6F);
}

TEST(ToyBackend, ItsSupportsRefusesRowsLongerThanItTakesWithAReason) {
  Registry& reg = default_registry();
  ProblemSpec spec;
  spec.shape = Shape{1, (1 << 20) + 1};
  Problem problem(reg, spec, reg.parse_device("toy"));
  const Verdict v = problem.run_variant("toy.rms_norm.fwd.simple");
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.reason, "a row of 1048577 elements is longer than the toy's 1048576");
}

TEST(ToyBackend, ItsMemoryServicesAccountForTheDevicesMemory) {
  Registry& reg = default_registry();
  const Device toy = reg.parse_device("toy");
  EXPECT_EQ(reg.device_props(toy).memory_bytes, 1ULL << 30);
  EXPECT_THROW((void)Tensor::empty({1LL << 29}, DType::f32, toy), Error);  // 2 GiB of f32 on a 1 GiB device
  EXPECT_NO_THROW((void)Tensor::empty({1 << 20}, DType::f32, toy));
}

}  // namespace
}  // namespace opreg::conformance

// The toy registers into the process-wide registry before gtest expands the conformance grid.
int main(int argc, char** argv) {
  std::vector<opreg::Registration> toy;
  try {
    toy = toy::register_toy(opreg::default_registry());
  } catch (const opreg::Error& e) {
    std::fprintf(stderr, "toy_backend_test: %s\n", e.what());
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
