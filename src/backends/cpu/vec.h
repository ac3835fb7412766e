// kLanes floats in registers, and 16-bit values converted, rounded and stored in registers: the
// element-wise passes of the cpu kernels, compiled once per instruction set (see elem.h).
//
// A pass over a chunk runs on blocks of kLanes elements (for_lanes): each block is loaded from
// its X (bf16: a widening and a shift; f16: F16C on AVX2, elem.h's software conversion on vectors
// of the baseline), computed as Lanes and, for outputs, rounded and packed to X in registers and
// stored. No f32 buffer sits between a conversion and its use, so a 16-bit element costs its
// arithmetic and its conversions only. A block reads its inputs before it writes its outputs, so
// an output may be the memory of an input (dx = dy). The last block of a chunk (fewer than
// kLanes elements, `Part`) goes through small zero-padded copies; its padding lanes compute
// values that are never stored. A result is the same whichever block computes it: the same
// operations in the same order, per element.
#pragma once

#include "backends/cpu/elem.h"

namespace opreg::cpu::OPREG_CPU_NS {

// One vector register of floats (GCC's vector extension): 8 with AVX2, 4 on the SSE2 baseline
// (and NEON). A 64-byte vector type instead made GCC 12 keep the accumulators on the stack.
#ifdef OPREG_CPU_AVX2
inline constexpr int kVec = 8;
#else
inline constexpr int kVec = 4;
#endif
using VecF = float __attribute__((vector_size(kVec * sizeof(float))));
using VecU16 = std::uint16_t __attribute__((vector_size(kVec * sizeof(std::uint16_t))));
using VecU32 = std::uint32_t __attribute__((vector_size(kVec * sizeof(std::uint32_t))));
using VecI32 = std::int32_t __attribute__((vector_size(kVec * sizeof(std::int32_t))));

// The 16-bit stores and the stream loop below take a block as two 8-float halves.
static_assert(kLanes == 16, "vec.h's stores assume blocks of 16 elements");

// kLanes floats in kLanes / kVec registers: lane l is element l % kVec of register l / kVec.
struct Lanes {
  static constexpr int kRegs = kLanes / kVec;
  VecF r[kRegs];
  OPREG_CPU_INLINE float get(int l) const { return r[l / kVec][l % kVec]; }
  OPREG_CPU_INLINE void add(int l, float v) { r[l / kVec][l % kVec] += v; }
};

// Element-wise arithmetic, each lane as its float would be computed.
#define OPREG_CPU_LANES_OP(op)                                                  \
  OPREG_CPU_INLINE Lanes operator op(const Lanes& a, const Lanes& b) {          \
    Lanes o;                                                                    \
    for (int k = 0; k < Lanes::kRegs; ++k) o.r[k] = a.r[k] op b.r[k];           \
    return o;                                                                   \
  }                                                                             \
  OPREG_CPU_INLINE Lanes operator op(const Lanes& a, float b) {                 \
    Lanes o;                                                                    \
    for (int k = 0; k < Lanes::kRegs; ++k) o.r[k] = a.r[k] op b;                \
    return o;                                                                   \
  }                                                                             \
  OPREG_CPU_INLINE Lanes operator op(float a, const Lanes& b) {                 \
    Lanes o;                                                                    \
    for (int k = 0; k < Lanes::kRegs; ++k) o.r[k] = a op b.r[k];                \
    return o;                                                                   \
  }
OPREG_CPU_LANES_OP(+)
OPREG_CPU_LANES_OP(-)
OPREG_CPU_LANES_OP(*)
#undef OPREG_CPU_LANES_OP
OPREG_CPU_INLINE Lanes& operator+=(Lanes& a, const Lanes& b) {
  for (int k = 0; k < Lanes::kRegs; ++k) a.r[k] += b.r[k];
  return a;
}
OPREG_CPU_INLINE Lanes splat(float v) {
  Lanes o;
  for (int k = 0; k < Lanes::kRegs; ++k) o.r[k] = VecF{} + v;
  return o;
}
// a * b + c per lane, fused where the unit has FMA (as elem.h's madd).
OPREG_CPU_INLINE Lanes madd(const Lanes& a, const Lanes& b, const Lanes& c) {
  Lanes o;
  for (int k = 0; k < Lanes::kRegs; ++k) {
#ifdef OPREG_CPU_AVX2
    o.r[k] = _mm256_fmadd_ps(a.r[k], b.r[k], c.r[k]);
#else
    o.r[k] = a.r[k] * b.r[k] + c.r[k];
#endif
  }
  return o;
}

// ---- IEEE binary16 on vectors, in software: elem.h's F16::load and F16::store, operation for
// operation (the same bits), for the baseline's vectors.
OPREG_CPU_INLINE VecF f16_widen(VecU32 h) {
  const VecU32 w = h << 16;
  const VecU32 sign = w & 0x80000000U;
  const VecU32 two_w = w + w;
  const VecF normal = reinterpret_cast<VecF>((two_w >> 4) + (0xE0U << 23)) * 0x1.0p-112f;
  const VecF subnormal = reinterpret_cast<VecF>((two_w >> 17) | (126U << 23)) - 0.5f;
  const auto is_sub = reinterpret_cast<VecU32>((h & 0x7C00U) == 0U);
  const VecU32 magnitude = (is_sub & reinterpret_cast<VecU32>(subnormal)) | (~is_sub & reinterpret_cast<VecU32>(normal));
  return reinterpret_cast<VecF>(sign | magnitude);
}
OPREG_CPU_INLINE VecU32 f16_narrow(VecF f) {
  const auto w = reinterpret_cast<VecU32>(f);
  const VecU32 sign = w & 0x80000000U;
  const auto magnitude = reinterpret_cast<VecI32>(w & 0x7FFFFFFFU);
  VecF base = (reinterpret_cast<VecF>(w & 0x7FFFFFFFU) * 0x1.0p+112f) * 0x1.0p-110f;
  VecI32 bias = magnitude & 0x7F800000;
  const VecI32 small = bias < 0x38800000;
  bias = (small & 0x38800000) | (~small & bias);
  base = reinterpret_cast<VecF>(reinterpret_cast<VecU32>(bias) + 0x07800000U) + base;
  const auto bits = reinterpret_cast<VecU32>(base);
  const VecU32 nonsign = ((bits >> 13) & 0x00007C00U) + (bits & 0x00000FFFU);
  const VecU32 nan = 0x7E00U | ((w >> 13) & 0x3FFU);
  const auto is_nan = reinterpret_cast<VecU32>(magnitude > 0x7F800000);
  return (sign >> 16) | (nan & is_nan) | (nonsign & ~is_nan);
}

// bf16's store of one register: round to nearest even by adding 0x7FFF plus the lowest kept bit,
// a NaN quiet with its top payload bits (elem.h's BF16::store), the result in the low halves.
OPREG_CPU_INLINE VecU32 bf16_narrow(VecF f) {
  const auto w = reinterpret_cast<VecU32>(f);
  const VecU32 high = w >> 16;
  const VecU32 rounded = (w + 0x7FFFU + (high & 1U)) >> 16;
  return f != f ? high | 0x40U : rounded;
}

// elem.h's mul_odd on every lane: x * r rounded to odd in f32 from the product p and its exact
// error (FMA's, or the two-sum of x * r_hi and x * r_lo), the same bits. Rounded away from zero
// (the error's sign differs from p's): one step back toward zero; inexact: the last bit set.
OPREG_CPU_INLINE Lanes mul_odd(const Lanes& x, float r, float r_hi, float r_lo) {
  Lanes o;
  for (int k = 0; k < Lanes::kRegs; ++k) {
#ifdef OPREG_CPU_AVX2
    static_cast<void>(r_hi);
    static_cast<void>(r_lo);
    const VecF p = x.r[k] * r;
    const VecF err = _mm256_fmsub_ps(x.r[k], VecF{} + r, p);
#else
    // p is x * r, the same bits as a + b (both exact, their sum rounded once) where finite; for
    // an infinite x, a + b would be inf + inf * 0 = NaN where r_lo is 0, and x * r keeps the
    // infinity (the error term is then NaN, read as exact below).
    const VecF a = x.r[k] * r_hi;
    const VecF b = x.r[k] * r_lo;
    const VecF p = x.r[k] * r;
    const VecF bb = p - a;
    const VecF err = (a - (p - bb)) + (b - bb);
#endif
    // Ordered compares, as elem.h's: err is NaN where p is an infinity (inf - inf), and p stays.
    const auto inexact = reinterpret_cast<VecI32>((err < 0.0f) | (err > 0.0f));
    const VecI32 away = (reinterpret_cast<VecI32>(p) ^ reinterpret_cast<VecI32>(err)) >> 31 & inexact;
    o.r[k] = reinterpret_cast<VecF>((reinterpret_cast<VecI32>(p) + away) | (inexact & 1));
  }
  return o;
}

// ---- Loads: kLanes values of X from p (Full), or the first m of them (Part: the rest read 0).
struct Full {
  static constexpr bool kFull = true;
};
struct Part {
  static constexpr bool kFull = false;
  i64 m;
};

template <class X>
OPREG_CPU_INLINE Lanes load16(const typename X::T* p) {
  Lanes v;
  for (int k = 0; k < Lanes::kRegs; ++k) {
    const typename X::T* q = p + k * kVec;
    if constexpr (std::is_same_v<X, F32>) {
      std::memcpy(&v.r[k], q, sizeof(VecF));
    } else {
#ifdef OPREG_CPU_AVX2
      // One vpmovzxwd from memory: GCC 12 makes __builtin_convertvector of a loaded vector two
      // 128-bit conversions and an insert.
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
      if constexpr (std::is_same_v<X, BF16>) {
        v.r[k] = reinterpret_cast<VecF>(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      } else {
        v.r[k] = _mm256_cvtph_ps(h);
      }
#else
      VecU16 h;
      std::memcpy(&h, q, sizeof h);
      const VecU32 w = __builtin_convertvector(h, VecU32);
      if constexpr (std::is_same_v<X, BF16>) {
        v.r[k] = reinterpret_cast<VecF>(w << 16);
      } else {
        v.r[k] = f16_widen(w);
      }
#endif
    }
  }
  return v;
}
template <class X, class W>
OPREG_CPU_INLINE Lanes load16(const typename X::T* p, W w) {
  if constexpr (W::kFull) {
    return load16<X>(p);
  } else {
    alignas(64) typename X::T tmp[kLanes] = {};
    std::memcpy(tmp, p, static_cast<std::size_t>(w.m) * sizeof(typename X::T));
    return load16<X>(tmp);
  }
}

// round_x of every lane (elem.h's round_x: the value rounded to X and read back as f32). A bf16
// NaN comes back as it went in (every later use of it is NaN too, and a store quiets it).
template <class X>
OPREG_CPU_INLINE Lanes round16(const Lanes& v) {
  if constexpr (std::is_same_v<X, F32>) {
    return v;
  } else {
    Lanes o;
    for (int k = 0; k < Lanes::kRegs; ++k) {
      if constexpr (std::is_same_v<X, BF16>) {
        const auto w = reinterpret_cast<VecU32>(v.r[k]);
        const VecU32 rounded = (w + 0x7FFFU + ((w >> 16) & 1U)) & 0xFFFF0000U;
        o.r[k] = v.r[k] != v.r[k] ? v.r[k] : reinterpret_cast<VecF>(rounded);
      } else {
#ifdef OPREG_CPU_AVX2
        o.r[k] = _mm256_cvtph_ps(_mm256_cvtps_ph(v.r[k], _MM_FROUND_TO_NEAREST_INT));
#else
        o.r[k] = f16_widen(f16_narrow(v.r[k]));
#endif
      }
    }
    return o;
  }
}

// ---- Stores: kLanes values (or the first m) to X at p, rounded to nearest even, optionally
// around the caches (a non-temporal store; p then is 32-byte aligned, see `emit`).
template <class X, bool kStream>
OPREG_CPU_INLINE void store16(const Lanes& v, typename X::T* p) {
  if constexpr (std::is_same_v<X, F32>) {
    for (int k = 0; k < Lanes::kRegs; ++k) {
#ifdef OPREG_CPU_AVX2
      if constexpr (kStream) {
        _mm256_stream_ps(p + k * kVec, v.r[k]);
        continue;
      }
#elif defined(__SSE2__)
      if constexpr (kStream) {
        _mm_stream_ps(p + k * kVec, v.r[k]);
        continue;
      }
#endif
      std::memcpy(p + k * kVec, &v.r[k], sizeof(VecF));
    }
  } else {
#ifdef OPREG_CPU_AVX2
  __m256i bits;
  if constexpr (std::is_same_v<X, F16>) {
    bits = _mm256_set_m128i(_mm256_cvtps_ph(v.r[1], _MM_FROUND_TO_NEAREST_INT),
                            _mm256_cvtps_ph(v.r[0], _MM_FROUND_TO_NEAREST_INT));
  } else {
    // packus interleaves 128-bit lanes (lo0 hi0 lo1 hi1): the permute restores the order.
    bits = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(reinterpret_cast<__m256i>(bf16_narrow(v.r[0])), reinterpret_cast<__m256i>(bf16_narrow(v.r[1]))),
        0xD8);
  }
  if constexpr (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), bits);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bits);
  }
#else
  alignas(64) typename X::T tmp[kLanes];
  typename X::T* out = kStream ? tmp : p;
  for (int k = 0; k < Lanes::kRegs; ++k) {
    const VecU32 w = std::is_same_v<X, BF16> ? bf16_narrow(v.r[k]) : f16_narrow(v.r[k]);
    const VecU16 h = __builtin_convertvector(w, VecU16);
    std::memcpy(out + k * kVec, &h, sizeof h);
  }
  if constexpr (kStream) {
#if defined(__SSE2__)
    for (int b = 0; b < 2; ++b) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(p) + b, _mm_load_si128(reinterpret_cast<const __m128i*>(tmp) + b));
    }
#else
    std::memcpy(p, tmp, sizeof tmp);
#endif
  }
#endif
  }
}
template <class X, bool kStream, class W>
OPREG_CPU_INLINE void store16(const Lanes& v, typename X::T* p, W w) {
  if constexpr (W::kFull) {
    store16<X, kStream>(v, p);
  } else {
    alignas(64) typename X::T tmp[kLanes];
    store16<X, false>(v, tmp);
    std::memcpy(p, tmp, static_cast<std::size_t>(w.m) * sizeof(typename X::T));
  }
}

// f(j, w) for the blocks of [0, n): j the block's first element, w Full or Part.
template <class F>
OPREG_CPU_INLINE void for_lanes(i64 n, const F& f) {
  i64 j = 0;
  for (; j + kLanes <= n; j += kLanes) f(j, Full{});
  if (j < n) f(j, Part{n - j});
}

// dst[0, n) = the Lanes f(j, w) returns for each block, rounded to X. With `stream`, around the
// caches: straight from the registers where dst is 32-byte aligned (every block then is), else
// through a buffer and elem.h's stream_bytes. dst may be the memory of an input of f.
template <class X, class F>
OPREG_CPU_INLINE void emit(i64 n, typename X::T* dst, bool stream, const F& f) {
  using T = typename X::T;
  if (!stream) {
    for_lanes(n, [&](i64 j, auto w) { store16<X, false>(f(j, w), dst + j, w); });
    return;
  }
  if ((reinterpret_cast<std::uintptr_t>(dst) & 31) == 0) {
    for_lanes(n, [&](i64 j, auto w) { store16<X, true>(f(j, w), dst + j, w); });
    return;
  }
  alignas(64) T tmp[kChunk];
  for_lanes(n, [&](i64 j, auto w) { store16<X, false>(f(j, w), tmp + j, w); });
  stream_bytes(tmp, static_cast<std::size_t>(n) * sizeof(T), dst);
}

}  // namespace opreg::cpu::OPREG_CPU_NS
