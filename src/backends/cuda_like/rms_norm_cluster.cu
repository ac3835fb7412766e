// rms_norm with a row split over a thread-block cluster (cuda.rms_norm.{fwd,bwd}.cluster; sm_90).
//
// For rows longer than one block holds in registers, or too few rows to fill the device: the
// `csize` blocks of a cluster each keep a contiguous slice of the row in registers (16-byte
// accesses), reduce it within the block, publish the block's partial sum in shared memory, and
// after one cluster barrier every block reads all csize partials through distributed shared
// memory in rank order (the same total, bit for bit, in every block). The row is read once.
// Grid: as many clusters as are co-resident, each looping over rows, so the backward keeps its
// slice's dW sums in registers for the whole launch and writes one partial row per cluster.
#include "backends/cuda_like/rms_norm_device.cuh"

#if OPREG_GPU_CLUSTERS
#include <cooperative_groups.h>
#endif

namespace opreg::cuda_like {

#if OPREG_GPU_CLUSTERS
namespace {

using namespace dev;
namespace cg = cooperative_groups;

// Fixed per direction (see the launch header's register budget): a forward thread holds 4
// accesses, a backward thread 2, at up to 1024 threads a block.
constexpr int kFwdNv = 4;
constexpr int kBwdNv = 2;

// The row total of a per-block partial: published in `slot` (two, alternating per row, so one
// cluster barrier per row suffices: a block can only overwrite a slot after every block passed
// the next row's barrier, i.e. finished reading it), then read from every block in rank order.
OPREG_DEV float cluster_total(float block_part, float* slot, int csize) {
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) *slot = block_part;
  cluster.sync();
  float total = 0.0f;
  for (int r = 0; r < csize; ++r) total += *cluster.map_shared_rank(slot, r);
  return total;
}

template <class X, class W, int VEC>
__global__ void __launch_bounds__(max_threads_fwd(kFwdNv, VEC)) fwd_cluster_kernel(RmsFwdParams p, int csize) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();
#else
  using XT = typename X::T;
  using WT = typename W::T;
  constexpr int NV = kFwdNv;
  __shared__ float red[kRedFloats];
  __shared__ float slots[2];
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const int tpr = static_cast<int>(blockDim.x);
  const int rank = static_cast<int>(cg::this_cluster().block_rank());
  const int nvec = static_cast<int>(p.hidden / VEC);
  // This block's slice of the row: accesses [first, first + tpr * NV).
  const int first = rank * tpr * NV;
  const int lane = first + static_cast<int>(threadIdx.x);
  const int mine = accesses(lane, tpr, nvec, NV);
  const bool gemma = p.casting == Cast::gemma;
  const bool round_w = p.casting == Cast::none;
  const std::int64_t clusters = gridDim.x / csize;
  int parity = 0;
  for (std::int64_t row = blockIdx.x / csize; row < p.rows; row += clusters, parity ^= 1) {
    const XT* __restrict__ x = static_cast<const XT*>(p.x) + row * p.hidden + lane * VEC;
    Pack<X, VEC> xv[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < mine) xv[k] = load_pack<X, VEC>(x + k * tpr * VEC);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < mine) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float f = X::load(xv[k].v[e]);
          ss += f * f;
        }
      }
    }
    ss = cluster_total(row_sum(ss, tpr, red, parity), &slots[parity], csize);
    const float mean = p.hidden > 0 ? ss / static_cast<float>(p.hidden) : 0.0f;
    const float rstd = 1.0f / sqrtf(mean + p.eps);
    XT* __restrict__ y = static_cast<XT*>(p.y) + row * p.hidden + lane * VEC;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < mine) {
        float s[VEC];
        load_scale<W, VEC>(w, (lane + k * tpr) * VEC, p.offset, round_w, s);
        Pack<X, VEC> out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) out.v[e] = X::store(xhat_of<X>(X::load(xv[k].v[e]), rstd, gemma) * s[e]);
        store_pack<X, VEC>(y + k * tpr * VEC, out);
      }
    }
    if (rank == 0 && threadIdx.x == 0) p.rstd[row] = rstd;
  }
  // No block may leave while another can still read its shared memory.
  cg::this_cluster().sync();
#endif
}

template <class X, class W, int VEC>
__global__ void __launch_bounds__(max_threads_bwd(kBwdNv, VEC)) bwd_cluster_kernel(RmsBwdParams p, int csize,
                                                                                  float* partial) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();
#else
  using XT = typename X::T;
  using WT = typename W::T;
  constexpr int NV = kBwdNv;
  __shared__ float red[kRedFloats];
  __shared__ float slots[2];
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const int tpr = static_cast<int>(blockDim.x);
  const int rank = static_cast<int>(cg::this_cluster().block_rank());
  const int nvec = static_cast<int>(p.hidden / VEC);
  const int first = rank * tpr * NV;
  const int lane = first + static_cast<int>(threadIdx.x);
  const int mine = accesses(lane, tpr, nvec, NV);
  const bool gemma = p.casting == Cast::gemma;
  const bool round_w = p.casting == Cast::none;
  const bool want_dw = partial != nullptr;
  const float inv_h = p.hidden > 0 ? 1.0f / static_cast<float>(p.hidden) : 0.0f;
  const std::int64_t clusters = gridDim.x / csize;
  DwSum<X> acc[NV][VEC];
  int parity = 0;
  for (std::int64_t row = blockIdx.x / csize; row < p.rows; row += clusters, parity ^= 1) {
    const std::int64_t at = row * p.hidden + lane * VEC;
    const XT* __restrict__ x = static_cast<const XT*>(p.x) + at;
    const XT* dy = static_cast<const XT*>(p.dy) + at;  // may be dx
    Pack<X, VEC> xv[NV];
    Pack<X, VEC> dyv[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < mine) {
        xv[k] = load_pack<X, VEC>(x + k * tpr * VEC);
        dyv[k] = load_pack<X, VEC>(dy + k * tpr * VEC);
      }
    }
    const float rstd = p.rstd[row];
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < mine) {
        float s[VEC];
        load_scale<W, VEC>(w, (lane + k * tpr) * VEC, p.offset, round_w, s);
#pragma unroll
        for (int e = 0; e < VEC; ++e) dot += X::load(dyv[k].v[e]) * s[e] * X::load(xv[k].v[e]);
      }
    }
    dot = cluster_total(row_sum(dot, tpr, red, parity), &slots[parity], csize);
    const float coeff = rstd * rstd * rstd * dot * inv_h;
    XT* dx = static_cast<XT*>(p.dx) + at;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < mine) {
        float s[VEC];
        load_scale<W, VEC>(w, (lane + k * tpr) * VEC, p.offset, round_w, s);
        Pack<X, VEC> out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xf = X::load(xv[k].v[e]);
          const float dyf = X::load(dyv[k].v[e]);
          out.v[e] = X::store(rstd * dyf * s[e] - coeff * xf);
          if (want_dw) acc[k][e].add(dyf * xhat_of<X>(xf, rstd, gemma));
        }
        store_pack<X, VEC>(dx + k * tpr * VEC, out);
      }
    }
  }
  if (want_dw) {
    let_next_kernel_launch();
    float* out = partial + static_cast<std::int64_t>(blockIdx.x / csize) * p.hidden + lane * VEC;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < mine) {
        Pack<F32, VEC> pv;
#pragma unroll
        for (int e = 0; e < VEC; ++e) pv.v[e] = acc[k][e].value();
        store_pack<F32, VEC>(out + k * tpr * VEC, pv);
      }
    }
  }
  cg::this_cluster().sync();
#endif
}

template <class Kernel>
gpuError_t plan_cluster(Kernel kernel, std::int64_t rows, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.threads = s.tpr;
  l.smem = 0;
  gpuLaunchConfig_t config{};
  gpuLaunchAttribute attr{};
  attr.id = gpuLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(s.cluster);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  config.gridDim = dim3(static_cast<unsigned>(s.cluster) * static_cast<unsigned>(g.sm_count));
  config.blockDim = dim3(static_cast<unsigned>(s.tpr));
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  l.call = "cudaOccupancyMaxActiveClusters";
  if (gpuError_t err = gpuOccupancyMaxActiveClusters(&clusters, kernel, &config); err != gpuSuccess) return err;
  if (clusters < 1) clusters = 1;
  const std::int64_t n = rows < clusters ? rows : clusters;
  l.grid = static_cast<int>((n < 1 ? 1 : n) * s.cluster);
  return gpuSuccess;
}

template <class Kernel, class... Args>
gpuError_t launch_cluster(Kernel kernel, const RowShape& s, const Launch& l, gpuStream_t stream, Args... args) {
  gpuLaunchConfig_t config{};
  gpuLaunchAttribute attr{};
  attr.id = gpuLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(s.cluster);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  config.gridDim = dim3(static_cast<unsigned>(l.grid));
  config.blockDim = dim3(static_cast<unsigned>(l.threads));
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  return gpuLaunchKernelEx(&config, kernel, args...);
}

template <class F>
gpuError_t with_fwd_kernel(const RmsFwdParams& p, F&& f) {
  return with_types(p.xt, p.wt, [&](auto xe, auto we) {
    using X = decltype(xe);
    return f(fwd_cluster_kernel<X, decltype(we), 16 / sizeof(typename X::T)>);
  });
}
template <class F>
gpuError_t with_bwd_kernel(const RmsBwdParams& p, F&& f) {
  return with_types(p.xt, p.wt, [&](auto xe, auto we) {
    using X = decltype(xe);
    return f(bwd_cluster_kernel<X, decltype(we), 16 / sizeof(typename X::T)>);
  });
}

}  // namespace

bool cluster_kernels_built() { return true; }

gpuError_t plan_fwd_cluster(const RmsFwdParams& p, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.kernel = "rms_norm_fwd_cluster";
  return with_fwd_kernel(p, [&](auto kernel) { return plan_cluster(kernel, p.rows, s, g, l); });
}
gpuError_t launch_fwd_cluster(const RmsFwdParams& p, const RowShape& s, const Launch& l, gpuStream_t stream) {
  return with_fwd_kernel(p, [&](auto kernel) { return launch_cluster(kernel, s, l, stream, p, s.cluster); });
}
gpuError_t plan_bwd_cluster(const RmsBwdParams& p, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.kernel = "rms_norm_bwd_cluster";
  return with_bwd_kernel(p, [&](auto kernel) -> gpuError_t {
    if (gpuError_t err = plan_cluster(kernel, p.rows, s, g, l); err != gpuSuccess) return err;
    l.partials = p.dweight != nullptr ? l.grid / s.cluster : 0;
    l.workspace = static_cast<std::size_t>(l.partials) * static_cast<std::size_t>(p.hidden) * sizeof(float);
    return gpuSuccess;
  });
}
gpuError_t launch_bwd_cluster(const RmsBwdParams& p, const RowShape& s, const Launch& l, float* partial,
                              gpuStream_t stream) {
  return with_bwd_kernel(p, [&](auto kernel) {
    return launch_cluster(kernel, s, l, stream, p, s.cluster, p.dweight != nullptr ? partial : nullptr);
  });
}

#else  // no clusters (HIP): the variant is not registered; these are never called.

bool cluster_kernels_built() { return false; }
gpuError_t plan_fwd_cluster(const RmsFwdParams&, const RowShape&, const GpuInfo&, Launch&) { return gpuErrorNotSupported; }
gpuError_t launch_fwd_cluster(const RmsFwdParams&, const RowShape&, const Launch&, gpuStream_t) { return gpuErrorNotSupported; }
gpuError_t plan_bwd_cluster(const RmsBwdParams&, const RowShape&, const GpuInfo&, Launch&) { return gpuErrorNotSupported; }
gpuError_t launch_bwd_cluster(const RmsBwdParams&, const RowShape&, const Launch&, float*, gpuStream_t) {
  return gpuErrorNotSupported;
}

#endif

}  // namespace opreg::cuda_like
