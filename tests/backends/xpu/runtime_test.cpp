// The xpu runtime on PoCL: kernel build errors carry the compiler log, memory that is not the
// device's is refused, caller queues are checked and used, dweight is reproducible, the
// variants' supports() rules and forced refusals say what they need, and rope's position_ids
// outside the tables give NaN outputs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/xpu/xpu_backend.h"
#include "backends/xpu/runtime.h"
#include "backends/xpu/xpu_backend.h"
#include "opreg/ops.h"
#include "ops/problem.h"
#include "support/throws_error.h"
#include "xpu_test_support.h"

namespace opreg::xpu {
namespace {

using opreg::testing::ThrowsError;

class XpuRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    device = registry.parse_device(xpu_test::cpu_device());
    registry.check_device(device);
    backend = dynamic_cast<XpuBackend*>(&registry.backend(device.backend));
    ASSERT_NE(backend, nullptr);
    rt = &backend->runtime(device.index);
  }
  Registry& registry = default_registry();
  Device device;
  XpuBackend* backend = nullptr;
  DeviceRuntime* rt = nullptr;
};

// The one line a cold PoCL cache's minute of compiling prints (issue: 60-80 s of silence), shown
// here with a short step rather than a cold compile: printed once past its delay, never before.
TEST(XpuSlowStepNotice, PrintsOneLineOnlyWhenTheStepOutlastsItsDelay) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    const SlowStepNotice quick("quick step", std::chrono::seconds(30), out);
    EXPECT_FALSE(quick.printed());
  }
  {
    const SlowStepNotice slow("opreg: xpu:0: compiling", std::chrono::milliseconds(20), out);
    for (int i = 0; i < 500 && !slow.printed(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(slow.printed());
  }
  std::rewind(out);
  char text[256] = {};
  const std::size_t n = std::fread(text, 1, sizeof(text) - 1, out);
  std::fclose(out);
  EXPECT_EQ(std::string(text, n), "opreg: xpu:0: compiling\n");
}

TEST_F(XpuRuntime, ContextIsMadeOnceWithEveryKernelBuiltAndWarmed) {
  EXPECT_EQ(&backend->runtime(device.index), rt);
  // rms_norm (and fused_add_rms_norm): 5 (x, weight) pairs x {fwd, bwd} + 3 dw_columns + 3
  // dw_reduce; glu: 3 formats x {fwd, bwd}; norm (layer_norm and group_norm): 5 pairs x {fwd,
  // bwd} + 3 dw_columns + 3 dw_reduce; rope: 5 (x, table) pairs, both directions in one. Then
  // rms_norm's 5 fwd_rows and 5 bwd_rows, glu's chunk, norm's 10 rows and 10 split.
  EXPECT_EQ(rt->kernel_count(), 26U + 12U + 36U + 5U);
  EXPECT_GE(rt->work_group_size(), 1U);
  EXPECT_LE(rt->work_group_size(), 1024U);
  EXPECT_EQ(rt->work_group_size() & (rt->work_group_size() - 1), 0U) << "a power of two";
  const DeviceProps& props = registry.device_props(device);
  EXPECT_TRUE(props.emulated);
  EXPECT_NE(props.name.find("(emulated, OpenCL CPU device)"), std::string::npos) << props.name;
  EXPECT_EQ(props.get(kWorkGroupSizeKey), std::to_string(rt->work_group_size()));
}

TEST_F(XpuRuntime, BuildErrorCarriesTheCompilerLog) {
  const std::string source = "kernel void broken(global float* x) { x[0] = 1.0f +; }\n";
  try {
    build_program(rt->context(), rt->info().device, source, "-cl-std=" + rt->info().cl_std, "test program 'broken'");
    FAIL() << "a kernel with a syntax error built";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::device);
    EXPECT_NE(what.find("test program 'broken': clBuildProgram failed: CL_BUILD_PROGRAM_FAILURE"), std::string::npos)
        << what;
    EXPECT_NE(what.find("compiler log:"), std::string::npos) << what;
    EXPECT_NE(what.find("expected expression"), std::string::npos) << "the compiler's own words: " << what;
  }
}

TEST_F(XpuRuntime, UnknownKernelIsAnInternalError) {
  EXPECT_TRUE(ThrowsError([&] { rt->kernel("no_such_kernel"); }, ErrorKind::internal,
                          {"no xpu kernel named 'no_such_kernel'"}));
}

TEST_F(XpuRuntime, HostMemoryWrappedAsXpuIsRefused) {
  std::vector<float> host(3 * 5, 1.0F);
  std::vector<float> out(3 * 5, 0.0F);
  std::vector<float> rstd(3, 0.0F);
  RmsNormFwdArgs a;
  a.x = Tensor::wrap(host.data(), {3, 5}, DType::f32, device);
  a.weight = Tensor::empty({5}, DType::f32, device, registry);
  a.weight.fill(1.0, registry);
  a.y = Tensor::wrap(out.data(), {3, 5}, DType::f32, device);
  a.rstd = Tensor::wrap(rstd.data(), {3}, DType::f32, device);
  EXPECT_TRUE(ThrowsError([&] { registry.call(rms_norm_fwd_op(), a); }, ErrorKind::invalid_argument,
                          {"xpu.rms_norm.fwd.rows: tensor x (60 bytes at 0x", "is not memory of this device"}));
}

// A problem on the device with its outputs and the reference, through the shared machinery.
CheckReport run_on(Registry& registry, Device device, ProblemSpec spec, const char* variant,
                   const ExecContext* ctx = nullptr) {
  Problem p(registry, spec, device);
  p.poison();
  const Verdict v = p.run_variant(variant, ctx);
  EXPECT_TRUE(v.ok) << v.reason;
  p.synchronize(ctx);
  return p.check();
}

TEST_F(XpuRuntime, CallerQueueOfThisContextIsUsed) {
  cl_command_queue queue = rt->new_queue();
  EXPECT_EQ(rt->queue(queue), queue);
  ExecContext ctx{queue};
  ProblemSpec spec;
  spec.op = "rms_norm.bwd";
  spec.dtype = DType::bf16;
  spec.shape = Shape{33, 300};
  const CheckReport report = run_on(registry, device, spec, "xpu.rms_norm.bwd.group", &ctx);
  EXPECT_TRUE(report.pass()) << report.summary();
}

TEST_F(XpuRuntime, QueueOfAnotherContextOrOutOfOrderIsRefused) {
  cl_int status = CL_SUCCESS;
  const cl_context_properties cprops[] = {CL_CONTEXT_PLATFORM,
                                          reinterpret_cast<cl_context_properties>(rt->info().platform), 0};
  ContextHandle other(clCreateContext(cprops, 1, &rt->info().device, nullptr, nullptr, &status));
  ASSERT_EQ(status, CL_SUCCESS);
  const cl_queue_properties in_order[] = {0};
  QueueHandle foreign(clCreateCommandQueueWithProperties(other.get(), rt->info().device, in_order, &status));
  ASSERT_EQ(status, CL_SUCCESS);
  EXPECT_TRUE(ThrowsError([&] { rt->queue(foreign.get()); }, ErrorKind::invalid_argument,
                          {"is not a command queue opreg made for this device"}));
  const cl_queue_properties out_of_order[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
  QueueHandle ooo(clCreateCommandQueueWithProperties(rt->context(), rt->info().device, out_of_order, &status));
  ASSERT_EQ(status, CL_SUCCESS);
  EXPECT_TRUE(ThrowsError([&] { rt->queue(ooo.get()); }, ErrorKind::invalid_argument,
                          {"is not a command queue opreg made for this device"}));
}

// A made-up handle (Python's stream=1) is refused without being read: the driver would crash on it.
TEST_F(XpuRuntime, MadeUpQueueHandleIsRefusedWithoutCrashing) {
  for (std::uintptr_t bogus : {std::uintptr_t{1}, std::uintptr_t{0x1000}, ~std::uintptr_t{0} - 7}) {
    EXPECT_TRUE(ThrowsError([&] { rt->queue(reinterpret_cast<void*>(bogus)); }, ErrorKind::invalid_argument,
                            {"is not a command queue opreg made for this device", "accepted: 0"}));
  }
}

// dweight comes from per-slot partials summed in a fixed order: the same bits on every run.
TEST_F(XpuRuntime, DweightIsTheSameOnEveryRun) {
  for (const char* variant : {"xpu.rms_norm.bwd.group", "xpu.rms_norm.bwd.packed", "xpu.rms_norm.bwd.split"}) {
    const Shape shape = std::string(variant).ends_with("packed") ? Shape{3000, 100} : Shape{3000, 1000};
    std::vector<float> first;
    for (int run = 0; run < 3; ++run) {
      RmsNormBwdArgs a;
      const std::int64_t h = shape[1];
      Tensor host_x = Tensor::empty(shape, DType::f32);
      Tensor host_dy = Tensor::empty(shape, DType::f32);
      for (std::int64_t i = 0; i < shape.numel(); ++i) {
        host_x.data_as<float>()[i] = static_cast<float>((i * 7919) % 1013) / 500.0F - 1.0F;
        host_dy.data_as<float>()[i] = static_cast<float>((i * 104729) % 997) / 400.0F - 1.2F;
      }
      a.x = host_x.to(device, registry);
      a.dy = host_dy.to(device, registry);
      a.weight = Tensor::empty({h}, DType::f32, device, registry);
      a.weight.fill(0.75, registry);
      a.rstd = Tensor::empty({shape[0]}, DType::f32, device, registry);
      a.rstd.fill(0.9, registry);
      a.dx = Tensor::empty(shape, DType::f32, device, registry);
      a.dweight = Tensor::empty({h}, DType::f32, device, registry);
      ASSERT_TRUE(registry.call_variant(rms_norm_bwd_op(), variant, a).ok);
      Tensor back = a.dweight.to(Device{}, registry);
      std::vector<float> bits(back.data_as<float>(), back.data_as<float>() + h);
      if (run == 0) {
        first = bits;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), bits.data(), bits.size() * sizeof(float))) << variant << " run " << run;
      }
    }
  }
}

// Every parameter gradient of every xpu backward variant (fused_add_rms_norm's dweight, layer_norm's
// and group_norm's dweight and dbias) comes from partials summed in a fixed order: three runs of
// one problem give the same bytes, on shapes where many work-groups and partial slots take part.
TEST_F(XpuRuntime, EveryParameterGradientIsTheSameOnEveryRun) {
  struct Case {
    const char* op;
    Shape shape;
    std::int64_t groups;
  };
  const Case cases[] = {{"fused_add_rms_norm.bwd", Shape{3000, 1000}, 1},
                        {"fused_add_rms_norm.bwd", Shape{3000, 100}, 1},
                        {"layer_norm.bwd", Shape{3000, 1000}, 1},
                        {"layer_norm.bwd", Shape{3000, 100}, 1},
                        {"group_norm.bwd", Shape{400, 32, 50}, 8},
                        {"group_norm.bwd", Shape{3, 6, 20000}, 3},
                        // Few long sets: split cuts each into parts with their own dweight/dbias slots.
                        {"layer_norm.bwd", Shape{2, 50000}, 1},
                        {"group_norm.bwd", Shape{2, 4, 30000}, 1}};
  int checked = 0;
  for (const Case& c : cases) {
    for (const auto& v : registry.variants(c.op)) {
      if (v.backend != "xpu") continue;
      for (DType wdtype : {DType::f32, DType::bf16}) {
        ProblemSpec spec;
        spec.op = c.op;
        spec.dtype = DType::bf16;
        spec.wdtype = wdtype;
        spec.shape = c.shape;
        spec.groups = c.groups;
        spec.seed = 21;
        std::vector<ProblemOutput> first;
        for (int run = 0; run < 3; ++run) {
          Problem p(registry, spec, device);
          p.poison();
          if (!p.run_variant(v.name).ok) break;  // a variant that refuses the shape
          p.synchronize();
          std::vector<ProblemOutput> outs = p.outputs();
          std::erase_if(outs, [](const ProblemOutput& o) { return o.name != "dweight" && o.name != "dbias"; });
          ASSERT_FALSE(outs.empty()) << v.name;
          if (run == 0) {
            first = std::move(outs);
            continue;
          }
          for (std::size_t i = 0; i < outs.size(); ++i) {
            ++checked;
            EXPECT_EQ(0, std::memcmp(first[i].value.data(), outs[i].value.data(), outs[i].value.nbytes()))
                << v.name << " " << outs[i].name << " run " << run << " on " << spec.cli_args("xpu");
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 8 * 2 * 2);
}

TEST_F(XpuRuntime, SupportsRulesFollowTheDeviceGeometry) {
  const DeviceProps& props = registry.device_props(device);
  const std::size_t group = std::stoul(std::string(props.get(kWorkGroupSizeKey)));
  const std::size_t fused = std::stoul(std::string(props.get(kFusedColumnsKey)));
  const auto bwd = [&](std::int64_t hidden, bool weight) {
    RmsNormBwdArgs a;
    a.x = Tensor::empty({2, hidden}, DType::f32, device, registry);
    a.dy = Tensor::empty({2, hidden}, DType::f32, device, registry);
    a.dx = Tensor::empty({2, hidden}, DType::f32, device, registry);
    a.rstd = Tensor::empty({2}, DType::f32, device, registry);
    if (weight) {
      a.weight = Tensor::empty({hidden}, DType::f32, device, registry);
      a.dweight = Tensor::empty({hidden}, DType::f32, device, registry);
    }
    return a;
  };
  const auto longest_packed = static_cast<std::int64_t>(group / 2 * 4);
  const auto longest_fused = static_cast<std::int64_t>(group * fused);
  std::string why;
  // PoCL's CPU device takes the CPU-shaped rows variant at every length; the GPU-shaped rules
  // below are checked with it disabled.
  EXPECT_EQ(registry.choose(rms_norm_bwd_op(), bwd(longest_fused + 1, true))->name, "xpu.rms_norm.bwd.rows");
  const Config saved = registry.config();
  Config no_rows = saved;
  no_rows.disable.push_back("xpu.rms_norm.bwd.rows");
  registry.set_config(no_rows);
  EXPECT_EQ(registry.choose(rms_norm_bwd_op(), bwd(longest_packed, true))->name, "xpu.rms_norm.bwd.packed");
  EXPECT_EQ(registry.choose(rms_norm_bwd_op(), bwd(longest_packed + 1, true))->name, "xpu.rms_norm.bwd.group");
  EXPECT_EQ(registry.choose(rms_norm_bwd_op(), bwd(longest_fused, true))->name, "xpu.rms_norm.bwd.group");
  EXPECT_EQ(registry.choose(rms_norm_bwd_op(), bwd(longest_fused + 1, true), &why)->name, "xpu.rms_norm.bwd.split");
  EXPECT_NE(why.find("dweight would need more than"), std::string::npos) << why;
  // Forced beyond its rule, the fused group variant says what it needs instead of guessing.
  Config forced = no_rows;
  forced.force_variants = {"xpu.rms_norm.bwd.group"};
  registry.set_config(forced);
  std::string message;
  const bool refused = ThrowsError([&] { registry.call(rms_norm_bwd_op(), bwd(longest_fused + 1, true)); },
                                   ErrorKind::unsupported, {"the fused path keeps at most", "xpu.rms_norm.bwd.split"},
                                   &message);
  registry.set_config(no_rows);
  EXPECT_TRUE(refused) << message;
  // Without a weight there is no dweight to fuse: the group variant takes any length.
  EXPECT_EQ(registry.choose(rms_norm_bwd_op(), bwd(longest_fused + 1, false))->name, "xpu.rms_norm.bwd.group");
  registry.set_config(saved);
}


// A position_ids value outside the tables makes that position's outputs NaN on the device (the cpu
// raises an error instead: a device would need a synchronisation to report it), in both
// directions, reading nothing outside the tables; the other positions turn as usual.
TEST_F(XpuRuntime, RopePositionsOutsideTheTablesGiveNaNOutputs) {
  constexpr std::int64_t kRows = 4;
  constexpr std::int64_t kDim = 6;
  constexpr std::int64_t kHalf = kDim / 2;
  const std::int64_t ids[] = {2, -1, kRows};  // t = 0 inside, t = 1 and 2 outside
  Tensor q = Tensor::empty({1, 2, 3, kDim}, DType::f32);
  Tensor k = Tensor::empty({1, 1, 3, kDim}, DType::f32);
  Tensor cos = Tensor::empty({kRows, kDim}, DType::f32);
  Tensor sin = Tensor::empty({kRows, kDim}, DType::f32);
  Tensor positions = Tensor::empty({1, 3}, DType::i64);
  for (std::int64_t i = 0; i < q.numel(); ++i) q.data_as<float>()[i] = 0.25F * static_cast<float>(i % 11) - 1.0F;
  for (std::int64_t i = 0; i < k.numel(); ++i) k.data_as<float>()[i] = 0.5F - 0.125F * static_cast<float>(i % 7);
  for (std::int64_t i = 0; i < cos.numel(); ++i) {
    cos.data_as<float>()[i] = std::cos(0.7F * static_cast<float>(i));
    sin.data_as<float>()[i] = std::sin(0.7F * static_cast<float>(i));
  }
  for (int t = 0; t < 3; ++t) positions.data_as<std::int64_t>()[t] = ids[t];
  const Tensor dq = q.to(device, registry);
  const Tensor dk = k.to(device, registry);
  const Tensor dcos = cos.to(device, registry);
  const Tensor dsin = sin.to(device, registry);
  const Tensor dpos = positions.to(device, registry);
  for (const bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "rope_backward" : "rope");
    const RopeOut out = backward ? rope_backward(dq, dk, dcos, dsin, dpos) : rope(dq, dk, dcos, dsin, dpos);
    const float sign = backward ? -1.0F : 1.0F;
    for (const auto& [in, got_device] : {std::pair{&q, &out.q}, std::pair{&k, &out.k}}) {
      const Tensor got = got_device->to(Device{}, registry);
      const std::int64_t heads = in->size(1);
      for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t t = 0; t < 3; ++t) {
          const float* x = in->data_as<float>() + (h * 3 + t) * kDim;
          const float* y = got.data_as<float>() + (h * 3 + t) * kDim;
          for (std::int64_t i = 0; i < kHalf; ++i) {
            if (t != 0) {
              EXPECT_TRUE(std::isnan(y[i]) && std::isnan(y[i + kHalf])) << "head " << h << " t " << t << " pair " << i;
              continue;
            }
            const double c = cos.data_as<float>()[ids[0] * kDim + i];
            const double s = sign * sin.data_as<float>()[ids[0] * kDim + i];
            EXPECT_NEAR(y[i], x[i] * c - x[i + kHalf] * s, 1e-6) << "head " << h << " pair " << i;
            EXPECT_NEAR(y[i + kHalf], x[i + kHalf] * c + x[i] * s, 1e-6) << "head " << h << " pair " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace opreg::xpu
