/// @file dense.hpp
/// Row-major dense matrices: a non-owning `DenseView<T>` with a leading dimension,
/// and an owning `Dense<T>`. Vectors are passed as `std::span`.
///
///     trnsparse::Dense<double> B(4, 3);           // zero-filled 4x3
///     B(1, 2) = 5.0;
///     trnsparse::DenseView<const double> v = B;   // view, ld = 3
#pragma once

#include <cstddef>
#include <initializer_list>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "trnsparse/error.hpp"
#include "trnsparse/storage.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse {

namespace detail {
/// Throws OverflowError naming `what` unless `a * b` fits in index_t. Both >= 0.
index_t checked_mul(index_t a, index_t b, const char* what);
/// Throws OverflowError naming `what` unless `a + b` fits in index_t.
index_t checked_add(index_t a, index_t b, const char* what);
/// Throws InvalidArgument naming `what` unless `n >= 0`.
void check_nonnegative(index_t n, const char* what);

/// Allocates on 64-byte boundaries, so that every row of a `Dense` whose row length is a
/// multiple of 64 bytes (8 fp64, 16 fp32 columns) starts a cache line: a kernel's vector
/// load of such a row then touches one line, not two, as it may with std::allocator's
/// 16-byte alignment (docs/benchmarks.md, "Small blocks").
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>& /*other*/) noexcept {}  // NOLINT(google-explicit-constructor)
  /// Large arrays are advised huge pages before their first touch (advise_huge_pages).
  T* allocate(std::size_t n) {
    T* p = static_cast<T*>(::operator new(n * sizeof(T), kAlign));
    advise_huge_pages(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t /*n*/) noexcept { ::operator delete(p, kAlign); }
  friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) noexcept { return true; }
};
}  // namespace detail

/// Non-owning row-major matrix: element (i, j) lives at `data[i * ld + j]`.
/// Invariants (checked by the constructor): rows, cols >= 0; ld >= max(cols, 1).
template <class T>
struct DenseView {
  T* data = nullptr;
  index_t rows = 0;
  index_t cols = 0;
  index_t ld = 1;

  DenseView() = default;
  /// @throw InvalidArgument for a negative shape or `ld < cols`; OverflowError when
  ///        `rows * ld` does not fit in index_t.
  DenseView(T* data_, index_t rows_, index_t cols_, index_t ld_) : data(data_), rows(rows_), cols(cols_), ld(ld_) {
    detail::check_nonnegative(rows, "DenseView rows");
    detail::check_nonnegative(cols, "DenseView cols");
    if (ld < cols || ld < 1)
      throw InvalidArgument("DenseView: ld = " + std::to_string(ld) + " must be >= max(cols = " +
                            std::to_string(cols) + ", 1)");
    (void)detail::checked_mul(rows, ld, "DenseView rows * ld");
  }

  T& operator()(index_t i, index_t j) const noexcept { return data[i * ld + j]; }
  T* row(index_t i) const noexcept { return data + i * ld; }

  /// A view of constant elements.
  operator DenseView<const T>() const noexcept {  // NOLINT(google-explicit-constructor)
    DenseView<const T> v;
    v.data = data;
    v.rows = rows;
    v.cols = cols;
    v.ld = ld;
    return v;
  }
};

/// Owning row-major matrix with `ld == cols`; zero-initialised, its first element on a
/// 64-byte boundary.
template <class T>
class Dense {
public:
  Dense() = default;
  /// @throw InvalidArgument for a negative shape; OverflowError if rows*cols overflows.
  Dense(index_t rows, index_t cols)
      : rows_(rows), cols_(cols), data_(static_cast<std::size_t>(size_of(rows, cols))) {}
  /// Copies `values` (row-major, length rows*cols) into aligned storage.
  /// @throw DimensionMismatch if `values.size() != rows * cols`.
  Dense(index_t rows, index_t cols, std::span<const T> values)
      : rows_(rows), cols_(cols), data_(values.begin(), values.end()) {
    if (static_cast<index_t>(data_.size()) != size_of(rows, cols))
      throw DimensionMismatch("Dense: values has " + std::to_string(data_.size()) + " elements, expected rows*cols = " +
                              std::to_string(rows * cols));
  }
  Dense(index_t rows, index_t cols, std::initializer_list<T> values)
      : Dense(rows, cols, std::span<const T>(values.begin(), values.size())) {}

  [[nodiscard]] index_t rows() const noexcept { return rows_; }
  [[nodiscard]] index_t cols() const noexcept { return cols_; }
  [[nodiscard]] index_t ld() const noexcept { return cols_ > 0 ? cols_ : 1; }
  T& operator()(index_t i, index_t j) noexcept { return data_[static_cast<std::size_t>(i * cols_ + j)]; }
  const T& operator()(index_t i, index_t j) const noexcept { return data_[static_cast<std::size_t>(i * cols_ + j)]; }
  [[nodiscard]] std::span<T> values() noexcept { return data_; }
  [[nodiscard]] std::span<const T> values() const noexcept { return data_; }

  [[nodiscard]] DenseView<T> view() noexcept { return {data_.data(), rows_, cols_, ld()}; }
  [[nodiscard]] DenseView<const T> view() const noexcept { return {data_.data(), rows_, cols_, ld()}; }
  operator DenseView<T>() noexcept { return view(); }              // NOLINT(google-explicit-constructor)
  operator DenseView<const T>() const noexcept { return view(); }  // NOLINT(google-explicit-constructor)

private:
  static index_t size_of(index_t rows, index_t cols) {
    detail::check_nonnegative(rows, "Dense rows");
    detail::check_nonnegative(cols, "Dense cols");
    return detail::checked_mul(rows, cols, "Dense rows * cols");
  }
  index_t rows_ = 0;
  index_t cols_ = 0;
  std::vector<T, detail::CacheLineAllocator<T>> data_;
};

}  // namespace trnsparse
