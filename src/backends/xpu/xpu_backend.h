// The xpu backend: OpenCL devices through the ICD loader. Intel GPUs are real xpu devices;
// OpenCL CPU devices (PoCL) are listed as emulated and run only when named.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/xpu/runtime.h"
#include "opreg/device.h"
#include "opreg/registry.h"

namespace opreg::xpu {

// Device properties the kernels are sized by (shown by `opreg devices`; the variants read them
// from the device's facts, its DeviceInfo).
inline constexpr const char* kWorkGroupSizeKey = "work_group_size";
inline constexpr const char* kFusedColumnsKey = "fused_dw_columns";

class XpuBackend final : public Backend {
 public:
  XpuBackend();
  ~XpuBackend() override;

  std::string name() const override { return "xpu"; }
  int inference_priority() const override { return 200; }
  FallbackPolicy default_fallback() const override { return FallbackPolicy::warn; }
  Availability probe() override;
  DeviceProps properties(int index) const override;

  void* allocate(int index, std::size_t bytes) override;
  void deallocate(int index, void* ptr, std::size_t bytes) noexcept override;
  void copy_to_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) override;
  void copy_from_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) override;
  void copy_on_device(int index, void* dst, const void* src, std::size_t bytes, void* stream) override;
  void fill(int index, void* dst, std::size_t bytes, const void* pattern, std::size_t pattern_bytes,
            void* stream) override;
  void synchronize(int index, void* stream) override;
  // Shared virtual memory of an OpenCL context: DLPack's kDLOpenCL.
  int dlpack_device_type() const override { return 4; }
  // No default stream is published: the device's queue exists only once its context is made (the
  // first use of the device), and a nullptr stream means that queue everywhere.

  // The device's context, queue and kernels, made (programs built, kernels warmed) on first use.
  DeviceRuntime& runtime(int index);
  const EnvironmentReport& environment() const { return environment_; }

 private:
  // A mutex rather than std::once_flag: a failed first use (a build error, say) must leave
  // the slot empty for the next call to retry, and call_once with an exception hangs with some
  // libstdc++ versions.
  struct Slot {
    std::mutex mutex;
    std::atomic<DeviceRuntime*> ready{nullptr};
    std::unique_ptr<DeviceRuntime> runtime;
  };
  std::string label(int index) const;
  EnvironmentReport environment_;
  Discovery discovery_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace opreg::xpu
