// The launchers of the cuda layer_norm and group_norm kernels (norm/kernels.cu), callable from
// plain C++. Both ops are one normalisation over `sets` contiguous sets of channels x spread
// elements (src/ops/families.h's NormSets): layer_norm's rows, group_norm's (n, group) pairs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda_like/gpu_vendor.h"
#include "ops/families.h"

namespace opreg::cuda_like {

inline constexpr int kNormThreads = 256;

// A block per set, the grid walking the sets (any count: N x groups past 65535 included).
struct NormLaunch {
  int grid = 0;
  // Backward: where dweight and dbias are summed before the finisher adds their rows in order.
  // per_channel: one row per batch item n of per-channel sums (spread > 1: each set reduces its
  // channels); else one row per block of per-parameter sums (spread 1: layer_norm).
  bool per_channel = false;
  std::int64_t partials = 0;   // rows of partial sums (each `params` doubles), per output
  std::int64_t params = 0;     // channels of the whole op (H, or C)
  std::size_t workspace = 0;   // bytes: dweight's rows, then dbias's
};

NormLaunch plan_norm(const family::NormSets& shape, int sm_count, bool backward);

gpuError_t launch_norm_fwd(const family::NormFwd& d, const NormLaunch& l, gpuStream_t stream);
// `workspace`: l.workspace bytes; dweight and dbias are finished from it (same stream).
gpuError_t launch_norm_bwd(const family::NormBwd& d, const NormLaunch& l, void* workspace, gpuStream_t stream);

}  // namespace opreg::cuda_like
