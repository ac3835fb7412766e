// The default benchmark clock and bandwidth ceiling of every backend (opreg/device.h): the host's
// wall clock around synchronized work, and a timed copy on the device. Backends with a better
// clock (CUDA events) or a modelled device (the npu emulator) override them.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>

#include "opreg/device.h"
#include "opreg/error.h"

namespace opreg {
namespace {

class WallTimer final : public KernelTimer {
 public:
  WallTimer(Backend& backend, int index, void* stream) : backend_(backend), index_(index), stream_(stream) {}
  void start() override {
    backend_.synchronize(index_, stream_);  // earlier work (the poison, a copy) is not counted
    start_ = std::chrono::steady_clock::now();
  }
  double stop_us() override {
    backend_.synchronize(index_, stream_);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
  }
  std::string method() const override { return "wall clock"; }

 private:
  Backend& backend_;
  int index_;
  void* stream_;
  std::chrono::steady_clock::time_point start_;
};

// Device memory held for the ceiling's copy, given back however the measurement ends.
struct DeviceBuffer {
  Backend& backend;
  int index;
  std::size_t bytes;
  void* data = nullptr;
  DeviceBuffer(Backend& b, int i, std::size_t n) : backend(b), index(i), bytes(n), data(b.allocate(i, n)) {}
  ~DeviceBuffer() { backend.deallocate(index, data, bytes); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

std::unique_ptr<KernelTimer> Backend::make_timer(int index, void* stream) {
  return std::make_unique<WallTimer>(*this, index, stream);
}

BandwidthCeiling Backend::bandwidth_ceiling(int index) {
  // 128 MiB: well past every last-level cache and L2 these backends run on (H100: 50 MiB), so the
  // copy streams memory; the best of a few runs is what the memory can do.
  constexpr std::size_t kBytes = std::size_t{128} << 20;
  constexpr int kRuns = 5;
  void* stream = default_stream(index);
  try {
    const DeviceBuffer src(*this, index, kBytes);
    const DeviceBuffer dst(*this, index, kBytes);
    const unsigned char pattern = 0x3C;
    fill(index, src.data, kBytes, &pattern, 1, stream);
    fill(index, dst.data, kBytes, &pattern, 1, stream);  // first touch outside the clock
    auto timer = make_timer(index, stream);
    double best_us = 0;
    for (int run = 0; run < kRuns; ++run) {
      timer->prepare();
      timer->start();
      copy_on_device(index, dst.data, src.data, kBytes, stream);
      const double us = timer->stop_us();
      if (us > 0 && (best_us == 0 || us < best_us)) best_us = us;
    }
    BandwidthCeiling ceiling;
    ceiling.gbps = best_us > 0 ? 2.0 * static_cast<double>(kBytes) / (best_us * 1e3) : 0.0;
    ceiling.method = fmt::format("copy on device of 128 MiB (read + write), {}, best of {}", timer->method(), kRuns);
    ceiling.estimate = timer->estimate();
    return ceiling;
  } catch (const Error& e) {
    return {0.0, fmt::format("unknown: the 128 MiB copy failed: {}", e.what()), false};
  }
}

}  // namespace opreg
