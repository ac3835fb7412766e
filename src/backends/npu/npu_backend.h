// The npu backend's object: host memory as GM, the emulated device behind it, and what the
// backend reports (device properties, the last launch's counters for `opreg run`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/npu/ascend/runtime.h"
#include "backends/npu/lists.h"
#include "backends/npu/profile.h"
#include "opreg/device.h"
#include "opreg/registry.h"

namespace opreg {
class Registry;
}

namespace opreg::npu {

class NpuBackend final : public HostMemoryBackend {
 public:
  // Reads OPREG_NPU_PROFILE / OPREG_NPU_UB_BYTES / OPREG_NPU_MATH / OPREG_NPU_SYNC when probed.
  NpuBackend() = default;
  // A fixed device model, whatever the environment says (tests, benchmarks).
  explicit NpuBackend(DeviceModel model) : fixed_(model) {}

  std::string name() const override { return "npu"; }
  int inference_priority() const override { return 300; }
  FallbackPolicy default_fallback() const override { return FallbackPolicy::warn; }
  std::vector<std::string> env_vars() const override {
    // OPREG_NPU_TRITON_MULTIBUFFER: gpu_port's multi-buffer rule, read by gpu_port.cpp per call.
    return {"OPREG_NPU_PROFILE", "OPREG_NPU_UB_BYTES", "OPREG_NPU_MATH", "OPREG_NPU_SYNC",
            "OPREG_NPU_TRITON_MULTIBUFFER"};
  }
  Availability probe() override;
  DeviceProps properties(int index) const override;
  std::string last_run_note(int index) const override;
  // Benchmarks: the cost model's est_us of the launches in a span (an estimate, not a time the
  // host measured), and the profile's HBM bandwidth as the ceiling.
  std::unique_ptr<KernelTimer> make_timer(int index, void* stream) override;
  BandwidthCeiling bandwidth_ceiling(int index) override;

  // The emulated device (after probe()).
  Emulator& emulator() const { return *emulator_; }

 private:
  std::optional<DeviceModel> fixed_;
  std::unique_ptr<Emulator> emulator_;
};

// The emulator of `registry`'s npu device, or nullptr when the registry has no npu backend.
Emulator* emulator_of(Registry& registry);
// The emulator a kernel call runs on (its context's backend); an internal error, naming the
// variant, when the context is not the npu backend's.
Emulator& emulator_in(const KernelContext& ctx);
// The counters of a call that had nothing to launch (an empty problem), for Emulator::record.
LaunchCounters empty_launch(const std::string& kernel, const Emulator& emulator);

}  // namespace opreg::npu
