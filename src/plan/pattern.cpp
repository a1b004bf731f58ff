#include "plan/pattern.hpp"

#include <numeric>

#include "runtime/checks.hpp"

namespace trnsparse::detail {

BscView transposed_pattern(index_t rows, index_t cols, std::span<const index_t> ptr, std::span<const index_t> idx) {
  BscView v;
  v.col_ptr = make_vector<index_t>(checked_add(cols, 1, "transpose: cols + 1"), "transpose: col_ptr");
  for (const index_t j : idx) ++v.col_ptr[j + 1];
  std::partial_sum(v.col_ptr.begin(), v.col_ptr.end(), v.col_ptr.begin());
  std::vector<index_t> next(v.col_ptr.begin(), v.col_ptr.end() - 1);
  v.row_idx = make_vector<index_t>(static_cast<index_t>(idx.size()), "transpose: row_idx");
  v.perm = make_vector<index_t>(static_cast<index_t>(idx.size()), "transpose: perm");
  for (index_t i = 0; i < rows; ++i)
    for (index_t p = ptr[i]; p < ptr[i + 1]; ++p) {
      const index_t q = next[idx[p]]++;
      v.row_idx[q] = i;
      v.perm[q] = p;
    }
  return v;
}

}  // namespace trnsparse::detail
