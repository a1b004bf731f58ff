/// @file csr.hpp
/// `CsrMatrix<T>`: compressed sparse rows with 64-bit indices. Row i holds entries
/// `row_ptr[i] .. row_ptr[i+1]-1` of `col_idx` / `values`; columns in a row are strictly
/// increasing (sorted, unique). Explicit zeros may be stored.
///
/// The products of a matrix with fewer than 2^31 columns (`spmv` and `spmm` of float and
/// double, `spmv_symmetric` of every type) read a 32-bit copy of `col_idx`, made on the
/// first product and kept with the structure (4 bytes per entry): they are memory-bound,
/// and it cuts a double matrix's traffic by a quarter.
///
///     // [[1 0 2]
///     //  [0 0 3]]
///     trnsparse::CsrMatrix<float> A(2, 3, {0, 2, 3}, {0, 2, 2}, {1.f, 2.f, 3.f});
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "trnsparse/types.hpp"

namespace trnsparse {

template <Value T>
class CsrMatrix;

namespace detail {
class CsrAnalyses;
/// Internal: the analyses of A's structure (src/plan/csr_analysis.hpp).
template <Value T>
CsrAnalyses& analyses(const CsrMatrix<T>& A) noexcept;
}  // namespace detail

template <Value T>
class CsrMatrix {
public:
  /// The all-zero rows x cols matrix. @throw InvalidArgument for a negative shape.
  CsrMatrix(index_t rows, index_t cols);
  /// Takes the arrays. Checks: non-negative shape; `row_ptr` has rows+1 entries,
  /// starts at 0, never decreases and ends at `col_idx.size() == values.size()`;
  /// every column in [0, cols); columns strictly increasing within each row. With
  /// `Canonicalize::yes`, unsorted rows are sorted and duplicates summed instead.
  /// @throw InvalidArgument, IndexError naming the array and the first bad position.
  CsrMatrix(index_t rows, index_t cols, std::vector<index_t> row_ptr, std::vector<index_t> col_idx,
            std::vector<T> values, Canonicalize canonicalize = Canonicalize::no);

  [[nodiscard]] index_t rows() const noexcept { return rows_; }
  [[nodiscard]] index_t cols() const noexcept { return cols_; }
  [[nodiscard]] index_t nnz() const noexcept { return static_cast<index_t>(values_.size()); }
  [[nodiscard]] std::span<const index_t> row_ptr() const noexcept { return row_ptr_; }
  [[nodiscard]] std::span<const index_t> col_indices() const noexcept { return col_idx_; }
  [[nodiscard]] std::span<const T> values() const noexcept { return values_; }
  /// Values are mutable; the structure is not.
  [[nodiscard]] std::span<T> values() noexcept { return values_; }

private:
  template <Value U>
  friend detail::CsrAnalyses& detail::analyses(const CsrMatrix<U>& A) noexcept;

  index_t rows_;
  index_t cols_;
  std::vector<index_t> row_ptr_;
  std::vector<index_t> col_idx_;
  std::vector<T> values_;
  // What is computed once per structure and reused by every call (the 32-bit column
  // indices, the chunks of the symmetric product, the transposed pattern), built on
  // first use. Copies share it:
  // their structure is the same, and the structure never changes.
  std::shared_ptr<detail::CsrAnalyses> analyses_;
};

extern template class CsrMatrix<float>;
extern template class CsrMatrix<double>;
extern template class CsrMatrix<bf16>;

}  // namespace trnsparse
