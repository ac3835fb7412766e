// What the layer_norm / group_norm kernels (fwd.cpp, bwd.cpp) share: their launches, which run a
// plan on the emulator (plan.cpp's run_fwd / run_bwd call them), and the device code both use
// (sums and moments of UB-resident sets, the parameters as float).
#pragma once

#include <cstdint>

#include "backends/npu/ascend/kernel_operator.h"
#include "backends/npu/kernel_util.h"
#include "backends/npu/npu_backend.h"
#include "backends/npu/norm/plan.h"

namespace opreg::npu::norm {

void launch_fwd(const family::NormFwd& d, const NormSizes& s, const NormPlan& plan, Emulator& emulator);
// Scratch (the per-core dW / dB partials) comes from the backend's workspace in `ctx`.
void launch_bwd(const family::NormBwd& d, const NormSizes& s, const NormPlan& plan, Emulator& emulator,
                const KernelContext& ctx);

namespace kernel_norm {

// ascend-c: begin
using namespace AscendC;

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// The sum (kMax: the largest, a NaN winning) of `rows` rows of `width` floats `pitch` apart, each
// row by ReduceSum (ReduceMax) into `acc` (a 32-byte slot) and the rows combined on the scalar
// unit in row order (V_S before each read).
template <bool kMax>
inline float RowsReduce(const LocalTensor<float>& v, int64_t rows, int64_t width, int64_t pitch,
                        const LocalTensor<float>& acc, const LocalTensor<float>& work) {
  float result = 0.0f;
  if (width == 0) return result;
  for (int64_t r = 0; r < rows; ++r) {
    if constexpr (kMax) {
      PipeBarrier<PIPE_V>();
      ReduceMax(acc, v[u32(r * pitch)], work, u32(width));
    } else {
      PipeBarrier<PIPE_V>();
      ReduceSum(acc, v[u32(r * pitch)], work, u32(width));
    }
    kernel::PipeSync<HardEvent::V_S>();
    const float m = acc.GetValue(0);
    if constexpr (kMax) {
      result = kernel::IsNan(m) || m > result ? m : result;
    } else {
      result += m;
    }
  }
  return result;
}
inline float RowsSum(const LocalTensor<float>& v, int64_t rows, int64_t width, int64_t pitch,
                     const LocalTensor<float>& acc, const LocalTensor<float>& work) {
  return RowsReduce<false>(v, rows, width, pitch, acc, work);
}
inline float RowsMax(const LocalTensor<float>& v, int64_t rows, int64_t width, int64_t pitch,
                     const LocalTensor<float>& acc, const LocalTensor<float>& work) {
  return RowsReduce<true>(v, rows, width, pitch, acc, work);
}

using kernel::ScaleFor;

// Chan's (count, mean, M2) of a set, merged piece by piece in piece order (float, on the scalar
// unit). An infinite or NaN mean on either side takes the weighted form, so an infinity in the
// set gives the sum's answer (inf, or NaN for inf - inf), as the reference's sum does.
struct Moments {
  float n = 0, mean = 0, m2 = 0;
};
inline void Merge(Moments& a, const Moments& b) {
  if (b.n == 0) return;
  if (a.n == 0) {
    a = b;
    return;
  }
  const float n = a.n + b.n;
  const float delta = b.mean - a.mean;
  a.mean = kernel::IsFinite(delta) ? a.mean + delta * (b.n / n) : (a.n * a.mean + b.n * b.mean) / n;
  a.m2 += b.m2 + delta * delta * (a.n * b.n / n);
  a.n = n;
}

// The sum of `rows` x `width` floats in UB, exact but for the rounding of its low parts (Rump's
// extraction, vector ops only): with sigma a power of two >= 2 * count * max|x|, each x is split
// into q = (sigma + x) - sigma, a multiple of ulp(sigma) / 2, and x - q (both exact); every partial
// sum of the q's is such a multiple below sigma / 2, so ReduceSum and the scalar row additions add
// them without rounding, and only the small x - q parts round. Needed where the values cancel:
// six values of ~2^60 whose sum is ~2^43 (group_norm 70000x4x3, --values large) lose their mean
// to one float rounding of a partial sum. `t` is scratch. Not finite, or no room for sigma below
// float's range (max|x| past ~2^100): the plain sum.
inline float RowsSumExact(const LocalTensor<float>& x, const LocalTensor<float>& t, int64_t rows,
                          int64_t width, int64_t pitch, const LocalTensor<float>& acc,
                          const LocalTensor<float>& work) {
  const int64_t count = rows * width;
  if (count == 0) return 0.0f;
  const uint32_t span = u32(rows * pitch);
  PipeBarrier<PIPE_V>();
  Abs(t, x, span);
  const float largest = RowsMax(t, rows, width, pitch, acc, work);
  const int e = kernel::ExponentOf(largest);  // largest < 2^e
  int k = 0;
  while ((int64_t{1} << k) < count) ++k;
  const int m = e + k + 1;
  if (!kernel::IsFinite(largest) || largest == 0.0f || m > 126) return RowsSum(x, rows, width, pitch, acc, work);
  const float sigma = kernel::Pow2(m);
  PipeBarrier<PIPE_V>();
  Adds(t, x, sigma, span);
  PipeBarrier<PIPE_V>();
  Adds(t, t, -sigma, span);  // q
  const float high = RowsSum(t, rows, width, pitch, acc, work);
  PipeBarrier<PIPE_V>();
  Sub(t, x, t, span);  // x - q
  return high + RowsSum(t, rows, width, pitch, acc, work);
}

// The moments of `rows` x `width` floats in UB (two-pass on the resident data, never
// E[x^2] - mean^2): mean0 = sum / n, d = x - mean0 into `t`, then M2 = sum(d^2) - sum(d)^2 / n and
// M2 = sum(d^2) - sum(d)^2 / n. `t` is left holding d^2. The sum is RowsSumExact's, for every
// dtype (the mean is an f32 statistic), and mean0 is the mean: the two-pass correction
// mean0 + sum(d) / n would add sum(d)'s own rounding noise, larger than the error it corrects
// where the values cancel (six f16 values of ~2^14 summing to -4: an error of 1e-3).
inline Moments PieceMoments(const LocalTensor<float>& x, const LocalTensor<float>& t, int64_t rows,
                            int64_t width, int64_t pitch, const LocalTensor<float>& acc,
                            const LocalTensor<float>& work) {
  Moments m;
  const int64_t count = rows * width;
  if (count == 0) return m;
  m.n = static_cast<float>(count);
  const float mean0 = RowsSumExact(x, t, rows, width, pitch, acc, work) / m.n;
  const uint32_t span = u32(rows * pitch);
  PipeBarrier<PIPE_V>();
  Adds(t, x, -mean0, span);
  const float sd = RowsSum(t, rows, width, pitch, acc, work);
  PipeBarrier<PIPE_V>();
  Mul(t, t, t, span);
  const float q = RowsSum(t, rows, width, pitch, acc, work);
  if (kernel::IsFinite(sd) && kernel::IsFinite(mean0)) {
    m.mean = mean0;
    m.m2 = Std::max(0.0f, q - sd * (sd / m.n));
  } else {
    m.mean = mean0;
    m.m2 = q;
  }
  return m;
}

// Pass 2 of a chunked kernel (kernel::SplitRows::pass2) whose sets' statistics pass 1 left for a
// group of sets at a time: with one group they stay in UB (V_S: the scalar unit reads what the
// vector unit made); with several, each group's mean and rstd come back from GM before its sets
// (a barrier first: MTE3 -> MTE2), with what `reload(set, gn)` copies besides.
template <class ChunkBegin, class Reload, class In, class Body, class ChunkEnd>
inline void StatsPass2(const kernel::SplitRows& walk, const LocalTensor<float>& mean, const LocalTensor<float>& rstd,
                       const GlobalTensor<float>& meanGm, const GlobalTensor<float>& rstdGm, ChunkBegin&& chunk_begin,
                       Reload&& reload, In&& in, Body&& body, ChunkEnd&& chunk_end) {
  const bool spill = walk.groups() > 1;
  if (spill) {
    PipeBarrier<PIPE_ALL>();
  } else {
    kernel::PipeSync<HardEvent::V_S>();
  }
  walk.pass2(
      chunk_begin,
      [&](int64_t set, int64_t gn) {
        if (!spill) return;
        kernel::CopyRowsIn(mean, meanGm[static_cast<uint64_t>(set)], 1, gn, gn);
        kernel::CopyRowsIn(rstd, rstdGm[static_cast<uint64_t>(set)], 1, gn, gn);
        reload(set, gn);
        kernel::PipeSync<HardEvent::MTE2_S>();
      },
      in, body, chunk_end);
}

// dst[0, n) = the GM params [0, n) as float, in DataCopyPad-sized pieces through `raw` (16-bit P),
// for the scalar unit (a channel's gamma or beta is a GetValue): raw is the vector unit's between
// copies (V_MTE2 before, MTE2_V after each), dst the scalar unit's at the end (MTE2_S or V_S).
template <class P>
inline void LoadParams(const LocalTensor<float>& dst, const GlobalTensor<P>& src, int64_t n, const LocalTensor<float>& raw) {
  constexpr int64_t kPiece = 8192;
  for (int64_t at = 0; at < n; at += kPiece) {
    const int64_t w = Std::min(kPiece, n - at);
    if constexpr (IsSameType<P, float>::value) {
      static_cast<void>(raw);
      kernel::CopyRowsIn(dst[u32(at)], src[static_cast<uint64_t>(at)], 1, w, w);
    } else {
      const LocalTensor<P> narrow = raw.ReinterpretCast<P>()[u32(at)];
      kernel::PipeSync<HardEvent::V_MTE2>();
      kernel::CopyRowsIn(narrow, src[static_cast<uint64_t>(at)], 1, w, w);
      kernel::PipeSync<HardEvent::MTE2_V>();
      Cast(dst[u32(at)], narrow, RoundMode::CAST_NONE, u32(w));
    }
  }
  if constexpr (IsSameType<P, float>::value) {
    kernel::PipeSync<HardEvent::MTE2_S>();
  } else {
    kernel::PipeSync<HardEvent::V_S>();
  }
}

// ascend-c: end
}  // namespace kernel_norm
}  // namespace opreg::npu::norm
