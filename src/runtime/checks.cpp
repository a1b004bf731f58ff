#include "runtime/checks.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "runtime/env.hpp"

namespace trnsparse::detail {

long env_integer(const char* name, const char* text, long lo, long hi) {
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || n < lo || n > hi)
    throw InvalidArgument(concat(name, "=", text, ": expected an integer in [", lo, ", ", hi, "]"));
  return n;
}

index_t checked_mul(index_t a, index_t b, const char* what) {
  index_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throw OverflowError(concat(what, ": ", a, " * ", b, " does not fit in a 64-bit index"));
  return r;
}

index_t checked_add(index_t a, index_t b, const char* what) {
  index_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    throw OverflowError(concat(what, ": ", a, " + ", b, " does not fit in a 64-bit index"));
  return r;
}

void check_nonnegative(index_t n, const char* what) {
  if (n < 0) throw InvalidArgument(concat(what, " = ", n, " must be >= 0"));
}

void check_threshold(double threshold, const char* who) {
  if (!(threshold >= 0.0)) throw InvalidArgument(concat(who, ": threshold = ", threshold, " must be >= 0"));
}

void check_block_size(index_t block_size, const char* who) {
  if (block_size < 1) throw InvalidArgument(concat(who, ": block_size = ", block_size, " must be >= 1"));
}

void check_dim(index_t got, index_t want, const char* who, const char* what, const char* unit, const char* want_name) {
  if (got != want)
    throw DimensionMismatch(concat(who, ": ", what, " has ", got, " ", unit, ", expected ", want_name, " = ", want));
}

void check_no_alias(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, const char* who,
                    const char* in_name, const char* out_name) {
  if (a_bytes == 0 || b_bytes == 0) return;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b);
  if (a0 < b0 + b_bytes && b0 < a0 + a_bytes)
    throw InvalidArgument(concat(who, ": output ", out_name, " overlaps input ", in_name));
}

bool validate_compressed(std::string_view who, std::span<const index_t> ptr, index_t n_rows,
                         std::span<const index_t> idx, index_t n_cols, bool require_sorted, const char* ptr_name,
                         const char* idx_name, const char* unit) {
  const auto nnz = static_cast<index_t>(idx.size());
  if (static_cast<index_t>(ptr.size()) != n_rows + 1)
    throw IndexError(concat(who, ": ", ptr_name, " has ", ptr.size(), " entries, expected ", n_rows + 1));
  if (ptr[0] != 0) throw IndexError(concat(who, ": ", ptr_name, "[0] = ", ptr[0], ", expected 0"));
  for (index_t i = 0; i < n_rows; ++i) {
    if (ptr[i + 1] < ptr[i])
      throw IndexError(concat(who, ": ", ptr_name, " decreases at ", ptr_name, "[", i + 1, "] = ", ptr[i + 1], " < ",
                              ptr_name, "[", i, "] = ", ptr[i]));
    if (ptr[i + 1] > nnz)
      throw IndexError(concat(who, ": ", ptr_name, "[", i + 1, "] = ", ptr[i + 1], " exceeds the ", nnz,
                              " entries of ", idx_name));
  }
  if (ptr[n_rows] != nnz)
    throw IndexError(concat(who, ": ", ptr_name, "[", n_rows, "] = ", ptr[n_rows], ", expected ", nnz, " (the length of ",
                            idx_name, ")"));
  bool sorted = true;
  for (index_t i = 0; i < n_rows; ++i) {
    for (index_t p = ptr[i]; p < ptr[i + 1]; ++p) {
      if (idx[p] < 0 || idx[p] >= n_cols)
        throw IndexError(concat(who, ": ", idx_name, "[", p, "] = ", idx[p], " is out of range [0, ", n_cols, ") (",
                                unit, " ", i, ")"));
      if (p > ptr[i] && idx[p] <= idx[p - 1]) {
        if (require_sorted)
          throw IndexError(concat(who, ": ", idx_name, "[", p, "] = ", idx[p], " is not greater than ", idx_name, "[",
                                  p - 1, "] = ", idx[p - 1], " (", unit, " ", i, "): indices must be strictly ",
                                  "increasing in each ", unit, " (or pass Canonicalize::yes)"));
        sorted = false;
      }
    }
  }
  return sorted;
}

}  // namespace trnsparse::detail
