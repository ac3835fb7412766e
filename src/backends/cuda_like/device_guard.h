// Device `index` current for a scope, the caller's device restored after it: the cuda backend's
// memory services and kernels never change which device is current for the caller (as PyTorch's
// operations do not), so a tensor on cuda:1 leaves a caller on cuda:0 on cuda:0.
#pragma once

#include "backends/cuda_like/gpu_vendor.h"
#include "registry/fail.h"

namespace opreg::cuda_like {

class CurrentDevice {
 public:
  // error() is the runtime's error when the device could not be selected; the caller reports it
  // in its own words.
  explicit CurrentDevice(int index) noexcept {
    if (gpuGetDevice(&previous_) != gpuSuccess) {
      gpu_clear_error();
      previous_ = -1;
    }
    if (previous_ == index) {
      previous_ = -1;  // nothing to restore
      return;
    }
    error_ = gpuSetDevice(index);
    if (error_ != gpuSuccess) gpu_clear_error();
  }
  ~CurrentDevice() {
    if (previous_ >= 0) (void)gpuSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  gpuError_t error() const { return error_; }

 private:
  int previous_ = -1;
  gpuError_t error_ = gpuSuccess;
};

// A kernel call's device (a variant's run, or a plan that queries the device) is current while it runs (and while a plan queries it); the caller's is
// restored after.
class DeviceGuard {
 public:
  DeviceGuard(int index, const char* variant) : current_(index) {
    if (current_.error() != gpuSuccess) {
      fail(ErrorKind::device, "{} on cuda:{}: cudaSetDevice failed: {}", variant, index,
           gpuGetErrorString(current_.error()));
    }
  }

 private:
  CurrentDevice current_;
};

}  // namespace opreg::cuda_like
