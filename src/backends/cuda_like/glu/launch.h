// The launchers of the cuda geglu and swiglu kernels (glu/kernels.cu), callable from plain C++.
#pragma once

#include <cstdint>

#include "backends/cuda_like/gpu_vendor.h"
#include "ops/families.h"

namespace opreg::cuda_like {

enum class GluAct : std::uint8_t { gelu_tanh, silu };

// A grid-stride launch: `blocks` blocks of kGluThreads threads, each thread taking packs of 16
// bytes (vec16) or single elements.
inline constexpr int kGluThreads = 256;
struct GluLaunch {
  bool vec16 = false;
  int blocks = 0;
};

gpuError_t launch_glu_fwd(const family::GluFwd& d, GluAct act, const GluLaunch& l, gpuStream_t stream);
gpuError_t launch_glu_bwd(const family::GluBwd& d, GluAct act, const GluLaunch& l, gpuStream_t stream);

}  // namespace opreg::cuda_like
