#include "trnsparse/bsr.hpp"

#include <algorithm>
#include <cstring>

#include "formats/compressed.hpp"
#include "runtime/checks.hpp"

namespace trnsparse {

namespace {

struct Grid {
  index_t block_rows;
  index_t block_cols;
};

Grid checked_grid(index_t rows, index_t cols, index_t b, const char* who) {
  detail::check_nonnegative(rows, "bsr: rows");
  detail::check_nonnegative(cols, "bsr: cols");
  detail::check_block_size(b, who);
  return {detail::ceil_div(rows, b), detail::ceil_div(cols, b)};
}

/// b * b values per block, n_blocks * b * b values in all: both must fit in index_t.
index_t checked_value_count(index_t n_blocks, index_t b) {
  return detail::checked_mul(n_blocks, detail::checked_mul(b, b, "bsr: block_size^2"), "bsr: n_blocks * block_size^2");
}

/// The checks of the validating constructor, on a structure built without them.
void check_structure(const BsrStructure& s) {
  const Grid g = checked_grid(s.rows(), s.cols(), s.block_size(), "bsr");
  detail::validate_compressed("bsr", s.block_row_ptr(), g.block_rows, s.block_col_indices(), g.block_cols, true,
                              "block_row_ptr", "block_col_idx", "block row");
  (void)checked_value_count(s.n_blocks(), s.block_size());
}

// SplitMix64 finaliser: the mixing step of the fingerprint.
std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace

BsrStructure::BsrStructure(Trusted, index_t rows, index_t cols, index_t block_size,
                           detail::Storage<index_t> block_row_ptr, detail::Storage<index_t> block_col_idx)
    : rows_(rows), cols_(cols), b_(block_size), row_ptr_(std::move(block_row_ptr)), col_idx_(std::move(block_col_idx)) {
  // The checking constructor rejects a block size below 1 after this one runs.
  block_cols_ = block_size > 0 ? detail::ceil_div(cols, block_size) : 0;
}

BsrStructure::BsrStructure(index_t rows, index_t cols, index_t block_size, std::vector<index_t> block_row_ptr,
                           std::vector<index_t> block_col_idx)
    : BsrStructure(Trusted{}, rows, cols, block_size, std::move(block_row_ptr), std::move(block_col_idx)) {
  check_structure(*this);
}

BsrStructure::BsrStructure(const BsrStructure& other)
    : rows_(other.rows_),
      cols_(other.cols_),
      b_(other.b_),
      block_cols_(other.block_cols_),
      row_ptr_(other.row_ptr_),
      col_idx_(other.col_idx_),
      fingerprint_(other.fingerprint_.load(std::memory_order_relaxed)) {}

BsrStructure& BsrStructure::operator=(const BsrStructure& other) {
  if (this == &other) return *this;
  rows_ = other.rows_;
  cols_ = other.cols_;
  b_ = other.b_;
  block_cols_ = other.block_cols_;
  row_ptr_ = other.row_ptr_;
  col_idx_ = other.col_idx_;
  fingerprint_.store(other.fingerprint_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return *this;
}

std::shared_ptr<const BsrStructure> BsrStructure::make(index_t rows, index_t cols, index_t block_size,
                                                       std::vector<index_t> block_row_ptr,
                                                       std::vector<index_t> block_col_idx) {
  return std::make_shared<const BsrStructure>(rows, cols, block_size, std::move(block_row_ptr),
                                              std::move(block_col_idx));
}

std::shared_ptr<const BsrStructure> detail::trusted_structure(index_t rows, index_t cols, index_t block_size,
                                                              Storage<index_t> block_row_ptr,
                                                              Storage<index_t> block_col_idx) {
  std::shared_ptr<const BsrStructure> s(new BsrStructure(BsrStructure::Trusted{}, rows, cols, block_size,
                                                         std::move(block_row_ptr), std::move(block_col_idx)));
#ifndef NDEBUG
  check_structure(*s);
#endif
  return s;
}

std::uint64_t BsrStructure::fingerprint() const noexcept {
  std::uint64_t h = fingerprint_.load(std::memory_order_relaxed);
  if (h != 0) return h;
  h = mix(mix(mix(0, static_cast<std::uint64_t>(rows_)), static_cast<std::uint64_t>(cols_)),
          static_cast<std::uint64_t>(b_));
  for (index_t p : row_ptr_) h = mix(h, static_cast<std::uint64_t>(p));
  for (index_t c : col_idx_) h = mix(h, static_cast<std::uint64_t>(c));
  h += h == 0;
  fingerprint_.store(h, std::memory_order_relaxed);
  return h;
}

index_t BsrStructure::row_extent(index_t bi) const noexcept { return std::min(b_, rows_ - bi * b_); }
index_t BsrStructure::col_extent(index_t bj) const noexcept { return std::min(b_, cols_ - bj * b_); }

double BsrStructure::block_density() const noexcept {
  const double grid = static_cast<double>(block_rows()) * static_cast<double>(block_cols_);
  return grid > 0 ? static_cast<double>(n_blocks()) / grid : 0.0;
}

bool operator==(const BsrStructure& a, const BsrStructure& b) noexcept {
  return a.fingerprint() == b.fingerprint() && a.rows_ == b.rows_ && a.cols_ == b.cols_ && a.b_ == b.b_ &&
         std::ranges::equal(a.row_ptr_, b.row_ptr_) && std::ranges::equal(a.col_idx_, b.col_idx_);
}

// ---- BsrMatrix ------------------------------------------------------------------------

template <Value T>
BsrMatrix<T>::BsrMatrix(std::shared_ptr<const BsrStructure> structure) : structure_(std::move(structure)) {
  if (!structure_) throw InvalidArgument("bsr: structure is null");
  values_ = detail::make_vector<T>(checked_value_count(n_blocks(), block_size()), "bsr: blocks");
}

template <Value T>
BsrMatrix<T>::BsrMatrix(std::shared_ptr<const BsrStructure> structure, std::vector<T> blocks)
    : BsrMatrix(std::move(structure), detail::Storage<T>(std::move(blocks)), detail::Written{}) {}

template <Value T>
BsrMatrix<T>::BsrMatrix(std::shared_ptr<const BsrStructure> structure, detail::Storage<T> blocks, detail::Written)
    : structure_(std::move(structure)), values_(std::move(blocks)) {
  if (!structure_) throw InvalidArgument("bsr: structure is null");
  const index_t want = checked_value_count(n_blocks(), block_size());
  if (static_cast<index_t>(values_.size()) != want)
    throw DimensionMismatch(detail::concat("bsr: blocks has ", values_.size(), " values, expected n_blocks * b * b = ",
                                           n_blocks(), " * ", block_size(), " * ", block_size(), " = ", want));
  zero_padding();
}

template <Value T>
BsrMatrix<T>::BsrMatrix(index_t rows, index_t cols, index_t block_size, std::vector<index_t> block_row_ptr,
                        std::vector<index_t> block_col_idx, std::vector<T> blocks, Canonicalize canonicalize) {
  const Grid g = checked_grid(rows, cols, block_size, "bsr");
  const index_t want = checked_value_count(static_cast<index_t>(block_col_idx.size()), block_size);
  if (static_cast<index_t>(blocks.size()) != want)
    throw DimensionMismatch(detail::concat("bsr: blocks has ", blocks.size(), " values, expected n_blocks * b * b = ",
                                           block_col_idx.size(), " * ", block_size, " * ", block_size, " = ", want));
  const bool sorted =
      detail::validate_compressed("bsr", block_row_ptr, g.block_rows, block_col_idx, g.block_cols,
                                  canonicalize == Canonicalize::no, "block_row_ptr", "block_col_idx", "block row");
  if (!sorted) detail::canonicalize_compressed(block_row_ptr, block_col_idx, blocks, block_size * block_size);
  structure_ = detail::trusted_structure(rows, cols, block_size, std::move(block_row_ptr), std::move(block_col_idx));
  values_ = std::move(blocks);
  zero_padding();
}

template <Value T>
std::span<const T> BsrMatrix<T>::block(index_t k) const noexcept {
  const index_t bb = block_size() * block_size();
  return std::span<const T>(values_).subspan(static_cast<std::size_t>(k * bb), static_cast<std::size_t>(bb));
}

template <Value T>
std::span<T> BsrMatrix<T>::block(index_t k) noexcept {
  const index_t bb = block_size() * block_size();
  return std::span<T>(values_).subspan(static_cast<std::size_t>(k * bb), static_cast<std::size_t>(bb));
}

template <Value T>
void BsrMatrix<T>::zero_padding() noexcept {
  const BsrStructure& s = *structure_;
  const index_t b = s.block_size();
  const auto ptr = s.block_row_ptr();
  const auto col = s.block_col_indices();
  for (index_t bi = 0; bi < s.block_rows(); ++bi) {
    const index_t re = s.row_extent(bi);
    for (index_t k = ptr[bi]; k < ptr[bi + 1]; ++k) {
      const index_t ce = s.col_extent(col[k]);
      if (re == b && ce == b) continue;
      T* blk = values_.data() + k * b * b;
      for (index_t r = 0; r < b; ++r)
        for (index_t c = (r < re ? ce : 0); c < b; ++c) blk[r * b + c] = T{};
    }
  }
}

template class BsrMatrix<float>;
template class BsrMatrix<double>;
template class BsrMatrix<bf16>;

}  // namespace trnsparse
