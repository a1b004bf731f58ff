// Internal: conversions between value types and the keep-rule of thresholds.
#pragma once

#include <cmath>
#include <type_traits>

#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// Converts a value to another value type; narrowing to bf16 rounds to nearest even
/// once (from double too).
template <Value To, class From>
To value_cast(From v) noexcept {
  if constexpr (std::is_same_v<From, bf16>) {
    if constexpr (std::is_same_v<To, bf16>) return v;
    else return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bf16>) {
    return bf16(v);
  } else {
    return static_cast<To>(v);
  }
}

/// The widened value products accumulate in.
template <Value T>
acc_t<T> widen(T v) noexcept {
  return static_cast<acc_t<T>>(v);
}

/// The threshold rule: keep v unless |v| <= threshold (so NaN is kept).
template <Value T>
bool above_threshold(T v, double threshold) noexcept {
  return !(std::fabs(static_cast<double>(widen(v))) <= threshold);
}

/// True for a stored value that is an entry: non-zero or NaN.
template <Value T>
bool is_entry(T v) noexcept {
  return widen(v) != acc_t<T>(0);
}

}  // namespace trnsparse::detail
