// half.h against bit patterns from the IEEE 754 / OCP FP8 tables and against a brute-force
// nearest-value search written here (it shares no code with half.h).
#include "groupcoord/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace groupcoord {
namespace {

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint32_t to_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Value of a sign-less minifloat code from its definition: (1 + m/2^M) * 2^(e - bias), or
/// m/2^M * 2^(1 - bias) when e == 0. Computed in double with ldexp.
double minifloat_value(unsigned code, int mant_bits, int bias) {
  const unsigned e = code >> mant_bits;
  const unsigned m = code & ((1u << mant_bits) - 1);
  const double frac = static_cast<double>(m) / (1u << mant_bits);
  if (e == 0) return std::ldexp(frac, 1 - bias);
  return std::ldexp(1.0 + frac, static_cast<int>(e) - bias);
}

/// Brute-force round-to-nearest-even: `values[i]` is the value of code i (ascending);
/// the result is the index of the nearest, ties to the even index.
unsigned nearest_even(const std::vector<double>& values, double x) {
  auto it = std::lower_bound(values.begin(), values.end(), x);
  if (it == values.begin()) return 0;
  if (it == values.end()) return static_cast<unsigned>(values.size() - 1);
  const unsigned hi = static_cast<unsigned>(it - values.begin());
  const unsigned lo = hi - 1;
  const double d_lo = x - values[lo];
  const double d_hi = values[hi] - x;
  if (d_lo < d_hi) return lo;
  if (d_hi < d_lo) return hi;
  return (lo % 2 == 0) ? lo : hi;
}

// ---- binary16 -------------------------------------------------------------------------------

TEST(Half, KnownBitPatterns) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(0.5f), 0x3800);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);  // largest finite
  EXPECT_EQ(float_to_half(0.1f), 0x2E66);
  EXPECT_EQ(float_to_half(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1023.0f, -24)), 0x03FF);  // largest subnormal
  EXPECT_EQ(float_to_half(kInf), 0x7C00);
  EXPECT_EQ(float_to_half(-kInf), 0xFC00);

  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(half_to_float(0x7C00), kInf);
  EXPECT_EQ(half_to_float(0xFC00), -kInf);
  EXPECT_EQ(to_bits(half_to_float(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_TRUE(std::isnan(half_to_float(0x7C01)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(half_to_float(0xFFFF)));
}

TEST(Half, RoundsToNearestEven) {
  // At 1.0 the half ulp is 2^-10, so 2^-11 is exactly halfway.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even (down)
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -20)), 0x3C00);
  // Subnormal ties: 2^-25 is halfway between 0 and the smallest subnormal.
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(float_to_half(-3 * std::ldexp(1.0f, -25)), 0x8002);
  // Rounding up out of the subnormals gives the smallest normal.
  EXPECT_EQ(float_to_half(std::ldexp(2047.0f, -25)), 0x0400);
  // Overflow: 65520 is halfway between 65504 and 2^16 (the would-be next value): ties to
  // even, which is infinity; anything below stays finite.
  EXPECT_EQ(float_to_half(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);
  EXPECT_EQ(float_to_half(-65520.0f), 0xFC00);
  EXPECT_EQ(float_to_half(1e10f), 0x7C00);
  // Tiny values and float subnormals flush to a signed zero.
  EXPECT_EQ(float_to_half(1e-30f), 0x0000);
  EXPECT_EQ(float_to_half(-from_bits(0x00000001)), 0x8000);
}

TEST(Half, NaNStaysNaN) {
  for (std::uint32_t bits : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7F802000u, 0xFFFFFFFFu}) {
    const std::uint16_t h = float_to_half(from_bits(bits));
    EXPECT_EQ(h & 0x7C00, 0x7C00) << std::hex << bits;
    EXPECT_NE(h & 0x03FF, 0) << std::hex << bits;
    EXPECT_EQ(h >> 15, bits >> 31) << std::hex << bits;
  }
}

TEST(Half, EveryCodeDecodesToItsDefinedValue) {
  for (unsigned code = 0; code < 0x10000; ++code) {
    const unsigned mag = code & 0x7FFF;
    const float got = half_to_float(static_cast<std::uint16_t>(code));
    if (mag > 0x7C00) {
      EXPECT_TRUE(std::isnan(got)) << code;
      continue;
    }
    double expected = mag == 0x7C00 ? INFINITY : minifloat_value(mag, 10, 15);
    if (code & 0x8000) expected = -expected;
    ASSERT_EQ(static_cast<double>(got), expected) << std::hex << code;
    // Every finite half is a float, so the trip back is exact.
    ASSERT_EQ(float_to_half(got), code) << std::hex << code;
  }
}

TEST(Half, MatchesBruteForceNearest) {
  // Positive codes 0..0x7C00 in ascending value; 0x7C00 (inf) stands at 2^16, the value the
  // exponent range would give next, which is exactly how IEEE rounding treats overflow.
  std::vector<double> values;
  for (unsigned code = 0; code < 0x7C00; ++code) values.push_back(minifloat_value(code, 10, 15));
  values.push_back(65536.0);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::uint32_t> mantissa(0, 0x7FFFFF);
  std::uniform_int_distribution<int> exponent(127 - 27, 127 + 17);  // just past both ends
  for (int i = 0; i < 300000; ++i) {
    const std::uint32_t bits = (static_cast<std::uint32_t>(exponent(rng)) << 23) | mantissa(rng);
    const float x = from_bits(bits);
    const double clamped = std::min<double>(x, 65536.0);
    const unsigned expected = nearest_even(values, clamped);
    ASSERT_EQ(float_to_half(x), expected) << std::hexfloat << x;
    ASSERT_EQ(float_to_half(-x), expected | 0x8000) << std::hexfloat << x;
  }
  // Every exact midpoint between neighbours (all are floats) must round to the even code.
  for (unsigned code = 0; code + 1 < values.size(); ++code) {
    const float mid = static_cast<float>((values[code] + values[code + 1]) / 2);
    ASSERT_EQ(float_to_half(mid), code % 2 == 0 ? code : code + 1) << code;
  }
}

// ---- bfloat16 -------------------------------------------------------------------------------

TEST(BFloat16, KnownBitPatterns) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bfloat16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bfloat16(3.0f), 0x4040);
  EXPECT_EQ(float_to_bfloat16(from_bits(0x40490FDB)), 0x4049);  // pi
  EXPECT_EQ(float_to_bfloat16(kInf), 0x7F80);
  EXPECT_EQ(float_to_bfloat16(-kInf), 0xFF80);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0xC000), -2.0f);
  EXPECT_EQ(bfloat16_to_float(0x7F80), kInf);
  EXPECT_EQ(bfloat16_to_float(0x0001), from_bits(0x00010000));  // bf16 subnormal
  EXPECT_EQ(bfloat16_to_float(0x7F7F), from_bits(0x7F7F0000));  // largest finite
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0x7FC0)));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0xFF81)));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16(from_bits(0x3F808000)), 0x3F80);  // tie -> even (down)
  EXPECT_EQ(float_to_bfloat16(from_bits(0x3F818000)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(float_to_bfloat16(from_bits(0x3F808001)), 0x3F81);
  EXPECT_EQ(float_to_bfloat16(from_bits(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(float_to_bfloat16(from_bits(0x7F7FFFFF)), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(float_to_bfloat16(from_bits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(float_to_bfloat16(from_bits(0x00018000)), 0x0002);  // subnormal tie -> even
}

TEST(BFloat16, NaNStaysNaN) {
  // 0x7F800001 would truncate to 0x7F80 (infinity) without care.
  for (std::uint32_t bits : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    const std::uint16_t b = float_to_bfloat16(from_bits(bits));
    EXPECT_EQ(b & 0x7F80, 0x7F80) << std::hex << bits;
    EXPECT_NE(b & 0x007F, 0) << std::hex << bits;
    EXPECT_EQ(b >> 15, bits >> 31) << std::hex << bits;
  }
}

TEST(BFloat16, MatchesTruncationCandidates) {
  // Reference: the two bf16 neighbours of x are its truncation and the next code; pick the
  // nearer in double, ties to the even code.
  std::mt19937 rng(99);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t bits = rng() & 0x7F7FFFFFu;  // finite and positive
    const double x = from_bits(bits);
    const std::uint32_t lo = bits >> 16;
    const double v_lo = from_bits(lo << 16);
    // Past the largest finite bf16 the next "value" is 2^128, where IEEE puts infinity.
    const double v_hi = lo + 1 == 0x7F80 ? std::ldexp(1.0, 128) : from_bits((lo + 1) << 16);
    std::uint32_t expected = (x - v_lo < v_hi - x)   ? lo
                             : (x - v_lo > v_hi - x) ? lo + 1
                                                     : (lo + (lo & 1));
    ASSERT_EQ(float_to_bfloat16(from_bits(bits)), expected) << std::hex << bits;
    ASSERT_EQ(bfloat16_to_float(static_cast<std::uint16_t>(lo)), v_lo);
  }
}

// ---- fp8 e4m3fn -----------------------------------------------------------------------------

TEST(Float8E4M3, KnownBitPatterns) {
  EXPECT_EQ(float_to_float8_e4m3fn(1.0f), 0x38);
  EXPECT_EQ(float_to_float8_e4m3fn(1.5f), 0x3C);
  EXPECT_EQ(float_to_float8_e4m3fn(2.0f), 0x40);
  EXPECT_EQ(float_to_float8_e4m3fn(-1.0f), 0xB8);
  EXPECT_EQ(float_to_float8_e4m3fn(448.0f), 0x7E);
  EXPECT_EQ(float_to_float8_e4m3fn(-448.0f), 0xFE);
  EXPECT_EQ(float_to_float8_e4m3fn(0.1f), 0x1D);                  // 0.1015625
  EXPECT_EQ(float_to_float8_e4m3fn(std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  EXPECT_EQ(float_to_float8_e4m3fn(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(float_to_float8_e4m3fn(std::ldexp(7.0f, -9)), 0x07);  // largest subnormal
  EXPECT_EQ(float_to_float8_e4m3fn(-0.0f), 0x80);

  EXPECT_EQ(float8_e4m3fn_to_float(0x38), 1.0f);
  EXPECT_EQ(float8_e4m3fn_to_float(0x7E), 448.0f);
  EXPECT_EQ(float8_e4m3fn_to_float(0xFE), -448.0f);
  EXPECT_EQ(float8_e4m3fn_to_float(0x01), 0.001953125f);
  EXPECT_EQ(float8_e4m3fn_to_float(0x07), 0.013671875f);
  EXPECT_EQ(float8_e4m3fn_to_float(0x08), 0.015625f);
  EXPECT_EQ(float8_e4m3fn_to_float(0x78), 256.0f);  // no infinity: exponent 1111 is finite
  EXPECT_TRUE(std::isnan(float8_e4m3fn_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(float8_e4m3fn_to_float(0xFF)));
}

TEST(Float8E4M3, SaturatesAndRoundsToNearestEven) {
  EXPECT_EQ(float_to_float8_e4m3fn(500.0f), 0x7E);
  EXPECT_EQ(float_to_float8_e4m3fn(464.0f), 0x7E);
  EXPECT_EQ(float_to_float8_e4m3fn(1e30f), 0x7E);
  EXPECT_EQ(float_to_float8_e4m3fn(-1e9f), 0xFE);
  EXPECT_EQ(float_to_float8_e4m3fn(kInf), 0x7E);
  EXPECT_EQ(float_to_float8_e4m3fn(-kInf), 0xFE);
  EXPECT_EQ(float_to_float8_e4m3fn(kNaN) & 0x7F, 0x7F);
  EXPECT_EQ(float_to_float8_e4m3fn(-kNaN), 0xFF);
  EXPECT_EQ(float_to_float8_e4m3fn(1.0f + 1.0f / 16), 0x38);       // tie -> even (down)
  EXPECT_EQ(float_to_float8_e4m3fn(1.0f + 3.0f / 16), 0x3A);       // tie -> even (up)
  EXPECT_EQ(float_to_float8_e4m3fn(std::ldexp(1.0f, -10)), 0x00);  // half the smallest
  EXPECT_EQ(float_to_float8_e4m3fn(std::ldexp(3.0f, -10)), 0x02);
  EXPECT_EQ(float_to_float8_e4m3fn(std::ldexp(1.1f, -10)), 0x01);
}

TEST(Float8E4M3, EveryCodeAndEveryMidpoint) {
  std::vector<double> values;  // codes 0..0x7E
  for (unsigned code = 0; code <= 0x7E; ++code) values.push_back(minifloat_value(code, 3, 7));
  for (unsigned code = 0; code < 256; ++code) {
    const float got = float8_e4m3fn_to_float(static_cast<std::uint8_t>(code));
    if ((code & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    const double expected = (code & 0x80 ? -1 : 1) * values[code & 0x7F];
    ASSERT_EQ(static_cast<double>(got), expected) << code;
    ASSERT_EQ(float_to_float8_e4m3fn(got), code) << code;
  }
  for (unsigned code = 0; code + 1 < values.size(); ++code) {
    const float mid = static_cast<float>((values[code] + values[code + 1]) / 2);
    ASSERT_EQ(float_to_float8_e4m3fn(mid), code % 2 == 0 ? code : code + 1) << code;
    ASSERT_EQ(float_to_float8_e4m3fn(std::nextafter(mid, 0.0f)), code) << code;
    ASSERT_EQ(float_to_float8_e4m3fn(std::nextafter(mid, kInf)), code + 1) << code;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-600.0f, 600.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng) * (i % 2 ? 1.0f : 1.0f / 1024);
    const unsigned expected = nearest_even(values, std::min(std::fabs(x), 448.0f));
    ASSERT_EQ(float_to_float8_e4m3fn(x), expected | (std::signbit(x) ? 0x80u : 0u)) << x;
  }
}

// ---- fp8 e5m2 -------------------------------------------------------------------------------

TEST(Float8E5M2, KnownBitPatterns) {
  EXPECT_EQ(float_to_float8_e5m2(1.0f), 0x3C);
  EXPECT_EQ(float_to_float8_e5m2(-1.0f), 0xBC);
  EXPECT_EQ(float_to_float8_e5m2(57344.0f), 0x7B);               // largest finite
  EXPECT_EQ(float_to_float8_e5m2(std::ldexp(1.0f, -14)), 0x04);  // smallest normal
  EXPECT_EQ(float_to_float8_e5m2(std::ldexp(1.0f, -16)), 0x01);  // smallest subnormal
  EXPECT_EQ(float_to_float8_e5m2(kInf), 0x7C);
  EXPECT_EQ(float_to_float8_e5m2(-kInf), 0xFC);
  EXPECT_EQ(float8_e5m2_to_float(0x3C), 1.0f);
  EXPECT_EQ(float8_e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(float8_e5m2_to_float(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(float8_e5m2_to_float(0x03), std::ldexp(3.0f, -16));
  EXPECT_EQ(float8_e5m2_to_float(0x7C), kInf);
  EXPECT_EQ(float8_e5m2_to_float(0xFC), -kInf);
  for (unsigned nan : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFFu}) {
    EXPECT_TRUE(std::isnan(float8_e5m2_to_float(static_cast<std::uint8_t>(nan)))) << nan;
  }
}

TEST(Float8E5M2, RoundsToNearestEvenAndOverflowsToInf) {
  EXPECT_EQ(float_to_float8_e5m2(1.125f), 0x3C);  // tie -> even (down)
  EXPECT_EQ(float_to_float8_e5m2(1.375f), 0x3E);  // tie -> even (up)
  EXPECT_EQ(float_to_float8_e5m2(60000.0f), 0x7B);
  EXPECT_EQ(float_to_float8_e5m2(61440.0f), 0x7C);  // halfway to 2^16: ties to even = inf
  EXPECT_EQ(float_to_float8_e5m2(-1e6f), 0xFC);
  EXPECT_EQ(float_to_float8_e5m2(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(float_to_float8_e5m2(std::ldexp(3.0f, -17)), 0x02);
  const std::uint8_t nan = float_to_float8_e5m2(kNaN);
  EXPECT_EQ(nan & 0x7C, 0x7C);
  EXPECT_NE(nan & 0x03, 0);
}

TEST(Float8E5M2, EveryCodeAndEveryMidpoint) {
  std::vector<double> values;  // codes 0..0x7B, then inf standing at 2^16
  for (unsigned code = 0; code <= 0x7B; ++code) values.push_back(minifloat_value(code, 2, 15));
  values.push_back(65536.0);
  for (unsigned code = 0; code < 256; ++code) {
    const float got = float8_e5m2_to_float(static_cast<std::uint8_t>(code));
    if ((code & 0x7F) > 0x7C) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    const double mag = (code & 0x7F) == 0x7C ? INFINITY : values[code & 0x7F];
    ASSERT_EQ(static_cast<double>(got), (code & 0x80) ? -mag : mag) << code;
    ASSERT_EQ(float_to_float8_e5m2(got), code) << code;
  }
  for (unsigned code = 0; code + 1 < values.size(); ++code) {
    const float mid = static_cast<float>((values[code] + values[code + 1]) / 2);
    ASSERT_EQ(float_to_float8_e5m2(mid), code % 2 == 0 ? code : code + 1) << code;
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng) * (i % 2 ? 1.0f : 1.0f / 65536);
    const unsigned expected = nearest_even(values, std::min<double>(std::fabs(x), 65536.0));
    ASSERT_EQ(float_to_float8_e5m2(x), expected | (std::signbit(x) ? 0x80u : 0u)) << x;
  }
}

}  // namespace
}  // namespace groupcoord
