/// @file coo.hpp
/// `CooMatrix<T>`: coordinate triplets, the construction and interchange format.
/// Entries may come in any order and may repeat; `canonicalize()` sorts them row-major
/// and sums duplicates.
///
///     trnsparse::CooMatrix<double> A(3, 3, {0, 2, 0}, {1, 2, 1}, {1.0, 2.0, 3.0});
///     A.canonicalize();   // (0,1)=4, (2,2)=2
#pragma once

#include <span>
#include <vector>

#include "trnsparse/types.hpp"

namespace trnsparse {

template <Value T>
class CooMatrix {
public:
  /// The empty rows x cols matrix. @throw InvalidArgument for a negative shape.
  CooMatrix(index_t rows, index_t cols);
  /// Takes the triplets. Checks: rows, cols >= 0; the three arrays have one length;
  /// every row index in [0, rows) and column index in [0, cols).
  /// @throw InvalidArgument, IndexError naming the array and the first bad position.
  CooMatrix(index_t rows, index_t cols, std::vector<index_t> row_idx, std::vector<index_t> col_idx,
            std::vector<T> values);

  [[nodiscard]] index_t rows() const noexcept { return rows_; }
  [[nodiscard]] index_t cols() const noexcept { return cols_; }
  /// Stored entries, duplicates counted separately.
  [[nodiscard]] index_t nnz() const noexcept { return static_cast<index_t>(values_.size()); }
  [[nodiscard]] std::span<const index_t> row_indices() const noexcept { return row_idx_; }
  [[nodiscard]] std::span<const index_t> col_indices() const noexcept { return col_idx_; }
  [[nodiscard]] std::span<const T> values() const noexcept { return values_; }
  [[nodiscard]] std::span<T> values() noexcept { return values_; }

  /// Appends one entry. @throw IndexError if (i, j) is outside the shape.
  void push_back(index_t i, index_t j, T v);
  /// True when entries are sorted row-major with no duplicate (i, j).
  [[nodiscard]] bool is_canonical() const noexcept;
  /// Sorts row-major (stable: duplicates are summed in input order) and sums
  /// duplicates; explicit zeros are kept. O(nnz log nnz).
  void canonicalize();

private:
  index_t rows_;
  index_t cols_;
  std::vector<index_t> row_idx_;
  std::vector<index_t> col_idx_;
  std::vector<T> values_;
};

extern template class CooMatrix<float>;
extern template class CooMatrix<double>;
extern template class CooMatrix<bf16>;

}  // namespace trnsparse
