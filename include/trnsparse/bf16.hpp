/// @file bf16.hpp
/// `bf16`: the 16-bit brain float (1 sign, 8 exponent, 7 mantissa bits): the upper half
/// of an IEEE float32. Conversion from float and double rounds to nearest, ties to
/// even; NaN stays NaN (quiet) and keeps its sign; infinities and signed zeros are exact.
/// Conversion to float is exact and implicit; from float it rounds and is explicit.
///
///     trnsparse::bf16 h{3.14159f};   // 3.140625
///     float f = h;                   // exact widening
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace trnsparse {

struct bf16 {
  std::uint16_t bits = 0;

  constexpr bf16() = default;
  explicit bf16(float f) noexcept : bits(round_float(f)) {}
  /// Rounds a double straight to bf16 (no double rounding through float).
  explicit bf16(double d) noexcept : bits(round_float(to_float_round_to_odd(d))) {}

  static constexpr bf16 from_bits(std::uint16_t b) noexcept {
    bf16 h;
    h.bits = b;
    return h;
  }

  operator float() const noexcept { return std::bit_cast<float>(std::uint32_t{bits} << 16); }

  friend bool operator==(bf16 a, bf16 b) noexcept { return float(a) == float(b); }

private:
  static std::uint16_t round_float(float f) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: truncate, force the quiet bit
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    const std::uint32_t lsb = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
  }
  // float nearest to d with ties broken toward the odd significand ("round to odd"):
  // float has 16 more significand bits than bf16, so rounding the result to bf16 with
  // ties-to-even gives the correctly rounded bf16 of d.
  static float to_float_round_to_odd(double d) noexcept {
    float f = static_cast<float>(d);
    if (!std::isfinite(f) || static_cast<double>(f) == d) return f;
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
  }
};

}  // namespace trnsparse
