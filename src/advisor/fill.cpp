// estimate_fill (advisor.hpp): per sampled block row, the distinct block columns of its
// rows' entries, marked in one array stamped with the block row's number, so nothing is
// cleared between block rows.
#include <algorithm>
#include <vector>

#include "runtime/checks.hpp"
#include "runtime/rng.hpp"
#include "trnsparse/advisor.hpp"

namespace trnsparse {

template <Value T>
double estimate_fill(const CsrMatrix<T>& A, index_t block_size, double fraction, std::uint64_t seed) {
  detail::check_block_size(block_size, "estimate_fill");
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw InvalidArgument(detail::concat("estimate_fill: fraction = ", fraction, " must be in (0, 1]"));
  const index_t b = block_size, block_rows = detail::ceil_div(A.rows(), b), block_cols = detail::ceil_div(A.cols(), b);
  const auto ptr = A.row_ptr();
  const auto col = A.col_indices();
  std::vector<index_t> stamp(static_cast<std::size_t>(block_cols), -1);
  index_t blocks = 0, entries = 0;
  // Counts block row I's blocks and entries into the totals.
  const auto count = [&](index_t I) {
    const index_t r1 = std::min(A.rows(), (I + 1) * b);
    for (index_t k = ptr[I * b]; k < ptr[r1]; ++k) {
      index_t& s = stamp[static_cast<std::size_t>(col[k] / b)];
      if (s != I) {
        s = I;
        ++blocks;
      }
    }
    entries += ptr[r1] - ptr[I * b];
  };
  detail::SplitMix64 rng{seed};
  for (index_t I = 0; I < block_rows; ++I)
    if (fraction >= 1.0 || rng.uniform() < fraction) count(I);
  for (index_t I = 0; entries == 0 && I < block_rows; ++I) count(I);  // empty sample: the first rows with entries
  return entries == 0 ? 1.0 : static_cast<double>(blocks) * static_cast<double>(b * b) / static_cast<double>(entries);
}

#define TRNSPARSE_INSTANTIATE(T) \
  template double estimate_fill<T>(const CsrMatrix<T>&, index_t, double, std::uint64_t);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
TRNSPARSE_INSTANTIATE(bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
