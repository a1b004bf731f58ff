// Internal: canonicalisation of compressed-row arrays, shared by CSR (one value per
// entry) and BSR (b*b values per entry).
#pragma once

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "runtime/value.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// Sorts every row of (ptr, idx, values) by index and sums entries with equal
/// indices, in input order, in acc_t<T>. Each entry owns `chunk` consecutive values.
/// Rewrites all three arrays. O(nnz log(row length) + nnz * chunk).
template <Value T>
void canonicalize_compressed(std::vector<index_t>& ptr, std::vector<index_t>& idx, std::vector<T>& values,
                             index_t chunk) {
  const index_t n_rows = static_cast<index_t>(ptr.size()) - 1;
  std::vector<index_t> new_ptr(ptr.size(), 0);
  std::vector<index_t> new_idx;
  std::vector<T> new_values;
  new_idx.reserve(idx.size());
  new_values.reserve(values.size());
  std::vector<index_t> order;
  std::vector<acc_t<T>> sum(static_cast<std::size_t>(chunk));
  const auto by_index = [&](index_t a, index_t b) { return idx[a] < idx[b]; };
  for (index_t i = 0; i < n_rows; ++i) {
    order.resize(static_cast<std::size_t>(ptr[i + 1] - ptr[i]));
    std::iota(order.begin(), order.end(), ptr[i]);
    // Short rows by insertion (stable, and no temporary buffer per row as stable_sort's).
    if (order.size() <= 32) {
      for (std::size_t q = 1; q < order.size(); ++q)
        for (std::size_t r = q; r > 0 && by_index(order[r], order[r - 1]); --r) std::swap(order[r], order[r - 1]);
    } else {
      std::stable_sort(order.begin(), order.end(), by_index);
    }
    for (std::size_t q = 0; q < order.size();) {
      const index_t col = idx[order[q]];
      std::fill(sum.begin(), sum.end(), acc_t<T>(0));
      for (; q < order.size() && idx[order[q]] == col; ++q)
        for (index_t e = 0; e < chunk; ++e) sum[e] += widen(values[order[q] * chunk + e]);
      new_idx.push_back(col);
      for (index_t e = 0; e < chunk; ++e) new_values.push_back(value_cast<T>(sum[e]));
    }
    new_ptr[i + 1] = static_cast<index_t>(new_idx.size());
  }
  ptr = std::move(new_ptr);
  idx = std::move(new_idx);
  values = std::move(new_values);
}

}  // namespace trnsparse::detail
