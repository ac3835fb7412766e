// The seam between the cuda rms_norm variants (list.cpp: choice, plans, workspace, errors) and
// their kernels (rows.cu, split.cu). Plain C++ on the host side, so the .cu files need no opreg
// header and the .cpp no CUDA compiler.
//
// Each kernel family has a plan_* function (launch geometry: block, grid from the occupancy of
// the exact instantiation, shared memory, the workspace it needs) and a launch_* function that
// enqueues it on a stream. Both return the runtime's error code and leave the failing call and
// the kernel's name in Launch, so the caller can say which call failed in which kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/gpu_vendor.h"
#include "ops/families.h"

namespace opreg::cuda_like {

// Threads of a warp, which the kernels' reductions and the plans' rounding agree on.
#if defined(OPREG_USE_HIP)
inline constexpr int kWarpSize = 64;
#else
inline constexpr int kWarpSize = 32;
#endif

// The kernels take the row-norm family's descriptors (src/ops/families.h): eps and offset are
// doubles there and used as floats here, as the kernels compute.
using family::Elem;
using family::Mode;
using family::RowNormBwd;
using family::RowNormFwd;

inline constexpr int elem_bytes(Elem e) { return e == Elem::f32 ? 4 : 2; }
// Elements of x in one 16-byte access.
inline constexpr int vec_of(Elem e) { return 16 / elem_bytes(e); }

// How a row is spread over threads: `tpr` threads per row, each holding `nv` accesses of `vec`
// elements (vec = 16 bytes' worth when every row is 16-byte aligned, else 1), `slots` rows per
// block (tpr <= warp when slots > 1). For the cluster kernels, `cluster` blocks share a row.
struct RowShape {
  int vec = 1;
  int nv = 1;
  int tpr = 32;
  int slots = 1;
  int cluster = 1;
  int per_sm = 0;     // blocks per multiprocessor in the persistent grid; 0: as many as fit; < 0: not persistent
  int stages = 0;     // rows kernels: rows staged in shared memory ahead of use (16-byte path); 0: in registers
  bool hold = false;  // backward, 16-byte path: the scales held in shared memory for the launch
};

// Accesses per thread of the cluster launches (fixed: one instantiation each).
inline constexpr int kClusterFwdNv = 4;
inline constexpr int kClusterBwdNv = 2;

// The register budget of each instantiation (its __launch_bounds__), which both sides must agree
// on (measured with ptxas -v for sm_90). The row kernels stage their data in shared memory, so a
// thread's registers hold only transient values and, backward, its dW sums: one per column for
// 16-bit inputs, two (compensated) for f32. 32 or more columns a thread spill at the 64 registers
// of a 1024-thread block.
constexpr int max_threads_fwd(int /*nv*/, int /*vec*/) { return 1024; }
constexpr int max_threads_bwd(int nv, int vec) { return nv * vec >= 32 ? 512 : 1024; }

// Bytes of shared memory a block's held scales take (f32, per thread per access).
constexpr std::size_t held_scale_bytes(int nv, int vec, int threads) {
  return static_cast<std::size_t>(nv) * static_cast<std::size_t>(vec) * 4u * static_cast<std::size_t>(threads);
}

// Bytes of shared memory one stage of a row kernel's block takes (x, and backward dy).
constexpr std::size_t stage_bytes(bool backward, int nv, int threads) {
  return static_cast<std::size_t>(backward ? 2 : 1) * static_cast<std::size_t>(nv) * static_cast<std::size_t>(threads) *
         16u;
}

struct Launch {
  int grid = 0;               // blocks
  int threads = 0;            // per block
  std::size_t smem = 0;       // dynamic shared memory per block
  std::int64_t partials = 0;  // rows of dW partials the kernel writes (bwd)
  std::size_t workspace = 0;  // bytes of workspace the launch needs
  int chunks = 1;             // split kernels: column chunks per row
  const char* kernel = "";    // the kernel family, for error messages
  const char* call = "";      // the runtime call that failed
};

// Bytes of one dW partial: f64 for f32 inputs (a compensated sum's two parts, added exactly, so
// partials that cancel keep f32 accuracy), f32 for 16-bit ones.
inline std::size_t partial_bytes(Elem x_type) { return x_type == Elem::f32 ? sizeof(double) : sizeof(float); }

// ---- The row in one block, or in a thread-block cluster (RowShape::cluster > 1; sm_90 and
// later, CUDA only), staged in shared memory (rows.cu).
bool cluster_kernels_built();
gpuError_t plan_fwd_rows(const RowNormFwd& p, const RowShape& s, const GpuInfo& g, Launch& l);
gpuError_t launch_fwd_rows(const RowNormFwd& p, const RowShape& s, const Launch& l, gpuStream_t stream);
gpuError_t plan_bwd_rows(const RowNormBwd& p, const RowShape& s, const GpuInfo& g, Launch& l);
// `partial`: l.partials x hidden dW partials of partial_bytes(x type) each (unused without dweight).
gpuError_t launch_bwd_rows(const RowNormBwd& p, const RowShape& s, const Launch& l, void* partial,
                           gpuStream_t stream);

// ---- Any row length: two kernels over column chunks, the row sum between them through the
// workspace (split.cu). `vec` as in RowShape; the rest is fixed.
gpuError_t plan_fwd_split(const RowNormFwd& p, int vec, const GpuInfo& g, Launch& l);
gpuError_t launch_fwd_split(const RowNormFwd& p, int vec, const Launch& l, void* workspace, gpuStream_t stream);
gpuError_t plan_bwd_split(const RowNormBwd& p, int vec, const GpuInfo& g, Launch& l);
// The workspace holds the per-chunk sums, then l.partials x hidden dW partials; `partial` is
// where those start.
gpuError_t launch_bwd_split(const RowNormBwd& p, int vec, const Launch& l, void* workspace, void** partial,
                            gpuStream_t stream);

// ---- dweight = the column sums of `partials` x hidden partials (of the backward of x type
// `xt`), in a fixed order (deterministic).
gpuError_t launch_dw_finish(const void* partial, Elem xt, std::int64_t partials, std::int64_t hidden, void* dweight,
                            Elem wt, gpuStream_t stream, Launch& l);

}  // namespace opreg::cuda_like
