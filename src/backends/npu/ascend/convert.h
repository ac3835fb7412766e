// The vector unit's float conversions, bit-exact (round to nearest even, as Cast's CAST_RINT;
// NaN stays a quiet NaN of the same sign): what Cast and the half arithmetic of the emulated
// vector unit compute with. They agree with opreg::to_half / to_bfloat16 on every float (tested).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace opreg::npu::detail {

// f16 -> f32 through a table of all 65536 values (built once).
const float* half_table();

inline float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

inline std::uint16_t float_to_bf16(float f) {
  const auto w = std::bit_cast<std::uint32_t>(f);
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((w >> 16) | 0x40u);
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest even through the carry.
  return static_cast<std::uint16_t>((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16);
}

inline std::uint16_t float_to_half(float f) {
  const auto w = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((w >> 16) & 0x8000u);
  const std::uint32_t a = w & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {  // infinity, NaN (quiet, top payload bits kept)
    return static_cast<std::uint16_t>(sign | (a == 0x7F800000u ? 0x7C00u : (0x7E00u | ((a >> 13) & 0x3FFu))));
  }
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds to 65520 or more
  if (a >= 0x38800000u) {                                                   // a normal half (>= 2^-14)
    const std::uint32_t rebased = a - 0x38000000u;                          // exponent bias 127 -> 15
    return static_cast<std::uint16_t>(sign | ((rebased + 0xFFFu + ((rebased >> 13) & 1u)) >> 13));
  }
  // Subnormal half: a multiple of 2^-24; the float product is exact and rint rounds to even.
  return static_cast<std::uint16_t>(sign |
                                    static_cast<std::uint32_t>(std::nearbyint(std::bit_cast<float>(a) * 0x1p24f)));
}

}  // namespace opreg::npu::detail
