// The layer_norm / group_norm kernels of the npu backend and what they share. run_fwd / run_bwd
// launch the plan the variant's supports() made (list.cpp); run_gpu_port reproduces what the GPU
// kernel's shape does on the device before computing with the chosen plan.
#pragma once

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <string>

#include "backends/npu/ascend/kernel_operator.h"
#include "backends/npu/kernel_util.h"
#include "backends/npu/npu_backend.h"
#include "backends/npu/norm/plan.h"
#include "opreg/ops.h"
#include "opreg/registry.h"
#include "ops/describe.h"

namespace opreg::npu::norm {


// The descriptor of a call and what its kernels need besides (an op knows whether it is layer_norm).
struct FwdCall {
  family::NormFwd d;
  Problem s;
};
struct BwdCall {
  family::NormBwd d;
  Problem s;
};

void run_fwd(const FwdCall& call, const Plan& plan, Emulator& emulator);
void run_bwd(const BwdCall& call, const Plan& plan, Emulator& emulator, const KernelContext& ctx);
// One block per set, the GPU kernel's live tiles allocated in UB: fails as the device does (grid or
// ub overflow); where it would fit, nothing more (the caller then computes with a real plan).
void probe_gpu_port(const Problem& s, const Plan& plan, bool backward, Emulator& emulator);


namespace kernel_norm {

using namespace AscendC;

inline std::uint32_t u32(std::int64_t v) { return static_cast<std::uint32_t>(v); }

// The sum of `rows` rows of `width` floats `pitch` apart, each row by ReduceSum into `acc` (a
// 32-byte slot) and the row sums added on the scalar unit in row order (V_S before each read).
inline float RowsSum(const LocalTensor<float>& v, std::int64_t rows, std::int64_t width, std::int64_t pitch,
                     const LocalTensor<float>& acc, const LocalTensor<float>& work) {
  float sum = 0.0f;
  if (width == 0) return sum;
  for (std::int64_t r = 0; r < rows; ++r) {
    ReduceSum(acc, v[u32(r * pitch)], work, u32(width));
    kernel::PipeSync<HardEvent::V_S>();
    sum += acc.GetValue(0);
  }
  return sum;
}

inline float RowsMax(const LocalTensor<float>& v, std::int64_t rows, std::int64_t width, std::int64_t pitch,
                     const LocalTensor<float>& acc, const LocalTensor<float>& work) {
  float largest = 0.0f;
  if (width == 0) return largest;
  for (std::int64_t r = 0; r < rows; ++r) {
    ReduceMax(acc, v[u32(r * pitch)], work, u32(width));
    kernel::PipeSync<HardEvent::V_S>();
    const float m = acc.GetValue(0);
    largest = std::isnan(m) || m > largest ? m : largest;
  }
  return largest;
}

// 2^-e for largest = m * 2^e, m in [0.5, 1): exact, and it brings largest below 1.
inline float ScaleFor(float largest) {
  int e = 0;
  std::frexp(largest, &e);
  return std::ldexp(1.0f, -e);
}

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
  a.mean = std::isfinite(delta) ? a.mean + delta * (b.n / n) : (a.n * a.mean + b.n * b.mean) / n;
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
inline float RowsSumExact(const LocalTensor<float>& x, const LocalTensor<float>& t, std::int64_t rows,
                          std::int64_t width, std::int64_t pitch, const LocalTensor<float>& acc,
                          const LocalTensor<float>& work) {
  const std::int64_t count = rows * width;
  if (count == 0) return 0.0f;
  const std::uint32_t span = u32(rows * pitch);
  Abs(t, x, span);
  const float largest = RowsMax(t, rows, width, pitch, acc, work);
  int e = 0;
  std::frexp(largest, &e);  // largest < 2^e
  int k = 0;
  while ((std::int64_t{1} << k) < count) ++k;
  const int m = e + k + 1;
  if (!std::isfinite(largest) || largest == 0.0f || m > 126) return RowsSum(x, rows, width, pitch, acc, work);
  const float sigma = std::ldexp(1.0f, m);
  Adds(t, x, sigma, span);
  Adds(t, t, -sigma, span);  // q
  const float high = RowsSum(t, rows, width, pitch, acc, work);
  Sub(t, x, t, span);  // x - q
  return high + RowsSum(t, rows, width, pitch, acc, work);
}

// The moments of `rows` x `width` floats in UB (two-pass on the resident data, never
// E[x^2] - mean^2): mean0 = sum / n, d = x - mean0 into `t`, then M2 = sum(d^2) - sum(d)^2 / n and
// M2 = sum(d^2) - sum(d)^2 / n. `t` is left holding d^2. The sum is RowsSumExact's, for every
// dtype (the mean is an f32 statistic), and mean0 is the mean: the two-pass correction
// mean0 + sum(d) / n would add sum(d)'s own rounding noise, larger than the error it corrects
// where the values cancel (six f16 values of ~2^14 summing to -4: an error of 1e-3).
inline Moments PieceMoments(const LocalTensor<float>& x, const LocalTensor<float>& t, std::int64_t rows,
                            std::int64_t width, std::int64_t pitch, const LocalTensor<float>& acc,
                            const LocalTensor<float>& work) {
  Moments m;
  const std::int64_t count = rows * width;
  if (count == 0) return m;
  m.n = static_cast<float>(count);
  const float mean0 = RowsSumExact(x, t, rows, width, pitch, acc, work) / m.n;
  const std::uint32_t span = u32(rows * pitch);
  Adds(t, x, -mean0, span);
  const float sd = RowsSum(t, rows, width, pitch, acc, work);
  Mul(t, t, t, span);
  const float q = RowsSum(t, rows, width, pitch, acc, work);
  if (std::isfinite(sd) && std::isfinite(mean0)) {
    m.mean = mean0;
    m.m2 = std::max(0.0f, q - sd * (sd / m.n));
  } else {
    m.mean = mean0;
    m.m2 = q;
  }
  return m;
}

// dst[0, n) = the GM params [0, n) as float, in DataCopyPad-sized pieces through `raw` (16-bit P),
// for the scalar unit (a channel's gamma or beta is a GetValue): raw is the vector unit's between
// copies (V_MTE2 before, MTE2_V after each), dst the scalar unit's at the end (MTE2_S or V_S).
template <class P>
inline void LoadParams(const LocalTensor<float>& dst, const GlobalTensor<P>& src, std::int64_t n, const LocalTensor<float>& raw) {
  constexpr std::int64_t kPiece = 8192;
  for (std::int64_t at = 0; at < n; at += kPiece) {
    const std::int64_t w = std::min(kPiece, n - at);
    if constexpr (std::is_same_v<P, float>) {
      static_cast<void>(raw);
      kernel::CopyRowsIn(dst[u32(at)], src[static_cast<std::uint64_t>(at)], 1, w, w);
    } else {
      const LocalTensor<P> narrow = raw.ReinterpretCast<P>()[u32(at)];
      kernel::PipeSync<HardEvent::V_MTE2>();
      kernel::CopyRowsIn(narrow, src[static_cast<std::uint64_t>(at)], 1, w, w);
      kernel::PipeSync<HardEvent::MTE2_V>();
      Cast(dst[u32(at)], narrow, RoundMode::CAST_NONE, u32(w));
    }
  }
  if constexpr (std::is_same_v<P, float>) {
    kernel::PipeSync<HardEvent::MTE2_S>();
  } else {
    kernel::PipeSync<HardEvent::V_S>();
  }
}

}  // namespace kernel_norm
}  // namespace opreg::npu::norm
