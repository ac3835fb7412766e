// Memory admission: a request larger than the device can give fails at once with both numbers,
// before anything is allocated (instead of the OOM killer minutes later).
#include <gtest/gtest.h>

#include <chrono>

#include "ops/problem.h"
#include "opreg/ops.h"
#include "support/throws_error.h"

namespace opreg {
namespace {

using testing::ThrowsError;

TEST(Admission, TensorLargerThanTheHostFailsAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(ThrowsError([] { Tensor::empty({std::int64_t{1} << 40}, DType::f32); }, ErrorKind::device,
                          {"a f32 tensor of [1099511627776] needs 4398046511104 bytes", "on cpu", "available"}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(Admission, WorkspaceLargerThanTheDeviceFailsAtOnce) {
  Workspace& ws = default_registry().backend(kCpuBackendId).workspace(0);
  const std::size_t allocations = ws.allocations();
  EXPECT_TRUE(ThrowsError([&] { ws.acquire(std::size_t{1} << 50); }, ErrorKind::device,
                          {"a workspace block needs", "cpu:0"}));
  EXPECT_EQ(ws.allocations(), allocations);  // nothing was allocated
}

// A problem sums what it will hold (host copies for the reference, the device's own, the outputs
// copied back) before allocating any of it.
TEST(Admission, ProblemLargerThanTheHostFailsBeforeAllocating) {
  ProblemSpec spec;
  spec.op = "rms_norm.fwd";
  spec.shape = Shape{200000, 200000};
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(ThrowsError([&] { Problem p(default_registry(), spec, Device{}); }, ErrorKind::device,
                          {"rms_norm.fwd of [200000x200000]", "needs 640003200000 bytes", "on the host"}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

}  // namespace
}  // namespace opreg
