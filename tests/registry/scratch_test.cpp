// A caller's scratch allocator (ExecContext::scratch): with one, every block of device scratch a
// call's kernels take comes from it and goes back to it, and the backend's cached Workspace is
// not touched; without one, the Workspace serves as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "backends/builtin.h"
#include "ops/problem.h"
#include "support/host_backend.h"
#include "support/real_backends.h"
#include "support/test_op.h"
#include "support/throws_error.h"

namespace opreg::testing {
namespace {

using ::testing::_;
using ::testing::Invoke;

// Takes its blocks from a backend's own allocate() (so that they are that device's memory) and
// counts every call; a block must come back with the size, device and stream it went out with.
class CountingAllocator {
 public:
  explicit CountingAllocator(Backend& backend) : backend_(backend) {}

  ScratchAllocator allocator{&allocate, &deallocate, this};
  int allocations = 0;
  int deallocations = 0;
  std::size_t bytes = 0;  // allocated in all
  int mismatches = 0;     // blocks given back with other facts than they went out with
  bool refuse = false;    // return nullptr
  std::size_t outstanding() const { return out_.size(); }

 private:
  struct Block {
    std::size_t bytes;
    int device;
    void* stream;
  };
  static void* allocate(void* self, std::size_t n, int device, void* stream) {
    auto& a = *static_cast<CountingAllocator*>(self);
    if (a.refuse) return nullptr;
    void* p = a.backend_.allocate(device, n);
    a.out_[p] = {n, device, stream};
    ++a.allocations;
    a.bytes += n;
    return p;
  }
  static void deallocate(void* self, void* p, std::size_t n, int device, void* stream) {
    auto& a = *static_cast<CountingAllocator*>(self);
    ++a.deallocations;
    auto it = a.out_.find(p);
    if (it == a.out_.end() || it->second.bytes != n || it->second.device != device || it->second.stream != stream) {
      ++a.mismatches;
    } else {
      a.out_.erase(it);
    }
    a.backend_.deallocate(device, p, n);
  }
  Backend& backend_;
  std::map<void*, Block> out_;
};

class ScratchLease : public ::testing::Test {
 protected:
  std::shared_ptr<HostBackend> backend =
      std::make_shared<HostBackend>(HostBackendSpec{.name = "gpu", .priority = 400, .device_count = 2});
  CountingAllocator counting{*backend};
};

TEST_F(ScratchLease, ComesFromTheAllocatorAndGoesBackToIt) {
  Workspace& ws = backend->workspace(1);
  int stream = 0;
  {
    Workspace::Lease lease = ws.acquire(1000, &stream, &counting.allocator);
    ASSERT_NE(lease.data(), nullptr);
    EXPECT_EQ(lease.bytes(), 1024U);  // whole 256-byte units, not the cache's power of two
    EXPECT_EQ(counting.allocations, 1);
    EXPECT_EQ(counting.bytes, 1024U);
    EXPECT_EQ(counting.deallocations, 0);
  }
  EXPECT_EQ(counting.deallocations, 1);
  EXPECT_EQ(counting.mismatches, 0);
  EXPECT_EQ(counting.outstanding(), 0U);
  EXPECT_EQ(ws.allocations(), 0U);  // the cache made nothing and keeps nothing
  EXPECT_EQ(ws.cached_bytes(), 0U);
  { Workspace::Lease tiny = ws.acquire(1, nullptr, &counting.allocator); }
  EXPECT_EQ(counting.bytes, 1024U + 256U);
}

TEST_F(ScratchLease, WithoutAnAllocatorTheCacheServesAsBefore) {
  Workspace& ws = backend->workspace(0);
  { Workspace::Lease lease = ws.acquire(1000); }
  { Workspace::Lease again = ws.acquire(1000, nullptr, nullptr); }
  EXPECT_EQ(ws.allocations(), 1U);
  EXPECT_EQ(ws.cached_bytes(), 1024U);
  EXPECT_EQ(counting.allocations, 0);
}

TEST_F(ScratchLease, MovedLeasesGiveTheBlockBackOnce) {
  Workspace& ws = backend->workspace(0);
  Workspace::Lease a = ws.acquire(300, nullptr, &counting.allocator);
  void* data = a.data();
  Workspace::Lease b(std::move(a));
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(counting.deallocations, 0);
  Workspace::Lease c = ws.acquire(300);  // from the cache
  c = std::move(b);                      // c's cached block goes back to the cache, b's stays out
  EXPECT_EQ(counting.deallocations, 0);
  EXPECT_EQ(ws.cached_bytes(), 512U);
  c.reset();
  EXPECT_EQ(counting.deallocations, 1);
  EXPECT_EQ(counting.mismatches, 0);
  EXPECT_EQ(ws.cached_bytes(), 512U);
}

TEST_F(ScratchLease, AnAllocatorWithoutMemoryIsADeviceErrorNamingTheBytes) {
  counting.refuse = true;
  EXPECT_TRUE(ThrowsError([&] { auto lease = backend->workspace(0).acquire(5000, nullptr, &counting.allocator); },
                          ErrorKind::device, {"gpu:0", "scratch allocator returned no memory", "5120 bytes"}));
  ScratchAllocator half{counting.allocator.allocate, nullptr, &counting};
  EXPECT_TRUE(ThrowsError([&] { auto lease = backend->workspace(0).acquire(10, nullptr, &half); },
                          ErrorKind::invalid_argument, {"no deallocate function"}));
  EXPECT_EQ(backend->workspace(0).allocations(), 0U);
}

// Through dispatch: the kernel sees the caller's allocator in its KernelContext on every path
// (problem-independent and by problem; with and without a stream), and acquire_scratch uses it.
class ScratchDispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    register_cpu(reg);
    gpu_registration = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "gpu", .priority = 400}));
    gpu = gpu_registration.backend_id();
  }
  ScaleArgs args() {
    ScaleArgs a;
    a.x = Tensor::empty({4, 8}, DType::f32, Device{gpu, 0}, reg);
    a.y = Tensor::empty({4, 8}, DType::f32, Device{gpu, 0}, reg);
    a.alpha = 2;
    return a;
  }
  // The kernel takes 4000 bytes of scratch and remembers what the context said.
  void expect_runs(MockKernel& k, int times) {
    EXPECT_CALL(k, Run(_, _)).Times(times).WillRepeatedly(Invoke([this](const ScaleArgs&, const KernelContext& kc) {
      seen = kc.scratch;
      seen_stream = kc.stream;
      Workspace::Lease lease = acquire_scratch(kc, 4000);
      ASSERT_NE(lease.data(), nullptr);
    }));
  }
  Registry reg;
  Registration gpu_registration;
  BackendId gpu = 0;
  const ScratchAllocator* seen = nullptr;
  void* seen_stream = nullptr;
};

TEST_F(ScratchDispatch, EveryPathHandsTheAllocatorToTheKernel) {
  for (const bool by_problem : {false, true}) {
    SCOPED_TRACE(by_problem ? "by problem" : "problem-independent");
    MockKernel k;
    auto r = reg.add_variant(scale_op(), mock_variant("gpu", by_problem ? "picky" : "any", 10, k, by_problem));
    if (by_problem) ON_CALL(k, Supports(_, _)).WillByDefault(::testing::Return(Verdict::accept()));
    if (by_problem) EXPECT_CALL(k, Supports(_, _)).Times(::testing::AnyNumber());
    CountingAllocator counting(reg.backend(gpu));
    Workspace& ws = reg.backend(gpu).workspace(0);
    ws.release_cached();
    const std::size_t made = ws.allocations();
    int stream = 0;
    expect_runs(k, 6);
    const ScaleArgs a = args();
    const ExecContext plain{};
    const ExecContext with{nullptr, &counting.allocator};
    const ExecContext with_stream{&stream, &counting.allocator};
    for (int round = 0; round < 2; ++round) {  // the first call of a problem chooses; the second hits
      reg.call(scale_op(), a, &with);
      EXPECT_EQ(seen, &counting.allocator);
      reg.call(scale_op(), a, &with_stream);
      EXPECT_EQ(seen, &counting.allocator);
      EXPECT_EQ(seen_stream, &stream);
      reg.call(scale_op(), a, round == 0 ? nullptr : &plain);
      EXPECT_EQ(seen, nullptr);
    }
    EXPECT_EQ(counting.allocations, 4);
    EXPECT_EQ(counting.deallocations, 4);
    EXPECT_EQ(counting.mismatches, 0);
    EXPECT_EQ(counting.bytes, 4 * 4096U);
    // The calls without an allocator used the cache: one block, made once.
    EXPECT_EQ(ws.allocations(), made + 1);
    EXPECT_EQ(ws.cached_bytes(), 4096U);
  }
}

// Real kernels that take scratch (dW/dB partials): the npu emulator's backward kernels, and the
// cpu's. The counting allocator takes device memory from the backend itself.
struct RealCase {
  const char* device;
  const char* op;
  Shape shape;
};

class ScratchKernels : public ::testing::TestWithParam<RealCase> {};

TEST_P(ScratchKernels, AllScratchOfABackwardComesFromTheAllocator) {
  const RealCase& c = GetParam();
  Registry reg;
  register_real_backends(reg);
  const std::string_view backend = std::string_view(c.device).substr(0, std::string_view(c.device).find(':'));
  bool here = false;
  for (const BackendInfo& b : reg.backends()) here = here || (b.name == backend && b.availability.available);
  if (!here) GTEST_SKIP() << c.device << " is not built or not here";
  const Device device = reg.parse_device(c.device);
  ProblemSpec spec;
  spec.op = c.op;
  spec.shape = c.shape;
  Workspace& ws = reg.backend(device.backend).workspace(device.index);

  // Without an allocator: the workspace cache serves the kernel (so it does take scratch).
  Problem cached(reg, spec, device);
  const std::size_t before = ws.allocations();
  ASSERT_NE(cached.run().variant, nullptr);
  ASSERT_TRUE(cached.check().pass()) << cached.check().summary();
  ASSERT_GT(ws.allocations(), before) << c.op << " on " << c.device << " took no scratch: pick another shape";
  ws.release_cached();

  // With one: every block from it and back to it, nothing from the cache.
  CountingAllocator counting(reg.backend(device.backend));
  const ExecContext ctx{nullptr, &counting.allocator};
  Problem mine(reg, spec, device);
  const std::size_t made = ws.allocations();
  for (int i = 0; i < 2; ++i) {
    mine.poison();
    ASSERT_NE(mine.run(&ctx).variant, nullptr);
    mine.synchronize(&ctx);
    const CheckReport report = mine.check();
    EXPECT_TRUE(report.pass()) << report.summary();
  }
  EXPECT_GE(counting.allocations, 2);
  EXPECT_EQ(counting.deallocations, counting.allocations);
  EXPECT_EQ(counting.mismatches, 0);
  EXPECT_EQ(counting.outstanding(), 0U);
  EXPECT_EQ(ws.allocations(), made);
  EXPECT_EQ(ws.cached_bytes(), 0U);
}

INSTANTIATE_TEST_SUITE_P(Backward, ScratchKernels,
                         ::testing::Values(RealCase{"npu:0", "rms_norm.bwd", {64, 512}},
                                           RealCase{"npu:0", "layer_norm.bwd", {64, 512}},
                                           RealCase{"npu:0", "group_norm.bwd", {4, 8, 64}},
                                           RealCase{"cpu", "rms_norm.bwd", {512, 1024}}),
                         [](const auto& info) {
                           std::string name = std::string(info.param.device) + "_" + info.param.op;
                           for (char& ch : name) {
                             if (ch == ':' || ch == '.') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace opreg::testing
