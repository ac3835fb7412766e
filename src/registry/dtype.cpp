#include "opreg/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "opreg/error.h"
#include "registry/fail.h"
#include "registry/spellings.h"

namespace opreg {
namespace {

// A binary floating format of 1 sign bit, E exponent bits and M stored mantissa bits, IEEE
// style (biased exponent, implicit leading one, all-ones exponent for inf/NaN). binary16 and
// bfloat16 differ only in (E, M), so both go through this one implementation.
template <int E, int M>
struct SmallFloat {
  static_assert(1 + E + M <= 16, "encodings are 16-bit at most");
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr int kEmin = 1 - kBias;  // unbiased exponent of the smallest normal
  static constexpr int kEmax = kBias;      // unbiased exponent of the largest finite
  static constexpr std::uint32_t kExpAllOnes = (1u << E) - 1;
  static constexpr std::uint32_t kMantMask = (1u << M) - 1;
  static constexpr std::uint32_t kSignBit = 1u << (E + M);
  static constexpr std::uint32_t kInf = kExpAllOnes << M;
  static constexpr std::uint32_t kQuietBit = 1u << (M - 1);

  static std::uint16_t encode(double value) {
    const std::uint32_t sign = std::signbit(value) ? kSignBit : 0u;
    if (std::isnan(value)) {
      // Keep the top payload bits so a NaN read from this format comes back with its own bits;
      // the quiet bit is forced on because a signalling NaN must not survive a conversion.
      const auto payload = static_cast<std::uint32_t>((std::bit_cast<std::uint64_t>(value) >> (52 - M)) & kMantMask);
      return static_cast<std::uint16_t>(sign | kInf | kQuietBit | payload);
    }
    const double a = std::fabs(value);
    if (a == 0.0) return static_cast<std::uint16_t>(sign);
    if (std::isinf(a)) return static_cast<std::uint16_t>(sign | kInf);

    int e2 = 0;
    std::frexp(a, &e2);  // a = f * 2^e2 with f in [0.5, 1), so a lies in [2^(e2-1), 2^e2)
    const int e = e2 - 1;
    // Anything at or above 2^(emax+1) is infinite whatever the rounding; checking here also
    // keeps the scaled value below small enough to hold exactly.
    if (e > kEmax) return static_cast<std::uint16_t>(sign | kInf);
    const int eq = e < kEmin ? kEmin : e;
    // q = a / 2^(eq - M) is exact: a power-of-two scaling that neither overflows (q < 2^(M+1))
    // nor underflows (it scales up whenever a is tiny). So rounding q once to an integer is
    // rounding a once to the format, with no intermediate precision in between.
    const double q = std::ldexp(a, M - eq);
    const double whole = std::floor(q);
    const double frac = q - whole;  // exact: a double's fractional part is always representable
    auto r = static_cast<std::uint32_t>(whole);
    if (frac > 0.5 || (frac == 0.5 && (r & 1u) != 0)) ++r;
    // For a normal eq, r is in [2^M, 2^(M+1)] and the implicit one is subtracted; for a
    // subnormal eq == emin, biased exponent 1 minus the implicit one leaves r itself. Either
    // way the encoding is monotone in r, so r == 2^(M+1) carries into the next exponent (and
    // from the largest finite into infinity), and a subnormal r == 2^M becomes the smallest
    // normal, with no special cases.
    const std::uint32_t bits = (static_cast<std::uint32_t>(eq + kBias) << M) + r - (1u << M);
    return static_cast<std::uint16_t>(sign | bits);
  }

  static double decode(std::uint16_t raw) {
    const std::uint32_t bits = raw;
    const bool negative = (bits & kSignBit) != 0;
    const std::uint32_t exp = (bits >> M) & kExpAllOnes;
    const std::uint32_t mant = bits & kMantMask;
    if (exp == kExpAllOnes) {
      if (mant == 0)
        return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      // Built bit by bit so the payload (and quiet bit) land where encode() reads them back.
      const std::uint64_t d =
          (negative ? (1ull << 63) : 0ull) | (0x7FFull << 52) | (static_cast<std::uint64_t>(mant) << (52 - M));
      return std::bit_cast<double>(d);
    }
    const double magnitude = exp == 0
                                 ? std::ldexp(static_cast<double>(mant), kEmin - M)
                                 : std::ldexp(static_cast<double>(mant | (1u << M)), static_cast<int>(exp) - kBias - M);
    return negative ? -magnitude : magnitude;
  }
};

using Binary16 = SmallFloat<5, 10>;
using BFloat16 = SmallFloat<8, 7>;

// Truncates toward zero. Out of range saturates to the type's limits and NaN becomes 0:
// a plain cast would be undefined behaviour, and saturation is what a reader of a reference
// or test result expects to see rather than an arbitrary wrapped value.
template <class Int>
Int truncate_saturating(double value) {
  if (std::isnan(value)) return 0;
  // Both limits of a signed type are -2^k and 2^k - 1, and 2^k is exact in double.
  constexpr double kUpper = -static_cast<double>(std::numeric_limits<Int>::min());
  if (value >= kUpper) return std::numeric_limits<Int>::max();
  if (value <= -kUpper) return std::numeric_limits<Int>::min();
  return static_cast<Int>(std::trunc(value));
}

template <class T>
T load(const void* data, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(void* data, std::size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(data) + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

namespace {
constexpr auto kDTypeNames = spellings<DType>("f32", "f16", "bf16", "f64", "i32", "i64");
static_assert(kDTypeNames.names.size() == kNumDTypes, "a spelling for every dtype");
}  // namespace

std::string_view to_string(DType dtype) { return kDTypeNames(dtype); }

DType parse_dtype(std::string_view text) {
  if (const auto d = kDTypeNames.parse(text)) return *d;
  fail(ErrorKind::invalid_argument, "invalid dtype '{}': accepted dtypes are {}", text, kDTypeNames.accepted());
}

std::size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
  }
  fail(ErrorKind::internal, "element_size: invalid dtype value {}", static_cast<int>(dtype));
}

bool is_floating(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::f64:
      return true;
    case DType::i32:
    case DType::i64:
      return false;
  }
  return false;
}

half to_half(double value) { return {Binary16::encode(value)}; }
bfloat16 to_bfloat16(double value) { return {BFloat16::encode(value)}; }
double to_double(half value) { return Binary16::decode(value.bits); }
double to_double(bfloat16 value) { return BFloat16::decode(value.bits); }

double load_as_double(const void* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::f32:
      return load<float>(data, i);
    case DType::f16:
      return Binary16::decode(load<std::uint16_t>(data, i));
    case DType::bf16:
      return BFloat16::decode(load<std::uint16_t>(data, i));
    case DType::f64:
      return load<double>(data, i);
    case DType::i32:
      return load<std::int32_t>(data, i);
    case DType::i64:
      return static_cast<double>(load<std::int64_t>(data, i));
  }
  fail(ErrorKind::internal, "load_as_double: invalid dtype value {}", static_cast<int>(dtype));
}

void store_from_double(void* data, DType dtype, std::size_t i, double value) {
  switch (dtype) {
    case DType::f32:
      return store(data, i, static_cast<float>(value));
    case DType::f16:
      return store(data, i, Binary16::encode(value));
    case DType::bf16:
      return store(data, i, BFloat16::encode(value));
    case DType::f64:
      return store(data, i, value);
    case DType::i32:
      return store(data, i, truncate_saturating<std::int32_t>(value));
    case DType::i64:
      return store(data, i, truncate_saturating<std::int64_t>(value));
  }
  fail(ErrorKind::internal, "store_from_double: invalid dtype value {}", static_cast<int>(dtype));
}

}  // namespace opreg
