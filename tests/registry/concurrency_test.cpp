// Dispatch from many threads while other threads register, override and unregister variants
// and reload the configuration. Meant for `make tsan`; it also checks that every call ran
// exactly one live variant, and (the real ops) that every result matches the reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/builtin.h"
#include "opreg/ops.h"
#include "ops/problem.h"
#include "ops/reference/reference.h"
#include "support/host_backend.h"
#include "support/real_backends.h"
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
  {
    Config c = saved;
    c.num_threads = 1;  // from here on 1, 2 or 3: what each kernel must see
    reg.set_config(c);
  }
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

// ---- Every op, fwd and bwd, on the cpu (and the npu emulator where it is built), each call's
// outputs checked against the double-precision reference, while three threads churn: one
// registers and unregisters a new top-priority variant of each op in turn, one overrides each
// op's generic variant with a higher priority and withdraws the override, one applies a cycle of
// configurations (disabling variants and the npu, forcing the references, verbose logging,
// thread counts) and re-reads the environment. The churned kernels are the reference itself,
// so every result must match whichever variant ran.

// Registers a variant of `op` on the cpu whose kernel is `kernel` (a reference function).
using AddVariant = std::function<Registration(Registry&, const std::string& impl, int priority, bool override_existing,
                                              std::atomic<long>& runs)>;

template <class Args>
AddVariant churned(const Op<Args>& op, void (*kernel)(const Args&)) {
  return [&op, kernel](Registry& reg, const std::string& impl, int priority, bool override_existing,
                       std::atomic<long>& runs) {
    return reg.add_variant(op,
                           VariantSpec<Args>{.backend = "cpu",
                                             .impl = impl,
                                             .priority = priority,
                                             .run = [kernel, &runs](const Args& a, const KernelContext&) {
                                               runs.fetch_add(1, std::memory_order_relaxed);
                                               kernel(a);
                                             }},
                           RegisterOptions{.override_existing = override_existing});
  };
}

std::vector<AddVariant> every_op() {
  return {churned(rms_norm_fwd_op(), &reference::rms_norm_fwd),
          churned(rms_norm_bwd_op(), &reference::rms_norm_bwd),
          churned(fused_add_rms_norm_fwd_op(), &reference::fused_add_rms_norm_fwd),
          churned(fused_add_rms_norm_bwd_op(), &reference::fused_add_rms_norm_bwd),
          churned(layer_norm_fwd_op(), &reference::layer_norm_fwd),
          churned(layer_norm_bwd_op(), &reference::layer_norm_bwd),
          churned(group_norm_fwd_op(), &reference::group_norm_fwd),
          churned(group_norm_bwd_op(), &reference::group_norm_bwd),
          churned(geglu_fwd_op(), &reference::geglu_fwd),
          churned(geglu_bwd_op(), &reference::geglu_bwd),
          churned(swiglu_fwd_op(), &reference::swiglu_fwd),
          churned(swiglu_bwd_op(), &reference::swiglu_bwd)};
}

// The configurations the reloading thread cycles through; each names only variants that stay
// registered (a configuration naming a churned one could be refused when it is applied).
std::vector<Config> config_cycle(bool npu) {
  std::vector<Config> out(6);
  out[1].disable = {"cpu.rms_norm.fwd.generic", "cpu.layer_norm.bwd.generic", "cpu.geglu.fwd.generic",
                    "cpu.group_norm.bwd.generic"};
  out[1].fallback = FallbackPolicy::silent;
  out[2].force_variants = {"cpu.layer_norm.fwd.ref", "cpu.swiglu.bwd.ref", "cpu.rms_norm.bwd.ref"};
  out[2].num_threads = 1;
  out[3].verbose = 2;
  out[3].num_threads = 3;
  if (npu) out[4].disable = {"npu"};  // its calls fall back to the cpu through host copies
  out[4].fallback = FallbackPolicy::silent;
  out[5].num_threads = 2;
  out[5].fallback = FallbackPolicy::warn;
  return out;
}

TEST(RegistryConcurrency, EveryOpCheckedWhileVariantsAndConfigurationChurn) {
  Registry reg;
  register_real_backends(reg);
  std::vector<std::string> devices{"cpu"};
  if (kWithNpu) devices.emplace_back("npu:0");

  constexpr int kDispatchers = 8;
  constexpr int kMinRounds = 3;        // each dispatcher: at least this many passes over its problems
  constexpr int kMinChurnCycles = 24;  // each churning thread: at least this many (two per op)
  const DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};

  // Every thread its own problems (inputs, outputs, reference): 12 ops x devices, small shapes
  // that are not powers of two, a dtype per thread, in place on every other thread.
  std::vector<std::vector<std::unique_ptr<Problem>>> problems(kDispatchers);
  for (int t = 0; t < kDispatchers; ++t) {
    for (const std::string& device : devices) {
      for (const std::string& op : problem_ops()) {
        ProblemSpec spec;
        spec.op = op;
        spec.dtype = kDtypes[t % 3];
        spec.wdtype = t % 2 == 0 ? DType::f32 : spec.dtype;
        const bool group_norm = op.starts_with("group_norm");
        spec.shape = group_norm ? Shape{2, 6, 5 + t} : op.starts_with("rope") ? Shape{1, 2, 3, 8 + 2 * t} : Shape{3, 37 + t};
        spec.groups = group_norm ? 3 : 1;
        spec.in_place = t % 2 == 1 && op.ends_with(".bwd");
        spec.seed = static_cast<std::uint64_t>(100 + t);
        problems[static_cast<std::size_t>(t)].push_back(
            std::make_unique<Problem>(reg, spec, reg.parse_device(device)));
      }
    }
  }

  std::atomic<int> dispatchers_done{0};
  std::atomic<int> churners_ready{0};  // churning threads past their minimum cycles
  std::atomic<long> calls{0};
  std::atomic<long> new_runs{0};
  std::atomic<long> override_runs{0};
  std::atomic<int> registrations{0};
  std::atomic<int> overrides{0};
  std::atomic<int> reloads{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  auto failed = [&](std::string what) {
    std::lock_guard lock(failures_mutex);
    if (failures.size() < 20) failures.push_back(std::move(what));
  };

  const std::vector<AddVariant> ops = every_op();
  // Runs `cycle(i)` until the dispatchers are done, and at least kMinChurnCycles times.
  auto churner = [&](auto cycle) {
    return std::thread([&, cycle] {
      for (int i = 0; i < kMinChurnCycles || dispatchers_done.load() < kDispatchers; ++i) {
        try {
          cycle(i);
        } catch (const Error& e) {
          failed(fmt::format("churn: {}", e.what()));
        }
        if (i + 1 == kMinChurnCycles) churners_ready.fetch_add(1);
      }
    });
  };
  std::vector<std::thread> threads;
  threads.push_back(churner([&](int i) {
    auto r = ops[static_cast<std::size_t>(i) % ops.size()](reg, "churn", 500, false, new_runs);
    registrations.fetch_add(1);
    std::this_thread::yield();
  }));
  threads.push_back(churner([&](int i) {
    auto r = ops[static_cast<std::size_t>(i * 5) % ops.size()](reg, "generic", 1000, true, override_runs);
    overrides.fetch_add(1);
    std::this_thread::yield();
  }));
  const std::vector<Config> configs = config_cycle(kWithNpu);
  threads.push_back(churner([&](int i) {
    if (i % 7 == 6) {
      reg.reload_config();
    } else {
      reg.set_config(configs[static_cast<std::size_t>(i) % configs.size()]);
    }
    reloads.fetch_add(1);
  }));
  constexpr int kChurners = 3;

  for (int t = 0; t < kDispatchers; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kMinRounds || churners_ready.load() < kChurners; ++round) {
        for (const auto& problem : problems[static_cast<std::size_t>(t)]) {
          try {
            problem->poison();
            const DispatchResult r = problem->run();
            problem->synchronize();
            calls.fetch_add(1, std::memory_order_relaxed);
            const CheckReport report = problem->check();
            if (r.variant == nullptr || !report.pass()) {
              failed(fmt::format("{} on {} ran {}: {}", problem->spec().op, reg.device_name(problem->device()),
                                 r.variant != nullptr ? r.variant->name : "no variant", report.summary()));
            }
          } catch (const Error& e) {
            failed(fmt::format("{} on {}: {}", problem->spec().op, reg.device_name(problem->device()), e.what()));
          }
        }
      }
      dispatchers_done.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  reg.set_config(Config{});

  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_GE(calls.load(), kDispatchers * kMinRounds * 12L * static_cast<long>(devices.size()));
  EXPECT_GE(registrations.load(), kMinChurnCycles);
  EXPECT_GE(overrides.load(), kMinChurnCycles);
  EXPECT_GE(reloads.load(), kMinChurnCycles);
  // The churned variants did run (they outrank every other cpu variant while registered).
  EXPECT_GT(new_runs.load() + override_runs.load(), 0);
  // Every registration was undone: the cpu variants are the built-in ones again.
  for (const auto& v : reg.variants("rms_norm.fwd")) {
    EXPECT_NE(v.impl, "churn");
    EXPECT_FALSE(v.is_override) << v.name;
  }
  std::printf("[ concurrency ] %d dispatchers: %ld checked calls on %zu device(s); %d registrations, %d overrides, "
              "%d configuration changes; churned variants ran %ld times\n",
              kDispatchers, calls.load(), devices.size(), registrations.load(), overrides.load(), reloads.load(),
              new_runs.load() + override_runs.load());
}

}  // namespace
}  // namespace opreg::testing
