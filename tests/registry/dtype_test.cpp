// Dtype names and the exact f16 / bf16 conversions.
#include "opreg/dtype.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "opreg/error.h"

namespace opreg {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::uint16_t h(double v) { return to_half(v).bits; }
std::uint16_t b(double v) { return to_bfloat16(v).bits; }
double hd(std::uint16_t bits) { return to_double(half{bits}); }
double bd(std::uint16_t bits) { return to_double(bfloat16{bits}); }

TEST(DTypeTest, NamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto d = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(to_string(d)), d);
  }
  EXPECT_EQ(to_string(DType::bf16), "bf16");
  EXPECT_EQ(element_size(DType::f32), 4u);
  EXPECT_EQ(element_size(DType::f16), 2u);
  EXPECT_EQ(element_size(DType::bf16), 2u);
  EXPECT_EQ(element_size(DType::f64), 8u);
  EXPECT_EQ(element_size(DType::i32), 4u);
  EXPECT_EQ(element_size(DType::i64), 8u);
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_TRUE(is_floating(DType::f64));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_FALSE(is_floating(DType::i64));
}

TEST(DTypeTest, ParseErrorsNameTextAndAcceptedNames) {
  for (const char* bad : {"", "F32", "float32", "f8", " f32", "bf16 "}) {
    try {
      parse_dtype(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_THAT(e.what(), AllOf(HasSubstr(std::string("'") + bad + "'"), HasSubstr("f32, f16, bf16, f64, i32, i64")));
    }
  }
}

TEST(DTypeTest, ErrorKindNames) {
  EXPECT_EQ(to_string(ErrorKind::invalid_argument), "invalid argument");
  EXPECT_EQ(to_string(ErrorKind::unsupported), "unsupported");
  EXPECT_EQ(to_string(ErrorKind::device), "device");
  EXPECT_EQ(to_string(ErrorKind::internal), "internal");
}

// Every pattern decodes to a value that encodes back to the same pattern, so both directions
// agree on every exponent, subnormal and special. Signalling NaNs come back quiet.
template <class Encode, class Decode>
void exhaustive_round_trip(Encode encode, Decode decode, int mantissa_bits) {
  const std::uint16_t quiet = static_cast<std::uint16_t>(1u << (mantissa_bits - 1));
  int nans = 0;
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto in = static_cast<std::uint16_t>(bits);
    const double v = decode(in);
    const std::uint16_t out = encode(v);
    if (std::isnan(v)) {
      ++nans;
      EXPECT_TRUE(std::isnan(decode(out))) << std::hex << bits;
      EXPECT_EQ(out, in | quiet) << std::hex << bits;  // sign and payload kept, quieted
    } else {
      EXPECT_EQ(out, in) << std::hex << bits << " decoded to " << v;
    }
  }
  EXPECT_EQ(nans, 2 * ((1 << mantissa_bits) - 1));
}

TEST(DTypeTest, HalfExhaustiveRoundTrip) { exhaustive_round_trip(h, hd, 10); }
TEST(DTypeTest, BFloat16ExhaustiveRoundTrip) { exhaustive_round_trip(b, bd, 7); }

TEST(DTypeTest, HalfDecodesKnownValues) {
  EXPECT_EQ(hd(0x3C00), 1.0);
  EXPECT_EQ(hd(0xC000), -2.0);
  EXPECT_EQ(hd(0x7BFF), 65504.0);
  EXPECT_EQ(hd(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(hd(0x03FF), std::ldexp(1023.0, -24));
  EXPECT_EQ(hd(0x0400), std::ldexp(1.0, -14));
  EXPECT_TRUE(std::isinf(hd(0x7C00)) && hd(0x7C00) > 0);
  EXPECT_TRUE(std::isinf(hd(0xFC00)) && hd(0xFC00) < 0);
  EXPECT_TRUE(std::signbit(hd(0x8000)) && hd(0x8000) == 0.0);
}

TEST(DTypeTest, HalfRoundsToNearestEven) {
  const double u = std::ldexp(1.0, -10);  // spacing just above 1
  EXPECT_EQ(h(1.0), 0x3C00);
  EXPECT_EQ(h(1.0 + u / 2), 0x3C00);      // tie, 1.0 is even
  EXPECT_EQ(h(1.0 + 3 * u / 2), 0x3C02);  // tie, 1 + 2^-9 is even
  EXPECT_EQ(hd(0x3C02), 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(h(1.0 + u / 2 + std::ldexp(1.0, -30)), 0x3C01);  // just above the tie
  EXPECT_EQ(h(1.0 + u / 2 - std::ldexp(1.0, -30)), 0x3C00);  // just below
  EXPECT_EQ(h(-(1.0 + 3 * u / 2)), 0xBC02);
  // The tie at the top of a binade: 2 - u/2 is halfway between 0x3FFF (odd) and 2.0, and the
  // carry moves into the next exponent.
  EXPECT_EQ(h(2.0 - u / 2), 0x4000);
  EXPECT_EQ(h(2.0 - u), 0x3FFF);
}

TEST(DTypeTest, NoDoubleRoundingThroughFloat) {
  // 1 + 2^-11 + 2^-40: above the f16 tie between 1 and 1 + 2^-10, so it rounds up. Through
  // float it would first become exactly the tie 1 + 2^-11 and then round to even, down to 1.
  const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(v)), 1.0 + std::ldexp(1.0, -11));
  EXPECT_EQ(h(static_cast<float>(v)), 0x3C00);
  EXPECT_EQ(h(v), 0x3C01);
  // The same for bf16, whose tie above 1 is 1 + 2^-8.
  const double w = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(w)), 1.0 + std::ldexp(1.0, -8));
  EXPECT_EQ(b(static_cast<float>(w)), 0x3F80);
  EXPECT_EQ(b(w), 0x3F81);
}

TEST(DTypeTest, HalfOverflow) {
  EXPECT_EQ(h(65504.0), 0x7BFF);
  EXPECT_EQ(h(65519.99), 0x7BFF);  // below the midpoint to the next (absent) value 65536
  EXPECT_EQ(h(65520.0), 0x7C00);   // the tie: 65504 is odd, so it rounds up, past max finite
  EXPECT_EQ(h(-65520.0), 0xFC00);
  EXPECT_EQ(h(1e300), 0x7C00);
  EXPECT_EQ(h(std::numeric_limits<double>::max()), 0x7C00);
  EXPECT_EQ(h(std::numeric_limits<double>::infinity()), 0x7C00);
  EXPECT_EQ(h(-std::numeric_limits<double>::infinity()), 0xFC00);
}

TEST(DTypeTest, HalfSubnormals) {
  const double tiny = std::ldexp(1.0, -24);  // smallest subnormal
  EXPECT_EQ(h(tiny), 0x0001);
  EXPECT_EQ(h(tiny / 2), 0x0000);  // tie between 0 (even) and 0x0001
  EXPECT_EQ(h(-tiny / 2), 0x8000);
  EXPECT_EQ(h(tiny / 2 + std::ldexp(1.0, -60)), 0x0001);
  EXPECT_EQ(h(3 * tiny / 2), 0x0002);  // tie, to even
  EXPECT_EQ(h(5 * tiny / 2), 0x0002);
  EXPECT_EQ(h(std::numeric_limits<double>::denorm_min()), 0x0000);
  EXPECT_EQ(h(-std::numeric_limits<double>::denorm_min()), 0x8000);
  // The largest subnormal plus half a step is a tie between 0x03FF (odd) and the smallest
  // normal 0x0400: the carry leaves the subnormal range.
  EXPECT_EQ(h(std::ldexp(1023.5, -24)), 0x0400);
  EXPECT_EQ(h(std::ldexp(1023.25, -24)), 0x03FF);
  EXPECT_EQ(h(std::ldexp(1.0, -14)), 0x0400);
}

TEST(DTypeTest, SignedZeroAndNaN) {
  EXPECT_EQ(h(0.0), 0x0000);
  EXPECT_EQ(h(-0.0), 0x8000);
  EXPECT_EQ(b(-0.0), 0x8000);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::uint16_t hn = h(nan);
  EXPECT_EQ(hn & 0x7C00, 0x7C00);
  EXPECT_NE(hn & 0x0200, 0);  // quiet bit
  EXPECT_EQ(hn & 0x8000, 0);
  EXPECT_NE(h(-nan) & 0x8000, 0);
  EXPECT_TRUE(std::isnan(hd(hn)));
  const std::uint16_t bn = b(-nan);
  EXPECT_EQ(bn & 0xFF80, 0xFF80);
  EXPECT_NE(bn & 0x0040, 0);
  EXPECT_TRUE(std::isnan(bd(bn)));
  // A signalling double NaN whose payload sits below the bits the format keeps is still NaN.
  const double snan = std::bit_cast<double>(0x7FF0000000000001ull);
  ASSERT_TRUE(std::isnan(snan));
  EXPECT_TRUE(std::isnan(hd(h(snan))));
  EXPECT_TRUE(std::isnan(bd(b(snan))));
}

TEST(DTypeTest, BFloat16Rounding) {
  const double u = std::ldexp(1.0, -7);
  EXPECT_EQ(b(1.0), 0x3F80);
  EXPECT_EQ(b(1.0 + u / 2), 0x3F80);      // 1 + 2^-8: tie, to even
  EXPECT_EQ(b(1.0 + 3 * u / 2), 0x3F82);  // tie, to even (up)
  EXPECT_EQ(b(1.0 + u / 2 + std::ldexp(1.0, -30)), 0x3F81);
  EXPECT_EQ(bd(0x3F81), 1.0 + u);
  const double max_finite = std::ldexp(255.0, 120);  // 0x7F7F
  EXPECT_EQ(b(max_finite), 0x7F7F);
  EXPECT_EQ(b(std::ldexp(255.5, 120)), 0x7F80);  // tie past max finite: infinity
  EXPECT_EQ(b(std::ldexp(255.49, 120)), 0x7F7F);
  EXPECT_EQ(b(std::ldexp(1.0, -133)), 0x0001);  // smallest subnormal
  EXPECT_EQ(b(std::ldexp(1.0, -134)), 0x0000);  // half of it: tie to 0
  EXPECT_EQ(b(std::ldexp(1.0, -134) * 1.0001), 0x0001);
  EXPECT_EQ(b(std::ldexp(127.5, -133)), 0x0080);  // largest subnormal + half: smallest normal
}

TEST(DTypeTest, LoadAndStoreEveryDType) {
  alignas(8) unsigned char buf[64] = {};
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto d = static_cast<DType>(i);
    store_from_double(buf, d, 3, -2.5);
    store_from_double(buf, d, 1, 7.0);
    EXPECT_EQ(load_as_double(buf, d, 1), 7.0) << to_string(d);
    EXPECT_EQ(load_as_double(buf, d, 3), is_floating(d) ? -2.5 : -2.0) << to_string(d);  // toward zero
  }
  store_from_double(buf, DType::f16, 0, 1.0 + std::ldexp(1.0, -11));
  EXPECT_EQ(load_as_double(buf, DType::f16, 0), 1.0);
  store_from_double(buf, DType::bf16, 0, 3.0);
  EXPECT_EQ(bd(static_cast<std::uint16_t>(buf[0] | (buf[1] << 8))), 3.0);  // little-endian host
  store_from_double(buf, DType::f32, 0, 0.1);
  EXPECT_EQ(load_as_double(buf, DType::f32, 0), static_cast<double>(0.1F));
}

TEST(DTypeTest, IntegerStoreSaturates) {
  alignas(8) unsigned char buf[8] = {};
  store_from_double(buf, DType::i32, 0, 3e9);
  EXPECT_EQ(load_as_double(buf, DType::i32, 0), 2147483647.0);
  store_from_double(buf, DType::i32, 0, -3e9);
  EXPECT_EQ(load_as_double(buf, DType::i32, 0), -2147483648.0);
  store_from_double(buf, DType::i32, 0, -2147483648.9);
  EXPECT_EQ(load_as_double(buf, DType::i32, 0), -2147483648.0);
  store_from_double(buf, DType::i32, 0, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(load_as_double(buf, DType::i32, 0), 0.0);
  store_from_double(buf, DType::i64, 0, 1e19);
  std::int64_t v = 0;
  std::memcpy(&v, buf, 8);
  EXPECT_EQ(v, std::numeric_limits<std::int64_t>::max());
  store_from_double(buf, DType::i64, 0, -1e19);
  std::memcpy(&v, buf, 8);
  EXPECT_EQ(v, std::numeric_limits<std::int64_t>::min());
  store_from_double(buf, DType::i64, 0, -2.9);
  std::memcpy(&v, buf, 8);
  EXPECT_EQ(v, -2);
  store_from_double(buf, DType::i64, 0, std::ldexp(1.0, 62) + 1024.0);  // large, in range, exact
  std::memcpy(&v, buf, 8);
  EXPECT_EQ(v, (std::int64_t{1} << 62) + 1024);
}

}  // namespace
}  // namespace opreg
