// Dispatch overhead of the registry itself, on an op whose kernel does almost nothing
// (adds one float), so the difference between the cases is the registry's cost.
#include <benchmark/benchmark.h>

#include "backends/builtin.h"
#include "opreg/registry.h"
#include "registry/fail.h"

namespace {

using namespace opreg;

struct TinyArgs {
  Tensor x;
  Tensor y;
  int mode = 0;  // looked at by the picky variant's supports()
};
void tiny_check(const TinyArgs& a) {
  if (!(a.x.shape() == a.y.shape())) fail(ErrorKind::invalid_argument, "bench_tiny.fwd: shape mismatch");
}
void tiny_tensors(TinyArgs& a, TensorList& l) {
  l.add("x", a.x, Role::in);
  l.add("y", a.y, Role::out);
}
void tiny_key(const TinyArgs& a, ProblemKey& k) { k.add(static_cast<std::uint64_t>(a.mode)); }
const Op<TinyArgs>& tiny_op() {
  static const Op<TinyArgs> op(OpSpec<TinyArgs>{"bench_tiny.fwd", &tiny_check, &tiny_tensors, &tiny_key});
  return op;
}
void tiny_kernel(const TinyArgs& a, const KernelContext&) { a.y.data_as<float>()[0] = a.x.data_as<float>()[0] + 1; }

struct Fixture {
  Registry reg;
  Registration plain;
  TinyArgs args;
  Fixture(bool with_supports) {
    register_cpu(reg);
    VariantSpec<TinyArgs> spec{.backend = "cpu", .impl = "tiny", .run = tiny_kernel};
    if (with_supports) {
      spec.supports = [](const TinyArgs& a, const DeviceProps&) {
        return a.mode == 0 ? Verdict::accept() : Verdict::reject("mode");
      };
    }
    plain = reg.add_variant(tiny_op(), std::move(spec));
    args.x = Tensor::empty({1, 8}, DType::f32, Device{}, reg);
    args.y = Tensor::empty({1, 8}, DType::f32, Device{}, reg);
    args.x.fill(1.0, reg);
  }
};

void BM_DirectCall(benchmark::State& state) {
  Fixture f(false);
  KernelContext ctx;
  for (auto _ : state) {
    tiny_kernel(f.args, ctx);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_DirectCall);

// A variant without supports(): resolved once per table, no cache lookup.
void BM_DispatchResolved(benchmark::State& state) {
  Fixture f(false);
  for (auto _ : state) {
    f.reg.call(tiny_op(), f.args);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_DispatchResolved);

// A variant with supports(): the problem key is built and looked up in the choice cache.
void BM_DispatchCached(benchmark::State& state) {
  Fixture f(true);
  for (auto _ : state) {
    f.reg.call(tiny_op(), f.args);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_DispatchCached);

}  // namespace

BENCHMARK_MAIN();
