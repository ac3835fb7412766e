// What the GPU benchmarks (bench_cuda_rms_norm, bench_cuda_ops) share: the device, the L2 flush,
// CUDA events, random inputs, the median of timed runs next to a copy of the same bytes, the
// 1 GiB copy ceiling, and main(). One method everywhere, also in the peer script
// (bench/peer_gpu_ops.py):
//
// each timed run starts with L2 flushed (a 256 MiB memset on the same stream), then CUDA events
// around the work alone, on the default stream; the reported time is the median of the runs
// (counter `us`), after 3 warm-up runs. Inputs are random in [-2, 2] (never zeros).
//
// Counters of a timed case: us, GBps (bytes of the byte model / time), bytes, copy_us, copy_GBps
// (a device-to-device copy of the same bytes: half read, half written), of_copy (GBps /
// copy_GBps). copy/peak: a copy of 1 GiB (2 GiB moved), counters us and GBps.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda_like/gpu_vendor.h"
#include "opreg/ops.h"

namespace opreg::bench {

// Exits the program with the runtime's message when err is not success.
void gpu_check(gpuError_t err, const char* what);

// Process-wide: the device, the L2 flush buffer, the events, the copy buffers.
struct Gpu {
  Registry& reg = default_registry();
  Device dev = reg.parse_device("cuda:0");
  void* flush = nullptr;
  std::size_t flush_bytes = 256u << 20;
  gpuEvent_t start = nullptr;
  gpuEvent_t stop = nullptr;
  void* copy_src = nullptr;
  void* copy_dst = nullptr;
  std::size_t copy_bytes = 0;
  Gpu();
  void reserve_copy(std::size_t bytes);
  // Milliseconds of f's device work, L2 cold.
  template <class F>
  double time_ms(F&& f) {
    gpu_check(gpuMemsetAsync(flush, 0, flush_bytes, nullptr), "cudaMemsetAsync(flush)");
    gpu_check(gpuEventRecord(start, nullptr), "cudaEventRecord");
    f();
    gpu_check(gpuEventRecord(stop, nullptr), "cudaEventRecord");
    gpu_check(gpuEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    gpu_check(gpuEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms;
  }
};
Gpu& gpu();

// Random values in [-2, 2] (at least 1/64 in magnitude): a host pattern of up to 4 Mi elements
// per (dtype, seed), made once, repeated over the tensor on the device.
void fill_random(Tensor& t, std::uint64_t seed);

double median(std::vector<double> v);

// Timed runs per case, from its bytes: about 4 GB moved, 20 to 200 runs.
int iterations_for(std::uint64_t bytes);

// copy/peak: the 1 GiB device-to-device copy.
void run_peak_copy(benchmark::State& state);

// Registers copy/peak, then calls register_cases, then runs Google Benchmark; exits 0 with a note
// when there is no usable GPU (and the command line is not only listing).
int bench_main(int argc, char** argv, const char* program, void (*register_cases)());

// Runs `work` (which returns an empty string, or why it cannot run) timed, and reports it next to
// a copy of the same bytes.
template <class Work>
void timed(benchmark::State& state, std::uint64_t bytes, Work&& work) {
  Gpu& g = gpu();
  for (int i = 0; i < 3; ++i) {
    const std::string why = work();
    if (!why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
  }
  gpu_check(gpuStreamSynchronize(nullptr), "cudaStreamSynchronize");
  std::vector<double> ms;
  for (auto _ : state) {
    const double t = g.time_ms([&] { work(); });
    state.SetIterationTime(t * 1e-3);
    ms.push_back(t);
  }
  const std::size_t half = static_cast<std::size_t>(bytes / 2);
  g.reserve_copy(half);
  std::vector<double> copy;
  for (std::size_t i = 0; i < std::max<std::size_t>(ms.size(), 20); ++i) {
    copy.push_back(g.time_ms([&] {
      gpu_check(gpuMemcpyAsync(g.copy_dst, g.copy_src, half, gpuMemcpyDefault, nullptr), "cudaMemcpyAsync(copy)");
    }));
  }
  const double t = median(ms);
  const double c = median(copy);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["us"] = t * 1e3;
  state.counters["GBps"] = static_cast<double>(bytes) / (t * 1e6);
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["copy_us"] = c * 1e3;
  state.counters["copy_GBps"] = static_cast<double>(2 * half) / (c * 1e6);
  state.counters["of_copy"] = c / t;
}

}  // namespace opreg::bench
