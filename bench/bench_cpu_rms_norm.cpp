// Throughput of the host rms_norm (cpu.rms_norm.{fwd,bwd}.generic) through the public entry
// points and the default registry, in GB/s of the byte model (opreg::bytes_moved), next to a plain
// memcpy moving as many bytes as the largest forward case: the bandwidth the kernels compete with.
//
// Times are wall-clock (UseRealTime): the kernels run on OpenMP threads, whose CPU time the
// calling thread's clock would not show. OPREG_NUM_THREADS sets the thread count.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "opreg/ops.h"

namespace {

using namespace opreg;

// Deterministic, non-zero, varied values (a constant input would let nothing vary per element).
void fill_pattern(Tensor& t, double scale) {
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = scale * (0.25 + std::fabs(std::sin(0.37 * static_cast<double>(i) + 1.0)));
    store_from_double(t.data(), t.dtype(), static_cast<std::size_t>(i), (i & 1) != 0 ? -v : v);
  }
}

struct RmsProblem {
  RmsNormFwdArgs fwd;
  RmsNormBwdArgs bwd;
  RmsProblem(const Shape& shape, DType dtype) {
    const std::int64_t hidden = shape[shape.ndim() - 1];
    const Shape rows{shape.numel() / hidden};
    fwd.x = Tensor::empty(shape, dtype);
    fwd.weight = Tensor::empty({hidden}, dtype);
    fwd.y = Tensor::empty(shape, dtype);
    fwd.rstd = Tensor::empty(rows, DType::f32);
    fill_pattern(fwd.x, 1.0);
    fill_pattern(fwd.weight, 0.5);
    rms_norm_fwd(fwd);  // the statistics the backward consumes
    bwd.dy = Tensor::empty(shape, dtype);
    fill_pattern(bwd.dy, 0.1);
    bwd.x = fwd.x;
    bwd.weight = fwd.weight;
    bwd.rstd = fwd.rstd;
    bwd.dx = Tensor::empty(shape, dtype);
    bwd.dweight = Tensor::empty({hidden}, dtype);
  }
};

void run_rms(benchmark::State& state, Direction direction, Shape shape, DType dtype) {
  RmsProblem p(shape, dtype);
  const char* variant = "";
  for (auto _ : state) {
    const DispatchResult r = direction == Direction::fwd ? rms_norm_fwd(p.fwd) : rms_norm_bwd(p.bwd);
    variant = r.variant != nullptr ? r.variant->name.c_str() : "?";
    benchmark::ClobberMemory();
  }
  const std::uint64_t bytes = bytes_moved("rms_norm", direction, shape, dtype, dtype);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.SetLabel(variant);
}

// A memcpy of half the forward's bytes reads and writes as many bytes as the forward moves.
void BM_MemcpyPeer(benchmark::State& state) {
  const std::uint64_t moved = bytes_moved("rms_norm", Direction::fwd, Shape{4096, 4096}, DType::f32, DType::f32);
  const std::size_t half = static_cast<std::size_t>(moved / 2);
  std::vector<unsigned char> src(half, 1);
  std::vector<unsigned char> dst(half, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), half);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * half) * state.iterations());
  state.SetLabel("f32 4096x4096 fwd bytes");
}
BENCHMARK(BM_MemcpyPeer)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Large rows x moderate hidden (a training batch), an odd shape that divides nothing evenly, and
// two very long rows (only two rows to share among threads).
#define OPREG_RMS_BENCH(dir, dtype, rows, hidden)                                                                  \
  BENCHMARK_CAPTURE(run_rms, dir##_##dtype##_##rows##x##hidden, Direction::dir, Shape{rows, hidden}, DType::dtype) \
      ->UseRealTime()                                                                                              \
      ->Unit(benchmark::kMicrosecond)

OPREG_RMS_BENCH(fwd, f32, 4096, 4096);
OPREG_RMS_BENCH(fwd, bf16, 4096, 4096);
OPREG_RMS_BENCH(fwd, f32, 127, 4099);
OPREG_RMS_BENCH(fwd, bf16, 127, 4099);
OPREG_RMS_BENCH(fwd, f32, 2, 200003);
OPREG_RMS_BENCH(fwd, bf16, 2, 200003);
OPREG_RMS_BENCH(bwd, f32, 4096, 4096);
OPREG_RMS_BENCH(bwd, bf16, 4096, 4096);
OPREG_RMS_BENCH(bwd, f32, 127, 4099);
OPREG_RMS_BENCH(bwd, bf16, 127, 4099);
OPREG_RMS_BENCH(bwd, f32, 2, 200003);
OPREG_RMS_BENCH(bwd, bf16, 2, 200003);

}  // namespace

BENCHMARK_MAIN();
