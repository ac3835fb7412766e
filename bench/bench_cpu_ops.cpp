// Throughput of every cpu op direction through the public entry point (the registry's default
// choice: cpu.<op>.<dir>.avx2 on an AVX2 machine; OPREG_CPU_ISA=generic for the baseline), on
// rows 4096 x hidden 1024 .. 32768 (group_norm: N = 32, HW = 4096, 32 groups, C = hidden / 16),
// bf16 and f32 (parameters in the same dtype), in bytes of the byte model (opreg::bytes_moved)
// per second. After each case the same program copies the same number of bytes (half read, half
// written) with a memcpy split across the same threads, through the cpu backend's own pool: the
// bandwidth ceiling. Counters: ceiling_GBps (decimal GB/s) and of_ceiling, the op's bandwidth as
// a fraction of it.
//
// Times are wall-clock: the kernels run on several threads. OPREG_NUM_THREADS sets the count.
// usage: bench_cpu_ops [--benchmark_filter=fwd/rms_norm/bf16/4096] [google benchmark flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "backends/cpu/parallel.h"
#include "bench_cpu_common.h"

namespace opreg::bench {
namespace {

using Clock = std::chrono::steady_clock;

int threads() {
  const int t = default_registry().config().num_threads;
  return t > 0 ? t : cpu::machine_threads();
}

struct Copy {
  const unsigned char* src;
  unsigned char* dst;
  std::size_t bytes;
  std::int64_t items;
};

// Seconds for one memcpy of `half` bytes over `team` threads: the best of five.
double memcpy_seconds(std::size_t half, int team) {
  std::vector<unsigned char> src(half, 1);
  std::vector<unsigned char> dst(half, 0);
  Copy copy{src.data(), dst.data(), half, 64};
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    cpu::run_items(
        team, copy.items,
        [](void* job, std::int64_t item, int) {
          const auto& c = *static_cast<const Copy*>(job);
          const std::size_t per = (c.bytes + static_cast<std::size_t>(c.items) - 1) / static_cast<std::size_t>(c.items);
          const std::size_t begin = std::min(c.bytes, per * static_cast<std::size_t>(item));
          const std::size_t end = std::min(c.bytes, begin + per);
          std::memcpy(c.dst + begin, c.src + begin, end - begin);
        },
        &copy);
    benchmark::DoNotOptimize(dst.data());
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

void run_case(benchmark::State& state, const std::string& op, std::int64_t hidden, DType dtype) {
  const std::string base = op.substr(0, op.find('.'));
  OpProblem p(op, bench_shape(base, 4096, hidden), dtype);
  const std::string variant = p.run();  // warm: workspace, pool
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    p.run();
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const auto bytes = static_cast<double>(p.bytes());
  state.SetBytesProcessed(static_cast<std::int64_t>(p.bytes()) * state.iterations());
  const double copy = memcpy_seconds(static_cast<std::size_t>(bytes / 2), threads());
  const double op_rate = bytes * static_cast<double>(state.iterations()) / seconds;
  state.counters["ceiling_GBps"] = bytes / copy / 1e9;
  state.counters["of_ceiling"] = op_rate / (bytes / copy);
  state.SetLabel(variant + " threads=" + std::to_string(threads()));
}

void register_all() {
  for (const std::string_view dir : {"fwd", "bwd"}) {
    for (const std::string_view base : op_names()) {
      for (const DType dtype : {DType::bf16, DType::f32}) {
        for (std::int64_t hidden = 1024; hidden <= 32768; hidden *= 2) {
          const std::string op = std::string(base) + "." + std::string(dir);
          const std::string name =
              std::string(dir) + "/" + std::string(base) + "/" + std::string(to_string(dtype)) + "/" + std::to_string(hidden);
          benchmark::RegisterBenchmark(name.c_str(), [op, hidden, dtype](benchmark::State& s) {
            run_case(s, op, hidden, dtype);
          })->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
        }
      }
    }
  }
}

}  // namespace
}  // namespace opreg::bench

int main(int argc, char** argv) {
  opreg::bench::register_all();
  return opreg::bench::run_benchmarks(argc, argv);
}
