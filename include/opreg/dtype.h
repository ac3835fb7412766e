// Element types and exact host conversions for the 16-bit floating formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace opreg {

enum class DType : std::uint8_t { f32, f16, bf16, f64, i32, i64 };
inline constexpr int kNumDTypes = 6;

std::string_view to_string(DType dtype);
// Parses "f32", "f16", "bf16", "f64", "i32", "i64"; anything else is an opreg::Error listing them.
DType parse_dtype(std::string_view text);
std::size_t element_size(DType dtype);
bool is_floating(DType dtype);

// IEEE binary16 and bfloat16 as bit patterns. Conversions from float and double round to
// nearest, ties to even, directly from the source value (no double rounding through float),
// with overflow to infinity, gradual underflow and NaN kept NaN (quiet, sign preserved).
struct half {
  std::uint16_t bits = 0;
};
struct bfloat16 {
  std::uint16_t bits = 0;
};

// The dtype of a C++ element type (float f32, double f64, std::int32_t i32, std::int64_t i64,
// opreg::half f16, opreg::bfloat16 bf16), for the typed Tensor::wrap.
template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
// An element type opreg knows (const or not).
template <class T>
concept Element = requires { dtype_of<std::remove_const_t<T>>::value; };

half to_half(double value);
bfloat16 to_bfloat16(double value);
double to_double(half value);
double to_double(bfloat16 value);

// Reads element i of a buffer of `dtype` as double / writes a double into it (rounding as above;
// integers truncate toward zero). For host-side tests, reference kernels and tools; not fast.
double load_as_double(const void* data, DType dtype, std::size_t i);
void store_from_double(void* data, DType dtype, std::size_t i, double value);

}  // namespace opreg
