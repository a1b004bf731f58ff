// bf16 conversions: round to nearest even from float and double (the latter without
// double rounding), NaN, infinities, signed zeros, subnormals and overflow, checked
// against an exact reference that never rounds.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "support.hpp"
#include "trnsparse/bf16.hpp"

namespace trnsparse::test {
namespace {

std::uint16_t bits_of(float f) { return bf16(f).bits; }
std::uint16_t bits_of(double d) { return bf16(d).bits; }
float float_from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

/// The value of the non-negative bf16 pattern b <= 0x7f80 as a double, where 0x7f80
/// stands for 2^128: the first value of the binade past the largest finite bf16, so that
/// rounding into it means overflow to infinity.
double bf16_value(std::uint16_t b) {
  const int exponent = b >> 7;
  const int mantissa = b & 0x7f;
  if (exponent == 0) return std::ldexp(mantissa, -133);  // subnormal: m * 2^-133
  return std::ldexp(128 + mantissa, exponent - 134);     // (1 + m/128) * 2^(e-127)
}

/// The correctly rounded (nearest, ties to even) bf16 of a finite or infinite double,
/// computed exactly: bracket |d| between adjacent bf16 values by binary search and
/// compare it with their midpoint, which needs 9 significant bits and so is exact in fp64.
std::uint16_t reference_round(double d) {
  const std::uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  const double a = std::fabs(d);
  if (a >= bf16_value(0x7f80)) return sign | 0x7f80;
  std::uint16_t lo = 0;  // invariant: bf16_value(lo) <= a < bf16_value(hi)
  std::uint16_t hi = 0x7f80;
  while (hi - lo > 1) {
    const auto mid = static_cast<std::uint16_t>((lo + hi) / 2);
    (bf16_value(mid) <= a ? lo : hi) = mid;
  }
  const double midpoint = (bf16_value(lo) + bf16_value(hi)) / 2;
  std::uint16_t rounded = a < midpoint ? lo : a > midpoint ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | rounded;
}

bool is_nan_bits(std::uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0; }

TEST(Bf16, WideningIsExact) {
  EXPECT_EQ(float(bf16::from_bits(0x3f80)), 1.0f);
  EXPECT_EQ(float(bf16::from_bits(0xc0a0)), -5.0f);
  EXPECT_EQ(float(bf16::from_bits(0x0001)), std::ldexp(1.0f, -133));
  EXPECT_EQ(float(bf16{3.14159f}), 3.140625f);
}

TEST(Bf16, RoundsHalfwayCasesToEven) {
  EXPECT_EQ(bits_of(float_from_bits(0x3f808000)), 0x3f80);  // tie, 0x3f80 is even
  EXPECT_EQ(bits_of(float_from_bits(0x3f818000)), 0x3f82);  // tie, 0x3f82 is even
  EXPECT_EQ(bits_of(float_from_bits(0xbf818000)), 0xbf82);
  EXPECT_EQ(bits_of(float_from_bits(0x3f808001)), 0x3f81);  // just above the tie
  EXPECT_EQ(bits_of(float_from_bits(0x3f817fff)), 0x3f81);  // just below the tie
  EXPECT_EQ(bits_of(float_from_bits(0x3f7fffff)), 0x3f80);  // rounds up into the next binade
}

TEST(Bf16, InfinitiesAndSignedZerosAreExact) {
  EXPECT_EQ(bits_of(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bits_of(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bits_of(0.0f), 0x0000);
  EXPECT_EQ(bits_of(-0.0f), 0x8000);
  EXPECT_EQ(bits_of(std::numeric_limits<double>::infinity()), 0x7f80);
  EXPECT_EQ(bits_of(-std::numeric_limits<double>::infinity()), 0xff80);
  EXPECT_EQ(bits_of(0.0), 0x0000);
  EXPECT_EQ(bits_of(-0.0), 0x8000);
}

TEST(Bf16, NanStaysNanAndKeepsItsSign) {
  const std::uint32_t nans[] = {
      0x7fc00000,  // canonical quiet NaN
      0x7f800001,  // signalling, payload only in the low bits: truncation would give Inf
      0x7fa00000,  // signalling, payload in the kept bits
      0x7fffffff,  // all ones: rounding up would carry into the sign
      0x7fff8000,  // a "tie" in the dropped bits
  };
  for (const std::uint32_t nan : nans) {
    for (const std::uint32_t sign : {0x00000000u, 0x80000000u}) {
      const std::uint32_t u = nan | sign;
      SCOPED_TRACE(::testing::Message() << "float bits 0x" << std::hex << u);
      const std::uint16_t b = bits_of(float_from_bits(u));
      EXPECT_TRUE(is_nan_bits(b)) << std::hex << b;
      EXPECT_EQ(b & 0x8000, sign >> 16);
      EXPECT_NE(b & 0x0040, 0) << "the result is a quiet NaN";
    }
  }
  for (const std::uint64_t nan : {0x7ff8000000000000ull, 0x7ff0000000000001ull, 0xfff8000000000000ull}) {
    SCOPED_TRACE(::testing::Message() << "double bits 0x" << std::hex << nan);
    const std::uint16_t b = bits_of(std::bit_cast<double>(nan));
    EXPECT_TRUE(is_nan_bits(b)) << std::hex << b;
    EXPECT_EQ(b & 0x8000, (nan >> 48) & 0x8000);
  }
}

TEST(Bf16, Subnormals) {
  EXPECT_EQ(bits_of(float_from_bits(0x00000001)), 0x0000);  // far below half the smallest bf16
  EXPECT_EQ(bits_of(float_from_bits(0x00008000)), 0x0000);  // tie between 0 and 0x0001: even
  EXPECT_EQ(bits_of(float_from_bits(0x00008001)), 0x0001);
  EXPECT_EQ(bits_of(float_from_bits(0x00018000)), 0x0002);  // tie between 0x0001 and 0x0002
  EXPECT_EQ(bits_of(float_from_bits(0x80018000)), 0x8002);
  EXPECT_EQ(bits_of(float_from_bits(0x80000001)), 0x8000);  // keeps the sign of zero
  EXPECT_EQ(bits_of(float_from_bits(0x007fffff)), 0x0080);  // rounds up to the smallest normal
  EXPECT_EQ(bits_of(float_from_bits(0x00400000)), 0x0040);  // exact subnormal
}

TEST(Bf16, OverflowsToInfinityOnlyPastTheLastTie) {
  EXPECT_EQ(bits_of(FLT_MAX), 0x7f80);
  EXPECT_EQ(bits_of(-FLT_MAX), 0xff80);
  EXPECT_EQ(bits_of(float_from_bits(0x7f7f8000)), 0x7f80);  // tie with the odd largest finite: up
  EXPECT_EQ(bits_of(float_from_bits(0x7f7f7fff)), 0x7f7f);  // the largest float that rounds down
  EXPECT_EQ(bits_of(float_from_bits(0x7f7f0000)), 0x7f7f);
  const double largest_finite = bf16_value(0x7f7f);
  const double last_tie = (largest_finite + bf16_value(0x7f80)) / 2;  // 2^128 - 2^119
  EXPECT_EQ(bits_of(last_tie), 0x7f80);
  EXPECT_EQ(bits_of(std::nextafter(last_tie, 0.0)), 0x7f7f);
  EXPECT_EQ(bits_of(-std::nextafter(last_tie, 0.0)), 0xff7f);
  EXPECT_EQ(bits_of(1e39), 0x7f80);  // beyond the float range
  EXPECT_EQ(bits_of(-1e300), 0xff80);
}

TEST(Bf16, WideningThenNarrowingIsIdentityForEveryPattern) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = bf16::from_bits(static_cast<std::uint16_t>(b));
    const float f = h;
    if (is_nan_bits(h.bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << b;
      EXPECT_TRUE(is_nan_bits(bits_of(f))) << std::hex << b;
    } else {
      ASSERT_EQ(bits_of(f), b) << "float pattern 0x" << std::hex << b;
      ASSERT_EQ(bits_of(static_cast<double>(f)), b) << "double pattern 0x" << std::hex << b;
    }
  }
}

using Bf16Random = Seeded<>;

TEST_F(Bf16Random, FromFloatMatchesTheExactReference) {
  for (int n = 0; n < (1 << 18); ++n) {
    const float f = float_from_bits(static_cast<std::uint32_t>(rng.bits()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(bits_of(f), reference_round(f)) << "float bits 0x" << std::hex << std::bit_cast<std::uint32_t>(f);
  }
}

// A double just above a bf16 tie rounds to the same float as the tie itself, so
// converting through float would round twice and land on the even neighbour instead of
// the nearest one. Build such doubles around ties of random bf16 values in every binade
// (subnormals and the top binade included) and compare with the exact reference.
TEST_F(Bf16Random, FromDoubleIsCorrectlyRoundedWithoutDoubleRounding) {
  for (int n = 0; n < 20000; ++n) {
    const auto b = static_cast<std::uint16_t>(rng.below(0x7f7f));
    const double tie = (bf16_value(b) + bf16_value(b + 1)) / 2;
    const double sign = rng.bernoulli(0.5) ? -1.0 : 1.0;
    const double candidates[] = {tie, std::nextafter(tie, 0.0), std::nextafter(tie, 1e300),
                                 tie * (1 + 0x1p-40), tie * (1 - 0x1p-40)};
    for (const double magnitude : candidates) {
      const double d = sign * magnitude;
      ASSERT_EQ(bits_of(d), reference_round(d)) << "double " << std::hexfloat << d;
    }
  }
}

TEST(Bf16, FromDoubleAvoidsTheDoubleRoundingTrap) {
  const double tie = (1.0 + 1.0078125) / 2;  // between 0x3f80 (even) and 0x3f81
  const double above = std::nextafter(tie, 2.0);
  ASSERT_EQ(bits_of(static_cast<float>(above)), 0x3f80) << "through float the tie is rounded to even";
  EXPECT_EQ(bits_of(above), 0x3f81);
  EXPECT_EQ(bits_of(std::nextafter(tie, 0.0)), 0x3f80);
  EXPECT_EQ(bits_of(tie), 0x3f80);
  const double odd_tie = (bf16_value(0x3f81) + bf16_value(0x3f82)) / 2;
  EXPECT_EQ(bits_of(std::nextafter(odd_tie, 0.0)), 0x3f81);
  EXPECT_EQ(bits_of(odd_tie), 0x3f82);
}

TEST(Bf16, FromDoubleBelowTheFloatRange) {
  const double half_smallest = std::ldexp(1.0, -134);  // tie between 0 and 0x0001
  EXPECT_EQ(bits_of(half_smallest), 0x0000);
  EXPECT_EQ(bits_of(std::nextafter(half_smallest, 1.0)), 0x0001);
  EXPECT_EQ(bits_of(-std::nextafter(half_smallest, 1.0)), 0x8001);
  EXPECT_EQ(bits_of(std::ldexp(3.0, -134)), 0x0002);  // tie between 0x0001 and 0x0002
  EXPECT_EQ(bits_of(1e-50), 0x0000);                  // below the smallest float subnormal
  EXPECT_EQ(bits_of(-1e-50), 0x8000);
  EXPECT_EQ(bits_of(std::ldexp(1.0, -126) * (1 - 0x1p-30)), 0x0080);  // up to the smallest normal
}

TEST(Bf16, EqualityComparesValues) {
  EXPECT_EQ(bf16::from_bits(0x0000), bf16::from_bits(0x8000));
  EXPECT_FALSE(bf16::from_bits(0x7fc0) == bf16::from_bits(0x7fc0));
  EXPECT_EQ(bf16{1.0f}, bf16{1.0});
}

}  // namespace
}  // namespace trnsparse::test
