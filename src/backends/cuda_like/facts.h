// What the cuda variants' plans read of a device: the cuda backend's device facts
// (DeviceProps::facts), read once when the backend is registered, so that nothing parses
// DeviceProps::extra on a call. Plain C++: the .cu files see it too.
#pragma once

#include <cstddef>

namespace opreg::cuda_like {

struct GpuInfo {
  int device = 0;
  int sm_count = 1;
  int cc_major = 0;
  std::size_t smem_optin = 48 * 1024;  // dynamic shared memory a block may opt in to
};

}  // namespace opreg::cuda_like
