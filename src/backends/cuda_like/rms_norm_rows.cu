// rms_norm with the row in one block (cuda.rms_norm.{fwd,bwd}.rows).
//
// A row is spread over `tpr` threads, each owning `NV` accesses of `VEC` elements (16 bytes when
// every row is 16-byte aligned, else single elements); short rows share a block (`slots` rows of
// tpr <= 32 threads, several rows per warp when tpr < 32). The grid is persistent: as many blocks
// as fit on the device at once, each looping over row groups, so a thread keeps the same columns
// for the whole launch. That is what lets the backward accumulate dW for its columns in registers
// (compensated f32 for f32 inputs) and write one partial row per block, which launch_dw_finish
// sums in a fixed order: no atomics, the same bits on every run.
//
// Bytes in flight decide the speed of these kernels, so on the 16-byte path a thread copies its
// accesses of the rows `stages - 1` groups ahead into shared memory (cp.async, its own slots, no
// barrier) while it works on the current one, and reads the current row from there: before the
// row's reduction (sum of squares, or sum(dy * s * x)) and again after it, so no register holds
// the row across the reduction. Every element of x (and dy) is read from memory once. The scalar
// path (rows that are not 16-byte aligned) keeps its few elements in registers instead.
#include "backends/cuda_like/rms_norm_device.cuh"

namespace opreg::cuda_like {
namespace {

using namespace dev;

// One block's view of the rows: which row of group g this thread works on, and which of its
// accesses fall inside the row.
struct RowWalk {
  std::int64_t rows;
  std::int64_t hidden;
  std::int64_t groups;
  int slots;
  int slot;
  int lane;
  int tpr;
  int mine;  // accesses of this thread that fall inside a row
  OPREG_DEV RowWalk(std::int64_t rows_, std::int64_t hidden_, int tpr_, int slots_, int nvec, int nv)
      : rows(rows_), hidden(hidden_), groups((rows_ + slots_ - 1) / slots_), slots(slots_),
        slot(static_cast<int>(threadIdx.x) / tpr_), lane(static_cast<int>(threadIdx.x) - slot * tpr_), tpr(tpr_),
        mine(accesses(lane, tpr_, nvec, nv)) {}
  OPREG_DEV std::int64_t row(std::int64_t g) const { return g * slots + slot; }
  OPREG_DEV int count(std::int64_t g) const { return g < groups && row(g) < rows ? mine : 0; }
  // Element offset of this thread's first access in group g's row.
  template <int VEC>
  OPREG_DEV std::int64_t at(std::int64_t g) const {
    return row(g) * hidden + static_cast<std::int64_t>(lane) * VEC;
  }
};

// Shared-memory slots of the staged path: [stage][tensor][access][thread] 16-byte units, so a
// warp's accesses of one (stage, tensor, access) are 512 consecutive bytes.
template <int NB, int NV>
struct Stages {
  uint4* base;
  int threads;
  OPREG_DEV uint4* slot(int stage, int tensor, int k) const {
    return base + ((stage * NB + tensor) * NV + k) * threads + static_cast<int>(threadIdx.x);
  }
};

// y for one row, given its accesses xk(k).
template <class X, class W, int VEC, int NV, Cast C, class Access>
OPREG_DEV void fwd_row_out(const typename W::T* w, typename X::T* y, const RowWalk& walk, int count, float rstd,
                           float offset, const Access& xk) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    if (k < count) {
      float s[VEC];
      load_scale<W, VEC>(w, static_cast<std::int64_t>(walk.lane + k * walk.tpr) * VEC, offset, C == Cast::none, s);
      const Pack<X, VEC> xv = xk(k);
      Pack<X, VEC> out;
#pragma unroll
      for (int e = 0; e < VEC; ++e) out.v[e] = X::store(xhat_of<X>(X::load(xv.v[e]), rstd, C == Cast::gemma) * s[e]);
      store_pack<X, VEC>(y + k * walk.tpr * VEC, out);
    }
  }
}

template <class X, class W, int VEC, int NV>
__global__ void __launch_bounds__(max_threads_fwd(NV, VEC)) fwd_rows_kernel(RmsFwdParams p, int tpr, int slots,
                                                                           int stages) {
  using XT = typename X::T;
  using WT = typename W::T;
  constexpr bool kStaged = VEC * sizeof(XT) == 16;
  extern __shared__ uint4 staged[];
  __shared__ float red[kRedFloats];
  const auto* __restrict__ x = static_cast<const XT*>(p.x);
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const RowWalk walk(p.rows, p.hidden, tpr, slots, static_cast<int>(p.hidden / VEC), NV);
  const Stages<1, NV> st{staged, static_cast<int>(blockDim.x)};
  const auto fetch = [&](std::int64_t g, int stage) {
    if constexpr (kStaged) {
      const int count = walk.count(g);
      const XT* src = x + (count > 0 ? walk.at<VEC>(g) : 0);
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) copy16_async(st.slot(stage, 0, k), src + k * tpr * VEC);
      }
      async_commit();
    }
  };
  for (int s = 0; s + 1 < stages; ++s) fetch(blockIdx.x + static_cast<std::int64_t>(s) * gridDim.x, s);
  int stage = 0;
  int parity = 0;
  for (std::int64_t g = blockIdx.x; g < walk.groups; g += gridDim.x, parity ^= 1) {
    fetch(g + static_cast<std::int64_t>(stages - 1) * gridDim.x, (stage + stages - 1) % stages);
    async_wait(stages - 1);
    const int count = walk.count(g);
    const std::int64_t at = count > 0 ? walk.at<VEC>(g) : 0;
    Pack<X, VEC> regs[NV];
    if constexpr (!kStaged) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) regs[k] = load_pack<X, VEC>(x + at + k * tpr * VEC);
      }
    }
    // The row's accesses: the staged slots (read before and after the reduction), or registers.
    const auto xk = [&](int k) -> Pack<X, VEC> {
      if constexpr (kStaged) {
        return *reinterpret_cast<const Pack<X, VEC>*>(st.slot(stage, 0, k));
      } else {
        return regs[k];
      }
    };
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        const Pack<X, VEC> xv = xk(k);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float f = X::load(xv.v[e]);
          ss += f * f;
        }
      }
    }
    ss = row_sum(ss, tpr, red, parity);
    const float mean = p.hidden > 0 ? ss / static_cast<float>(p.hidden) : 0.0f;
    const float rstd = 1.0f / sqrtf(mean + p.eps);
    XT* y = static_cast<XT*>(p.y) + at;
    switch (p.casting) {
      case Cast::llama:
        fwd_row_out<X, W, VEC, NV, Cast::llama>(w, y, walk, count, rstd, p.offset, xk);
        break;
      case Cast::gemma:
        fwd_row_out<X, W, VEC, NV, Cast::gemma>(w, y, walk, count, rstd, p.offset, xk);
        break;
      case Cast::none:
        fwd_row_out<X, W, VEC, NV, Cast::none>(w, y, walk, count, rstd, p.offset, xk);
        break;
    }
    if (walk.row(g) < p.rows && walk.lane == 0) p.rstd[walk.row(g)] = rstd;
    stage = stage + 1 == stages ? 0 : stage + 1;
  }
  async_wait(0);
}

// dx (and dW) for one row, given its accesses xk(k), dyk(k).
template <class X, class W, int VEC, int NV, Cast C, class XAccess, class DyAccess>
OPREG_DEV void bwd_row_out(const typename W::T* w, typename X::T* dx, const RowWalk& walk, int count, float rstd,
                           float coeff, float offset, bool want_dw, const XAccess& xk, const DyAccess& dyk,
                           DwSum<X> (&acc)[NV][VEC]) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    if (k < count) {
      float s[VEC];
      load_scale<W, VEC>(w, static_cast<std::int64_t>(walk.lane + k * walk.tpr) * VEC, offset, C == Cast::none, s);
      const Pack<X, VEC> xv = xk(k);
      const Pack<X, VEC> dyv = dyk(k);
      Pack<X, VEC> out;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float xf = X::load(xv.v[e]);
        const float dyf = X::load(dyv.v[e]);
        out.v[e] = X::store(rstd * dyf * s[e] - coeff * xf);
        if (want_dw) acc[k][e].add(dyf * xhat_of<X>(xf, rstd, C == Cast::gemma));
      }
      store_pack<X, VEC>(dx + k * walk.tpr * VEC, out);
    }
  }
}

// Shared memory: the stages (x and dy), then (slots > 1) `hidden` floats where the slots' dW
// partials are added in slot order.
template <class X, class W, int VEC, int NV>
__global__ void __launch_bounds__(max_threads_bwd(NV, VEC)) bwd_rows_kernel(RmsBwdParams p, int tpr, int slots,
                                                                           int stages, float* partial) {
  using XT = typename X::T;
  using WT = typename W::T;
  constexpr bool kStaged = VEC * sizeof(XT) == 16;
  extern __shared__ uint4 staged[];
  __shared__ float red[kRedFloats];
  const auto* __restrict__ x = static_cast<const XT*>(p.x);
  const auto* dy = static_cast<const XT*>(p.dy);  // may be dx: no __restrict__
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const RowWalk walk(p.rows, p.hidden, tpr, slots, static_cast<int>(p.hidden / VEC), NV);
  const Stages<2, NV> st{staged, static_cast<int>(blockDim.x)};
  const bool want_dw = partial != nullptr;
  const float inv_h = p.hidden > 0 ? 1.0f / static_cast<float>(p.hidden) : 0.0f;
  const auto fetch = [&](std::int64_t g, int stage) {
    if constexpr (kStaged) {
      const int count = walk.count(g);
      const std::int64_t at = count > 0 ? walk.at<VEC>(g) : 0;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) {
          copy16_async(st.slot(stage, 0, k), x + at + k * tpr * VEC);
          copy16_async(st.slot(stage, 1, k), dy + at + k * tpr * VEC);
        }
      }
      async_commit();
    }
  };
  DwSum<X> acc[NV][VEC];
  for (int s = 0; s + 1 < stages; ++s) fetch(blockIdx.x + static_cast<std::int64_t>(s) * gridDim.x, s);
  int stage = 0;
  int parity = 0;
  for (std::int64_t g = blockIdx.x; g < walk.groups; g += gridDim.x, parity ^= 1) {
    fetch(g + static_cast<std::int64_t>(stages - 1) * gridDim.x, (stage + stages - 1) % stages);
    const int count = walk.count(g);
    const float rstd = count > 0 ? p.rstd[walk.row(g)] : 0.0f;
    async_wait(stages - 1);
    const std::int64_t at = count > 0 ? walk.at<VEC>(g) : 0;
    Pack<X, VEC> xregs[NV];
    Pack<X, VEC> dyregs[NV];
    if constexpr (!kStaged) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) {
          xregs[k] = load_pack<X, VEC>(x + at + k * tpr * VEC);
          dyregs[k] = load_pack<X, VEC>(dy + at + k * tpr * VEC);
        }
      }
    }
    const auto xk = [&](int k) -> Pack<X, VEC> {
      if constexpr (kStaged) {
        return *reinterpret_cast<const Pack<X, VEC>*>(st.slot(stage, 0, k));
      } else {
        return xregs[k];
      }
    };
    const auto dyk = [&](int k) -> Pack<X, VEC> {
      if constexpr (kStaged) {
        return *reinterpret_cast<const Pack<X, VEC>*>(st.slot(stage, 1, k));
      } else {
        return dyregs[k];
      }
    };
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        float s[VEC];
        load_scale<W, VEC>(w, static_cast<std::int64_t>(walk.lane + k * tpr) * VEC, p.offset, p.casting == Cast::none,
                           s);
        const Pack<X, VEC> xv = xk(k);
        const Pack<X, VEC> dyv = dyk(k);
#pragma unroll
        for (int e = 0; e < VEC; ++e) dot += X::load(dyv.v[e]) * s[e] * X::load(xv.v[e]);
      }
    }
    dot = row_sum(dot, tpr, red, parity);
    const float coeff = rstd * rstd * rstd * dot * inv_h;
    XT* dx = static_cast<XT*>(p.dx) + at;
    switch (p.casting) {
      case Cast::llama:
        bwd_row_out<X, W, VEC, NV, Cast::llama>(w, dx, walk, count, rstd, coeff, p.offset, want_dw, xk, dyk, acc);
        break;
      case Cast::gemma:
        bwd_row_out<X, W, VEC, NV, Cast::gemma>(w, dx, walk, count, rstd, coeff, p.offset, want_dw, xk, dyk, acc);
        break;
      case Cast::none:
        bwd_row_out<X, W, VEC, NV, Cast::none>(w, dx, walk, count, rstd, coeff, p.offset, want_dw, xk, dyk, acc);
        break;
    }
    stage = stage + 1 == stages ? 0 : stage + 1;
  }
  async_wait(0);
  if (!want_dw) return;
  let_next_kernel_launch();
  const int nvec = static_cast<int>(p.hidden / VEC);
  if (slots == 1) {
    float* out = partial + static_cast<std::int64_t>(blockIdx.x) * p.hidden + walk.lane * VEC;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < walk.mine) {
        Pack<F32, VEC> pv;
#pragma unroll
        for (int e = 0; e < VEC; ++e) pv.v[e] = acc[k][e].value();
        store_pack<F32, VEC>(out + k * tpr * VEC, pv);
      }
    }
    return;
  }
  // Several rows per block: their columns coincide; add the slots in order.
  float* combine = reinterpret_cast<float*>(staged + (kStaged ? stages * 2 * NV * static_cast<int>(blockDim.x) : 0));
  for (int s = 0; s < slots; ++s) {
    if (walk.slot == s) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < walk.mine) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const int c = (walk.lane + k * tpr) * VEC + e;
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

// Shared memory of a row kernel's block: its stages (16-byte path), and backward with several
// rows a block, the slots' dW sums.
std::size_t rows_smem(bool backward, const RowShape& s, std::int64_t hidden) {
  const int threads = s.tpr * s.slots;
  std::size_t bytes = s.vec == 1 ? 0 : static_cast<std::size_t>(s.stages) * stage_bytes(backward, s.nv, threads);
  if (backward && s.slots > 1) bytes += static_cast<std::size_t>(hidden) * sizeof(float);
  return bytes;
}

template <class Kernel>
gpuError_t plan_rows(Kernel kernel, std::int64_t rows, const RowShape& s, const GpuInfo& g, std::size_t smem,
                     Launch& l) {
  l.threads = s.tpr * s.slots;
  l.smem = smem;
  l.call = "cudaFuncSetAttribute";
  if (gpuError_t err = allow_smem(kernel, smem); err != gpuSuccess) return err;
  int per_sm = 0;
  l.call = "cudaOccupancyMaxActiveBlocksPerMultiprocessor";
  if (gpuError_t err = occupancy(kernel, g.device, l.threads, smem, per_sm); err != gpuSuccess) return err;
  if (s.per_sm > 0 && s.per_sm < per_sm) per_sm = s.per_sm;
  const std::int64_t groups = (rows + s.slots - 1) / s.slots;
  // per_sm < 0: one group a block (not persistent), for comparison in the benchmark's sweep.
  const std::int64_t resident = s.per_sm < 0 ? groups : static_cast<std::int64_t>(per_sm) * g.sm_count;
  l.grid = static_cast<int>(groups < resident ? groups : resident);
  if (l.grid < 1) l.grid = 1;
  return gpuSuccess;
}

}  // namespace

gpuError_t plan_fwd_rows(const RmsFwdParams& p, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.kernel = "rms_norm_fwd_rows";
  return with_fwd_shape(p, s, [&](auto kernel) { return plan_rows(kernel, p.rows, s, g, rows_smem(false, s, p.hidden), l); });
}

gpuError_t launch_fwd_rows(const RmsFwdParams& p, const RowShape& s, const Launch& l, gpuStream_t stream) {
  return with_fwd_shape(p, s, [&](auto kernel) {
    kernel<<<l.grid, l.threads, l.smem, stream>>>(p, s.tpr, s.slots, s.vec == 1 ? 1 : s.stages);
    return gpuGetLastError();
  });
}

gpuError_t plan_bwd_rows(const RmsBwdParams& p, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.kernel = "rms_norm_bwd_rows";
  return with_bwd_shape(p, s, [&](auto kernel) -> gpuError_t {
    if (gpuError_t err = plan_rows(kernel, p.rows, s, g, rows_smem(true, s, p.hidden), l); err != gpuSuccess) {
      return err;
    }
    l.partials = p.dweight != nullptr ? l.grid : 0;
    l.workspace = static_cast<std::size_t>(l.partials) * static_cast<std::size_t>(p.hidden) * sizeof(float);
    return gpuSuccess;
  });
}

gpuError_t launch_bwd_rows(const RmsBwdParams& p, const RowShape& s, const Launch& l, float* partial,
                           gpuStream_t stream) {
  return with_bwd_shape(p, s, [&](auto kernel) {
    kernel<<<l.grid, l.threads, l.smem, stream>>>(p, s.tpr, s.slots, s.vec == 1 ? 1 : s.stages,
                                                  p.dweight != nullptr ? partial : nullptr);
    return gpuGetLastError();
  });
}

}  // namespace opreg::cuda_like
