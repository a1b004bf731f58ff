/// @file bsr.hpp
/// Block sparse rows, the compute format. `BsrStructure` is the immutable sparsity
/// pattern (logical shape, block size, block-row pointers, block-column indices,
/// fingerprint), shared between matrices, masks and plans. `BsrMatrix<T>` pairs a
/// structure with `n_blocks * b * b` values, row-major inside each block, blocks in
/// structure order.
///
/// Shapes that are not multiples of the block size are padded: the structure has
/// `ceil(rows / b)` block rows and `ceil(cols / b)` block columns, and the entries of
/// edge blocks outside the logical shape are padding. Padding is always zero (the
/// constructors zero it) and no operation reads an operand outside its logical shape.
///
///     // 3x3 logical matrix, block size 2: 2x2 block grid, blocks (0,0) and (1,1).
///     auto s = trnsparse::BsrStructure::make(3, 3, 2, {0, 1, 2}, {0, 1});
///     trnsparse::BsrMatrix<float> A(s);   // zero values, 2 blocks of 2x2
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "trnsparse/storage.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse {

/// Default block size: one tile of the 128x128 tile-matmul engine.
inline constexpr index_t default_block_size = 128;

class BsrStructure;

namespace detail {
/// Internal: a structure built by the library from indices it has already checked (a
/// product's pattern, a validated CSR matrix's): no second pass over them. Debug builds
/// check anyway.
std::shared_ptr<const BsrStructure> trusted_structure(index_t rows, index_t cols, index_t block_size,
                                                      Storage<index_t> block_row_ptr,
                                                      Storage<index_t> block_col_idx);
}  // namespace detail

class BsrStructure {
public:
  /// Checks: rows, cols >= 0; block_size >= 1; `block_row_ptr` has block_rows+1
  /// entries, starts at 0, never decreases, ends at `block_col_idx.size()`; block
  /// columns in [0, block_cols), strictly increasing in each block row; b * b and
  /// the value count n_blocks * b * b fit in index_t.
  /// @throw InvalidArgument, IndexError, OverflowError naming the array and position.
  BsrStructure(index_t rows, index_t cols, index_t block_size, std::vector<index_t> block_row_ptr,
               std::vector<index_t> block_col_idx);
  /// Same, returned as the shared immutable handle matrices hold.
  static std::shared_ptr<const BsrStructure> make(index_t rows, index_t cols, index_t block_size,
                                                  std::vector<index_t> block_row_ptr,
                                                  std::vector<index_t> block_col_idx);
  BsrStructure(const BsrStructure& other);
  BsrStructure& operator=(const BsrStructure& other);

  [[nodiscard]] index_t rows() const noexcept { return rows_; }
  [[nodiscard]] index_t cols() const noexcept { return cols_; }
  [[nodiscard]] index_t block_size() const noexcept { return b_; }
  [[nodiscard]] index_t block_rows() const noexcept { return static_cast<index_t>(row_ptr_.size()) - 1; }
  [[nodiscard]] index_t block_cols() const noexcept { return block_cols_; }
  [[nodiscard]] index_t n_blocks() const noexcept { return static_cast<index_t>(col_idx_.size()); }
  [[nodiscard]] std::span<const index_t> block_row_ptr() const noexcept { return row_ptr_; }
  [[nodiscard]] std::span<const index_t> block_col_indices() const noexcept { return col_idx_; }
  /// Logical rows covered by block row `bi` (b, or less for the last one).
  [[nodiscard]] index_t row_extent(index_t bi) const noexcept;
  /// Logical columns covered by block column `bj` (b, or less for the last one).
  [[nodiscard]] index_t col_extent(index_t bj) const noexcept;
  /// Stored blocks over all blocks of the grid (0 for an empty grid).
  [[nodiscard]] double block_density() const noexcept;
  /// 64-bit hash of shape, block size and both index arrays; equal structures have
  /// equal fingerprints. Plans are cached under it. Computed on the first call (a
  /// structure nobody plans for never pays the pass over its indices).
  [[nodiscard]] std::uint64_t fingerprint() const noexcept;

  friend bool operator==(const BsrStructure& a, const BsrStructure& b) noexcept;
  friend std::shared_ptr<const BsrStructure> detail::trusted_structure(index_t, index_t, index_t,
                                                                       detail::Storage<index_t>,
                                                                       detail::Storage<index_t>);

private:
  struct Trusted {};
  BsrStructure(Trusted, index_t rows, index_t cols, index_t block_size, detail::Storage<index_t> block_row_ptr,
               detail::Storage<index_t> block_col_idx);

  index_t rows_;
  index_t cols_;
  index_t b_;
  index_t block_cols_;
  detail::Storage<index_t> row_ptr_;
  detail::Storage<index_t> col_idx_;
  // 0 until computed; a computed fingerprint is never 0. Threads racing to compute it
  // store the same value.
  mutable std::atomic<std::uint64_t> fingerprint_{0};
};

template <Value T>
class BsrMatrix {
public:
  /// All stored blocks zero.
  explicit BsrMatrix(std::shared_ptr<const BsrStructure> structure);
  /// Takes `blocks` (n_blocks * b * b values, row-major per block); padding is zeroed.
  /// @throw InvalidArgument for a null structure; DimensionMismatch for a wrong length.
  BsrMatrix(std::shared_ptr<const BsrStructure> structure, std::vector<T> blocks);
  /// Internal: takes blocks the library wrote (a product's, filled on several threads);
  /// padding is zeroed.
  BsrMatrix(std::shared_ptr<const BsrStructure> structure, detail::Storage<T> blocks, detail::Written);
  /// From raw arrays; checks as `BsrStructure` does. With `Canonicalize::yes`,
  /// unsorted block rows are sorted and duplicate blocks summed (in input order).
  BsrMatrix(index_t rows, index_t cols, index_t block_size, std::vector<index_t> block_row_ptr,
            std::vector<index_t> block_col_idx, std::vector<T> blocks, Canonicalize canonicalize = Canonicalize::no);

  [[nodiscard]] const BsrStructure& structure() const noexcept { return *structure_; }
  [[nodiscard]] const std::shared_ptr<const BsrStructure>& structure_ptr() const noexcept { return structure_; }
  [[nodiscard]] index_t rows() const noexcept { return structure_->rows(); }
  [[nodiscard]] index_t cols() const noexcept { return structure_->cols(); }
  [[nodiscard]] index_t block_size() const noexcept { return structure_->block_size(); }
  [[nodiscard]] index_t n_blocks() const noexcept { return structure_->n_blocks(); }
  /// All block values, block k at offset k * b * b.
  [[nodiscard]] std::span<const T> blocks() const noexcept { return values_; }
  /// Mutable values. Writing non-zeros into padding breaks the zero-padding invariant;
  /// call `zero_padding()` afterwards if you may have.
  [[nodiscard]] std::span<T> blocks() noexcept { return values_; }
  [[nodiscard]] std::span<const T> block(index_t k) const noexcept;
  [[nodiscard]] std::span<T> block(index_t k) noexcept;
  /// Sets every padding entry (outside the logical shape) to zero.
  void zero_padding() noexcept;

private:
  std::shared_ptr<const BsrStructure> structure_;
  detail::Storage<T> values_;
};

extern template class BsrMatrix<float>;
extern template class BsrMatrix<double>;
extern template class BsrMatrix<bf16>;

}  // namespace trnsparse
