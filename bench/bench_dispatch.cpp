// The price of the front door on a real op: rms_norm.fwd on a 1x8 f32 problem, the cpu
// backend's chosen variant called directly with prepared arguments (BM_DirectCall) against the
// same call through the public entry point opreg::rms_norm_fwd, checks included (BM_Dispatch).
// The difference of the two medians is the front door's overhead per call; BM_CheckOnly shows
// how much of it is the op's argument check.
//
// The registry must choose cpu.rms_norm.fwd.generic; on a CPU with AVX2 it chooses the avx2
// variant unless told: OPREG_FORCE_VARIANT=cpu.rms_norm.fwd.generic (a choice that cannot depend
// on the problem, made when the table is published) or OPREG_CPU_ISA=generic (the capped avx2
// variant refuses in its supports(), so the choice is looked up per problem).
//
// `--path=problem` registers a bench-only variant first in the cpu's list, cpu.rms_norm.fwd.bench,
// whose supports() accepts every problem and whose kernel is the generic one: the choice is then
// looked up per problem (the path of every npu, cuda and xpu variant), whatever the cpu's own
// variants are, and BM_Dispatch times that path.
//
// `bench_dispatch --calls=direct:N` (or dispatch:N, check:N) makes N calls the way
// BM_DirectCall (or BM_Dispatch, BM_CheckOnly) does, without the timing loop, and exits: under
// callgrind, the difference of two such runs divided by the difference of their N is the
// instructions of one call (docs/perf.md).
#include <benchmark/benchmark.h>

#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>

#include "backends/cpu/rms_norm/direct.h"
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

// What the registry would hand the kernel.
KernelContext direct_context() {
  Registry& reg = default_registry();
  KernelContext ctx;
  ctx.registry = &reg;
  ctx.backend = &reg.backend(kCpuBackendId);
  ctx.props = &reg.device_props(Device{});
  return ctx;
}

void BM_DirectCall(benchmark::State& state) {
  Problem1x8 p;
  const KernelContext ctx = direct_context();
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

// The variant the dispatch must choose: the generic kernel, or the bench-only one by problem.
std::string g_expected = "cpu.rms_norm.fwd.generic";

bool chooses_expected(const DispatchResult& r) { return r.variant != nullptr && r.variant->name == g_expected; }

// --path=problem: a variant first in the cpu's list whose supports() accepts (so the registry asks
// per problem and caches the answer) and whose kernel is the generic one.
void register_by_problem() {
  VariantSpec<RmsNormFwdArgs> spec;
  spec.backend = "cpu";
  spec.impl = "bench";
  spec.priority = 1000;
  spec.supports = [](const RmsNormFwdArgs&, const DeviceProps&) { return Verdict::accept(); };
  spec.run = &cpu::rms_norm_fwd_generic;
  default_registry().add_variant(rms_norm_fwd_op(), std::move(spec)).release();
  g_expected = "cpu.rms_norm.fwd.bench";
}

void BM_Dispatch(benchmark::State& state) {
  Problem1x8 p;
  const DispatchResult r = rms_norm_fwd(p.args);
  if (!chooses_expected(r)) {
    state.SkipWithError(
        "the registry does not choose cpu.rms_norm.fwd.generic (run with "
        "OPREG_FORCE_VARIANT=cpu.rms_norm.fwd.generic, OPREG_CPU_ISA=generic or --path=problem: docs/perf.md)");
    return;
  }
  for (auto _ : state) {
    rms_norm_fwd(p.args);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Dispatch);

// --calls=<direct|dispatch|check>:<N>. Both modes make the same setup (registry, tensors, a first
// dispatch that fills the choice cache) so that only the N calls differ between two runs.
int count_calls(std::string_view spec) {
  const auto colon = spec.find(':');
  long n = -1;
  const std::string_view mode = spec.substr(0, colon);
  if (colon != std::string_view::npos) std::from_chars(spec.data() + colon + 1, spec.data() + spec.size(), n);
  if (n < 0 || (mode != "direct" && mode != "dispatch" && mode != "check")) {
    std::fprintf(stderr, "bench_dispatch: --calls=%.*s: expected direct:N, dispatch:N or check:N\n",
                 static_cast<int>(spec.size()), spec.data());
    return 2;
  }
  Problem1x8 p;
  const KernelContext ctx = direct_context();
  const DispatchResult r = rms_norm_fwd(p.args);
  if (!chooses_expected(r)) {
    std::fprintf(stderr,
                 "bench_dispatch: the registry does not choose %s (run with "
                 "OPREG_FORCE_VARIANT=cpu.rms_norm.fwd.generic, OPREG_CPU_ISA=generic or --path=problem: "
                 "docs/perf.md)\n",
                 g_expected.c_str());
    return 1;
  }
  if (mode == "direct") {
    for (long i = 0; i < n; ++i) {
      cpu::rms_norm_fwd_generic(p.args, ctx);
      benchmark::ClobberMemory();
    }
  } else if (mode == "dispatch") {
    for (long i = 0; i < n; ++i) {
      rms_norm_fwd(p.args);
      benchmark::ClobberMemory();
    }
  } else {
    const auto& def = rms_norm_fwd_op().def();
    for (long i = 0; i < n; ++i) {
      def.check(def, &p.args);
      benchmark::ClobberMemory();
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view calls;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--path=problem") {
      register_by_problem();
    } else if (arg.starts_with("--calls=")) {
      calls = arg.substr(8);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (!calls.empty()) return count_calls(calls);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
