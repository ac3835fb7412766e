// The launchers of the cuda layer_norm and group_norm kernels (norm/kernels.cu), callable from
// plain C++. Both ops are one normalisation over `sets` contiguous sets of channels x spread
// elements (src/ops/families.h's NormSets): layer_norm's rows, group_norm's (n, group) pairs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda_like/facts.h"
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
  std::int64_t partials = 0;  // rows of partial sums (each `params` doubles), per output
  std::int64_t params = 0;    // channels of the whole op (H, or C)
  std::size_t workspace = 0;  // bytes: dweight's rows, then dbias's
};

NormLaunch plan_norm(const family::NormSets& shape, int sm_count, bool backward);

gpuError_t launch_norm_fwd(const family::NormFwd& d, const NormLaunch& l, gpuStream_t stream);
// `workspace`: l.workspace bytes; dweight and dbias are finished from it (same stream).
gpuError_t launch_norm_bwd(const family::NormBwd& d, const NormLaunch& l, void* workspace, gpuStream_t stream);

// ---- layer_norm with the row held on chip (norm/rows.cu, cuda.layer_norm.{fwd,bwd}.rows): a row
// is spread over `tpr` threads, each holding `nv` accesses of `vec` elements in registers (16
// bytes' worth when every row of every tensor is 16-byte aligned, else 1), `slots` = 256 / tpr rows a
// block when a row takes fewer than 256 threads. The instantiations: the 16-byte path takes nv 4 or 8
// forward and 1, 2 or 4 backward; the 1-element path nv 8 either way.
struct LnRowsShape {
  int vec = 1;
  int nv = 8;
  int tpr = 32;
  int slots = 1;
};
inline constexpr int kLnScalarNv = 8;
// The register budget of each instantiation (its __launch_bounds__), which the plans and the
// kernels agree on (ptxas -v, sm_90): the backward holds dweight and dbias sums per column (f64
// for f32 inputs), so past 32 bytes of them a thread it takes 512-thread blocks (128 registers a
// thread); the forward's 8 accesses of 16 bytes spill a few bytes at 1024 threads.
constexpr int ln_max_threads(bool backward, int nv, int vec, int x_bytes) {
  return backward && nv * vec * (x_bytes == 4 ? 8 : 4) > 32 ? 512 : 1024;
}

struct LnRowsLaunch {
  LnRowsShape shape;
  int grid = 0;
  int threads = 0;
  std::size_t smem = 0;       // backward with several rows a block: the slots' sums added in order
  std::int64_t partials = 0;  // backward: rows of dweight (and of dbias) partial sums, one a block
  std::size_t workspace = 0;  // backward: bytes; dweight's partials, then dbias's
};

// The launch geometry of a shape: the forward a block per row group; the backward a persistent
// grid from the instantiation's occupancy on the device.
gpuError_t plan_ln_rows(const family::NormSets& shape, family::Elem x_type, family::Elem p_type, bool backward,
                        bool partial_sums, const LnRowsShape& s, const GpuInfo& g, LnRowsLaunch& l);
gpuError_t launch_ln_rows_fwd(const family::NormFwd& d, const LnRowsLaunch& l, gpuStream_t stream);
// `workspace`: l.workspace bytes; dweight and dbias are finished from it (same stream).
gpuError_t launch_ln_rows_bwd(const family::NormBwd& d, const LnRowsLaunch& l, void* workspace, gpuStream_t stream);

// ---- A set spread over several blocks (norm/split.cu, cuda.{layer_norm,group_norm}.{fwd,bwd}.split):
// chunks of columns (layer_norm) or of whole channels (group_norm), blocks (chunk, set group), two
// kernels a direction with per-(set, chunk) f64 sums between them.
inline constexpr int kNormSplitThreads = 256;
inline constexpr int kNormSplitFwdNv = 4;  // accesses a thread a forward chunk (a backward one: 2)
// Chunks of whole channels (group_norm's channels, or its groups' weight slices), else of columns
// (layer_norm, and group_norm with one group of single-element channels).
constexpr bool norm_split_channel_chunks(const family::NormSets& s) { return s.spread > 1 || s.groups > 1; }
struct NormSplitLaunch {
  int vec = 1;                  // elements an access: 16 bytes' worth when aligned (NormSets' rule), else 1
  bool channel_chunks = false;  // chunks of whole channels (spread > 1 or groups > 1), else of columns
  std::int64_t chunk = 0;       // columns, or channels, a chunk
  std::int64_t chunks = 0;      // a set's
  std::int64_t walkers = 0;     // set groups: block (chunk, w) takes sets w, w + walkers, ...
  int grid = 0;
  std::int64_t partials = 0;  // backward: rows of dweight (and dbias) sums: walkers (columns) or N (channels)
  std::int64_t params = 0;    // their width: groups x channels
  std::size_t sums = 0;       // workspace bytes of the per-(set, chunk) sums, which come first
  std::size_t workspace = 0;  // bytes in all
};
gpuError_t plan_norm_split(const family::NormSets& shape, family::Elem x_type, family::Elem p_type, int vec,
                           bool backward, bool partial_sums, const GpuInfo& g, NormSplitLaunch& l);
gpuError_t launch_norm_split_fwd(const family::NormFwd& d, const NormSplitLaunch& l, void* workspace,
                                 gpuStream_t stream);
// dweight and dbias are finished from the workspace (same stream).
gpuError_t launch_norm_split_bwd(const family::NormBwd& d, const NormSplitLaunch& l, void* workspace,
                                 gpuStream_t stream);

}  // namespace opreg::cuda_like
