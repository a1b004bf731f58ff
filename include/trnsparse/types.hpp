/// @file types.hpp
/// Index type, value types and their accumulators.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "trnsparse/bf16.hpp"

namespace trnsparse {

/// Every index, size and offset is a signed 64-bit integer.
using index_t = std::int64_t;

/// The value types of stored matrices and dense operands.
template <class T>
concept Value = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, bf16>;

/// The type products accumulate in: fp32 for float and bf16, fp64 for double.
template <Value T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

/// Output types an operation with operand type `TA` may write: the operand type
/// itself, or fp32 when the operands are bf16 (accumulated in fp32, rounded once).
template <class TA, class TY>
concept OutputFor = Value<TA> && (std::same_as<TA, TY> || (std::same_as<TA, bf16> && std::same_as<TY, float>));

/// Which triangle of a symmetric matrix is stored (including the diagonal).
enum class Triangle { upper, lower };

/// Whether a constructor from raw arrays may sort and merge duplicates
/// (`yes`), or must reject unsorted or duplicated indices (`no`, the default).
enum class Canonicalize { no, yes };

}  // namespace trnsparse
