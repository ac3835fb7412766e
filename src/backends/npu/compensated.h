// Exact products and compensated sums on the vector unit, for f32 parameter gradients whose
// terms cancel: under `--values large` a dweight column sums products of ~2^60 that cancel to
// ~2^49 across the rows, so one rounding of each product (2^-24 of 2^60) or of each running sum
// already misses the f32 tolerance against the double reference. The A2 vector unit has no fused
// multiply-add to recover a product's rounding error, so it is recovered the classic way with
// plain Mul/Sub/Add instructions: Veltkamp's split of each operand into two 12-bit halves and
// Dekker's TwoProduct (a * b = p + e exactly), and Knuth's TwoSum for each addition into a
// (hi, lo) accumulator. The results are as good as a sum in twice the precision, in a fixed
// order (the same bits whatever order the blocks run in).
//
// The operands of a product are clamped to +-2^63 before the error term is formed, so that the
// split (a * 4097) and the partial products stay finite: for |a|, |b| <= 2^63 the error term is
// exact; past it (or for an infinity) it is the error of the clamped product, finite and no larger
// than the product's own rounding, so the sum degrades to the plain float sum and an infinite term
// still gives an infinite (not NaN) result.
#pragma once

#include <cstdint>

#include "backends/npu/ascend/kernel_operator.h"

namespace opreg::npu::kernel {

// ascend-c: begin
using namespace AscendC;

// Columns one step of the exact path takes, and the float temporaries it needs: the scratch is
// kExactTemps x kExactCols floats (a fixed UB item of kExactBytes).
inline constexpr int64_t kExactCols = 256;
inline constexpr uint32_t kExactTemps = 6;
inline constexpr uint32_t kExactBytes = kExactTemps * kExactCols * 4;
// layer_norm's dW also carries xhat's own rounding: three more temporaries.
inline constexpr uint32_t kExactNormTemps = kExactTemps + 3;
inline constexpr uint32_t kExactNormBytes = kExactNormTemps * kExactCols * 4;

inline constexpr float kSplitter = 4097.0f;   // 2^12 + 1: splits a 24-bit significand in two halves
inline constexpr float kExactBound = 0x1p63f;  // operands clamped here: products stay below 2^126

// hi = a's upper 12 significant bits, lo = a - hi, both exact; `tmp` is scratch. lo may be a.
inline void Split(const LocalTensor<float>& hi, const LocalTensor<float>& lo, const LocalTensor<float>& a,
                  const LocalTensor<float>& tmp, uint32_t n) {
  PipeBarrier<PIPE_V>();
  Muls(hi, a, kSplitter, n);  // c = a * (2^12 + 1)
  PipeBarrier<PIPE_V>();
  Sub(tmp, hi, a, n);         // c - a
  PipeBarrier<PIPE_V>();
  Sub(hi, hi, tmp, n);        // c - (c - a)
  PipeBarrier<PIPE_V>();
  Sub(lo, a, hi, n);
}

// dst = a clamped to [-bound, bound] (a NaN stays NaN).
inline void Clamp(const LocalTensor<float>& dst, const LocalTensor<float>& a, float bound, uint32_t n) {
  PipeBarrier<PIPE_V>();
  Maxs(dst, a, -bound, n);
  PipeBarrier<PIPE_V>();
  Mins(dst, dst, bound, n);
}

// e = a * b - fl(a * b), exactly (Dekker's TwoProduct without FMA) for |a|, |b| <= 2^63;
// s[0..4] are scratch.
inline void ProductError(const LocalTensor<float>& e, const LocalTensor<float>& a, const LocalTensor<float>& b,
                         const LocalTensor<float>* s, uint32_t n) {
  const LocalTensor<float>& ah = s[0];
  const LocalTensor<float>& al = s[1];
  const LocalTensor<float>& bh = s[2];
  const LocalTensor<float>& bl = s[3];
  const LocalTensor<float>& tmp = s[4];
  Clamp(al, a, kExactBound, n);
  Clamp(bl, b, kExactBound, n);
  PipeBarrier<PIPE_V>();
  Mul(e, al, bl, n);  // p, the clamped operands' product
  Split(ah, al, al, tmp, n);
  Split(bh, bl, bl, tmp, n);
  PipeBarrier<PIPE_V>();
  Mul(tmp, ah, bh, n);
  PipeBarrier<PIPE_V>();
  Sub(e, tmp, e, n);  // ah bh - p
  PipeBarrier<PIPE_V>();
  Mul(ah, ah, bl, n);
  PipeBarrier<PIPE_V>();
  Add(e, e, ah, n);  // + ah bl
  PipeBarrier<PIPE_V>();
  Mul(bh, al, bh, n);
  PipeBarrier<PIPE_V>();
  Add(e, e, bh, n);  // + al bh
  PipeBarrier<PIPE_V>();
  Mul(al, al, bl, n);
  PipeBarrier<PIPE_V>();
  Add(e, e, al, n);  // + al bl: the rounding error of p
}

// (hi, lo) += v with hi's rounding error carried in lo (Knuth's TwoSum); s[0..4] scratch. The
// error is formed from hi and v clamped to +-2^126, where it is exact and cannot overflow: an
// infinite hi or v then leaves a finite lo (hi + lo stays infinite, not NaN).
inline constexpr float kSumBound = 0x1p126f;
inline constexpr uint32_t kSumTemps = 5;
inline void AddCompensated(const LocalTensor<float>& hi, const LocalTensor<float>& lo, const LocalTensor<float>& v,
                           const LocalTensor<float>* s, uint32_t n) {
  const LocalTensor<float>& sum = s[0];
  const LocalTensor<float>& z = s[1];
  const LocalTensor<float>& err = s[2];
  const LocalTensor<float>& hc = s[3];
  const LocalTensor<float>& vc = s[4];
  Clamp(hc, hi, kSumBound, n);
  Clamp(vc, v, kSumBound, n);
  PipeBarrier<PIPE_V>();
  Add(sum, hc, vc, n);
  PipeBarrier<PIPE_V>();
  Sub(z, sum, hc, n);    // the part of v that reached the sum
  PipeBarrier<PIPE_V>();
  Sub(err, sum, z, n);   // the part of hi that did
  PipeBarrier<PIPE_V>();
  Sub(err, hc, err, n);  // hi's lost bits
  PipeBarrier<PIPE_V>();
  Sub(z, vc, z, n);      // v's lost bits
  PipeBarrier<PIPE_V>();
  Add(err, err, z, n);
  PipeBarrier<PIPE_V>();
  Add(lo, lo, err, n);
  PipeBarrier<PIPE_V>();
  Add(hi, hi, v, n);
}

// The scratch tensors of the exact path, from one buffer of kExactBytes (kExactNormBytes: all
// kExactNormTemps).
struct ExactScratch {
  LocalTensor<float> t[kExactNormTemps];
  explicit ExactScratch(const LocalTensor<float>& buf, uint32_t temps = kExactTemps) {
    for (uint32_t i = 0; i < temps; ++i) t[i] = buf[static_cast<uint32_t>(i * kExactCols)];
  }
};

// (hi, lo) += a * b exactly over n elements, where p = fl(a * b) is given: the product's error
// and the addition's both go into lo. In steps of kExactCols through the scratch.
inline void AddProductExact(const LocalTensor<float>& hi, const LocalTensor<float>& lo, const LocalTensor<float>& a,
                            const LocalTensor<float>& b, const LocalTensor<float>& p, const ExactScratch& s,
                            int64_t n) {
  const LocalTensor<float>& e = s.t[kExactTemps - 1];
  for (int64_t c = 0; c < n; c += kExactCols) {
    const auto at = static_cast<uint32_t>(c);
    const auto w = static_cast<uint32_t>(Std::min(kExactCols, n - c));
    ProductError(e, a[at], b[at], s.t, w);
    AddCompensated(hi[at], lo[at], p[at], s.t, w);
    PipeBarrier<PIPE_V>();
    Add(lo[at], lo[at], e, w);
  }
}

// (hi, lo) += v over n elements, in steps of kExactCols through the scratch.
inline void AddExact(const LocalTensor<float>& hi, const LocalTensor<float>& lo, const LocalTensor<float>& v,
                     const ExactScratch& s, int64_t n) {
  for (int64_t c = 0; c < n; c += kExactCols) {
    const auto at = static_cast<uint32_t>(c);
    AddCompensated(hi[at], lo[at], v[at], s.t, static_cast<uint32_t>(Std::min(kExactCols, n - c)));
  }
}

// (hi, lo) += dy * xhat over n elements with xhat = (x - mean) * rstd carried exactly too, as a
// pair xh + xl (layer_norm's dW: the reference's xhat is double, so xhat's own float rounding,
// 2^-24 of each term, would not cancel with the terms): d = x - mean by TwoSum, xh = fl(d * rstd)
// with its error by TwoProduct against rstd split on the scalar unit, then dy * xh exactly and
// dy * xl plainly (it is 2^-24 of the term). Needs the kExactNormTemps scratch; rstd finite and
// at most 2^63 (the caller adds the plain products otherwise).
inline void AddNormProductExact(const LocalTensor<float>& hi, const LocalTensor<float>& lo,
                                const LocalTensor<float>& dy, const LocalTensor<float>& x, float mean, float rstd,
                                const ExactScratch& s, int64_t n) {
  const float c = rstd * kSplitter;  // rstd = rh + rl on the scalar unit
  const float rh = c - (c - rstd);
  const float rl = rstd - rh;
  const LocalTensor<float>& xh = s.t[6];
  const LocalTensor<float>& xl = s.t[7];
  const LocalTensor<float>& p = s.t[8];
  const LocalTensor<float>* t = s.t;
  for (int64_t c0 = 0; c0 < n; c0 += kExactCols) {
    const auto at = static_cast<uint32_t>(c0);
    const auto w = static_cast<uint32_t>(Std::min(kExactCols, n - c0));
    PipeBarrier<PIPE_V>();
    Adds(xh, x[at], -mean, w);  // d = fl(x - mean)
    PipeBarrier<PIPE_V>();
    Sub(t[0], xh, x[at], w);    // TwoSum(x, -mean)'s error into xl
    PipeBarrier<PIPE_V>();
    Sub(t[1], xh, t[0], w);
    PipeBarrier<PIPE_V>();
    Sub(t[1], x[at], t[1], w);
    PipeBarrier<PIPE_V>();
    Adds(t[0], t[0], mean, w);
    PipeBarrier<PIPE_V>();
    Sub(xl, t[1], t[0], w);
    PipeBarrier<PIPE_V>();
    Muls(xl, xl, rstd, w);  // the difference's error, scaled
    PipeBarrier<PIPE_V>();
    Maxs(t[0], xh, -kExactBound, w);
    PipeBarrier<PIPE_V>();
    Mins(t[0], t[0], kExactBound, w);
    PipeBarrier<PIPE_V>();
    Muls(t[1], t[0], rstd, w);  // the clamped d's product
    Split(t[2], t[0], t[0], t[3], w);
    PipeBarrier<PIPE_V>();
    Muls(t[3], t[2], rh, w);
    PipeBarrier<PIPE_V>();
    Sub(t[1], t[3], t[1], w);
    PipeBarrier<PIPE_V>();
    Muls(t[3], t[2], rl, w);
    PipeBarrier<PIPE_V>();
    Add(t[1], t[1], t[3], w);
    PipeBarrier<PIPE_V>();
    Muls(t[3], t[0], rh, w);
    PipeBarrier<PIPE_V>();
    Add(t[1], t[1], t[3], w);
    PipeBarrier<PIPE_V>();
    Muls(t[3], t[0], rl, w);
    PipeBarrier<PIPE_V>();
    Add(t[1], t[1], t[3], w);
    PipeBarrier<PIPE_V>();
    Add(xl, xl, t[1], w);  // xhat - xh
    PipeBarrier<PIPE_V>();
    Muls(xh, xh, rstd, w);
    PipeBarrier<PIPE_V>();
    Mul(p, dy[at], xh, w);
    ProductError(t[5], dy[at], xh, t, w);
    AddCompensated(hi[at], lo[at], p, t, w);
    PipeBarrier<PIPE_V>();
    Add(lo[at], lo[at], t[5], w);
    PipeBarrier<PIPE_V>();
    Mul(t[0], dy[at], xl, w);
    PipeBarrier<PIPE_V>();
    Add(lo[at], lo[at], t[0], w);
  }
}

// ascend-c: end
}  // namespace opreg::npu::kernel
