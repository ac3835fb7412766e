// rms_norm with the row held in registers (cuda.rms_norm.{fwd,bwd}.rows).
//
// A row is spread over `tpr` threads, each holding `NV` accesses of `VEC` elements (16 bytes when
// every row is 16-byte aligned, else single elements); short rows share a block (`slots` rows of
// tpr <= 32 threads, several rows per warp when tpr < 32). The grid is persistent: as many blocks
// as fit on the device at once, each looping over row groups, so a thread keeps the same columns
// for the whole launch. That is what lets the backward accumulate dW for its columns in registers
// (compensated f32) and write one partial row per block, which launch_dw_finish sums in a fixed
// order: no atomics, the same bits on every run.
//
// x (and dy) are read exactly once: every load of a row is issued before its reduction, and the
// output is computed from the registers. The weight is re-read per row (L1-resident).
#include "backends/cuda_like/rms_norm_device.cuh"

namespace opreg::cuda_like {
namespace {

using namespace dev;

template <class X, class W, int VEC, int NV>
__global__ void __launch_bounds__(max_threads_fwd(NV, VEC)) fwd_rows_kernel(RmsFwdParams p, int tpr, int slots) {
  using XT = typename X::T;
  using WT = typename W::T;
  __shared__ float red[kRedFloats];
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const int slot = static_cast<int>(threadIdx.x) / tpr;
  const int lane = static_cast<int>(threadIdx.x) - slot * tpr;
  // Rows this variant takes are short enough for 32-bit column indices (RowsPlan caps them).
  const int nvec = static_cast<int>(p.hidden / VEC);
  const std::int64_t groups = (p.rows + slots - 1) / slots;
  const bool gemma = p.casting == Cast::gemma;
  const bool round_w = p.casting == Cast::none;
  const int mine = accesses(lane, tpr, nvec, NV);
  int parity = 0;
  for (std::int64_t g = blockIdx.x; g < groups; g += gridDim.x, parity ^= 1) {
    const std::int64_t row = g * slots + slot;
    const int count = row < p.rows ? mine : 0;
    const XT* __restrict__ x = static_cast<const XT*>(p.x) + row * p.hidden + lane * VEC;
    Pack<X, VEC> xv[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) xv[k] = load_pack<X, VEC>(x + k * tpr * VEC);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float f = X::load(xv[k].v[e]);
          ss += f * f;
        }
      }
    }
    ss = row_sum(ss, tpr, red, parity);
    const float mean = p.hidden > 0 ? ss / static_cast<float>(p.hidden) : 0.0f;
    const float rstd = 1.0f / sqrtf(mean + p.eps);
    XT* __restrict__ y = static_cast<XT*>(p.y) + row * p.hidden + lane * VEC;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        float s[VEC];
        load_scale<W, VEC>(w, (lane + k * tpr) * VEC, p.offset, round_w, s);
        Pack<X, VEC> out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) out.v[e] = X::store(xhat_of<X>(X::load(xv[k].v[e]), rstd, gemma) * s[e]);
        store_pack<X, VEC>(y + k * tpr * VEC, out);
      }
    }
    if (row < p.rows && lane == 0) p.rstd[row] = rstd;
  }
}

// Shared memory: the reduction buffer, then (slots > 1) `hidden` floats where the slots' dW
// partials are added in slot order.
template <class X, class W, int VEC, int NV>
__global__ void __launch_bounds__(max_threads_bwd(NV, VEC)) bwd_rows_kernel(RmsBwdParams p, int tpr, int slots,
                                                                           float* partial) {
  using XT = typename X::T;
  using WT = typename W::T;
  extern __shared__ float smem[];
  float* red = smem;
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const int slot = static_cast<int>(threadIdx.x) / tpr;
  const int lane = static_cast<int>(threadIdx.x) - slot * tpr;
  const int nvec = static_cast<int>(p.hidden / VEC);
  const std::int64_t groups = (p.rows + slots - 1) / slots;
  const bool gemma = p.casting == Cast::gemma;
  const bool round_w = p.casting == Cast::none;
  const bool want_dw = partial != nullptr;
  const float inv_h = p.hidden > 0 ? 1.0f / static_cast<float>(p.hidden) : 0.0f;
  const int mine = accesses(lane, tpr, nvec, NV);
  DwSum<X> acc[NV][VEC];
  int parity = 0;
  for (std::int64_t g = blockIdx.x; g < groups; g += gridDim.x, parity ^= 1) {
    const std::int64_t row = g * slots + slot;
    const int count = row < p.rows ? mine : 0;
    const std::int64_t at = row * p.hidden + lane * VEC;
    const XT* __restrict__ x = static_cast<const XT*>(p.x) + at;
    const XT* dy = static_cast<const XT*>(p.dy) + at;  // may be dx: no __restrict__
    Pack<X, VEC> xv[NV];
    Pack<X, VEC> dyv[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        xv[k] = load_pack<X, VEC>(x + k * tpr * VEC);
        dyv[k] = load_pack<X, VEC>(dy + k * tpr * VEC);
      }
    }
    const float rstd = count > 0 ? p.rstd[row] : 0.0f;
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        float s[VEC];
        load_scale<W, VEC>(w, (lane + k * tpr) * VEC, p.offset, round_w, s);
#pragma unroll
        for (int e = 0; e < VEC; ++e) dot += X::load(dyv[k].v[e]) * s[e] * X::load(xv[k].v[e]);
      }
    }
    dot = row_sum(dot, tpr, red, parity);
    const float coeff = rstd * rstd * rstd * dot * inv_h;
    XT* dx = static_cast<XT*>(p.dx) + at;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
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
  if (!want_dw) return;
  float* out = partial + static_cast<std::int64_t>(blockIdx.x) * p.hidden + lane * VEC;
  if (slots == 1) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < mine) {
        Pack<F32, VEC> pv;
#pragma unroll
        for (int e = 0; e < VEC; ++e) pv.v[e] = acc[k][e].value();
        store_pack<F32, VEC>(out + k * tpr * VEC, pv);
      }
    }
    return;
  }
  // Several rows per block: their columns coincide; add the slots in order.
  float* combine = smem + kRedFloats;
  for (int s = 0; s < slots; ++s) {
    if (slot == s) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < mine) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const int c = (lane + k * tpr) * VEC + e;
            combine[c] = (s == 0 ? 0.0f : combine[c]) + acc[k][e].value();
          }
        }
      }
    }
    __syncthreads();
  }
  float* row_out = partial + static_cast<std::int64_t>(blockIdx.x) * p.hidden;
  for (int c = static_cast<int>(threadIdx.x); c < nvec * VEC; c += static_cast<int>(blockDim.x)) row_out[c] = combine[c];
}

// ---- Launchers: the instantiations are (x, weight) dtypes x {16-byte, scalar} x NV.

template <class F>
gpuError_t with_fwd_shape(const RmsFwdParams& p, const RowShape& s, F&& f) {
  return with_types(p.xt, p.wt, [&](auto xe, auto we) -> gpuError_t {
    using X = decltype(xe);
    using W = decltype(we);
    constexpr int kVec = 16 / sizeof(typename X::T);
    if (s.vec == 1) return f(fwd_rows_kernel<X, W, 1, 8>);
    switch (s.nv) {
      case 2:
        return f(fwd_rows_kernel<X, W, kVec, 2>);
      case 4:
        return f(fwd_rows_kernel<X, W, kVec, 4>);
      default:
        return f(fwd_rows_kernel<X, W, kVec, 8>);
    }
  });
}

template <class F>
gpuError_t with_bwd_shape(const RmsBwdParams& p, const RowShape& s, F&& f) {
  return with_types(p.xt, p.wt, [&](auto xe, auto we) -> gpuError_t {
    using X = decltype(xe);
    using W = decltype(we);
    constexpr int kVec = 16 / sizeof(typename X::T);
    if (s.vec == 1) return f(bwd_rows_kernel<X, W, 1, 8>);
    switch (s.nv) {
      case 1:
        return f(bwd_rows_kernel<X, W, kVec, 1>);
      case 2:
        return f(bwd_rows_kernel<X, W, kVec, 2>);
      default:
        return f(bwd_rows_kernel<X, W, kVec, 4>);
    }
  });
}

template <class Kernel>
gpuError_t plan_rows(Kernel kernel, std::int64_t rows, const RowShape& s, const GpuInfo& g, std::size_t smem,
                     Launch& l) {
  l.threads = s.tpr * s.slots;
  l.smem = smem;
  int per_sm = 0;
  l.call = "cudaOccupancyMaxActiveBlocksPerMultiprocessor";
  if (gpuError_t err = occupancy(kernel, g.device, l.threads, smem, per_sm); err != gpuSuccess) return err;
  if (s.per_sm > 0 && s.per_sm < per_sm) per_sm = s.per_sm;
  const std::int64_t groups = (rows + s.slots - 1) / s.slots;
  const std::int64_t resident = static_cast<std::int64_t>(per_sm) * g.sm_count;
  l.grid = static_cast<int>(groups < resident ? groups : resident);
  if (l.grid < 1) l.grid = 1;
  return gpuSuccess;
}

}  // namespace

gpuError_t plan_fwd_rows(const RmsFwdParams& p, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.kernel = "rms_norm_fwd_rows";
  return with_fwd_shape(p, s, [&](auto kernel) { return plan_rows(kernel, p.rows, s, g, 0, l); });
}

gpuError_t launch_fwd_rows(const RmsFwdParams& p, const RowShape& s, const Launch& l, gpuStream_t stream) {
  return with_fwd_shape(p, s, [&](auto kernel) {
    kernel<<<l.grid, l.threads, 0, stream>>>(p, s.tpr, s.slots);
    return gpuGetLastError();
  });
}

gpuError_t plan_bwd_rows(const RmsBwdParams& p, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.kernel = "rms_norm_bwd_rows";
  std::size_t smem = kRedFloats * sizeof(float);
  if (s.slots > 1) smem += static_cast<std::size_t>(p.hidden) * sizeof(float);
  return with_bwd_shape(p, s, [&](auto kernel) -> gpuError_t {
    if (gpuError_t err = plan_rows(kernel, p.rows, s, g, smem, l); err != gpuSuccess) return err;
    l.partials = p.dweight != nullptr ? l.grid : 0;
    l.workspace = static_cast<std::size_t>(l.partials) * static_cast<std::size_t>(p.hidden) * sizeof(float);
    return gpuSuccess;
  });
}

gpuError_t launch_bwd_rows(const RmsBwdParams& p, const RowShape& s, const Launch& l, float* partial,
                           gpuStream_t stream) {
  return with_bwd_shape(p, s, [&](auto kernel) {
    kernel<<<l.grid, l.threads, l.smem, stream>>>(p, s.tpr, s.slots, p.dweight != nullptr ? partial : nullptr);
    return gpuGetLastError();
  });
}

}  // namespace opreg::cuda_like
