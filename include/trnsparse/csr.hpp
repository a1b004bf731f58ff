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

#include "trnsparse/bsr.hpp"
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
  /// Shares `structure` (block size 1: rows, columns and column indices, as another
  /// matrix's `structure_ptr()` returns) and takes one value per stored entry: matrices
  /// with one pattern and different values hold its indices once.
  /// @throw InvalidArgument for a null structure or a block size other than 1;
  /// DimensionMismatch for a wrong number of values.
  CsrMatrix(std::shared_ptr<const BsrStructure> structure, std::vector<T> values);
  /// Internal: takes values the library wrote (a product's, filled on several threads).
  CsrMatrix(std::shared_ptr<const BsrStructure> structure, detail::Storage<T> values, detail::Written);

  [[nodiscard]] index_t rows() const noexcept { return structure_->rows(); }
  [[nodiscard]] index_t cols() const noexcept { return structure_->cols(); }
  [[nodiscard]] index_t nnz() const noexcept { return static_cast<index_t>(values_.size()); }
  [[nodiscard]] std::span<const index_t> row_ptr() const noexcept { return structure_->block_row_ptr(); }
  [[nodiscard]] std::span<const index_t> col_indices() const noexcept { return structure_->block_col_indices(); }
  /// The pattern as an immutable block-size-1 structure, shared by copies and by the
  /// results of a cached product plan. Plans are cached under its fingerprint.
  [[nodiscard]] const std::shared_ptr<const BsrStructure>& structure_ptr() const noexcept { return structure_; }
  [[nodiscard]] std::span<const T> values() const noexcept { return values_; }
  /// Values are mutable; the structure is not.
  [[nodiscard]] std::span<T> values() noexcept { return values_; }

private:
  template <Value U>
  friend detail::CsrAnalyses& detail::analyses(const CsrMatrix<U>& A) noexcept;

  std::shared_ptr<const BsrStructure> structure_;
  detail::Storage<T> values_;
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
