// The xpu rms_norm on PoCL's OpenCL CPU device (emulated: a CPU running GPU-style OpenCL C, not
// an Intel GPU) beside the cpu backend's rms_norm on the same host, shapes 4096 x 1024..16384,
// f32 and bf16, forward and backward, through the public entry points and the default registry.
// Bytes per second of the byte model (opreg::bytes_moved); wall clock, each xpu call followed
// by a synchronize of its queue (the OpenCL launch is asynchronous).
//
// The xpu device's context (program build and kernel warm-up) is made when the first tensor is
// allocated on it, before any timing; the counter first_call_us is the first call after that,
// timed alone, so a compile that leaked into a first call would show there.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "opreg/ops.h"
#include "bench_xpu_common.h"
#include "opreg/registry.h"
#include "ops/problem.h"

namespace {

using namespace opreg;
using opreg::bench::xpu_cpu_device;

// The inputs are the shared problem machinery's (seeded, the same on both devices); a backward
// problem's statistics come from the reference forward.
void run_rms(benchmark::State& state, Device device, Direction direction, Shape shape, DType dtype) {
  ProblemSpec spec;
  spec.op = direction == Direction::fwd ? "rms_norm.fwd" : "rms_norm.bwd";
  spec.dtype = dtype;
  spec.wdtype = dtype;
  spec.shape = shape;
  Problem p(default_registry(), spec, device);
  const auto start = std::chrono::steady_clock::now();
  const VariantInfo* variant = p.run().variant;
  p.synchronize();
  const double first_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  for (auto _ : state) {
    variant = p.run().variant;
    p.synchronize();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(p.bytes()) * state.iterations());
  state.counters["first_call_us"] = first_us;
  state.SetLabel(default_registry().device_label(device) + " " + (variant != nullptr ? variant->name : "?"));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Device xpu;
  if (!xpu_cpu_device(&xpu)) {
    std::fprintf(stderr, "bench_xpu_rms_norm: no xpu OpenCL CPU device (PoCL) here; see `opreg devices`\n");
    return 3;
  }
  for (const Direction direction : {Direction::fwd, Direction::bwd}) {
    for (const DType dtype : {DType::f32, DType::bf16}) {
      for (const std::int64_t hidden : {1024, 2048, 4096, 8192, 16384}) {
        const Shape shape{4096, hidden};
        for (const auto& [tag, device] : {std::pair<const char*, Device>{"xpu_emulated", xpu}, {"cpu", Device{}}}) {
          const std::string name = std::string(tag) + "/" + std::string(to_string(direction)) + "/" +
                                   std::string(to_string(dtype)) + "/" + shape.str();
          benchmark::RegisterBenchmark(name.c_str(), run_rms, device, direction, shape, dtype)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
