// layer_norm and group_norm on the GPU, forward and backward: one kernel pair for both, a block
// per set (a layer_norm row, a group_norm (n, group) pair) with the grid walking the sets.
//   forward   mean = sum(x) / n, var = sum((x - mean)^2) / n (two passes: never E[x^2] - mean^2),
//             rstd = 1 / sqrt(var + eps), y = (x - mean) * rstd * w + b, rounded once
//   backward  xhat = (x - mean) * rstd, g = dy * w, c1 = sum(g * xhat) / n, c2 = sum(g) / n,
//             dx = rstd * (g - c2 - xhat * c1); dweight = sum dy * xhat, dbias = sum dy
// The set sums are doubles (x up to 2^60 squared stays finite; cancellation is harmless), added
// in a fixed order. dweight and dbias are deterministic without atomics: per-block rows of
// per-parameter sums (spread 1) or per-(n, channel) sums (spread > 1), then added row by row in
// order by the rms_norm finisher (double partials).
// A first version: the set is read from global memory (L2) once per pass, scalar accesses.
#include <algorithm>

#include "backends/cuda_like/elem.cuh"
#include "backends/cuda_like/norm/launch.h"
#include "backends/cuda_like/rms_norm/launch.h"

namespace opreg::cuda_like {
namespace dev {
namespace {

constexpr int kWarps = kNormThreads / kWarpSize;

// The sum of v over the block, in a fixed order, returned to every thread. `red` holds kWarps
// values; the barrier at the end lets the caller reuse it at once.
template <class T>
OPREG_DEV T block_sum(T v, T* red) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) v += gpu_shfl_xor(v, o);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) red[warp] = v;
  __syncthreads();
  T total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += red[w];
  __syncthreads();
  return total;
}

template <class P>
OPREG_DEV float param(const void* t, std::int64_t c, float none) {
  return t != nullptr ? P::load(static_cast<const typename P::T*>(t)[c]) : none;
}

// Calls f(k, n, xk) for each set k of this block's (the grid walking the sets): n elements a set,
// xk the set's first element of x.
template <class X, class F>
OPREG_DEV void for_each_set(const family::NormSets& sh, const void* x, F&& f) {
  const std::int64_t n = sh.channels * sh.spread;
  for (std::int64_t k = blockIdx.x; k < sh.sets; k += gridDim.x) f(k, n, static_cast<const typename X::T*>(x) + k * n);
}

template <class X, class P>
__global__ void __launch_bounds__(kNormThreads) norm_fwd_kernel(family::NormFwd p) {
  using XT = typename X::T;
  __shared__ double red[kWarps];
  const family::NormSets sh = p.shape;
  for_each_set<X>(sh, p.x, [&](std::int64_t k, std::int64_t n, const XT* x) {
    XT* y = static_cast<XT*>(p.y) + k * n;
    double s = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += kNormThreads) s += X::load(x[i]);
    const double mean = n > 0 ? block_sum(s, red) / static_cast<double>(n) : 0.0;
    double q = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += kNormThreads) {
      const double d = static_cast<double>(X::load(x[i])) - mean;
      q += d * d;
    }
    const double var = n > 0 ? block_sum(q, red) / static_cast<double>(n) : 0.0;
    const float rstd = static_cast<float>(1.0 / sqrt(var + p.eps));
    const std::int64_t p0 = (k % sh.groups) * sh.channels;
    for (std::int64_t i = threadIdx.x; i < n; i += kNormThreads) {
      const std::int64_t c = p0 + i / sh.spread;
      const float xhat = static_cast<float>(static_cast<double>(X::load(x[i])) - mean) * rstd;
      y[i] = X::store(xhat * param<P>(p.weight, c, 1.0f) + param<P>(p.bias, c, 0.0f));
    }
    if (threadIdx.x == 0) {
      p.mean[k] = static_cast<float>(mean);
      p.rstd[k] = rstd;
    }
  });
}

// dx for the set's elements [i0, i1) (one channel, or all), with their dweight/dbias terms summed
// into tw/tb; the same thread reads dy[i] before writing dx[i] (dx may be dy).
template <class X, class P, class Each>
OPREG_DEV void bwd_elements(const family::NormBwd& p, std::int64_t k, std::int64_t n, std::int64_t i0,
                            std::int64_t i1, float mean, float rstd, double c1, double c2, Each&& each) {
  using XT = typename X::T;
  const XT* x = static_cast<const XT*>(p.x) + k * n;
  const XT* dy = static_cast<const XT*>(p.dy) + k * n;
  XT* dx = static_cast<XT*>(p.dx) + k * n;
  const std::int64_t p0 = (k % p.shape.groups) * p.shape.channels;
  for (std::int64_t i = i0 + threadIdx.x; i < i1; i += kNormThreads) {
    const std::int64_t c = p0 + i / p.shape.spread;
    // xhat in double: dweight's terms dy * xhat of large rows cancel across rows, so an f32
    // xhat's rounding would be amplified (the reference's xhat is double).
    const double xhat = (static_cast<double>(X::load(x[i])) - mean) * rstd;
    const float d = X::load(dy[i]);
    const double g = static_cast<double>(d) * param<P>(p.weight, c, 1.0f);
    dx[i] = X::store(static_cast<float>(rstd * (g - c2 - xhat * c1)));
    each(c, d, xhat);
  }
}

template <class X, class P>
__global__ void __launch_bounds__(kNormThreads) norm_bwd_kernel(family::NormBwd p, NormLaunch l, double* pw,
                                                                 double* pb) {
  using XT = typename X::T;
  __shared__ double red[kWarps];
  const family::NormSets sh = p.shape;
  for_each_set<X>(sh, p.x, [&](std::int64_t k, std::int64_t n, const XT* x) {
    const XT* dy = static_cast<const XT*>(p.dy) + k * n;
    const float mean = p.mean[k];
    const float rstd = p.rstd[k];
    const std::int64_t p0 = (k % sh.groups) * sh.channels;
    double a = 0.0;
    double b = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += kNormThreads) {
      const double xhat = (static_cast<double>(X::load(x[i])) - mean) * rstd;
      const double g = static_cast<double>(X::load(dy[i])) * param<P>(p.weight, p0 + i / sh.spread, 1.0f);
      a += g * xhat;
      b += g;
    }
    const double inv_n = n > 0 ? 1.0 / static_cast<double>(n) : 0.0;
    const double c1 = block_sum(a, red) * inv_n;
    const double c2 = block_sum(b, red) * inv_n;
    if (!l.per_channel) {
      // This block's row of per-parameter sums: each thread owns its parameters of the set.
      double* rw = pw != nullptr ? pw + blockIdx.x * l.params : nullptr;
      double* rb = pb != nullptr ? pb + blockIdx.x * l.params : nullptr;
      bwd_elements<X, P>(p, k, n, 0, n, mean, rstd, c1, c2, [&](std::int64_t c, float d, double xhat) {
        if (rw != nullptr) rw[c] += d * xhat;
        if (rb != nullptr) rb[c] += d;
      });
      return;
    }
    // Per channel of the set: its spread elements, their sums reduced over the block and written
    // to row n = k / groups of the per-(n, channel) sums (each (n, c) belongs to one set).
    const std::int64_t row = k / sh.groups;
    for (std::int64_t ch = 0; ch < sh.channels; ++ch) {
      double sw = 0.0;
      double sb = 0.0;
      bwd_elements<X, P>(p, k, n, ch * sh.spread, (ch + 1) * sh.spread, mean, rstd, c1, c2,
                         [&](std::int64_t, float d, double xhat) {
                           sw += d * xhat;
                           sb += d;
                         });
      if (pw != nullptr) sw = block_sum(sw, red);
      if (pb != nullptr) sb = block_sum(sb, red);
      if (threadIdx.x == 0) {
        if (pw != nullptr) pw[row * l.params + p0 + ch] = sw;
        if (pb != nullptr) pb[row * l.params + p0 + ch] = sb;
      }
    }
  });
}

template <class F>
gpuError_t with_norm_types(family::Elem xt, family::Elem pt, F&& f) {
  switch (xt) {
    case family::Elem::f32:
      return f(F32{}, F32{});
    case family::Elem::f16:
      return pt == family::Elem::f32 ? f(F16{}, F32{}) : f(F16{}, F16{});
    case family::Elem::bf16:
      return pt == family::Elem::f32 ? f(BF16{}, F32{}) : f(BF16{}, BF16{});
  }
  return gpuErrorInvalidValue;
}

}  // namespace
}  // namespace dev

NormLaunch plan_norm(const family::NormSets& shape, int sm_count, bool backward) {
  NormLaunch l;
  const std::int64_t fill = static_cast<std::int64_t>(sm_count) * (2048 / kNormThreads);
  l.grid = static_cast<int>(std::max<std::int64_t>(1, std::min(shape.sets, fill)));
  if (!backward) return l;
  l.params = shape.groups * shape.channels;
  l.per_channel = shape.spread > 1 && shape.sets > 0;
  l.partials = l.per_channel ? shape.sets / std::max<std::int64_t>(1, shape.groups) : l.grid;
  l.workspace = 2 * static_cast<std::size_t>(l.partials) * static_cast<std::size_t>(l.params) * sizeof(double);
  return l;
}

gpuError_t launch_norm_fwd(const family::NormFwd& d, const NormLaunch& l, gpuStream_t stream) {
  if (d.shape.sets == 0) return gpuSuccess;
  return dev::with_norm_types(d.x_type, d.p_type, [&](auto xe, auto pe) {
    dev::norm_fwd_kernel<decltype(xe), decltype(pe)><<<l.grid, kNormThreads, 0, stream>>>(d);
    return gpuGetLastError();
  });
}

gpuError_t launch_norm_bwd(const family::NormBwd& d, const NormLaunch& l, void* workspace, gpuStream_t stream) {
  const std::size_t half = l.workspace / 2;
  auto* pw = d.dweight != nullptr ? static_cast<double*>(workspace) : nullptr;
  auto* pb = d.dbias != nullptr ? reinterpret_cast<double*>(static_cast<char*>(workspace) + half) : nullptr;
  if (!l.per_channel || d.shape.sets == 0) {
    // Rows that sums are added into (or that no set reaches) start at zero.
    if (half > 0 && (pw != nullptr || pb != nullptr)) {
      const gpuError_t err = gpuMemsetAsync(workspace, 0, l.workspace, stream);
      if (err != gpuSuccess) return err;
    }
  }
  if (d.shape.sets > 0) {
    const gpuError_t err = dev::with_norm_types(d.x_type, d.p_type, [&](auto xe, auto pe) {
      dev::norm_bwd_kernel<decltype(xe), decltype(pe)><<<l.grid, kNormThreads, 0, stream>>>(d, l, pw, pb);
      return gpuGetLastError();
    });
    if (err != gpuSuccess) return err;
  }
  // The rows added in order, in double (the finisher's f32-input path reads double partials).
  Launch fl;
  if (pw != nullptr) {
    const gpuError_t err =
        launch_dw_finish(pw, family::Elem::f32, l.partials, l.params, d.dweight, d.p_type, stream, fl);
    if (err != gpuSuccess) return err;
  }
  if (pb != nullptr) {
    const gpuError_t err =
        launch_dw_finish(pb, family::Elem::f32, l.partials, l.params, d.dbias, d.p_type, stream, fl);
    if (err != gpuSuccess) return err;
  }
  return gpuSuccess;
}

}  // namespace opreg::cuda_like
