// Helpers of the npu tests: an emulator or a registry with a chosen profile, GM buffers as
// kernel arguments, and launching a kernel body written against the Ascend C device API.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/builtin.h"
#include "backends/npu/ascend/kernel_operator.h"
#include "backends/npu/npu_backend.h"
#include "backends/npu/profile.h"
#include "opreg/ops.h"
#include "ops/problem.h"
#include "opreg/registry.h"
#include "support/throws_error.h"

namespace opreg::npu::testing {

using opreg::testing::ThrowsError;

inline DeviceModel model(const char* profile = "Ascend910B4", std::optional<std::string> ub = std::nullopt) {
  return select_device_model(std::string(profile), ub);
}

// A registry of its own with the cpu backend and an npu backend of `m` (whatever the
// environment says), with the npu variants registered.
inline std::unique_ptr<Registry> npu_registry(const DeviceModel& m) {
  auto reg = std::make_unique<Registry>();
  define_builtin_ops();
  register_cpu(*reg);
  reg->add_backend(std::make_shared<NpuBackend>(m)).release();
  register_lists(*reg);
  return reg;
}

// A test on the npu backend of a registry of its own: the registry, its npu device and the
// emulator behind it (the default profile; use() picks another), and constant input tensors there.
class NpuTest : public ::testing::Test {
 protected:
  void SetUp() override { use(model()); }
  void use(const DeviceModel& m) {
    reg = npu_registry(m);
    npu = reg->parse_device("npu");
    em = emulator_of(*reg);
  }
  // A problem of the factory (src/ops/problem.h): parameters in x's dtype, eps 1e-5, seed 7.
  static ProblemSpec spec(const std::string& op, Shape shape, DType dtype, std::int64_t groups = 1) {
    ProblemSpec s;
    s.op = op;
    s.shape = std::move(shape);
    s.dtype = dtype;
    s.wdtype = dtype;
    s.groups = groups;
    s.eps = 1e-5;
    s.seed = 7;
    return s;
  }
  // Runs `variant` on `a` (Registry::call_variant: it must accept) and returns its launch.
  template <class Args>
  LaunchCounters launched(const Op<Args>& op, const std::string& variant, const Args& a) {
    const Verdict v = reg->call_variant(op, variant, a);
    EXPECT_TRUE(v.ok) << v.reason;
    return *em->last_launch();
  }
  Tensor filled(const Shape& shape, DType dtype, double value) {
    Tensor t = Tensor::empty(shape, dtype, npu, *reg);
    t.fill(value, *reg);
    return t;
  }

  std::unique_ptr<Registry> reg;
  Device npu;
  Emulator* em = nullptr;
};

// Bytes of `elems` elements of `d`.
inline std::uint64_t bytes(std::int64_t elems, DType d) { return static_cast<std::uint64_t>(elems) * element_size(d); }

// Host memory standing for a GM tensor, with the argument naming it.
template <class T>
struct Gm {
  std::vector<T> data;
  const char* name;
  Gm(const char* n, std::size_t count, T fill = T{}) : data(count, fill), name(n) {}
  GmArg arg() const { return {name, data.data(), data.size() * sizeof(T)}; }
  GmArg out() const { return {name, data.data(), data.size() * sizeof(T), true}; }  // an output argument
  AscendC::GM_ADDR addr() { return reinterpret_cast<AscendC::GM_ADDR>(data.data()); }
};

// Launches `body` with the given GM arguments.
inline LaunchCounters launch(Emulator& em, std::int64_t block_dim, std::vector<GmArg> args,
                             const std::function<void()>& body, const char* name = "test_kernel") {
  return em.launch(name, block_dim, args, body);
}

}  // namespace opreg::npu::testing
