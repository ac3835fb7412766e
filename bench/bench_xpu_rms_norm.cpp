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
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "opreg/ops.h"
#include "opreg/registry.h"

namespace {

using namespace opreg;

void fill_pattern(Tensor& t, double scale) {
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = scale * (0.25 + std::fabs(std::sin(0.37 * static_cast<double>(i) + 1.0)));
    store_from_double(t.data(), t.dtype(), static_cast<std::size_t>(i), (i & 1) != 0 ? -v : v);
  }
}

Tensor on(Device device, const Shape& shape, DType dtype, double scale) {
  Tensor host = Tensor::empty(shape, dtype);
  fill_pattern(host, scale);
  return host.to(device);
}

struct RmsProblem {
  Device device;
  RmsNormFwdArgs fwd;
  RmsNormBwdArgs bwd;
  RmsProblem(Device d, const Shape& shape, DType dtype) : device(d) {
    const std::int64_t hidden = shape[shape.ndim() - 1];
    const Shape rows{shape.numel() / hidden};
    fwd.x = on(device, shape, dtype, 1.0);
    fwd.weight = on(device, {hidden}, dtype, 0.5);
    fwd.y = Tensor::empty(shape, dtype, device, default_registry());
    fwd.rstd = Tensor::empty(rows, DType::f32, device, default_registry());
    bwd.dy = on(device, shape, dtype, 0.1);
    bwd.x = fwd.x;
    bwd.weight = fwd.weight;
    bwd.rstd = fwd.rstd;
    bwd.dx = Tensor::empty(shape, dtype, device, default_registry());
    bwd.dweight = Tensor::empty({hidden}, dtype, device, default_registry());
    run(Direction::fwd);  // the statistics the backward consumes
    synchronize();
  }
  const VariantInfo* run(Direction direction) const {
    return (direction == Direction::fwd ? rms_norm_fwd(fwd) : rms_norm_bwd(bwd)).variant;
  }
  void synchronize() const { default_registry().backend(device.backend).synchronize(device.index, nullptr); }
};

void run_rms(benchmark::State& state, Device device, Direction direction, Shape shape, DType dtype) {
  const RmsProblem p(device, shape, dtype);
  const auto start = std::chrono::steady_clock::now();
  const VariantInfo* variant = p.run(direction);
  p.synchronize();
  const double first_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  for (auto _ : state) {
    variant = p.run(direction);
    p.synchronize();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_moved("rms_norm", direction, shape, dtype, dtype)) *
                          state.iterations());
  state.counters["first_call_us"] = first_us;
  state.SetLabel(default_registry().device_label(device) + " " + (variant != nullptr ? variant->name : "?"));
}

// The first OpenCL CPU device of the xpu backend (emulated).
bool xpu_cpu_device(Device* out) {
  for (const auto& b : default_registry().backends()) {
    if (b.name != "xpu") continue;
    for (std::size_t i = 0; i < b.devices.size(); ++i) {
      if (b.devices[i].emulated) {
        *out = Device{b.id, static_cast<std::int16_t>(i)};
        return true;
      }
    }
  }
  return false;
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
