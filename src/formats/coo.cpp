#include "trnsparse/coo.hpp"

#include <algorithm>
#include <numeric>

#include "runtime/checks.hpp"
#include "runtime/value.hpp"
#include "trnsparse/convert.hpp"

namespace trnsparse {

template <Value T>
CooMatrix<T>::CooMatrix(index_t rows, index_t cols) : rows_(rows), cols_(cols) {
  detail::check_nonnegative(rows, "coo: rows");
  detail::check_nonnegative(cols, "coo: cols");
}

template <Value T>
CooMatrix<T>::CooMatrix(index_t rows, index_t cols, std::vector<index_t> row_idx, std::vector<index_t> col_idx,
                        std::vector<T> values)
    : CooMatrix(rows, cols) {
  if (row_idx.size() != values.size() || col_idx.size() != values.size())
    throw IndexError(detail::concat("coo: row_idx, col_idx and values must have one length, got ", row_idx.size(), ", ",
                                    col_idx.size(), " and ", values.size()));
  for (std::size_t p = 0; p < values.size(); ++p) {
    if (row_idx[p] < 0 || row_idx[p] >= rows)
      throw IndexError(detail::concat("coo: row_idx[", p, "] = ", row_idx[p], " is out of range [0, ", rows, ")"));
    if (col_idx[p] < 0 || col_idx[p] >= cols)
      throw IndexError(detail::concat("coo: col_idx[", p, "] = ", col_idx[p], " is out of range [0, ", cols, ")"));
  }
  row_idx_ = std::move(row_idx);
  col_idx_ = std::move(col_idx);
  values_ = std::move(values);
}

template <Value T>
void CooMatrix<T>::push_back(index_t i, index_t j, T v) {
  if (i < 0 || i >= rows_ || j < 0 || j >= cols_)
    throw IndexError(detail::concat("coo: push_back(", i, ", ", j, ") is outside the ", rows_, " x ", cols_, " shape"));
  row_idx_.push_back(i);
  col_idx_.push_back(j);
  values_.push_back(v);
}

template <Value T>
bool CooMatrix<T>::is_canonical() const noexcept {
  for (std::size_t p = 1; p < values_.size(); ++p)
    if (row_idx_[p] < row_idx_[p - 1] || (row_idx_[p] == row_idx_[p - 1] && col_idx_[p] <= col_idx_[p - 1]))
      return false;
  return true;
}

template <Value T>
void CooMatrix<T>::canonicalize() {
  if (is_canonical()) return;
  if (rows_ <= nnz()) {
    // A counting sort by row, then each row sorted by column with duplicates summed in
    // input order (to_csr): O(nnz log(row length) + rows).
    const CsrMatrix<T> c = to_csr(*this);
    const auto ptr = c.row_ptr();
    row_idx_.resize(static_cast<std::size_t>(c.nnz()));
    for (index_t i = 0; i < c.rows(); ++i) std::fill(row_idx_.begin() + ptr[i], row_idx_.begin() + ptr[i + 1], i);
    col_idx_.assign(c.col_indices().begin(), c.col_indices().end());
    values_.assign(c.values().begin(), c.values().end());
    return;
  }
  // More rows than entries (a huge, nearly empty shape): a comparison sort, whose cost
  // does not grow with the shape.
  std::vector<std::size_t> order(values_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return row_idx_[a] != row_idx_[b] ? row_idx_[a] < row_idx_[b] : col_idx_[a] < col_idx_[b];
  });
  std::vector<index_t> rows, cols;
  std::vector<T> vals;
  for (std::size_t q = 0; q < order.size();) {
    const index_t i = row_idx_[order[q]], j = col_idx_[order[q]];
    acc_t<T> sum = 0;
    for (; q < order.size() && row_idx_[order[q]] == i && col_idx_[order[q]] == j; ++q)
      sum += detail::widen(values_[order[q]]);
    rows.push_back(i);
    cols.push_back(j);
    vals.push_back(detail::value_cast<T>(sum));
  }
  row_idx_ = std::move(rows);
  col_idx_ = std::move(cols);
  values_ = std::move(vals);
}

template class CooMatrix<float>;
template class CooMatrix<double>;
template class CooMatrix<bf16>;

}  // namespace trnsparse
