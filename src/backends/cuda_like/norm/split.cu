// layer_norm and group_norm with a set spread over several blocks
// (cuda.{layer_norm,group_norm}.{fwd,bwd}.split): the sets that one block would take too long on
// (group_norm's (n, group) pairs of tens of channels x an image; layer_norm rows past what the
// rows variant holds in registers), with every multiprocessor busy whatever the set count.
//
// A set (channels x spread elements, contiguous) is cut into chunks: runs of columns (layer_norm,
// spread 1) or of whole channels (group_norm). Blocks are (chunk, set group) pairs, a set group
// walking the sets group, group + groups, ... Each op direction is two kernels:
//   forward   1. per (set, chunk): s = sum(x) and M2 = sum((x - s / len)^2) (the chunk is read
//                twice; the second time from cache);
//             2. per set, the chunks combined in a fixed order (by one warp): mean = sum(s) / n,
//                M2 = sum(M2_c + len_c (mean_c - mean)^2) (Chan et al.: never E[x^2] - mean^2),
//                rstd = 1 / sqrt(M2 / n + eps); then y = X((x - mean) * rstd * w + b) over the
//                chunk, and chunk 0 writes mean and rstd.
//   backward  1. per (set, chunk): a = sum(g * xhat), b = sum(g), g = dy * w; and
//                the parameter sums dweight = sum(dy * xhat), dbias = sum(dy): layer_norm per
//                column in each thread's registers over the sets its group walks, one partial
//                row per group; group_norm per (n, channel), reduced over the block (a channel
//                belongs to one chunk of one set), one row per n;
//             2. dx = X(rstd * (g - xhat * c1 - c2)), c1 = sum(a) / n, c2 = sum(b) / n added in a
//                fixed order. The rms_norm finisher adds the partial rows in order (f64).
// Per element, f64 for f32 inputs and f32 for 16-bit ones (Acc); every sum across accesses,
// threads and chunks in f64, in a fixed order: no atomics, the same bits on every run. x (and dy)
// are read twice from memory, y or dx written once: the price of spreading a set over blocks
// without keeping it on chip.
#include <algorithm>
#include <type_traits>

#include "backends/cuda_like/norm/launch.h"
#include "backends/cuda_like/rms_norm/device.cuh"

namespace opreg::cuda_like {
namespace {

using namespace dev;

constexpr int kThreads = kNormSplitThreads;
constexpr int kWarps = kThreads / kWarp;

// (No member initialisers: HIP refuses __shared__ arrays of a type that has them. `Two t{}` is 0, 0.)
struct Two {
  double a;
  double b;
};

// The block's sums of v.a and v.b, in a fixed order, returned to every thread; `red` holds kWarps
// pairs, free again when this returns.
OPREG_DEV Two block_sum2(Two v, Two* red) {
  v.a = warp_sum(v.a, kWarp);
  v.b = warp_sum(v.b, kWarp);
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  if (threadIdx.x % kWarp == 0) red[warp] = v;
  __syncthreads();
  Two total{};
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    total.a += red[w].a;
    total.b += red[w].b;
  }
  __syncthreads();
  return total;
}

// The type of a thread's per-element arithmetic: f64 for f32 inputs, f32 for 16-bit ones, whose
// few significant bits leave f32 sums of an access exact or nearly (f64 per element made the
// 16-bit kernels 1-3% slower forward, 4-10% forward+backward, on the H100). Sums over accesses
// and blocks are f64.
template <class X>
using Acc = std::conditional_t<sizeof(typename X::T) == 2, float, double>;

// A mean kept as f32 hi + lo (the rows variant's form), so that (x - hi) - lo is accurate relative
// to the deviation, not to the mean.
struct Mean {
  float hi;
  float lo;
  OPREG_DEV explicit Mean(double m) : hi(static_cast<float>(m)), lo(static_cast<float>(m - static_cast<float>(m))) {}
  OPREG_DEV float deviation_f32(float x) const { return (x - hi) - lo; }
  template <class X>
  OPREG_DEV Acc<X> deviation(float x) const {
    if constexpr (std::is_same_v<Acc<X>, float>) {
      return deviation_f32(x);
    } else {
      return (static_cast<double>(x) - hi) - lo;
    }
  }
};

// What warp 0 computes from a set's per-chunk sums (lane l takes chunks l, l + warp, ...), shared
// with the block through `red[0]`: the chunks of a wide set are many (64 for f32 sets of
// 64 x 4096), too many for every thread to add them one by one.
template <class F>
OPREG_DEV Two from_warp0(Two* red, F&& f) {
  if (threadIdx.x < kWarp) {
    const Two v = f(static_cast<int>(threadIdx.x));
    if (threadIdx.x == 0) red[0] = v;
  }
  __syncthreads();
  const Two v = red[0];
  __syncthreads();
  return v;
}

// The geometry the kernels share (NormSplitLaunch's device side).
struct Split {
  std::int64_t sets;
  std::int64_t groups;    // the op's groups (the weight slice of set k starts at (k % groups) * channels)
  std::int64_t channels;  // a set's
  std::int64_t spread;
  std::int64_t chunk;     // columns (spread 1) or channels a chunk
  std::int64_t chunks;
  std::int64_t walkers;   // set groups
  OPREG_DEV std::int64_t n() const { return channels * spread; }
  OPREG_DEV std::int64_t chunk_of_block() const { return blockIdx.x % chunks; }
  OPREG_DEV std::int64_t first_set() const { return blockIdx.x / chunks; }
  // Chunk c's elements: [begin, end) of the set.
  OPREG_DEV std::int64_t begin(std::int64_t c) const { return c * chunk * spread; }
  OPREG_DEV std::int64_t last_channel(std::int64_t c) const {  // one past chunk c's
    return (c + 1) * chunk < channels ? (c + 1) * chunk : channels;
  }
  OPREG_DEV std::int64_t end(std::int64_t c) const { return last_channel(c) * spread; }
};

Split split_of(const family::NormSets& sh, const NormSplitLaunch& l) {
  return {sh.sets, sh.groups, sh.channels, sh.spread, l.chunk, l.chunks, l.walkers};
}

// f(e, c) for this thread's accesses of VEC elements in chunk `c`: e the first element's index in
// the set, c its channel within the set. Channel chunks walk channel by channel, so a channel's
// parameters are loaded once per run of it (spread % VEC == 0 when VEC > 1: no access straddles
// two channels).
template <int VEC, bool CH, class F>
OPREG_DEV void each_access(const Split& s, std::int64_t c, F&& f) {
  if constexpr (!CH) {
    const std::int64_t end = s.end(c);
    for (std::int64_t e = s.begin(c) + threadIdx.x * VEC; e < end; e += kThreads * VEC) f(e, e);
  } else {
    for (std::int64_t ch = c * s.chunk; ch < s.last_channel(c); ++ch) {
      const std::int64_t end = (ch + 1) * s.spread;
      for (std::int64_t e = ch * s.spread + threadIdx.x * VEC; e < end; e += kThreads * VEC) f(e, ch);
    }
  }
}

// The VEC parameters of access e (channel ch of the set whose slice starts at p0): a pack of
// per-column parameters, or one per-channel value repeated; `none` without the tensor.
template <class P, int VEC, bool CH>
OPREG_DEV void params_of(const void* t, std::int64_t p0, std::int64_t e, std::int64_t ch, float none,
                         float (&out)[VEC]) {
  using PT = typename P::T;
  if (t == nullptr) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) out[i] = none;
  } else if constexpr (CH) {
    const float v = P::load(static_cast<const PT*>(t)[p0 + ch]);
#pragma unroll
    for (int i = 0; i < VEC; ++i) out[i] = v;
  } else {
    const Pack<P, VEC> v = load_pack<P, VEC>(static_cast<const PT*>(t) + p0 + e);
#pragma unroll
    for (int i = 0; i < VEC; ++i) out[i] = P::load(v.v[i]);
  }
}

template <class X, int VEC, bool CH>
__global__ void __launch_bounds__(kThreads) fwd_stats_kernel(family::NormFwd p, Split s, Two* sums) {
  using XT = typename X::T;
  __shared__ Two red[kWarps];
  const std::int64_t c = s.chunk_of_block();
  const double len = static_cast<double>(s.end(c) - s.begin(c));
  for (std::int64_t k = s.first_set(); k < s.sets; k += s.walkers) {
    const XT* x = static_cast<const XT*>(p.x) + k * s.n();
    Two t{};
    each_access<VEC, CH>(s, c, [&](std::int64_t e, std::int64_t) {
      const Pack<X, VEC> v = load_pack<X, VEC>(x + e);
      Acc<X> part = 0;
#pragma unroll
      for (int i = 0; i < VEC; ++i) part += X::load(v.v[i]);
      t.a += part;
    });
    const double sum = block_sum2(t, red).a;
    const double mean = sum / len;
    const Mean m(mean);
    Two q{};
    each_access<VEC, CH>(s, c, [&](std::int64_t e, std::int64_t) {
      const Pack<X, VEC> v = load_pack<X, VEC>(x + e);
      Acc<X> part = 0;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const Acc<X> d = m.deviation<X>(X::load(v.v[i]));
        part += d * d;
      }
      q.a += part;
    });
    q = block_sum2(q, red);
    if (threadIdx.x == 0) sums[k * s.chunks + c] = {sum, q.a};
  }
}

template <class X, class P, int VEC, bool CH>
__global__ void __launch_bounds__(kThreads) fwd_norm_kernel(family::NormFwd p, Split s, const Two* sums) {
  using XT = typename X::T;
  __shared__ Two red[1];
  const std::int64_t c = s.chunk_of_block();
  const double n = static_cast<double>(s.n());
  for (std::int64_t k = s.first_set(); k < s.sets; k += s.walkers) {
    const Two* mine = sums + k * s.chunks;
    const Two stats = from_warp0(red, [&](int lane) {
      double total = 0.0;
      for (std::int64_t i = lane; i < s.chunks; i += kWarp) total += mine[i].a;
      const double mean = warp_sum(total, kWarp) / n;
      double m2 = 0.0;
      for (std::int64_t i = lane; i < s.chunks; i += kWarp) {
        const double len = static_cast<double>(s.end(i) - s.begin(i));
        const double d = mine[i].a / len - mean;
        m2 += mine[i].b + len * d * d;
      }
      return Two{mean, warp_sum(m2, kWarp)};
    });
    const double mean = stats.a;
    const double m2 = stats.b;
    const float rstd = static_cast<float>(1.0 / sqrt(m2 / n + p.eps));
    const Mean m(mean);
    const std::int64_t p0 = (k % s.groups) * s.channels;
    const XT* x = static_cast<const XT*>(p.x) + k * s.n();
    XT* y = static_cast<XT*>(p.y) + k * s.n();
    each_access<VEC, CH>(s, c, [&](std::int64_t e, std::int64_t ch) {
      const Pack<X, VEC> v = load_pack<X, VEC>(x + e);
      float w[VEC];
      float b[VEC];
      params_of<P, VEC, CH>(p.weight, p0, e, ch, 1.0f, w);
      params_of<P, VEC, CH>(p.bias, p0, e, ch, 0.0f, b);
      Pack<X, VEC> out;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float xhat = m.deviation_f32(X::load(v.v[i])) * rstd;
        out.v[i] = X::store(xhat * w[i] + b[i]);
      }
      store_pack<X, VEC>(y + e, out);
    });
    if (c == 0 && threadIdx.x == 0) {
      p.mean[k] = m.hi;
      p.rstd[k] = rstd;
    }
  }
}

// One access's terms f(i, xhat, dy, g = dy * w) in Acc<X>: for f32 inputs xhat is f64 (dweight's
// terms dy * xhat of rows near 2^60 cancel across rows, so an f32 xhat's rounding would show at
// f32 tolerance; the reference's xhat is f64), for 16-bit ones f32 (the rows variant's rule).
template <class X, int VEC, class F>
OPREG_DEV void bwd_terms(const Pack<X, VEC>& xv, const Pack<X, VEC>& dyv, const float (&w)[VEC], float mean, float rstd,
                         F&& f) {
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    const Acc<X> xhat = (static_cast<Acc<X>>(X::load(xv.v[i])) - mean) * rstd;
    const float d = X::load(dyv.v[i]);
    // g rounded to Acc on its own (no fused multiply-add into what uses it): dx's g - c2 is then
    // exactly 0 where c2 is g's own mean (a row of one column).
    if constexpr (std::is_same_v<Acc<X>, float>) {
      f(i, xhat, d, __fmul_rn(d, w[i]));
    } else {
      f(i, xhat, d, static_cast<double>(d) * w[i]);
    }
  }
}

// Columns: the accesses a thread holds dweight/dbias sums for (chunk = kThreads x kBwdNv x VEC).
constexpr int kBwdNv = 2;

template <class X, class P, int VEC, bool CH>
__global__ void __launch_bounds__(kThreads)
    bwd_sums_kernel(family::NormBwd p, Split s, Two* sums, double* pw, double* pb, std::int64_t params) {
  using XT = typename X::T;
  __shared__ Two red[kWarps];
  const std::int64_t c = s.chunk_of_block();
  const bool params_wanted = pw != nullptr || pb != nullptr;
  // layer_norm: this thread's columns' sums over the sets its group walks.
  Acc<X> acc_w[CH ? 1 : kBwdNv][CH ? 1 : VEC] = {};
  Acc<X> acc_b[CH ? 1 : kBwdNv][CH ? 1 : VEC] = {};
  for (std::int64_t k = s.first_set(); k < s.sets; k += s.walkers) {
    const XT* x = static_cast<const XT*>(p.x) + k * s.n();
    const XT* dy = static_cast<const XT*>(p.dy) + k * s.n();
    const float mean = p.mean[k];
    const float rstd = p.rstd[k];
    const std::int64_t p0 = (k % s.groups) * s.channels;
    Two t{};
    if constexpr (!CH) {
      const std::int64_t end = s.end(c);
#pragma unroll
      for (int j = 0; j < kBwdNv; ++j) {
        const std::int64_t e = s.begin(c) + (threadIdx.x + static_cast<std::int64_t>(j) * kThreads) * VEC;
        if (e < end) {
          const Pack<X, VEC> xv = load_pack<X, VEC>(x + e);
          const Pack<X, VEC> dyv = load_pack<X, VEC>(dy + e);
          float w[VEC];
          params_of<P, VEC, false>(p.weight, p0, e, 0, 1.0f, w);
          Acc<X> pa = 0;
          Acc<X> pb2 = 0;
          bwd_terms<X, VEC>(xv, dyv, w, mean, rstd, [&](int i, Acc<X> xhat, float d, Acc<X> g) {
            pa += g * xhat;
            pb2 += g;
            acc_w[j][i] += d * xhat;
            acc_b[j][i] += d;
          });
          t.a += pa;
          t.b += pb2;
        }
      }
    } else {
      const std::int64_t row = k / s.groups;  // (n, channel) sums: row n
      for (std::int64_t ch = c * s.chunk; ch < s.last_channel(c); ++ch) {
        float w[VEC];
        params_of<P, VEC, true>(p.weight, p0, 0, ch, 1.0f, w);
        Two mine{};
        const std::int64_t end = (ch + 1) * s.spread;
        for (std::int64_t e = ch * s.spread + threadIdx.x * VEC; e < end; e += kThreads * VEC) {
          const Pack<X, VEC> xv = load_pack<X, VEC>(x + e);
          const Pack<X, VEC> dyv = load_pack<X, VEC>(dy + e);
          Acc<X> pa = 0;
          Acc<X> pb2 = 0;
          Acc<X> pw2 = 0;
          Acc<X> pd = 0;
          bwd_terms<X, VEC>(xv, dyv, w, mean, rstd, [&](int, Acc<X> xhat, float d, Acc<X> g) {
            pa += g * xhat;
            pb2 += g;
            pw2 += d * xhat;
            pd += d;
          });
          t.a += pa;
          t.b += pb2;
          mine.a += pw2;
          mine.b += pd;
        }
        if (params_wanted) {
          mine = block_sum2(mine, red);
          if (threadIdx.x == 0) {
            if (pw != nullptr) pw[row * params + p0 + ch] = mine.a;
            if (pb != nullptr) pb[row * params + p0 + ch] = mine.b;
          }
        }
      }
    }
    t = block_sum2(t, red);
    if (threadIdx.x == 0) sums[k * s.chunks + c] = t;
  }
  if constexpr (!CH) {
    if (!params_wanted) return;
    // This group's partial row: every column of the chunk, written by the thread that summed it.
    const std::int64_t row = s.first_set();
    const std::int64_t end = s.end(c);
#pragma unroll
    for (int j = 0; j < kBwdNv; ++j) {
      const std::int64_t e = s.begin(c) + (threadIdx.x + static_cast<std::int64_t>(j) * kThreads) * VEC;
      if (e < end) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          if (pw != nullptr) pw[row * params + e + i] = acc_w[j][i];
          if (pb != nullptr) pb[row * params + e + i] = acc_b[j][i];
        }
      }
    }
  }
}

template <class X, class P, int VEC, bool CH>
__global__ void __launch_bounds__(kThreads) bwd_dx_kernel(family::NormBwd p, Split s, const Two* sums) {
  using XT = typename X::T;
  __shared__ Two red[1];
  const std::int64_t c = s.chunk_of_block();
  const double inv_n = 1.0 / static_cast<double>(s.n());
  for (std::int64_t k = s.first_set(); k < s.sets; k += s.walkers) {
    const Two* mine = sums + k * s.chunks;
    const Two t = from_warp0(red, [&](int lane) {
      Two v{};
      for (std::int64_t i = lane; i < s.chunks; i += kWarp) {
        v.a += mine[i].a;
        v.b += mine[i].b;
      }
      return Two{warp_sum(v.a, kWarp), warp_sum(v.b, kWarp)};
    });
    const Acc<X> c1 = static_cast<Acc<X>>(t.a * inv_n);
    const Acc<X> c2 = static_cast<Acc<X>>(t.b * inv_n);
    const float mean = p.mean[k];
    const float rstd = p.rstd[k];
    const std::int64_t p0 = (k % s.groups) * s.channels;
    const XT* x = static_cast<const XT*>(p.x) + k * s.n();
    const XT* dy = static_cast<const XT*>(p.dy) + k * s.n();
    XT* dx = static_cast<XT*>(p.dx) + k * s.n();  // may be dy: each access is read before it is written
    each_access<VEC, CH>(s, c, [&](std::int64_t e, std::int64_t ch) {
      const Pack<X, VEC> xv = load_pack<X, VEC>(x + e);
      const Pack<X, VEC> dyv = load_pack<X, VEC>(dy + e);
      float w[VEC];
      params_of<P, VEC, CH>(p.weight, p0, e, ch, 1.0f, w);
      Pack<X, VEC> out;
      bwd_terms<X, VEC>(xv, dyv, w, mean, rstd, [&](int i, Acc<X> xhat, float, Acc<X> g) {
        out.v[i] = X::store(static_cast<float>(rstd * (g - c2 - xhat * c1)));
      });
      store_pack<X, VEC>(dx + e, out);
    });
  }
}

// Calls f(X{}, P{}, VEC, CH) for the launch's element types, access width and chunk kind.
template <class F>
gpuError_t with_split(family::Elem xt, family::Elem pt, const NormSplitLaunch& l, F&& f) {
  return with_types(xt, pt, [&]<class X, class P, int kVec>() -> gpuError_t {
    const auto by_vec = [&](auto ch) -> gpuError_t {
      if (l.vec == 1) return f(X{}, P{}, std::integral_constant<int, 1>{}, ch);
      return f(X{}, P{}, std::integral_constant<int, kVec>{}, ch);
    };
    if (l.channel_chunks) return by_vec(std::true_type{});
    return by_vec(std::false_type{});
  });
}

std::size_t round256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

gpuError_t plan_norm_split(const family::NormSets& shape, family::Elem x_type, family::Elem p_type, int vec,
                           bool backward, bool partial_sums, const GpuInfo& g, NormSplitLaunch& l) {
  l = NormSplitLaunch{};
  l.vec = vec;
  l.channel_chunks = norm_split_channel_chunks(shape);
  const std::int64_t per_chunk = static_cast<std::int64_t>(kThreads) * (backward ? kBwdNv : kNormSplitFwdNv) * vec;
  if (l.channel_chunks) {
    l.chunk = std::max<std::int64_t>(1, per_chunk / std::max<std::int64_t>(1, shape.spread));
    l.chunk = std::min(l.chunk, std::max<std::int64_t>(1, shape.channels));
  } else {
    l.chunk = per_chunk;
  }
  l.chunks = std::max<std::int64_t>(1, (shape.channels + l.chunk - 1) / l.chunk);
  int per_sm = 0;
  const gpuError_t err = with_split(x_type, p_type, l, [&](auto xe, auto pe, auto ve, auto ch) {
    using X = decltype(xe);
    using P = decltype(pe);
    constexpr int kVec = decltype(ve)::value;
    constexpr bool kCh = decltype(ch)::value;
    if (backward) return occupancy(bwd_dx_kernel<X, P, kVec, kCh>, g.device, kThreads, 0, per_sm);
    return occupancy(fwd_norm_kernel<X, P, kVec, kCh>, g.device, kThreads, 0, per_sm);
  });
  if (err != gpuSuccess) return err;
  // Enough set groups to fill the device twice over; a layer_norm backward's groups each add a
  // partial row of every column for the finisher, so they stop at 128.
  const std::int64_t target = 2LL * per_sm * g.sm_count;
  std::int64_t walkers = (target + l.chunks - 1) / l.chunks;
  if (backward && !l.channel_chunks && partial_sums) walkers = std::min<std::int64_t>(walkers, 128);
  l.walkers = std::clamp<std::int64_t>(walkers, 1, std::max<std::int64_t>(1, shape.sets));
  l.grid = static_cast<int>(l.chunks * l.walkers);
  l.sums = round256(static_cast<std::size_t>(shape.sets * l.chunks) * 2 * sizeof(double));
  l.workspace = l.sums;
  if (backward && partial_sums) {
    l.params = shape.groups * shape.channels;
    l.partials = l.channel_chunks ? shape.sets / std::max<std::int64_t>(1, shape.groups) : l.walkers;
    l.workspace += 2 * static_cast<std::size_t>(l.partials * l.params) * sizeof(double);
  }
  return gpuSuccess;
}

gpuError_t launch_norm_split_fwd(const family::NormFwd& d, const NormSplitLaunch& l, void* workspace,
                                 gpuStream_t stream) {
  auto* sums = static_cast<Two*>(workspace);
  const Split s = split_of(d.shape, l);
  return with_split(d.x_type, d.p_type, l, [&](auto xe, auto pe, auto ve, auto ch) -> gpuError_t {
    using X = decltype(xe);
    constexpr int kVec = decltype(ve)::value;
    constexpr bool kCh = decltype(ch)::value;
    fwd_stats_kernel<X, kVec, kCh><<<l.grid, kThreads, 0, stream>>>(d, s, sums);
    if (gpuError_t err = gpuGetLastError(); err != gpuSuccess) return err;
    fwd_norm_kernel<X, decltype(pe), kVec, kCh><<<l.grid, kThreads, 0, stream>>>(d, s, sums);
    return gpuGetLastError();
  });
}

gpuError_t launch_norm_split_bwd(const family::NormBwd& d, const NormSplitLaunch& l, void* workspace,
                                 gpuStream_t stream) {
  auto* sums = static_cast<Two*>(workspace);
  const std::size_t half = static_cast<std::size_t>(l.partials * l.params) * sizeof(double);
  double* pw = nullptr;
  double* pb = nullptr;
  if (l.partials > 0) {
    auto* base = static_cast<unsigned char*>(workspace) + l.sums;
    if (d.dweight != nullptr) pw = reinterpret_cast<double*>(base);
    if (d.dbias != nullptr) pb = reinterpret_cast<double*>(base + half);
  }
  const Split s = split_of(d.shape, l);
  const gpuError_t err = with_split(d.x_type, d.p_type, l, [&](auto xe, auto pe, auto ve, auto ch) -> gpuError_t {
    using X = decltype(xe);
    using P = decltype(pe);
    constexpr int kVec = decltype(ve)::value;
    constexpr bool kCh = decltype(ch)::value;
    bwd_sums_kernel<X, P, kVec, kCh><<<l.grid, kThreads, 0, stream>>>(d, s, sums, pw, pb, l.params);
    if (gpuError_t e = gpuGetLastError(); e != gpuSuccess) return e;
    bwd_dx_kernel<X, P, kVec, kCh><<<l.grid, kThreads, 0, stream>>>(d, s, sums);
    return gpuGetLastError();
  });
  if (err != gpuSuccess) return err;
  // The partial rows added in order, in f64 (the finisher's f32-input path reads f64 partials).
  Launch fl;
  for (auto [part, out] : {std::pair{pw, d.dweight}, std::pair{pb, d.dbias}}) {
    if (part == nullptr) continue;
    const gpuError_t e = launch_dw_finish(part, family::Elem::f32, l.partials, l.params, out, d.p_type, stream, fl);
    if (e != gpuSuccess) return e;
  }
  return gpuSuccess;
}

}  // namespace opreg::cuda_like
