// Element types and packs of 16 bytes, shared by every cuda kernel family: each dtype's load to
// float and store from it, what rounding to a dtype gives, and N elements read or written as
// 16-byte vectors when they fill whole vectors (the caller guarantees the alignment).
#pragma once

#include <cstdint>
#include <type_traits>

#include "backends/cuda_like/gpu_vendor.h"

namespace opreg::cuda_like {
namespace dev {

#define OPREG_DEV __device__ __forceinline__

struct F32 {
  using T = float;
  static OPREG_DEV float load(T v) { return v; }
  static OPREG_DEV T store(float v) { return v; }
};
struct BF16 {
  using T = gpu_bf16;
  // bf16 is the top half of an f32. Written as integer arithmetic rather than the header's
  // inline-asm conversion, which the compiler cannot re-materialise: with it, every converted
  // value of a row stays live and the bf16 kernels need ~60% more registers than the f16 ones.
#if defined(OPREG_USE_HIP)
  static OPREG_DEV float load(T v) { return __uint_as_float(static_cast<unsigned>(v.bits) << 16); }
  // Round to nearest even on the word; a NaN stays a (quiet) NaN rather than rounding to inf.
  static OPREG_DEV T store(float v) {
    const unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return T{static_cast<unsigned short>((u >> 16) | 0x40u)};
    return T{static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
  }
#else
  static OPREG_DEV float load(T v) { return __uint_as_float(static_cast<unsigned>(__bfloat16_as_ushort(v)) << 16); }
  static OPREG_DEV T store(float v) { return __float2bfloat16_rn(v); }
#endif
};
struct F16 {
  using T = __half;
  static OPREG_DEV float load(T v) { return __half2float(v); }
  static OPREG_DEV T store(float v) { return __float2half_rn(v); }
};

// What storing v in E and reading it back gives.
template <class E>
OPREG_DEV float round_to(float v) {
  if constexpr (std::is_same_v<E, F32>) {
    return v;
  } else {
    return E::load(E::store(v));
  }
}

// N elements accessed together: as 16-byte vectors when they fill whole vectors (the caller
// guarantees the alignment), else one by one.
template <class E, int N>
struct alignas((N * sizeof(typename E::T)) % 16 == 0 ? 16 : alignof(typename E::T)) Pack {
  typename E::T v[N];
};

template <class E, int N>
OPREG_DEV Pack<E, N> load_pack(const typename E::T* p) {
  Pack<E, N> out;
  if constexpr ((N * sizeof(typename E::T)) % 16 == 0) {
#pragma unroll
    for (int i = 0; i < static_cast<int>(N * sizeof(typename E::T) / 16); ++i) {
      reinterpret_cast<uint4*>(out.v)[i] = reinterpret_cast<const uint4*>(p)[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out.v[i] = p[i];
  }
  return out;
}

// load_pack for data no thread of the kernel writes, read once: 16-byte accesses through the
// read-only path without allocating in L1 (CUDA), so the streamed rows leave L1 to the weight.
template <class E, int N>
OPREG_DEV Pack<E, N> load_pack_once(const typename E::T* p) {
#if !defined(OPREG_USE_HIP)
  if constexpr ((N * sizeof(typename E::T)) % 16 == 0) {
    Pack<E, N> out;
#pragma unroll
    for (int i = 0; i < static_cast<int>(N * sizeof(typename E::T) / 16); ++i) {
      uint4 v;
      asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(reinterpret_cast<const uint4*>(p) + i));
      reinterpret_cast<uint4*>(out.v)[i] = v;
    }
    return out;
  }
#endif
  return load_pack<E, N>(p);
}

template <class E, int N>
OPREG_DEV void store_pack(typename E::T* p, const Pack<E, N>& in) {
  if constexpr ((N * sizeof(typename E::T)) % 16 == 0) {
#pragma unroll
    for (int i = 0; i < static_cast<int>(N * sizeof(typename E::T) / 16); ++i) {
      reinterpret_cast<uint4*>(p)[i] = reinterpret_cast<const uint4*>(in.v)[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = in.v[i];
  }
}

}  // namespace dev
}  // namespace opreg::cuda_like
