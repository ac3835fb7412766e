// Unpublished dispatch-table States are freed once no reader can hold them: memory stays
// bounded over long register / unregister / reconfigure loops, also while other threads
// dispatch (`make tsan` runs these).
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "support/heap.h"
#include "support/host_backend.h"
#include "support/test_op.h"

namespace opreg::testing {
namespace {

#ifdef OPREG_TEST_SANITIZER_HEAP
// ASan and TSan (Debug) run a loop about 100 times slower: there the loops check that
// reclamation frees safely; the Release build shows the bound over 100,000.
constexpr int kLoops = 4'000;
#else
constexpr int kLoops = 100'000;
#endif
// What a loop may keep: a few batches of States not yet reclaimed, allocator slack. Without
// reclamation each reload kept ~5 KiB and each register/unregister pair ~11 KiB (500 MB and
// 1.1 GB over the loops).
constexpr std::size_t kBound = 2U << 20;

// A registry with one backend and one variant whose choice goes through the choice cache (it
// has supports()), so each new State also allocates a cache on its first call.
struct Fixture {
  Registry reg;
  Registration cpu = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "cpu"}));
  Registration base = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{
                                                      .backend = "cpu",
                                                      .impl = "base",
                                                      .supports = [](const ScaleArgs&, const DeviceProps&) {
                                                        return Verdict::accept();
                                                      },
                                                      .run = &scale_on_host});
  ScaleArgs args;
  Fixture() {
    args.x = Tensor::empty({2, 3}, DType::f32, Device{}, reg);
    args.y = Tensor::empty({2, 3}, DType::f32, Device{}, reg);
    args.x.fill(1.0, reg);
  }
};

TEST(RegistryMemory, LongReloadLoopKeepsMemoryBounded) {
  Fixture f;
  Config c;
  auto reload = [&](int i) {
    c.num_threads = 1 + i % 4;
    f.reg.set_config(c);
    if (i % 8 == 0) f.reg.call(scale_op(), f.args);
  };
  for (int i = 0; i < 200; ++i) reload(i);  // allocator warm-up
  const std::size_t before = heap_in_use();
  for (int i = 0; i < kLoops; ++i) reload(i);
  const std::size_t after = heap_in_use();
  EXPECT_LT(after, before + kBound) << "grew by " << (after - before) << " bytes over " << kLoops << " reloads";
}

TEST(RegistryMemory, LongRegisterUnregisterLoopKeepsMemoryBounded) {
  Fixture f;
  std::atomic<long> runs{0};
  auto pair = [&] {
    Registration extra = f.reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{
                                                           .backend = "cpu",
                                                           .impl = "extra",
                                                           .priority = 1,
                                                           .supports = [](const ScaleArgs&, const DeviceProps&) {
                                                             return Verdict::accept();
                                                           },
                                                           .run = [&runs](const ScaleArgs&, const KernelContext&) {
                                                             runs.fetch_add(1, std::memory_order_relaxed);
                                                           }});
    f.reg.call(scale_op(), f.args);
  };
  for (int i = 0; i < 200; ++i) pair();
  const std::size_t before = heap_in_use();
  for (int i = 0; i < kLoops; ++i) pair();
  const std::size_t after = heap_in_use();
  EXPECT_LT(after, before + kBound) << "grew by " << (after - before) << " bytes over " << kLoops << " pairs";
  EXPECT_EQ(runs.load(), kLoops + 200);
}

// Eight threads dispatch and check every result while three others register and unregister a
// variant, override and restore another, and reload the configuration; memory stays bounded.
TEST(RegistryMemory, EightDispatchersWhileOthersRegisterOverrideUnregisterAndReload) {
  Fixture f;
  auto gpu = f.reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "gpu"}));
  auto gpu_base = f.reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{
                                                    .backend = "gpu",
                                                    .impl = "base",
                                                    .supports = [](const ScaleArgs&, const DeviceProps&) {
                                                      return Verdict::accept();
                                                    },
                                                    .run = &scale_on_host});
  // Spares, so that disabling a base variant never leaves a backend without one.
  auto cpu_spare = f.reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{.backend = "cpu", .impl = "spare",
                                                                        .priority = -1, .run = &scale_on_host});
  auto gpu_spare = f.reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{.backend = "gpu", .impl = "spare",
                                                                        .priority = -1, .run = &scale_on_host});
  const Device gpu_device = f.reg.parse_device("gpu");
  constexpr int kDispatchers = 8;
#ifdef OPREG_TEST_SANITIZER_HEAP
  constexpr int kChanges = 400;  // per writer
#else
  constexpr int kChanges = 5000;
#endif

  // A correct kernel each: whatever variant a call picks, y = alpha * x.
  auto spec = [](const char* backend, const char* impl, int priority) {
    return VariantSpec<ScaleArgs>{.backend = backend,
                                  .impl = impl,
                                  .priority = priority,
                                  .supports = [](const ScaleArgs& a, const DeviceProps&) {
                                    return a.x.numel() > 0 ? Verdict::accept() : Verdict::reject("empty");
                                  },
                                  .run = &scale_on_host};
  };
  std::atomic<int> writers_left{3};
  auto writer = [&](auto change) {
    return std::thread([&, change] {
      for (int i = 0; i < kChanges; ++i) change(i);
      writers_left.fetch_sub(1);
    });
  };
  const std::size_t before = heap_in_use();
  std::vector<std::thread> threads;
  threads.push_back(writer([&](int i) {
    Registration r = f.reg.add_variant(scale_op(), spec(i % 2 == 0 ? "cpu" : "gpu", "churn", 5));
  }));
  threads.push_back(writer([&](int) {
    Registration r = f.reg.add_variant(scale_op(), spec("gpu", "base", 0), RegisterOptions{.override_existing = true});
  }));
  threads.push_back(writer([&](int i) {
    Config c;
    c.num_threads = 1 + i % 3;
    c.verbose = 0;
    if (i % 5 == 0) c.disable = {i % 2 == 0 ? "cpu.test_scale.fwd.base" : "gpu.test_scale.fwd.base"};
    f.reg.set_config(c);
  }));
  std::atomic<long> wrong{0};
  std::atomic<long> calls{0};
  for (int t = 0; t < kDispatchers; ++t) {
    threads.emplace_back([&, t] {
      const Device device = t % 2 == 0 ? Device{} : gpu_device;
      ScaleArgs a;
      a.x = Tensor::empty({t + 1, 5}, DType::f32, device, f.reg);
      a.y = Tensor::empty({t + 1, 5}, DType::f32, device, f.reg);
      a.x.fill(2.0, f.reg);
      a.alpha = static_cast<float>(t + 1);
      std::vector<float> y(static_cast<std::size_t>(a.y.numel()));
      Tensor host_y = Tensor::wrap(y.data(), a.y.shape(), DType::f32);
      while (writers_left.load() > 0) {
        a.y.fill(-1.0, f.reg);
        f.reg.call(scale_op(), a);
        host_y.copy_from(a.y, f.reg);
        for (float v : y) {
          if (v != 2.0F * a.alpha) wrong.fetch_add(1);
        }
        calls.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  // A dispatcher preempted inside a call holds what was published meanwhile; once every thread
  // is out, the next publications free it.
  for (int i = 0; i < 16; ++i) f.reg.set_config(Config{});
  const std::size_t after = heap_in_use();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(calls.load(), kDispatchers);
  EXPECT_LT(after, before + kBound) << "grew by " << (after - before) << " bytes";
}

}  // namespace
}  // namespace opreg::testing
