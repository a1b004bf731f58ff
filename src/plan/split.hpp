// Internal: the work split shared by BSR plans and CSR products.
#pragma once

#include <span>
#include <vector>

#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// Splits rows [0, n) into `parts` ranges of about equal cost, where the cost of rows
/// [0, i) is ptr[i] + i: its stored entries (blocks, or non-zeros), plus one per row for
/// the row's own output work. O(parts log n).
inline std::vector<index_t> balanced_split(std::span<const index_t> ptr, int parts) {
  const auto n = static_cast<index_t>(ptr.size()) - 1;
  const index_t total = ptr[n] + n;
  std::vector<index_t> s(static_cast<std::size_t>(parts) + 1, n);
  s[0] = 0;
  for (int t = 1; t < parts; ++t) {
    const index_t target = total / parts * t + total % parts * t / parts;
    // First row boundary i whose prefix cost reaches the target.
    index_t lo = s[t - 1], hi = n;
    while (lo < hi) {
      const index_t mid = lo + (hi - lo) / 2;
      if (ptr[mid] + mid < target) lo = mid + 1;
      else hi = mid;
    }
    s[t] = lo;
  }
  return s;
}

}  // namespace trnsparse::detail
