// Dispatch from many threads while another thread registers and unregisters variants.
// Meant for `make tsan`; it also checks that every call ran exactly one live variant.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "backends/builtin.h"
#include "opreg/ops.h"
#include "support/host_backend.h"
#include "support/test_op.h"

namespace opreg::testing {
namespace {

TEST(RegistryConcurrency, EightDispatchersWhileAnotherThreadRegistersAndUnregisters) {
  Registry reg;
  register_cpu(reg);
  auto gpu = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "gpu"}));
  const Device device = reg.parse_device("gpu");

  std::atomic<long> base_runs{0};
  std::atomic<long> extra_runs{0};
  // The base variant always accepts; the churned one accepts every problem too but has a
  // higher priority, so calls alternate between them as it comes and goes.
  auto base = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{
                                              .backend = "gpu",
                                              .impl = "base",
                                              .priority = 1,
                                              .supports = [](const ScaleArgs&, const DeviceProps&) {
                                                return Verdict::accept();
                                              },
                                              .run = [&](const ScaleArgs&, const KernelContext&) {
                                                base_runs.fetch_add(1, std::memory_order_relaxed);
                                              }});

  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 4000;
  std::atomic<bool> stop{false};
  std::atomic<int> registrations{0};
  std::thread churn([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      auto extra = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{
                                                   .backend = "gpu",
                                                   .impl = "extra",
                                                   .priority = 2,
                                                   .run = [&](const ScaleArgs&, const KernelContext&) {
                                                     extra_runs.fetch_add(1, std::memory_order_relaxed);
                                                   }});
      registrations.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::yield();
      extra.reset();
      if (registrations.load(std::memory_order_relaxed) >= 2000) break;
    }
  });

  std::vector<std::thread> dispatchers;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    dispatchers.emplace_back([&, t] {
      // Shapes differ per thread so the choice cache is exercised with several keys.
      ScaleArgs a;
      a.x = Tensor::empty({t + 1, 3}, DType::f32, device, reg);
      a.y = Tensor::empty({t + 1, 3}, DType::f32, device, reg);
      for (int i = 0; i < kCallsPerThread; ++i) {
        try {
          auto r = reg.call(scale_op(), a);
          if (r.variant == nullptr || r.fell_back) errors.fetch_add(1);
        } catch (const Error&) {
          errors.fetch_add(1);
        }
      }
    });
  }
  for (auto& d : dispatchers) d.join();
  stop.store(true);
  churn.join();

  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(base_runs.load() + extra_runs.load(), static_cast<long>(kThreads) * kCallsPerThread);
  EXPECT_GT(registrations.load(), 0);
}

TEST(RegistryConcurrency, ConfigReloadWhileDispatching) {
  Registry reg;
  register_cpu(reg);
  std::atomic<long> runs{0};
  auto v = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{
                                           .backend = "cpu",
                                           .impl = "count",
                                           .run = [&](const ScaleArgs&, const KernelContext&) { runs++; }});
  std::atomic<bool> done{false};
  std::thread reloader([&] {
    Config c;
    for (int i = 0; i < 500 && !done.load(); ++i) {
      c.verbose = 0;
      c.num_threads = 1 + i % 4;
      reg.set_config(c);
    }
  });
  std::vector<std::thread> dispatchers;
  for (int t = 0; t < 4; ++t) {
    dispatchers.emplace_back([&] {
      ScaleArgs a;
      a.x = Tensor::empty({2, 2}, DType::f32, Device{}, reg);
      a.y = Tensor::empty({2, 2}, DType::f32, Device{}, reg);
      for (int i = 0; i < 2000; ++i) reg.call(scale_op(), a);
    });
  }
  for (auto& d : dispatchers) d.join();
  done.store(true);
  reloader.join();
  EXPECT_EQ(runs.load(), 4 * 2000);
}

// The ops' entry points take an inline path of their own (the check's facts, the table's ready
// KernelContexts) on the default registry: dispatch through it from several threads while
// another registers and unregisters a variant in front of the cpu's (alternately with and
// without supports(), so calls move between that path and the choice cache) and changes the
// thread count, which rebuilds the contexts.
TEST(RegistryConcurrency, EntryPointsWhileVariantsComeAndGoAndTheConfigChanges) {
  Registry& reg = default_registry();
  const Config saved = reg.config();
  std::atomic<long> churn_runs{0};
  std::atomic<int> bad_contexts{0};
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    for (int i = 0; i < 300 && !stop.load(); ++i) {
      VariantSpec<RmsNormFwdArgs> spec{
          .backend = "cpu",
          .impl = "churn",
          .priority = 1000,
          .run = [&](const RmsNormFwdArgs&, const KernelContext& c) {
            if (c.variant == nullptr || c.variant->name != "cpu.rms_norm.fwd.churn" || c.threads < 1 || c.threads > 3) {
              bad_contexts.fetch_add(1);
            }
            churn_runs.fetch_add(1, std::memory_order_relaxed);
          }};
      if (i % 2 == 1) spec.supports = [](const RmsNormFwdArgs&, const DeviceProps&) { return Verdict::accept(); };
      auto extra = reg.add_variant(rms_norm_fwd_op(), std::move(spec));
      Config c = saved;
      c.num_threads = 1 + i % 3;
      reg.set_config(c);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> dispatchers;
  std::atomic<int> errors{0};
  std::atomic<long> calls{0};
  for (int t = 0; t < 4; ++t) {
    dispatchers.emplace_back([&] {
      RmsNormFwdArgs a{.x = Tensor::empty({1, 8}, DType::f32, Device{}, reg),
                       .weight = Tensor::empty({8}, DType::f32, Device{}, reg),
                       .y = Tensor::empty({1, 8}, DType::f32, Device{}, reg),
                       .rstd = Tensor::empty({1}, DType::f32, Device{}, reg)};
      a.x.fill(0.5, reg);
      a.weight.fill(1.0, reg);
      for (int i = 0; i < 2000; ++i) {
        try {
          if (rms_norm_fwd(a).variant == nullptr) errors.fetch_add(1);
          calls.fetch_add(1, std::memory_order_relaxed);
        } catch (const Error&) {
          errors.fetch_add(1);
        }
      }
    });
  }
  for (auto& d : dispatchers) d.join();
  stop.store(true);
  churn.join();
  reg.set_config(saved);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(bad_contexts.load(), 0);
  EXPECT_EQ(calls.load(), 4 * 2000);
  EXPECT_LE(churn_runs.load(), calls.load());
}

}  // namespace
}  // namespace opreg::testing
