// Scalar conversions between float and the 16- and 8-bit floating formats groupcoord carries
// (IEEE binary16, bfloat16, fp8 e4m3fn and e5m2). Header-only so that CPU reduction loops can
// inline them. All float -> narrow conversions round to nearest, ties to even, and keep NaN a NaN.
//
// The three "minifloat" formats (binary16, e4m3fn, e5m2) share one encoder and one decoder that
// are parameterised by the mantissa width and exponent bias; they differ only in how the top of
// the range is spelled (binary16 and e5m2 have infinities, e4m3fn has only NaN = S.1111.111).
#pragma once

#include <cstdint>
#include <cstring>

namespace groupcoord {
namespace detail {

/// Bit pattern of a float (memcpy is the portable, UB-free bit cast before C++20).
inline std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

/// Float with the given bit pattern.
inline float bits_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// Rounds `value >> shift` to nearest, ties to even. `shift` must be in [1, 31].
inline std::uint32_t shift_right_round_even(std::uint32_t value, int shift) {
  const std::uint32_t result = value >> shift;
  const std::uint32_t remainder = value & ((std::uint32_t{1} << shift) - 1);
  const std::uint32_t half = std::uint32_t{1} << (shift - 1);
  if (remainder > half || (remainder == half && (result & 1u) != 0)) return result + 1;
  return result;
}

/// Encodes the magnitude `abs_bits` (a finite, non-negative float's bits) into a minifloat with
/// `mant_bits` mantissa bits and exponent bias `bias`, rounding to nearest even. The result is
/// the unsigned code (exponent << mant_bits | mantissa) and may run past the format's largest
/// finite code; the caller decides whether that means infinity, NaN or saturation.
inline std::uint32_t encode_minifloat_magnitude(std::uint32_t abs_bits, int mant_bits, int bias) {
  const int float_exp = static_cast<int>(abs_bits >> 23);
  const std::uint32_t float_mant = abs_bits & 0x7FFFFFu;
  // Float subnormals (< 2^-126) are far below half a unit of any of our formats.
  if (float_exp == 0) return 0;
  const int unbiased = float_exp - 127;
  const int min_normal_exp = 1 - bias;
  if (unbiased >= min_normal_exp) {
    // Normal in the target: re-bias the exponent and drop the low mantissa bits. A carry out of
    // the mantissa correctly bumps the exponent (and may reach the infinity/NaN code).
    const std::uint32_t wide = (static_cast<std::uint32_t>(unbiased + bias) << 23) | float_mant;
    return shift_right_round_even(wide, 23 - mant_bits);
  }
  // Subnormal in the target: value = (1.mant) * 2^unbiased measured in units of
  // 2^(min_normal_exp - mant_bits), i.e. the 24-bit significand shifted right by `shift`.
  const int shift = 23 + min_normal_exp - mant_bits - unbiased;
  if (shift > 24) return 0;  // below half the smallest subnormal (the significand is < 2^24)
  return shift_right_round_even(float_mant | 0x800000u, shift);
}

/// Decodes a finite minifloat magnitude code (no sign bit) into a float.
inline float decode_minifloat_magnitude(std::uint32_t code, int mant_bits, int bias) {
  const std::uint32_t exp = code >> mant_bits;
  const std::uint32_t mant = code & ((std::uint32_t{1} << mant_bits) - 1);
  if (exp == 0) {
    // Subnormal: mant * 2^(1 - bias - mant_bits); the scale is a normal float for all our formats.
    const float scale = bits_float(static_cast<std::uint32_t>(127 + 1 - bias - mant_bits) << 23);
    return static_cast<float>(mant) * scale;
  }
  const std::uint32_t float_exp = exp - static_cast<std::uint32_t>(bias) + 127u;
  return bits_float((float_exp << 23) | (mant << (23 - mant_bits)));
}

/// Applies the sign bit of a narrow format (at `sign_bit`) to a float magnitude.
inline float with_sign(float magnitude, std::uint32_t code, int sign_bit) {
  const std::uint32_t sign = ((code >> sign_bit) & 1u) << 31;
  return bits_float(float_bits(magnitude) | sign);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// IEEE binary16 (float16): 1 sign, 5 exponent (bias 15), 10 mantissa bits.

/// Converts IEEE binary16 bits to float (exact; subnormals, infinities and NaN preserved).
inline float half_to_float(std::uint16_t bits) {
  const std::uint32_t mag = bits & 0x7FFFu;
  if ((mag >> 10) == 0x1F) {
    // Infinity or NaN: widen the payload so a NaN stays a NaN.
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    return detail::bits_float(sign | 0x7F800000u | ((mag & 0x3FFu) << 13));
  }
  return detail::with_sign(detail::decode_minifloat_magnitude(mag, 10, 15), bits, 15);
}

/// Converts float to IEEE binary16 bits, rounding to nearest even; values of 65520 and above
/// in magnitude become infinity, NaN stays a (quiet) NaN.
inline std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = detail::float_bits(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) {
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu));
  }
  if (abs_bits == 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  std::uint32_t code = detail::encode_minifloat_magnitude(abs_bits, 10, 15);
  if (code > 0x7C00u) code = 0x7C00u;
  return static_cast<std::uint16_t>(sign | code);
}

// ---------------------------------------------------------------------------------------------
// bfloat16: the top half of a float32.

/// Converts bfloat16 bits to float (exact).
inline float bfloat16_to_float(std::uint16_t bits) {
  return detail::bits_float(static_cast<std::uint32_t>(bits) << 16);
}

/// Converts float to bfloat16 bits, rounding to nearest even; NaN stays a (quiet) NaN and
/// values that round past the largest bfloat16 become infinity.
inline std::uint16_t float_to_bfloat16(float value) {
  const std::uint32_t bits = detail::float_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    // Truncating a NaN could clear every remaining mantissa bit; force the quiet bit.
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// ---------------------------------------------------------------------------------------------
// fp8 e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, NaN = S.1111.111,
// largest finite 448 (S.1111.110).

/// Converts fp8 e4m3fn bits to float (exact; 0x7F/0xFF are NaN).
inline float float8_e4m3fn_to_float(std::uint8_t bits) {
  const std::uint32_t mag = bits & 0x7Fu;
  if (mag == 0x7Fu) {
    return detail::bits_float(((static_cast<std::uint32_t>(bits) & 0x80u) << 24) | 0x7FC00000u);
  }
  return detail::with_sign(detail::decode_minifloat_magnitude(mag, 3, 7), bits, 7);
}

/// Converts float to fp8 e4m3fn bits, rounding to nearest even and saturating: finite values
/// beyond the range and infinities become ±448 (like CUDA's __NV_SATFINITE, which vLLM's fp8
/// quantisation uses); NaN becomes NaN (0x7F with the sign).
inline std::uint8_t float_to_float8_e4m3fn(float value) {
  const std::uint32_t bits = detail::float_bits(value);
  const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return static_cast<std::uint8_t>(sign | 0x7Fu);
  if (abs_bits == 0x7F800000u) return static_cast<std::uint8_t>(sign | 0x7Eu);
  std::uint32_t code = detail::encode_minifloat_magnitude(abs_bits, 3, 7);
  if (code > 0x7Eu) code = 0x7Eu;
  return static_cast<std::uint8_t>(sign | code);
}

// ---------------------------------------------------------------------------------------------
// fp8 e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like with infinities and NaN,
// largest finite 57344.

/// Converts fp8 e5m2 bits to float (exact; infinities and NaN preserved).
inline float float8_e5m2_to_float(std::uint8_t bits) {
  const std::uint32_t mag = bits & 0x7Fu;
  if ((mag >> 2) == 0x1F) {
    const std::uint32_t sign = (static_cast<std::uint32_t>(bits) & 0x80u) << 24;
    return detail::bits_float(sign | 0x7F800000u | ((mag & 0x3u) << 21));
  }
  return detail::with_sign(detail::decode_minifloat_magnitude(mag, 2, 15), bits, 7);
}

/// Converts float to fp8 e5m2 bits, rounding to nearest even; values that round past 57344
/// become infinity (IEEE behaviour, as torch does), NaN becomes a quiet NaN (0x7E with the sign).
inline std::uint8_t float_to_float8_e5m2(float value) {
  const std::uint32_t bits = detail::float_bits(value);
  const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return static_cast<std::uint8_t>(sign | 0x7Eu);
  if (abs_bits == 0x7F800000u) return static_cast<std::uint8_t>(sign | 0x7Cu);
  std::uint32_t code = detail::encode_minifloat_magnitude(abs_bits, 2, 15);
  if (code > 0x7Cu) code = 0x7Cu;
  return static_cast<std::uint8_t>(sign | code);
}

}  // namespace groupcoord
