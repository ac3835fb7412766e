// The GPU benchmarks' shared method (bench_cuda_common.h).
#include "bench_cuda_common.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <utility>

#include "bench_cpu_common.h"

namespace opreg::bench {

namespace {
const char* g_program = "bench_cuda";
}

void gpu_check(gpuError_t err, const char* what) {
  if (err == gpuSuccess) return;
  std::fprintf(stderr, "%s: %s failed: %s\n", g_program, what, gpuGetErrorString(err));
  std::exit(1);
}

Gpu::Gpu() {
  gpu_check(gpuSetDevice(0), "cudaSetDevice");
  gpu_check(gpuMalloc(&flush, flush_bytes), "cudaMalloc(flush)");
  gpu_check(gpuEventCreate(&start), "cudaEventCreate");
  gpu_check(gpuEventCreate(&stop), "cudaEventCreate");
}

void Gpu::reserve_copy(std::size_t bytes) {
  if (bytes <= copy_bytes) return;
  if (copy_src != nullptr) gpu_check(gpuFree(copy_src), "cudaFree(copy)");
  if (copy_dst != nullptr) gpu_check(gpuFree(copy_dst), "cudaFree(copy)");
  gpu_check(gpuMalloc(&copy_src, bytes), "cudaMalloc(copy)");
  gpu_check(gpuMalloc(&copy_dst, bytes), "cudaMalloc(copy)");
  gpu_check(gpuMemsetAsync(copy_src, 0x3c, bytes, nullptr), "cudaMemsetAsync");
  copy_bytes = bytes;
}

Gpu& gpu() {
  static Gpu g;
  return g;
}

void fill_random(Tensor& t, std::uint64_t seed) {
  // One host pattern per (dtype, seed): drawing 16 Mi values per tensor took most of a shape
  // change once every op's tensors were filled.
  static std::map<std::pair<DType, std::uint64_t>, Tensor> patterns;
  constexpr std::int64_t kPattern = 4 << 20;
  const std::int64_t n = t.numel();
  if (n == 0) return;
  Tensor& host = patterns[{t.dtype(), seed}];
  if (!host.defined()) {
    host = Tensor::empty({kPattern}, t.dtype());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(-2.0, 2.0);
    for (std::int64_t i = 0; i < kPattern; ++i) {
      double v = dist(rng);
      if (std::fabs(v) < 1.0 / 64) v = std::copysign(1.0 / 64, v);
      store_from_double(host.data(), t.dtype(), static_cast<std::size_t>(i), v);
    }
  }
  const std::int64_t pattern = std::min(n, kPattern);
  const std::size_t esize = element_size(t.dtype());
  auto* dst = static_cast<unsigned char*>(t.data());
  gpu_check(gpuMemcpyAsync(dst, host.data(), static_cast<std::size_t>(pattern) * esize, gpuMemcpyDefault, nullptr),
            "cudaMemcpyAsync");
  for (std::int64_t done = pattern; done < n;) {
    const std::int64_t chunk = std::min(done, n - done);
    gpu_check(gpuMemcpyAsync(dst + static_cast<std::size_t>(done) * esize, dst, static_cast<std::size_t>(chunk) * esize,
                             gpuMemcpyDefault, nullptr),
              "cudaMemcpyAsync");
    done += chunk;
  }
  gpu_check(gpuStreamSynchronize(nullptr), "cudaStreamSynchronize");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int iterations_for(std::uint64_t bytes) {
  return static_cast<int>(std::clamp<std::uint64_t>(4'000'000'000ull / std::max<std::uint64_t>(bytes, 1), 20, 200));
}

void run_peak_copy(benchmark::State& state) {
  Gpu& g = gpu();
  const std::size_t half = std::size_t{1} << 30;
  g.reserve_copy(half);
  std::vector<double> ms;
  for (auto _ : state) {
    const double t = g.time_ms([&] {
      gpu_check(gpuMemcpyAsync(g.copy_dst, g.copy_src, half, gpuMemcpyDefault, nullptr), "cudaMemcpyAsync(copy)");
    });
    state.SetIterationTime(t * 1e-3);
    ms.push_back(t);
  }
  const double t = median(ms);
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * half) * state.iterations());
  state.counters["us"] = t * 1e3;
  state.counters["GBps"] = static_cast<double>(2 * half) / (t * 1e6);
}

int bench_main(int argc, char** argv, const char* program, void (*register_cases)()) {
  g_program = program;
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).starts_with("--benchmark_list_tests");
  for (const auto& b : default_registry().backends()) {
    if (b.name == "cuda" && !b.availability.available && !listing) {
      std::printf("%s: no usable GPU (%s)\n", program, b.availability.reason.c_str());
      return 0;
    }
  }
  benchmark::RegisterBenchmark("copy/peak", run_peak_copy)
      ->UseManualTime()
      ->Iterations(20)
      ->Unit(benchmark::kMicrosecond);
  register_cases();
  return run_benchmarks(argc, argv);
}

}  // namespace opreg::bench
