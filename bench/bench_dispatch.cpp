// The price of the front door on a real op: rms_norm.fwd on a 1x8 f32 problem, the cpu
// backend's chosen variant called directly with prepared arguments (BM_DirectCall) against the
// same call through the public entry point opreg::rms_norm_fwd, checks included (BM_Dispatch).
// The difference of the two medians is the front door's overhead per call; BM_CheckOnly shows
// how much of it is the op's argument check.
#include <benchmark/benchmark.h>

#include "backends/cpu/rms_norm.h"
#include "opreg/ops.h"

namespace {

using namespace opreg;

struct Problem1x8 {
  RmsNormFwdArgs args;
  Problem1x8() {
    args.x = Tensor::empty({1, 8}, DType::f32);
    args.weight = Tensor::empty({8}, DType::f32);
    args.y = Tensor::empty({1, 8}, DType::f32);
    args.rstd = Tensor::empty({1}, DType::f32);
    args.x.fill(0.5);
    args.weight.fill(1.25);
  }
};

void BM_DirectCall(benchmark::State& state) {
  Problem1x8 p;
  // What the registry would hand the kernel.
  Registry& reg = default_registry();
  KernelContext ctx;
  ctx.registry = &reg;
  ctx.backend = &reg.backend(kCpuBackendId);
  ctx.props = &reg.device_props(Device{});
  for (auto _ : state) {
    cpu::rms_norm_fwd_generic(p.args, ctx);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_DirectCall);

// The op's argument check alone (what BM_Dispatch pays for validation): shapes, dtype pairs,
// scalars and the overlap rule.
void BM_CheckOnly(benchmark::State& state) {
  Problem1x8 p;
  const auto& def = rms_norm_fwd_op().def();
  for (auto _ : state) {
    def.check(def, &p.args);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_CheckOnly);

void BM_Dispatch(benchmark::State& state) {
  Problem1x8 p;
  const DispatchResult r = rms_norm_fwd(p.args);
  if (r.variant == nullptr || r.variant->name != "cpu.rms_norm.fwd.generic") {
    state.SkipWithError("the registry does not choose cpu.rms_norm.fwd.generic (OPREG_* set?)");
    return;
  }
  for (auto _ : state) {
    rms_norm_fwd(p.args);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Dispatch);

}  // namespace
BENCHMARK_MAIN();
