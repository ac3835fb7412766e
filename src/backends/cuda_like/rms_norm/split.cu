// rms_norm and fused_add_rms_norm for any row length and alignment
// (cuda.{rms_norm,fused_add_rms_norm}.{fwd,bwd}.split), and the dW finisher every backward
// variant ends with.
//
// The row is cut into chunks of kThreads x NV accesses. A first kernel writes one partial sum per
// (row, chunk) to the workspace; a second adds a row's partials in chunk order (deterministic),
// then normalises its chunk, reading the chunk again (from L2 when the row is recent). Blocks
// are (chunk, row group) pairs, so every multiprocessor gets work even from a single row. This
// moves more bytes than the register-resident variants (x, and dy, are read twice) and is the
// fallback for what they cannot hold: very long rows, and long rows that are not 16-byte
// aligned. A row group keeps its chunk's columns, so the backward accumulates dW in registers as
// the others do, one partial row per group.
//
// fused_add_rms_norm takes the same kernels, told apart at run time as the rows kernels are (a
// residual in the forward's descriptor, ds_out in the backward's): the forward's first kernel
// forms s = X(x + residual), stores it and sums the squares of s as stored; the second normalises
// s, read back from where the first stored it, exactly as rms_norm normalises x (the reference:
// rms_norm of the stored s). The backward's x is s already; its second kernel adds ds_out to dx
// before rounding it. dW is rms_norm's.
#include <atomic>

#include "backends/cuda_like/rms_norm/device.cuh"

namespace opreg::cuda_like {
namespace {

using namespace dev;

constexpr int kThreads = 256;
constexpr int kFwdNv = 4;
constexpr int kBwdNv = 2;

struct SplitGrid {
  std::int64_t chunks;
  std::int64_t groups;
  OPREG_DEV std::int64_t chunk() const { return blockIdx.x % chunks; }
  OPREG_DEV std::int64_t group() const { return blockIdx.x / chunks; }
};

// The accesses of this thread in chunk c: indices into the row, in units of VEC elements.
struct ChunkSpan {
  std::int64_t first;  // this thread's first access
  int count;           // how many, kThreads apart
};
template <int NV>
OPREG_DEV ChunkSpan chunk_span(std::int64_t chunk, std::int64_t nvec) {
  const std::int64_t first = chunk * kThreads * NV + threadIdx.x;
  if (first >= nvec) return {first, 0};
  const std::int64_t n = (nvec - first + kThreads - 1) / kThreads;
  return {first, static_cast<int>(n < NV ? n : NV)};
}

// The block's sum of terms(scale) (row_total's), every thread gets it.
template <class Terms>
OPREG_DEV double block_sum(const Terms& terms, float tiny, float* red, float* red2, int& parity) {
  const double total = row_total(terms, kThreads, red, red2, parity, tiny).value;
  parity ^= 1;
  return total;
}

template <class X, int VEC>
__global__ void __launch_bounds__(kThreads) fwd_sum_kernel(RowNormFwd p, SplitGrid sg, double* sums) {
  using XT = typename X::T;
  __shared__ float red[kRedSlots];
  __shared__ float red2[kRedSlots];
  const std::int64_t nvec = p.hidden / VEC;
  const ChunkSpan span = chunk_span<kFwdNv>(sg.chunk(), nvec);
  int parity = 0;
  for (std::int64_t row = sg.group(); row < p.rows; row += sg.groups) {
    const std::int64_t at = row * p.hidden + span.first * VEC;
    const XT* x = static_cast<const XT*>(p.x) + at;
    Pack<X, VEC> xv[kFwdNv];
#pragma unroll
    for (int k = 0; k < kFwdNv; ++k) {
      if (k < span.count) xv[k] = load_pack<X, VEC>(x + static_cast<std::int64_t>(k) * kThreads * VEC);
    }
    if (p.residual != nullptr) {  // fused_add_rms_norm: s = X(x + residual), stored; its squares summed
      const XT* res = static_cast<const XT*>(p.residual) + at;
      XT* sum = static_cast<XT*>(p.s) + at;
#pragma unroll
      for (int k = 0; k < kFwdNv; ++k) {
        if (k < span.count) {
          const std::int64_t off = static_cast<std::int64_t>(k) * kThreads * VEC;
          const Pack<X, VEC> rv = load_pack_once<X, VEC>(res + off);
#pragma unroll
          for (int e = 0; e < VEC; ++e) xv[k].v[e] = X::store(X::load(xv[k].v[e]) + X::load(rv.v[e]));
          store_pack<X, VEC>(sum + off, xv[k]);
        }
      }
    }
    const auto squares = [&](float scale) {
      float ss = 0.0f;
#pragma unroll
      for (int k = 0; k < kFwdNv; ++k) {
        if (k < span.count) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float f = X::load(xv[k].v[e]) * scale;
            ss += f * f;
          }
        }
      }
      return ss;
    };
    const double ss = block_sum(squares, kTinySquares, red, red2, parity);
    if (threadIdx.x == 0) sums[row * sg.chunks + sg.chunk()] = ss;
  }
}

template <class X, class W, int VEC>
__global__ void __launch_bounds__(kThreads) fwd_norm_kernel(RowNormFwd p, SplitGrid sg, const double* sums) {
  using XT = typename X::T;
  using WT = typename W::T;
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const std::int64_t nvec = p.hidden / VEC;
  const ChunkSpan span = chunk_span<kFwdNv>(sg.chunk(), nvec);
  const bool gemma = p.mode == Mode::gemma;
  const bool round_w = p.mode == Mode::none;
  for (std::int64_t row = sg.group(); row < p.rows; row += sg.groups) {
    double ss = 0.0;
    for (std::int64_t c = 0; c < sg.chunks; ++c) ss += sums[row * sg.chunks + c];
    const float rstd = rstd_of(ss, p.hidden, p.eps);
    const std::int64_t at = row * p.hidden + span.first * VEC;
    // fused_add_rms_norm normalises s, which fwd_sum_kernel stored (in x's dtype).
    const XT* x = static_cast<const XT*>(p.residual != nullptr ? p.s : p.x) + at;
    XT* y = static_cast<XT*>(p.y) + at;
#pragma unroll
    for (int k = 0; k < kFwdNv; ++k) {
      if (k < span.count) {
        const std::int64_t off = static_cast<std::int64_t>(k) * kThreads * VEC;
        const Pack<X, VEC> xv = load_pack<X, VEC>(x + off);
        float s[VEC];
        load_scale<W, VEC>(w, span.first * VEC + off, static_cast<float>(p.offset), round_w, s);
        Pack<X, VEC> out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) out.v[e] = X::store(xhat_of<X>(X::load(xv.v[e]), rstd, gemma) * s[e]);
        store_pack<X, VEC>(y + off, out);
      }
    }
    if (sg.chunk() == 0 && threadIdx.x == 0) p.rstd[row] = rstd;
  }
}

template <class X, class W, int VEC>
__global__ void __launch_bounds__(kThreads) bwd_dot_kernel(RowNormBwd p, SplitGrid sg, double* sums) {
  using XT = typename X::T;
  using WT = typename W::T;
  __shared__ float red[kRedSlots];
  __shared__ float red2[kRedSlots];
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const std::int64_t nvec = p.hidden / VEC;
  const ChunkSpan span = chunk_span<kBwdNv>(sg.chunk(), nvec);
  const bool round_w = p.mode == Mode::none;
  int parity = 0;
  for (std::int64_t row = sg.group(); row < p.rows; row += sg.groups) {
    const std::int64_t at = row * p.hidden + span.first * VEC;
    const XT* x = static_cast<const XT*>(p.x) + at;
    const XT* dy = static_cast<const XT*>(p.dy) + at;
    Pack<X, VEC> xv[kBwdNv];
    Pack<X, VEC> dyv[kBwdNv];
    float s[kBwdNv][VEC];
#pragma unroll
    for (int k = 0; k < kBwdNv; ++k) {
      if (k < span.count) {
        const std::int64_t off = static_cast<std::int64_t>(k) * kThreads * VEC;
        xv[k] = load_pack<X, VEC>(x + off);
        dyv[k] = load_pack<X, VEC>(dy + off);
        load_scale<W, VEC>(w, span.first * VEC + off, static_cast<float>(p.offset), round_w, s[k]);
      }
    }
    const auto terms = [&](float scale) {
      float dot = 0.0f;
#pragma unroll
      for (int k = 0; k < kBwdNv; ++k) {
        if (k < span.count) dot = dot_pack<X, VEC>(dot, scale, dyv[k], s[k], xv[k]);
      }
      return dot;
    };
    const double dot = block_sum(terms, 0.0f, red, red2, parity);
    if (threadIdx.x == 0) sums[row * sg.chunks + sg.chunk()] = dot;
  }
}

template <class X, class W, int VEC>
__global__ void __launch_bounds__(kThreads)
    bwd_dx_kernel(RowNormBwd p, SplitGrid sg, const double* sums, DwPartial<X>* partial) {
  using XT = typename X::T;
  using WT = typename W::T;
  const auto* __restrict__ w = static_cast<const WT*>(p.weight);
  const std::int64_t nvec = p.hidden / VEC;
  const ChunkSpan span = chunk_span<kBwdNv>(sg.chunk(), nvec);
  const bool gemma = p.mode == Mode::gemma;
  const bool round_w = p.mode == Mode::none;
  const double inv_h = p.hidden > 0 ? 1.0 / static_cast<double>(p.hidden) : 0.0;
  DwSum<X> acc[kBwdNv][VEC];
  for (std::int64_t row = sg.group(); row < p.rows; row += sg.groups) {
    double dot = 0.0;
    for (std::int64_t c = 0; c < sg.chunks; ++c) dot += sums[row * sg.chunks + c];
    const float rstd = p.rstd[row];
    const float coeff = coeff_of(rstd, dot, inv_h);
    const std::int64_t at = row * p.hidden + span.first * VEC;
    const XT* x = static_cast<const XT*>(p.x) + at;
    const XT* dy = static_cast<const XT*>(p.dy) + at;
    XT* dx = static_cast<XT*>(p.dx) + at;
    // fused_add_rms_norm: the gradient into the new residual, added to dx before it is rounded.
    const XT* ds = p.ds_out != nullptr ? static_cast<const XT*>(p.ds_out) + at : nullptr;
#pragma unroll
    for (int k = 0; k < kBwdNv; ++k) {
      if (k < span.count) {
        const std::int64_t off = static_cast<std::int64_t>(k) * kThreads * VEC;
        const Pack<X, VEC> xv = load_pack<X, VEC>(x + off);
        const Pack<X, VEC> dyv = load_pack<X, VEC>(dy + off);
        float s[VEC];
        load_scale<W, VEC>(w, span.first * VEC + off, static_cast<float>(p.offset), round_w, s);
        const bool dw = partial != nullptr;
        Pack<X, VEC> dsv{};
        if (ds != nullptr) dsv = load_pack_once<X, VEC>(ds + off);
        const Pack<X, VEC>* extra = ds != nullptr ? &dsv : nullptr;
        store_pack<X, VEC>(dx + off, gemma ? dx_pack<X, VEC, true>(dyv, s, xv, rstd, coeff, dw, acc[k], extra)
                                           : dx_pack<X, VEC, false>(dyv, s, xv, rstd, coeff, dw, acc[k], extra));
      }
    }
  }
  if (partial == nullptr) return;
  let_next_kernel_launch();
  DwPartial<X>* out = partial + sg.group() * p.hidden + span.first * VEC;
#pragma unroll
  for (int k = 0; k < kBwdNv; ++k) {
    if (k < span.count) store_partials<X, VEC>(out + static_cast<std::int64_t>(k) * kThreads * VEC, acc[k]);
  }
}

// dweight[c] = sum over p of partial[p][c]. The partials (one row per block of the backward
// kernel, hundreds of them) were just written and sit in L2, so the time is latency: a block
// takes 32 columns (one 128-byte line per partial row) with 32 threads a column, each adding
// every 32nd partial in double with several loads in flight, then the 32 sums in order.
// (Tried on the H100: 8 columns a block with up to 128 groups and a tree, so that hidden 1024
// gets 128 blocks instead of 32; forward+backward came out 2-5% slower at 4096 rows, though ncu
// put that finisher at 5.6 us against 6.1 at 1024 columns, and 10.0 against 7.2 at 4096.)
constexpr int kFinishParts = 32;

template <class W, class P>
__global__ void __launch_bounds__(32 * kFinishParts)
    dw_finish_kernel(const P* partial, std::int64_t partials, std::int64_t hidden, typename W::T* dweight) {
  __shared__ double sums[kFinishParts][33];
  wait_for_previous_kernel();
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int part = static_cast<int>(threadIdx.x) / 32;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + lane;
  double s = 0.0;
  if (c < hidden) {
    std::int64_t q = part;
    for (; q + 3 * kFinishParts < partials; q += 4 * kFinishParts) {
      const P a = partial[q * hidden + c];
      const P b = partial[(q + kFinishParts) * hidden + c];
      const P d = partial[(q + 2 * kFinishParts) * hidden + c];
      const P e = partial[(q + 3 * kFinishParts) * hidden + c];
      s += static_cast<double>(a);
      s += static_cast<double>(b);
      s += static_cast<double>(d);
      s += static_cast<double>(e);
    }
    for (; q < partials; q += kFinishParts) s += static_cast<double>(partial[q * hidden + c]);
  }
  sums[part][lane] = s;
  __syncthreads();
  if (part == 0 && c < hidden) {
    double total = 0.0;
    for (int i = 0; i < kFinishParts; ++i) total += sums[i][lane];
    dweight[c] = W::store(static_cast<float>(total));
  }
}

template <class F>
gpuError_t with_split_types(Elem xt, Elem wt, int vec, F&& f) {
  return with_types(xt, wt, [&]<class X, class W, int kVec>() -> gpuError_t {
    if (vec == 1) return f(X{}, W{}, std::integral_constant<int, 1>{});
    return f(X{}, W{}, std::integral_constant<int, kVec>{});
  });
}

// Grid: every chunk of every row group; enough row groups to fill the device twice over, since
// a block's work per row is short.
template <class Kernel>
gpuError_t plan_split(Kernel kernel, std::int64_t rows, std::int64_t hidden, int vec, int nv, const GpuInfo& g,
                      Launch& l) {
  l.threads = kThreads;
  const std::int64_t nvec = hidden / vec;
  const std::int64_t per_chunk = static_cast<std::int64_t>(kThreads) * nv;
  const std::int64_t chunks = nvec > 0 ? (nvec + per_chunk - 1) / per_chunk : 1;
  int per_sm = 0;
  l.call = "cudaOccupancyMaxActiveBlocksPerMultiprocessor";
  if (gpuError_t err = occupancy(kernel, g.device, kThreads, 0, per_sm); err != gpuSuccess) return err;
  const std::int64_t target = 2LL * per_sm * g.sm_count;
  std::int64_t groups = (target + chunks - 1) / chunks;
  if (groups > rows) groups = rows;
  if (groups < 1) groups = 1;
  l.chunks = static_cast<int>(chunks);
  l.grid = static_cast<int>(chunks * groups);
  l.partials = groups;
  l.workspace = static_cast<std::size_t>(rows * chunks) * sizeof(double);
  return gpuSuccess;
}

SplitGrid split_grid(const Launch& l) { return {l.chunks, l.grid / l.chunks}; }

// Partials start after the per-row sums, on a 256-byte boundary.
std::size_t sums_bytes(std::int64_t rows, int chunks) {
  return (static_cast<std::size_t>(rows) * static_cast<std::size_t>(chunks) * sizeof(double) + 255) / 256 * 256;
}

}  // namespace

gpuError_t plan_fwd_split(const RowNormFwd& p, int vec, const GpuInfo& g, Launch& l) {
  l.kernel = "rms_norm_fwd_split";
  return with_split_types(p.x_type, p.w_type, vec, [&](auto xe, auto we, auto ve) {
    return plan_split(fwd_norm_kernel<decltype(xe), decltype(we), decltype(ve)::value>, p.rows, p.hidden, vec, kFwdNv,
                      g, l);
  });
}

gpuError_t launch_fwd_split(const RowNormFwd& p, int vec, const Launch& l, void* workspace, gpuStream_t stream) {
  auto* sums = static_cast<double*>(workspace);
  return with_split_types(p.x_type, p.w_type, vec, [&](auto xe, auto we, auto ve) -> gpuError_t {
    using X = decltype(xe);
    constexpr int kVec = decltype(ve)::value;
    fwd_sum_kernel<X, kVec><<<l.grid, kThreads, 0, stream>>>(p, split_grid(l), sums);
    if (gpuError_t err = gpuGetLastError(); err != gpuSuccess) return err;
    fwd_norm_kernel<X, decltype(we), kVec><<<l.grid, kThreads, 0, stream>>>(p, split_grid(l), sums);
    return gpuGetLastError();
  });
}

gpuError_t plan_bwd_split(const RowNormBwd& p, int vec, const GpuInfo& g, Launch& l) {
  l.kernel = "rms_norm_bwd_split";
  return with_split_types(p.x_type, p.w_type, vec, [&](auto xe, auto we, auto ve) -> gpuError_t {
    gpuError_t err =
        plan_split(bwd_dx_kernel<decltype(xe), decltype(we), decltype(ve)::value>, p.rows, p.hidden, vec, kBwdNv, g, l);
    if (err != gpuSuccess) return err;
    if (p.dweight == nullptr) l.partials = 0;
    l.workspace = sums_bytes(p.rows, l.chunks) +
                  static_cast<std::size_t>(l.partials) * static_cast<std::size_t>(p.hidden) * partial_bytes(p.x_type);
    return gpuSuccess;
  });
}

gpuError_t launch_bwd_split(const RowNormBwd& p, int vec, const Launch& l, void* workspace, void** partial,
                            gpuStream_t stream) {
  auto* sums = static_cast<double*>(workspace);
  void* dw = p.dweight != nullptr ? static_cast<unsigned char*>(workspace) + sums_bytes(p.rows, l.chunks) : nullptr;
  *partial = dw;
  return with_split_types(p.x_type, p.w_type, vec, [&](auto xe, auto we, auto ve) -> gpuError_t {
    using X = decltype(xe);
    using W = decltype(we);
    constexpr int kVec = decltype(ve)::value;
    bwd_dot_kernel<X, W, kVec><<<l.grid, kThreads, 0, stream>>>(p, split_grid(l), sums);
    if (gpuError_t err = gpuGetLastError(); err != gpuSuccess) return err;
    bwd_dx_kernel<X, W, kVec><<<l.grid, kThreads, 0, stream>>>(p, split_grid(l), sums, static_cast<DwPartial<X>*>(dw));
    return gpuGetLastError();
  });
}

gpuError_t launch_dw_finish(const void* partial_in, Elem xt, std::int64_t partials, std::int64_t hidden, void* dweight,
                            Elem wt, gpuStream_t stream, Launch& l) {
  l.kernel = "rms_norm_dw_finish";
  const auto blocks = static_cast<unsigned>((hidden + 31) / 32);
  const auto launch = [&](auto kernel, auto* partial, auto* out) -> gpuError_t {
#if OPREG_GPU_CLUSTERS
    // Launched while the backward kernel drains (it waits for it at its start). A runtime that
    // refuses the attribute gets a plain launch, from then on.
    static std::atomic<bool> refused{false};
    if (refused.load(std::memory_order_relaxed)) {
      kernel<<<blocks, 32 * kFinishParts, 0, stream>>>(partial, partials, hidden, out);
      l.call = "kernel launch";
      return gpuGetLastError();
    }
    gpuLaunchConfig_t config{};
    gpuLaunchAttribute attr{};
    attr.id = gpuLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(32 * kFinishParts);
    config.stream = stream;
    config.attrs = &attr;
    config.numAttrs = 1;
    l.call = "cudaLaunchKernelEx";
    const gpuError_t err = gpuLaunchKernelEx(&config, kernel, partial, partials, hidden, out);
    if (err != gpuErrorNotSupported && err != gpuErrorInvalidValue) return err;
    gpu_clear_error();
    refused.store(true, std::memory_order_relaxed);
    kernel<<<blocks, 32 * kFinishParts, 0, stream>>>(partial, partials, hidden, out);
    l.call = "kernel launch";
    return gpuGetLastError();
#else
    kernel<<<blocks, 32 * kFinishParts, 0, stream>>>(partial, partials, hidden, out);
    l.call = "kernel launch";
    return gpuGetLastError();
#endif
  };
  // The partials' type follows x's (DwPartial), the output's the weight's.
  const auto by_partial = [&](auto we, auto* out) -> gpuError_t {
    using W = decltype(we);
    if (xt == Elem::f32) return launch(dw_finish_kernel<W, double>, static_cast<const double*>(partial_in), out);
    return launch(dw_finish_kernel<W, float>, static_cast<const float*>(partial_in), out);
  };
  switch (wt) {
    case Elem::f32:
      return by_partial(F32{}, static_cast<float*>(dweight));
    case Elem::f16:
      return by_partial(F16{}, static_cast<__half*>(dweight));
    case Elem::bf16:
      return by_partial(BF16{}, static_cast<gpu_bf16*>(dweight));
  }
  return gpuSuccess;
}

}  // namespace opreg::cuda_like
