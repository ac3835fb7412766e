// The cuda backend's runtime glue: device discovery, properties, memory and streams.
// The kernels' variants (rms_norm.cpp) are registered with it.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/builtin.h"
#include "backends/cuda_like/device_guard.h"
#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/gpu_vendor.h"
#include "opreg/registry.h"
#include "registry/fail.h"

namespace opreg {
namespace cuda_like {
// Each family folder's lists (<family>/list.cpp), registered below.
#define OPREG_FAMILY(family) void register_##family(Registry& registry);
#include "families/cuda_like.inc"  // the family folders (cmake/OpregFamilies.cmake)
#undef OPREG_FAMILY
}  // namespace cuda_like
namespace {

using cuda_like::CurrentDevice;

// A failed call also leaves the runtime's last error set: cleared, or the next kernel launch's
// check would report it.
void check(gpuError_t err, const char* what, int index) {
  if (err != gpuSuccess) {
    gpu_clear_error();
    fail(ErrorKind::device, "cuda:{}: {} failed: {}", index, what, gpuGetErrorString(err));
  }
}

// `opreg bench`'s clock: CUDA events recorded on the timed stream around the work, each span
// starting with the L2 flushed (a memset of a buffer larger than any L2, outside the span), as
// bench/bench_cuda_rms_norm.cpp and the peer scripts time.
class EventTimer final : public KernelTimer {
 public:
  EventTimer(int index, void* stream) : index_(index), stream_(static_cast<gpuStream_t>(stream)) {
    const CurrentDevice current(index);
    check(current.error(), "selecting the device", index);
    try {
      check(gpuMalloc(&flush_, kFlushBytes), "allocating the L2 flush buffer", index);
      check(gpuEventCreate(&start_), "creating an event", index);
      check(gpuEventCreate(&stop_), "creating an event", index);
    } catch (...) {
      release();  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  ~EventTimer() override {
    const CurrentDevice current(index_);
    release();
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void prepare() override {
    const CurrentDevice current(index_);
    check(gpuMemsetAsync(flush_, 0, kFlushBytes, stream_), "flushing the L2", index_);
  }
  void start() override {
    const CurrentDevice current(index_);
    check(gpuEventRecord(start_, stream_), "recording an event", index_);
  }
  double stop_us() override {
    const CurrentDevice current(index_);
    check(gpuEventRecord(stop_, stream_), "recording an event", index_);
    check(gpuEventSynchronize(stop_), "waiting for an event", index_);
    float ms = 0;
    check(gpuEventElapsedTime(&ms, start_, stop_), "reading an event time", index_);
    return static_cast<double>(ms) * 1e3;
  }
  std::string method() const override { return "cuda events, L2 flushed"; }

 private:
  void release() noexcept {
    if (start_ != nullptr) (void)gpuEventDestroy(start_);
    if (stop_ != nullptr) (void)gpuEventDestroy(stop_);
    if (flush_ != nullptr) (void)gpuFree(flush_);
    start_ = stop_ = nullptr;
    flush_ = nullptr;
  }
  static constexpr std::size_t kFlushBytes = std::size_t{256} << 20;  // > any L2 (H100: 50 MiB)
  int index_;
  gpuStream_t stream_;
  void* flush_ = nullptr;
  gpuEvent_t start_ = nullptr;
  gpuEvent_t stop_ = nullptr;
};

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override { release_workspaces(); }
  std::string name() const override { return "cuda"; }
  int inference_priority() const override { return 400; }
  FallbackPolicy default_fallback() const override { return FallbackPolicy::error; }
  int dlpack_device_type() const override { return OPREG_GPU_DLPACK_DEVICE; }

  Availability probe() override {
    int count = 0;
    gpuError_t err = gpuGetDeviceCount(&count);
    if (err != gpuSuccess) return {false, 0, fmt::format("{}: {}", OPREG_GPU_RUNTIME, gpuGetErrorString(err))};
    if (count == 0) return {false, 0, fmt::format("{}: no device", OPREG_GPU_RUNTIME)};
    int runtime = 0;
    int driver = 0;
    (void)gpuRuntimeGetVersion(&runtime);  // 0 where it cannot say
    (void)gpuDriverGetVersion(&driver);
    facts_.assign(static_cast<std::size_t>(count), {});
    for (int i = 0; i < count; ++i) {
      gpuDeviceProp p{};
      if (gpuGetDeviceProperties(&p, i) != gpuSuccess) {
        gpu_clear_error();
        continue;  // properties() reports it
      }
      facts_[static_cast<std::size_t>(i)] = {i, std::max(p.multiProcessorCount, 1), p.major, gpu_smem_optin(p)};
    }
    return {true, count, fmt::format("{} runtime {}, driver {}", OPREG_GPU_RUNTIME, runtime, driver)};
  }

  DeviceProps properties(int index) const override {
    gpuDeviceProp p{};
    check(gpuGetDeviceProperties(&p, index), "getting device properties", index);
    DeviceProps props;
    props.name = p.name;
    props.memory_bytes = p.totalGlobalMem;
    props.compute_units = p.multiProcessorCount;
    props.extra = {{"sm_count", std::to_string(p.multiProcessorCount)},
                   {"compute_capability", fmt::format("{}.{}", p.major, p.minor)},
                   {"l2_bytes", std::to_string(p.l2CacheSize)},
                   {"smem_per_block_optin", std::to_string(gpu_smem_optin(p))},
                   {"max_threads_per_block", std::to_string(p.maxThreadsPerBlock)}};
    props.facts = &facts_.at(static_cast<std::size_t>(index));
    return props;
  }

  // Each service makes its device current for its own duration only (CurrentDevice).
  void* allocate(int index, std::size_t bytes) override {
    const CurrentDevice current(index);
    check(current.error(), "selecting the device", index);
    void* p = nullptr;
    gpuError_t err = gpuMalloc(&p, std::max<std::size_t>(bytes, 1));
    if (err != gpuSuccess) {
      gpu_clear_error();
      fail(ErrorKind::device, "cuda:{}: allocating {} bytes failed: {}", index, bytes, gpuGetErrorString(err));
    }
    return p;
  }
  // Free device memory now, for the admission checks (0, i.e. unknown, if the runtime cannot say:
  // the checks then use the device's total).
  std::uint64_t memory_available(int index) override {
    const CurrentDevice current(index);
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    if (current.error() != gpuSuccess || gpuMemGetInfo(&free_bytes, &total_bytes) != gpuSuccess) {
      gpu_clear_error();
      return 0;
    }
    return free_bytes;
  }
  void deallocate(int index, void* ptr, std::size_t) noexcept override {
    const CurrentDevice current(index);
    (void)gpuFree(ptr);
  }
  void copy(int index, void* dst, const void* src, std::size_t bytes, void* stream) {
    if (bytes == 0) return;
    const CurrentDevice current(index);
    check(current.error(), "selecting the device", index);
    auto s = static_cast<gpuStream_t>(stream);
    check(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDefault, s), "copying", index);
    check(gpuStreamSynchronize(s), "synchronizing after a copy", index);
  }
  void copy_to_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) override {
    copy(index, dst, src, bytes, stream);
  }
  void copy_from_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) override {
    copy(index, dst, src, bytes, stream);
  }
  void copy_on_device(int index, void* dst, const void* src, std::size_t bytes, void* stream) override {
    copy(index, dst, src, bytes, stream);
  }
  void fill(int index, void* dst, std::size_t bytes, const void* pattern, std::size_t pattern_bytes,
            void* stream) override {
    if (bytes == 0) return;
    const auto* pat = static_cast<const unsigned char*>(pattern);
    if (std::all_of(pat, pat + pattern_bytes, [&](unsigned char c) { return c == pat[0]; })) {
      const CurrentDevice current(index);
      check(current.error(), "selecting the device", index);
      check(gpuMemsetAsync(dst, pat[0], bytes, static_cast<gpuStream_t>(stream)), "filling", index);
      return;
    }
    // Multi-byte patterns go through a host staging buffer until a fill kernel exists.
    constexpr std::size_t kChunk = 1 << 20;
    std::vector<unsigned char> host(std::min(bytes, kChunk - kChunk % pattern_bytes));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = pat[i % pattern_bytes];
    for (std::size_t done = 0; done < bytes; done += host.size()) {
      copy(index, static_cast<unsigned char*>(dst) + done, host.data(), std::min(host.size(), bytes - done), stream);
    }
  }
  void synchronize(int index, void* stream) override {
    const CurrentDevice current(index);
    check(current.error(), "selecting the device", index);
    check(gpuStreamSynchronize(static_cast<gpuStream_t>(stream)), "synchronizing", index);
  }
  std::unique_ptr<KernelTimer> make_timer(int index, void* stream) override {
    return std::make_unique<EventTimer>(index, stream);
  }

 private:
  std::vector<cuda_like::GpuInfo> facts_;  // per device, from probe()
};

}  // namespace

void register_cuda_like(Registry& registry) {
  registry.add_backend(std::make_shared<CudaBackend>()).release();
  // The op families' lists (each family folder's list.cpp).
#define OPREG_FAMILY(family) cuda_like::register_##family(registry);
#include "families/cuda_like.inc"
#undef OPREG_FAMILY
}

}  // namespace opreg
