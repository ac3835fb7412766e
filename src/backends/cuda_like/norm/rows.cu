// layer_norm with the row held on chip (cuda.layer_norm.{fwd,bwd}.rows; the `sets` variant,
// norm/kernels.cu, stays the fallback for rows that do not fit).
//
// A row is spread over `tpr` threads, each holding NV accesses of VEC elements in registers (16
// bytes when every row is 16-byte aligned, else single elements: the rms_norm rows kernels'
// rule); short rows share a block (`slots` rows of tpr <= 32 threads). Every element of x (and
// dy) is read from memory once; the statistics are two passes over the registers.
//
//   forward   mean = sum(x) / H: each thread's share summed in f32 with Kahan's compensation
//             (rows whose mean is far from zero relative to their spread keep their mean to f64
//             accuracy), its terms x * 2^-8 (no finite row overflows: at most 64 terms a thread),
//             the shares added in f64 across the row. The mean is kept as f32 hi + lo, so
//             d = (x - hi) - lo is accurate relative to d, not to the mean.
//             var = sum(d^2) / H in f32 with the rms_norm kernels' out-of-range rescue
//             (row_total: a second pass scaled by 2^-88 or 2^88 where the f32 total overflows or
//             underflows, e.g. x near 2^60, or a row of equal values), never E[x^2] - mean^2.
//             rstd = 1 / sqrt(var + eps); y = X(d * rstd * w + b).
//   backward  xhat = (x - mean) * rstd, g = dy * w, c1 = sum(g * xhat) / H, c2 = sum(g) / H (f32
//             shares, f64 across the row), dx = X(rstd * (g - xhat * c1 - c2)).
//             dweight = sum dy * xhat, dbias = sum dy over the rows a thread sees, in registers:
//             f64 for f32 inputs (xhat in f64: the terms of rows near 2^60 cancel across rows,
//             and an f32 xhat's rounding would show at f32 tolerance), f32 for 16-bit inputs.
//             A persistent grid: each block writes one partial row (its slots added in slot
//             order through shared memory), the rms_norm finisher adds the rows in order: no
//             atomics, the same bits on every run.
// Limits: x and the deviations x - mean must stay finite in f32 (|x| under 2^127); the
// backward's per-thread shares of g * xhat in f32 (dy under ~2^120).
#include <algorithm>
#include <type_traits>

#include "backends/cuda_like/norm/launch.h"
#include "backends/cuda_like/rms_norm/device.cuh"

namespace opreg::cuda_like {
namespace {

using namespace dev;

// The row of group g a thread works on, and which of its accesses fall inside the row.
struct LnWalk {
  std::int64_t rows;
  std::int64_t groups;  // row groups (slots rows each)
  int slots;
  int slot;
  int lane;  // thread within its row's threads (0 writes the row's statistics)
  int tpr;
  int mine;  // accesses of this thread that fall inside a row
  OPREG_DEV LnWalk(std::int64_t rows_, int tpr_, int slots_, int nvec, int nv)
      : rows(rows_),
        groups((rows_ + slots_ - 1) / slots_),
        slots(slots_),
        slot(static_cast<int>(threadIdx.x) / tpr_),
        lane(static_cast<int>(threadIdx.x) - slot * tpr_),
        tpr(tpr_),
        mine(accesses(lane, tpr_, nvec, nv)) {}
  OPREG_DEV std::int64_t row(std::int64_t g) const { return g * slots + slot; }
  OPREG_DEV int count(std::int64_t g) const { return row(g) < rows ? mine : 0; }
  // The element offset of this thread's first access of group g's row.
  template <int VEC>
  OPREG_DEV std::int64_t at(std::int64_t g, std::int64_t hidden) const {
    return row(g) * hidden + static_cast<std::int64_t>(lane) * VEC;
  }
  // The column of access k's first element.
  template <int VEC>
  OPREG_DEV int column(int k) const {
    return (lane + k * tpr) * VEC;
  }
};

// An access's weights and biases as f32 (1 and 0 without them).
template <class P, int VEC>
OPREG_DEV void load_affine(const typename P::T* w, const typename P::T* b, int col, float (&wf)[VEC],
                           float (&bf)[VEC]) {
  if (w != nullptr) {
    const Pack<P, VEC> v = load_pack<P, VEC>(w + col);
#pragma unroll
    for (int e = 0; e < VEC; ++e) wf[e] = P::load(v.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) wf[e] = 1.0f;
  }
  if (b != nullptr) {
    const Pack<P, VEC> v = load_pack<P, VEC>(b + col);
#pragma unroll
    for (int e = 0; e < VEC; ++e) bf[e] = P::load(v.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) bf[e] = 0.0f;
  }
}

// The forward's sum terms are x * kSumScale (exact for every f32 of magnitude 2^-118 or more; below,
// the product is subnormal and may lose low bits, which matters only with eps near 0), so that a
// thread's 64 terms cannot overflow whatever the input.
constexpr float kSumScale = 0x1.0p-8f;

template <class X, class P, int VEC, int NV>
__global__ void __launch_bounds__(ln_max_threads(false, NV, VEC, static_cast<int>(sizeof(typename X::T))))
    ln_fwd_rows_kernel(family::NormFwd p, int tpr, int slots) {
  using XT = typename X::T;
  using PT = typename P::T;
  __shared__ double red_mean[kRedSlots];
  __shared__ float red[kRedSlots];
  __shared__ float red2[kRedSlots];
  const std::int64_t hidden = p.shape.channels;
  const LnWalk walk(p.shape.sets, tpr, slots, static_cast<int>(hidden / VEC), NV);
  const auto* __restrict__ x = static_cast<const XT*>(p.x);
  const auto* w = static_cast<const PT*>(p.weight);
  const auto* b = static_cast<const PT*>(p.bias);
  const float eps = static_cast<float>(p.eps);
  int parity = 0;
  for (std::int64_t g = blockIdx.x; g < walk.groups; g += gridDim.x, parity ^= 1) {
    const int count = walk.count(g);
    const std::int64_t at = count > 0 ? walk.at<VEC>(g, hidden) : 0;
    Pack<X, VEC> regs[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) regs[k] = load_pack_once<X, VEC>(x + at + k * tpr * VEC);
    }
    // The mean: Kahan's sum of this thread's terms (exact apart from the final rounding for any
    // row a thread's 64 terms can hold), then the threads' shares in f64, in a fixed order.
    float sum = 0.0f;
    float comp = 0.0f;   // what sum holds beyond the exact total
    float plain = 0.0f;  // the plain sum: +-inf where a term is (Kahan's turns an inf into NaN)
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xs = X::load(regs[k].v[e]) * kSumScale;
          const float y = xs - comp;
          const float t = sum + y;
          comp = (t - sum) - y;
          sum = t;
          plain += xs;
        }
      }
    }
    // A share with an infinity or NaN among its terms is their plain sum: +inf for a row holding
    // +inf (the reference's mean), NaN for one holding NaN or both infinities.
    const double share =
        isfinite(plain) ? static_cast<double>(sum) - static_cast<double>(comp) : static_cast<double>(plain);
    // Divided (not multiplied by 1 / H): a row of equal values gets its value back exactly.
    const double mean =
        row_sum(share, tpr, red_mean, parity) / static_cast<double>(hidden) / static_cast<double>(kSumScale);
    const float mean_hi = static_cast<float>(mean);
    const float mean_lo = isfinite(mean) ? static_cast<float>(mean - static_cast<double>(mean_hi)) : 0.0f;
    const auto squares = [&](float scale) {
      float ss = 0.0f;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) {
          const Pack<X, VEC> xv = opaque(regs[k]);
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float d = ((X::load(xv.v[e]) - mean_hi) - mean_lo) * scale;
            ss += d * d;
          }
        }
      }
      return ss;
    };
    const RowTotal ss = row_total(squares, tpr, red, red2, parity, kTinySquares);
    float rstd;
    if (ss.scaled) {
      rstd = rstd_of(ss.value, hidden, p.eps);
    } else {
      rstd = 1.0f / sqrtf(static_cast<float>(ss.value) / static_cast<float>(hidden) + eps);
    }
    XT* y = static_cast<XT*>(p.y) + at;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        float wf[VEC];
        float bf[VEC];
        load_affine<P, VEC>(w, b, walk.column<VEC>(k), wf, bf);
        Pack<X, VEC> out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xhat = ((X::load(regs[k].v[e]) - mean_hi) - mean_lo) * rstd;
          out.v[e] = X::store(fmaf(xhat, wf[e], bf[e]));
        }
        store_pack<X, VEC>(y + k * tpr * VEC, out);
      }
    }
    if (walk.lane == 0 && walk.row(g) < walk.rows) {
      p.mean[walk.row(g)] = mean_hi;
      p.rstd[walk.row(g)] = rstd;
    }
  }
}

// dweight's and dbias's sums (and partials): f64 for f32 inputs, f32 for 16-bit ones
// (rms_norm's DwPartial, which launch_dw_finish reads).
template <class X>
using LnSum = DwPartial<X>;

// The partial row of a block: its threads' sums at their columns; with several rows a block, the
// slots' sums added in slot order through `combine` (hidden sums) first. Every column is some
// lane's of every slot, so the whole row is written.
template <class X, int VEC, int NV>
OPREG_DEV void write_partials(const LnWalk& walk, std::int64_t hidden, const LnSum<X> (&acc)[NV][VEC],
                              LnSum<X>* combine, LnSum<X>* out) {
  if (walk.slots == 1) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < walk.mine) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) out[walk.column<VEC>(k) + e] = acc[k][e];
      }
    }
    return;
  }
  __syncthreads();  // combine may still be read for the previous output
  combine_slots<VEC, NV>(walk, hidden, combine, out, [&](int k, int e) { return acc[k][e]; });
}

// Shared memory (dynamic): with several rows a block, `hidden` sums where the slots' are added.
// pw, pb: this launch's dweight and dbias partial rows (one a block), or null when not wanted.
template <class X, class P, int VEC, int NV>
__global__ void __launch_bounds__(ln_max_threads(true, NV, VEC, static_cast<int>(sizeof(typename X::T))))
    ln_bwd_rows_kernel(family::NormBwd p, int tpr, int slots, void* pw_out, void* pb_out) {
  using XT = typename X::T;
  using PT = typename P::T;
  constexpr bool kWide = std::is_same_v<X, F32>;
  extern __shared__ uint4 combine_raw[];
  __shared__ double red_a[kRedSlots];
  __shared__ double red_b[kRedSlots];
  const std::int64_t hidden = p.shape.channels;
  const LnWalk walk(p.shape.sets, tpr, slots, static_cast<int>(hidden / VEC), NV);
  const auto* __restrict__ x = static_cast<const XT*>(p.x);
  const auto* dy = static_cast<const XT*>(p.dy);  // may be dx: no __restrict__
  const auto* w = static_cast<const PT*>(p.weight);
  const double inv_h = 1.0 / static_cast<double>(hidden);  // hidden > 0: the plan refuses 0
  auto* pw = static_cast<LnSum<X>*>(pw_out);
  auto* pb = static_cast<LnSum<X>*>(pb_out);
  const bool want_w = pw != nullptr;
  const bool want_b = pb != nullptr;
  LnSum<X> acc_w[NV][VEC];
  LnSum<X> acc_b[NV][VEC];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      acc_w[k][e] = 0;
      acc_b[k][e] = 0;
    }
  }
  int parity = 0;
  for (std::int64_t g = blockIdx.x; g < walk.groups; g += gridDim.x, parity ^= 1) {
    const int count = walk.count(g);
    const std::int64_t row = walk.row(g);
    const float mean = row < walk.rows ? p.mean[row] : 0.0f;
    const float rstd = row < walk.rows ? p.rstd[row] : 0.0f;
    const std::int64_t at = count > 0 ? walk.at<VEC>(g, hidden) : 0;
    Pack<X, VEC> xregs[NV];
    Pack<X, VEC> dyregs[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        xregs[k] = load_pack_once<X, VEC>(x + at + k * tpr * VEC);
        dyregs[k] = load_pack<X, VEC>(dy + at + k * tpr * VEC);
      }
    }
    float a = 0.0f;  // sum g * xhat
    float c = 0.0f;  // sum g
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        float wf[VEC];
        float unused[VEC];
        load_affine<P, VEC>(w, nullptr, walk.column<VEC>(k), wf, unused);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xhat = (X::load(xregs[k].v[e]) - mean) * rstd;
          const float gv = X::load(dyregs[k].v[e]) * wf[e];
          a += gv * xhat;
          c += gv;
        }
      }
    }
    const float c1 = static_cast<float>(row_sum(static_cast<double>(a), tpr, red_a, parity) * inv_h);
    const float c2 = static_cast<float>(row_sum(static_cast<double>(c), tpr, red_b, parity) * inv_h);
    XT* dx = static_cast<XT*>(p.dx) + at;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k < count) {
        float wf[VEC];
        float unused[VEC];
        load_affine<P, VEC>(w, nullptr, walk.column<VEC>(k), wf, unused);
        Pack<X, VEC> out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xf = X::load(xregs[k].v[e]);
          const float dyf = X::load(dyregs[k].v[e]);
          const float xhat = (xf - mean) * rstd;
          out.v[e] = X::store(rstd * ((dyf * wf[e] - xhat * c1) - c2));
          if constexpr (kWide) {
            if (want_w) {
              const double xd = (static_cast<double>(xf) - static_cast<double>(mean)) * static_cast<double>(rstd);
              acc_w[k][e] += static_cast<double>(dyf) * xd;
            }
            if (want_b) acc_b[k][e] += static_cast<double>(dyf);
          } else {
            if (want_w) acc_w[k][e] += dyf * xhat;
            if (want_b) acc_b[k][e] += dyf;
          }
        }
        store_pack<X, VEC>(dx + k * tpr * VEC, out);
      }
    }
  }
  if (want_w || want_b) {
    let_next_kernel_launch();
    auto* combine = reinterpret_cast<LnSum<X>*>(combine_raw);
    if (want_w) write_partials<X, VEC, NV>(walk, hidden, acc_w, combine, pw + blockIdx.x * hidden);
    if (want_b) write_partials<X, VEC, NV>(walk, hidden, acc_b, combine, pb + blockIdx.x * hidden);
  }
}

// The direction's rows kernel (only the one named is instantiated).
template <bool BWD, class X, class P, int VEC, int NV>
constexpr auto ln_rows_kernel = ln_fwd_rows_kernel<X, P, VEC, NV>;
template <class X, class P, int VEC, int NV>
constexpr auto ln_rows_kernel<true, X, P, VEC, NV> = ln_bwd_rows_kernel<X, P, VEC, NV>;

// Calls f(kernel) with the instantiation for the direction (BWD), dtypes and launch shape.
template <bool BWD, class F>
gpuError_t with_ln_kernel(Elem xt, Elem pt, const LnRowsShape& s, F&& f) {
  return with_types(xt, pt, [&]<class X, class P, int kVec>() -> gpuError_t {
    const auto pick = [&]<int VEC, int NV>() -> gpuError_t { return f(ln_rows_kernel<BWD, X, P, VEC, NV>); };
    if (s.vec == 1) {
      if (s.nv == kLnScalarNv) return pick.template operator()<1, kLnScalarNv>();
      return gpuErrorInvalidValue;
    }
    if (s.vec != kVec) return gpuErrorInvalidValue;
    const auto packed = [&]<int NV>() { return pick.template operator()<kVec, NV>(); };
    if constexpr (BWD) {
      return with_nv<1, 2, 4>(s.nv, packed);
    } else {
      return with_nv<4, 8>(s.nv, packed);
    }
  });
}

}  // namespace

gpuError_t plan_ln_rows(const family::NormSets& shape, Elem x_type, Elem p_type, bool backward, bool partial_sums,
                        const LnRowsShape& s, const GpuInfo& g, LnRowsLaunch& l) {
  l = LnRowsLaunch{};
  l.shape = s;
  l.threads = s.tpr * s.slots;
  const std::int64_t groups = (shape.sets + s.slots - 1) / s.slots;
  const std::int64_t cap = std::int64_t{1} << 30;  // a larger grid loops instead
  if (!backward) {
    l.grid = static_cast<int>(std::max<std::int64_t>(1, std::min(groups, cap)));
    return with_ln_kernel<false>(x_type, p_type, s, [&](auto) { return gpuSuccess; });
  }
  const std::size_t sum_bytes = partial_bytes(x_type);
  l.smem = s.slots > 1 ? static_cast<std::size_t>(shape.channels) * sum_bytes : 0;
  return with_ln_kernel<true>(x_type, p_type, s, [&](auto kernel) -> gpuError_t {
    if (gpuError_t err = allow_smem(kernel, g.device, l.smem); err != gpuSuccess) return err;
    int per_sm = 0;
    if (gpuError_t err = occupancy(kernel, g.device, l.threads, l.smem, per_sm); err != gpuSuccess) return err;
    const std::int64_t resident = static_cast<std::int64_t>(per_sm) * g.sm_count;
    l.grid = static_cast<int>(std::max<std::int64_t>(1, std::min({groups, resident, cap})));
    l.partials = partial_sums ? l.grid : 0;
    l.workspace = 2 * static_cast<std::size_t>(l.partials) * static_cast<std::size_t>(shape.channels) * sum_bytes;
    return gpuSuccess;
  });
}

gpuError_t launch_ln_rows_fwd(const family::NormFwd& d, const LnRowsLaunch& l, gpuStream_t stream) {
  if (d.shape.sets == 0) return gpuSuccess;
  const LnRowsShape& s = l.shape;
  return with_ln_kernel<false>(d.x_type, d.p_type, s, [&](auto kernel) {
    kernel<<<l.grid, l.threads, 0, stream>>>(d, s.tpr, s.slots);
    return gpuGetLastError();
  });
}

gpuError_t launch_ln_rows_bwd(const family::NormBwd& d, const LnRowsLaunch& l, void* workspace, gpuStream_t stream) {
  const LnRowsShape& s = l.shape;
  const std::size_t half = l.workspace / 2;
  void* pw = d.dweight != nullptr && half > 0 ? workspace : nullptr;
  void* pb = d.dbias != nullptr && half > 0 ? static_cast<char*>(workspace) + half : nullptr;
  // Zero rows still launch (one block): its partial row of zeros gives dweight and dbias 0.
  const gpuError_t err = with_ln_kernel<true>(d.x_type, d.p_type, s, [&](auto kernel) {
    kernel<<<l.grid, l.threads, l.smem, stream>>>(d, s.tpr, s.slots, pw, pb);
    return gpuGetLastError();
  });
  if (err != gpuSuccess) return err;
  // The partial rows added in order (the sums' type follows x's: launch_dw_finish's partials).
  Launch fl;
  if (pw != nullptr) {
    if (gpuError_t e = launch_dw_finish(pw, d.x_type, l.partials, d.shape.channels, d.dweight, d.p_type, stream, fl);
        e != gpuSuccess) {
      return e;
    }
  }
  if (pb != nullptr) {
    if (gpuError_t e = launch_dw_finish(pb, d.x_type, l.partials, d.shape.channels, d.dbias, d.p_type, stream, fl);
        e != gpuSuccess) {
      return e;
    }
  }
  return gpuSuccess;
}

}  // namespace opreg::cuda_like
