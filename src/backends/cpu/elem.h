// Element types, conversions and f32 math for the cpu kernels, compiled once per instruction set.
//
// Include only from an ISA translation unit (<family>_generic.cpp, <family>_avx2.cpp), which
// defines OPREG_CPU_NS (generic or avx2) first: everything here lives in
// opreg::cpu::OPREG_CPU_NS, so the two compilations never share a symbol (see abi.h).
//
// The kernels' element-wise passes work on blocks of kLanes values held in registers (vec.h:
// loaded and widened, computed, rounded and packed, stored); what still goes through chunks (the
// glu backwards, f16 reads on AVX2) converts a chunk of 16-bit values into an f32 buffer on the
// stack, runs plain float loops that the compiler vectorises (4 lanes on the baseline, 8 with
// AVX2), and converts the results back. Conversions are exact and round to
// nearest even, as opreg::to_half / to_bfloat16 do; AVX2 units convert f16 with F16C, the baseline
// in software. Loops stay free of branches the vectoriser cannot take: selections are bit masks,
// sums go to kLanes independent accumulators (an explicit reassociation the compiler may not make
// under strict IEEE semantics), and -ffp-contract=off keeps a*b+c two roundings except where madd
// asks for a fused one.
#pragma once

#ifndef OPREG_CPU_NS
#error "elem.h belongs to an ISA translation unit: define OPREG_CPU_NS (generic or avx2) first"
#endif

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/abi.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define OPREG_CPU_AVX2 1
#endif
#if defined(__SSE2__)
#include <immintrin.h>  // SSE2's streaming stores on the baseline; F16C with AVX2
#endif

// Everything a row loop calls is forced inline, so that it is compiled into that loop.
#define OPREG_CPU_INLINE [[gnu::always_inline]] inline

namespace opreg::cpu::OPREG_CPU_NS {

using i64 = std::int64_t;

template <class T>
OPREG_CPU_INLINE T min_of(T a, T b) {
  return b < a ? b : a;
}
template <class T>
OPREG_CPU_INLINE T max_of(T a, T b) {
  return a < b ? b : a;
}

// m ? a : b on floats through bits: GCC turns ?: on floats back into a branch that stops the
// vectoriser.
OPREG_CPU_INLINE float select(bool m, float a, float b) {
  const std::uint32_t mask = 0U - static_cast<std::uint32_t>(m);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & mask) | (std::bit_cast<std::uint32_t>(b) & ~mask));
}

// a * b + c, fused where the unit has FMA.
OPREG_CPU_INLINE float madd(float a, float b, float c) {
#ifdef OPREG_CPU_AVX2
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// ---- Element types: T is the storage type; load/store convert one value.

struct F32 {
  using T = float;
  static constexpr Elem kElem = Elem::f32;
  OPREG_CPU_INLINE static float load(float v) { return v; }
  OPREG_CPU_INLINE static float store(float v) { return v; }
};

struct BF16 {
  using T = std::uint16_t;
  static constexpr Elem kElem = Elem::bf16;
  // bf16 is the top half of an f32.
  OPREG_CPU_INLINE static float load(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
  // Round to nearest even by adding 0x7FFF plus the lowest kept bit: the carry does the rest,
  // including rounding the largest finite values up to infinity. A NaN keeps its sign and top
  // payload bits and is made quiet (the add could carry it into an infinity).
  OPREG_CPU_INLINE static std::uint16_t store(float f) {
    const auto w = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t rounded = (w + 0x7FFFU + ((w >> 16) & 1U)) >> 16;
    const std::uint32_t nan = (w >> 16) | 0x40U;
    // Signed comparisons: SSE2 has no unsigned ones.
    return static_cast<std::uint16_t>(static_cast<std::int32_t>(w & 0x7FFFFFFFU) > 0x7F800000 ? nan : rounded);
  }
};

// IEEE binary16, one value at a time in software: the f32 unit does the rebias and rounding by
// scaling with powers of two (the method of Maratyszcza's FP16 library, checked against
// opreg::to_half on every f32), in branch-free code that vectorises. (F16C's scalar instructions
// would not: compilers leave loops of them scalar. AVX2 units convert whole chunks with F16C's
// vector instructions instead: see kBuffered.)
struct F16 {
  using T = std::uint16_t;
  static constexpr Elem kElem = Elem::f16;
  OPREG_CPU_INLINE static float load(std::uint16_t h) {
    const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
    const std::uint32_t sign = w & 0x80000000U;
    const std::uint32_t two_w = w + w;  // exponent and mantissa, sign shifted out
    // Normal numbers, inf and NaN: exponent and mantissa in f32 position with the exponent raised
    // by 224 (the all-ones f16 exponent becomes the all-ones f32 one), then scaled by 2^-112 to
    // land on the bias difference (127 - 15) exactly.
    const float normal = std::bit_cast<float>((two_w >> 4) + (0xE0U << 23)) * 0x1.0p-112f;
    // Subnormals: the mantissa m under the exponent of 0.5 reads 0.5 + m * 2^-24; removing 0.5
    // leaves m * 2^-24 exactly.
    const float subnormal = std::bit_cast<float>((two_w >> 17) | (126U << 23)) - 0.5f;
    const float magnitude = select((h & 0x7C00U) == 0, subnormal, normal);
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  OPREG_CPU_INLINE static std::uint16_t store(float f) {
    const auto w = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = w & 0x80000000U;
    const auto magnitude = static_cast<std::int32_t>(w & 0x7FFFFFFFU);
    // Overflow: scaling up by 2^112 sends everything at or above 2^16 to infinity; the scale back
    // down keeps smaller values exact.
    float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
    // Rounding: base is 4|f|; adding 2^(e+15) (e: f's exponent, at least f16's smallest normal
    // exponent -14) leaves exactly f16's precision in the f32 sum's mantissa, so the f32 add
    // rounds to nearest even where f16 would, and the low bits hold the f16 exponent and mantissa.
    std::int32_t bias = magnitude & 0x7F800000;
    bias = bias < 0x38800000 ? 0x38800000 : bias;
    base = std::bit_cast<float>(static_cast<std::uint32_t>(bias) + 0x07800000U) + base;
    const auto bits = std::bit_cast<std::uint32_t>(base);
    const std::uint32_t nonsign = ((bits >> 13) & 0x00007C00U) + (bits & 0x00000FFFU);
    // NaN: quiet, with the top payload bits.
    const std::uint32_t nan = 0x7E00U | ((w >> 13) & 0x3FFU);
    const std::uint32_t is_nan = 0U - static_cast<std::uint32_t>(magnitude > 0x7F800000);
    return static_cast<std::uint16_t>((sign >> 16) | (nan & is_nan) | (nonsign & ~is_nan));
  }
};

// How a loop reads X: f16 on an AVX2 unit is converted a chunk at a time into an f32 buffer with
// F16C's vector instructions; everything else is converted inside the loop that uses it (bf16 is
// a shift, f16 on the baseline the software conversion, f32 nothing), saving the buffer's store
// and load. (bf16 buffered the same way, with vpmovzxwd and a shift, took 10-30% more
// instructions per element in every op, by callgrind.) A chunk's reader is made by read() and
// indexed like an array.
template <class X>
inline constexpr bool kBuffered =
#ifdef OPREG_CPU_AVX2
    std::is_same_v<X, F16>;
#else
    false;
#endif

template <class X>
struct In {
  const typename X::T* p;
  const float* buf;
  OPREG_CPU_INLINE float operator[](i64 j) const {
    if constexpr (kBuffered<X>) {
      return buf[j];
    } else {
      return X::load(p[j]);
    }
  }
};

// The reader of src[0, n); `buf` (kChunk floats) holds the converted chunk where X is buffered.
template <class X>
OPREG_CPU_INLINE In<X> read(const typename X::T* src, i64 n, float* __restrict buf) {
#ifdef OPREG_CPU_AVX2
  if constexpr (kBuffered<X>) {
    i64 i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(buf + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
    for (; i < n; ++i) buf[i] = X::load(src[i]);
  }
#else
  static_cast<void>(n);
#endif
  return {src, buf};
}

// Copies `bytes` from src to dst around the caches (non-temporal stores) where dst is 16-byte
// aligned: an output larger than the caches then costs its write only, not also the read that a
// cached store makes of each line first. The caller issues stream_fence() before another thread
// may read what was written.
OPREG_CPU_INLINE void stream_bytes(const void* __restrict src, std::size_t bytes, void* __restrict dst) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  std::size_t i = 0;
  const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
  for (; i < head && i < bytes; ++i) d[i] = s[i];
#if defined(__SSE2__)
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  }
#endif
  for (; i < bytes; ++i) d[i] = s[i];
}
OPREG_CPU_INLINE void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

#ifdef OPREG_CPU_AVX2
// BF16::store of 8 floats, each in the low half of its 32 bits: the same rounding (add 0x7FFF
// plus the lowest kept bit) and the same quiet NaN.
OPREG_CPU_INLINE __m256i bf16_bits(__m256i w) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(w, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(w, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(w, 16), _mm256_set1_epi32(0x40));
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, nan, is_nan);
}
#endif

// n floats into X. Results are stored from an f32 buffer rather than inside the loop that
// computes them: an output may be the very memory of an input (dx = dy), and a loop that reads
// and writes the same 16-bit array through two pointers is left scalar by the vectoriser. With
// `stream`, the chunk goes to memory around the caches (stream_bytes). (The kernels' element-wise
// passes use vec.h's emit instead, which rounds and stores from registers.)
template <class X>
OPREG_CPU_INLINE void store_n(const float* __restrict src, i64 n, typename X::T* __restrict dst, bool stream = false) {
  using T = typename X::T;
  if (stream && std::is_same_v<X, F32>) {
    stream_bytes(src, static_cast<std::size_t>(n) * sizeof(T), dst);
    return;
  }
  alignas(64) T tmp[kChunk];
  T* __restrict out = stream ? tmp : dst;
  i64 i = 0;
#ifdef OPREG_CPU_AVX2
  if constexpr (std::is_same_v<X, F16>) {
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    }
  } else if constexpr (std::is_same_v<X, BF16>) {
    for (; i + 16 <= n; i += 16) {
      const __m256i lo = bf16_bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
      const __m256i hi = bf16_bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8)));
      // packus interleaves 128-bit lanes (lo0 hi0 lo1 hi1): the permute restores the order.
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8));
    }
  }
#endif
  for (; i < n; ++i) out[i] = X::store(src[i]);
  if (stream) stream_bytes(tmp, static_cast<std::size_t>(n) * sizeof(T), dst);
}

// One value's round_x.
template <class X>
OPREG_CPU_INLINE float round_x(float v) {
  if constexpr (std::is_same_v<X, F32>) {
    return v;
  } else {
    return X::load(X::store(v));
  }
}

// ---- Rounding to odd: rounding a value to f32 "to odd" (truncate, set the last bit if anything
// was cut off) and then to a format with at least two fewer mantissa bits (f16, bf16) gives what
// rounding it directly would; a plain double -> f32 -> f16 chain does not (a value just off a tie
// lands on the tie, then ties to even).

OPREG_CPU_INLINE float to_float_odd(double d) {
  const float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  const auto bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t truncated = bits - static_cast<std::uint32_t>(std::fabs(back) > std::fabs(d));
  return std::bit_cast<float>(truncated | static_cast<std::uint32_t>(back != d));
}

// a + b rounded to odd, in f32 only (it vectorises next to 16-bit lanes): the f32 sum and its
// exact error (Knuth's two-sum, exact without FMA contraction) say whether and which way the sum
// was rounded. An overflowed sum keeps its infinity, which rounds to the same one in f16/bf16.
OPREG_CPU_INLINE float add_odd(float a, float b) {
  const float s = a + b;
  const float bb = s - a;
  const float err = (a - (s - bb)) + (b - bb);
  const auto inexact = static_cast<std::uint32_t>((err < 0.0f) | (err > 0.0f));
  const auto away = static_cast<std::uint32_t>(((s > 0.0f) & (err < 0.0f)) | ((s < 0.0f) & (err > 0.0f)));
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(s) - away) | inexact);
}

// x * r rounded to odd in f32, for x with at most 12 significant bits (f16, bf16) and any f32 r
// split as r = r_hi + r_lo (12 significant bits each). With FMA the product's exact error is
// fma(x, r, -p); without, x * r_hi and x * r_lo are exact and add_odd rounds their sum. Both give
// the one odd rounding of the exact product.
OPREG_CPU_INLINE float mul_odd(float x, float r, float r_hi, float r_lo) {
#ifdef OPREG_CPU_AVX2
  static_cast<void>(r_hi);
  static_cast<void>(r_lo);
  const float p = x * r;
  const float err = __builtin_fmaf(x, r, -p);
  const auto inexact = static_cast<std::uint32_t>((err < 0.0f) | (err > 0.0f));
  const auto away = static_cast<std::uint32_t>(((p > 0.0f) & (err < 0.0f)) | ((p < 0.0f) & (err > 0.0f)));
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(p) - away) | inexact);
#else
  static_cast<void>(r);
  return add_odd(x * r_hi, x * r_lo);
#endif
}

// A double rounded once to W and read back as float (the last step of every parameter gradient).
template <class W>
OPREG_CPU_INLINE float double_to(double v) {
  if constexpr (std::is_same_v<W, F32>) {
    return static_cast<float>(v);
  } else {
    return round_x<W>(to_float_odd(v));
  }
}

// ---- f32 math

// e^x with about 1 ulp of error, vectorisable: x = n ln2 + r with |r| <= ln2 / 2, e^r by its
// Taylor series to r^7 (truncation error under 2^-27), 2^n applied in two halves so that results
// reach the f32 subnormals and infinity exactly where expf's do. NaN stays NaN.
OPREG_CPU_INLINE float exp_f32(float x) {
  // Beyond these e^x is 0 or inf in f32 anyway; the clamp keeps n small enough for two halves.
  const float xc = select(x > 100.0f, 100.0f, select(x < -110.0f, -110.0f, x));
  constexpr float kShift = 0x1.8p23f;  // adding it rounds to an integer held in the low bits
  const float nf = madd(xc, 0x1.715476p+0f, kShift);
  const auto n = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(nf) - std::bit_cast<std::uint32_t>(kShift));
  const float k = nf - kShift;
  float r = madd(k, -0x1.62e4p-1f, xc);   // ln2's high part: k * it is exact
  r = madd(k, -0x1.7f7d1cp-20f, r);       // and the rest of ln2
  float p = 1.0f / 5040;
  p = madd(p, r, 1.0f / 720);
  p = madd(p, r, 1.0f / 120);
  p = madd(p, r, 1.0f / 24);
  p = madd(p, r, 1.0f / 6);
  p = madd(p, r, 0.5f);
  p = madd(p, r, 1.0f);
  p = madd(p, r, 1.0f);
  const std::int32_t half = n >> 1;
  const float s1 = std::bit_cast<float>(static_cast<std::uint32_t>(half + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<std::uint32_t>(n - half + 127) << 23);
  const float e = (p * s1) * s2;
  return select(x != x, x, e);  // NaN in, NaN out (the clamp above kept it, the bits did not)
}

// 1 / (1 + e^-x) and its complement 1 - sigmoid = e^-x * sigmoid, without cancellation on
// either side: the complement is computed from whichever form is small.
struct Sigmoid {
  float s;    // sigmoid(x)
  float one_minus;  // 1 - sigmoid(x)
};
OPREG_CPU_INLINE Sigmoid sigmoid(float x) {
  const float e = exp_f32(-x);
  const float s = 1.0f / (1.0f + e);
  // For x >= 0, e <= 1 and e * s is accurate; for x < 0, s < 1/2 and 1 - s is.
  return {s, select(x >= 0.0f, e * s, 1.0f - s)};
}

}  // namespace opreg::cpu::OPREG_CPU_NS
