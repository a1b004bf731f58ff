// Conversions between formats. Every loop is linear in what it reads or writes.
#include "trnsparse/convert.hpp"

#include <algorithm>
#include <tuple>

#include "plan/pattern.hpp"
#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
#include "runtime/value.hpp"

namespace trnsparse {

namespace {

using detail::above_threshold;
using detail::ceil_div;

std::vector<index_t> to_vector(std::span<const index_t> s) { return detail::huge_copy(s, "convert: indices"); }

/// Builds BSR from a per-block-row list of the block columns to store and a filler
/// that writes the values of block row bi. `keep[bi]` must be sorted.
template <Value T, class Fill>
BsrMatrix<T> assemble_bsr(index_t rows, index_t cols, index_t b, const std::vector<std::vector<index_t>>& keep,
                          Fill&& fill) {
  std::vector<index_t> ptr(keep.size() + 1, 0), idx;
  for (std::size_t bi = 0; bi < keep.size(); ++bi) {
    idx.insert(idx.end(), keep[bi].begin(), keep[bi].end());
    ptr[bi + 1] = static_cast<index_t>(idx.size());
  }
  auto s = BsrStructure::make(rows, cols, b, std::move(ptr), std::move(idx));
  BsrMatrix<T> out(s);
  for (std::size_t bi = 0; bi < keep.size(); ++bi) fill(static_cast<index_t>(bi), out);
  return out;
}

}  // namespace

// ---- to dense ---------------------------------------------------------------------

template <Value T>
Dense<T> to_dense(const CooMatrix<T>& A) {
  CooMatrix<T> c = A;
  c.canonicalize();  // sums duplicates in acc_t, rounding once
  Dense<T> D(A.rows(), A.cols());
  for (index_t p = 0; p < c.nnz(); ++p) D(c.row_indices()[p], c.col_indices()[p]) = c.values()[p];
  return D;
}

template <Value T>
Dense<T> to_dense(const CsrMatrix<T>& A) {
  Dense<T> D(A.rows(), A.cols());
  const auto ptr = A.row_ptr();
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t p = ptr[i]; p < ptr[i + 1]; ++p) D(i, A.col_indices()[p]) = A.values()[p];
  return D;
}

template <Value T>
Dense<T> to_dense(const BsrMatrix<T>& A) {
  const BsrStructure& s = A.structure();
  const index_t b = s.block_size();
  Dense<T> D(A.rows(), A.cols());
  for (index_t bi = 0; bi < s.block_rows(); ++bi)
    for (index_t k = s.block_row_ptr()[bi]; k < s.block_row_ptr()[bi + 1]; ++k) {
      const index_t bj = s.block_col_indices()[k];
      const auto blk = A.block(k);
      for (index_t r = 0; r < s.row_extent(bi); ++r)
        for (index_t c = 0; c < s.col_extent(bj); ++c) D(bi * b + r, bj * b + c) = blk[r * b + c];
    }
  return D;
}

// ---- from dense ---------------------------------------------------------------------

template <Value T>
CooMatrix<T> to_coo(DenseView<const T> A, double threshold) {
  detail::check_threshold(threshold, "to_coo");
  CooMatrix<T> out(A.rows, A.cols);
  for (index_t i = 0; i < A.rows; ++i)
    for (index_t j = 0; j < A.cols; ++j)
      if (above_threshold(A(i, j), threshold)) out.push_back(i, j, A(i, j));
  return out;
}

template <Value T>
CsrMatrix<T> to_csr(DenseView<const T> A, double threshold) {
  detail::check_threshold(threshold, "to_csr");
  std::vector<index_t> ptr(static_cast<std::size_t>(A.rows) + 1, 0), idx;
  std::vector<T> vals;
  for (index_t i = 0; i < A.rows; ++i) {
    for (index_t j = 0; j < A.cols; ++j)
      if (above_threshold(A(i, j), threshold)) {
        idx.push_back(j);
        vals.push_back(A(i, j));
      }
    ptr[i + 1] = static_cast<index_t>(idx.size());
  }
  return CsrMatrix<T>(A.rows, A.cols, std::move(ptr), std::move(idx), std::move(vals));
}

template <Value T>
BsrMatrix<T> to_bsr(DenseView<const T> A, index_t block_size, double threshold) {
  detail::check_block_size(block_size, "to_bsr");
  detail::check_threshold(threshold, "to_bsr");
  const index_t b = block_size;
  const index_t block_rows = ceil_div(A.rows, b), block_cols = ceil_div(A.cols, b);
  std::vector<std::vector<index_t>> keep(static_cast<std::size_t>(block_rows));
  for (index_t bi = 0; bi < block_rows; ++bi)
    for (index_t bj = 0; bj < block_cols; ++bj) {
      bool any = false;
      for (index_t i = bi * b; i < std::min(A.rows, (bi + 1) * b) && !any; ++i)
        for (index_t j = bj * b; j < std::min(A.cols, (bj + 1) * b) && !any; ++j) any = above_threshold(A(i, j), threshold);
      if (any) keep[bi].push_back(bj);
    }
  return assemble_bsr<T>(A.rows, A.cols, b, keep, [&](index_t bi, BsrMatrix<T>& out) {
    const BsrStructure& s = out.structure();
    for (index_t k = s.block_row_ptr()[bi]; k < s.block_row_ptr()[bi + 1]; ++k) {
      const index_t bj = s.block_col_indices()[k];
      auto blk = out.block(k);
      for (index_t r = 0; r < s.row_extent(bi); ++r)
        for (index_t c = 0; c < s.col_extent(bj); ++c) blk[r * b + c] = A(bi * b + r, bj * b + c);
    }
  });
}

// ---- between sparse formats ----------------------------------------------------------

template <Value T>
CsrMatrix<T> to_csr(const CooMatrix<T>& A) {
  // Counting sort by row keeps input order within a row; the canonicalising
  // constructor then sorts each row and sums duplicates in that order.
  std::vector<index_t> ptr = detail::make_vector<index_t>(detail::checked_add(A.rows(), 1, "to_csr: rows + 1"), "to_csr: row_ptr");
  for (index_t i : A.row_indices()) ++ptr[i + 1];
  for (index_t i = 0; i < A.rows(); ++i) ptr[i + 1] += ptr[i];
  std::vector<index_t> next(ptr.begin(), ptr.end() - 1), idx = detail::make_vector<index_t>(A.nnz(), "to_csr: col_idx");
  std::vector<T> vals = detail::make_vector<T>(A.nnz(), "to_csr: values");
  for (index_t p = 0; p < A.nnz(); ++p) {
    const index_t q = next[A.row_indices()[p]]++;
    idx[q] = A.col_indices()[p];
    vals[q] = A.values()[p];
  }
  return CsrMatrix<T>(A.rows(), A.cols(), std::move(ptr), std::move(idx), std::move(vals), Canonicalize::yes);
}

template <Value T>
CooMatrix<T> to_coo(const CsrMatrix<T>& A) {
  std::vector<index_t> rows(static_cast<std::size_t>(A.nnz()));
  for (index_t i = 0; i < A.rows(); ++i)
    std::fill(rows.begin() + A.row_ptr()[i], rows.begin() + A.row_ptr()[i + 1], i);
  return CooMatrix<T>(A.rows(), A.cols(), std::move(rows), to_vector(A.col_indices()),
                      {A.values().begin(), A.values().end()});
}

template <Value T>
BsrMatrix<T> to_bsr(const CsrMatrix<T>& A, index_t block_size, double threshold) {
  detail::check_block_size(block_size, "to_bsr");
  detail::check_threshold(threshold, "to_bsr");
  const index_t b = block_size;
  const index_t block_rows = ceil_div(A.rows(), b), block_cols = ceil_div(A.cols(), b);
  const auto ptr = A.row_ptr();
  const auto col = A.col_indices();
  const auto val = A.values();
  // slot[bj]: position of block column bj within the current block row's kept blocks,
  // or -1. Reset only where set, so the whole pass is O(nnz + stored blocks).
  std::vector<index_t> slot(static_cast<std::size_t>(block_cols), -1);
  std::vector<std::vector<index_t>> keep(static_cast<std::size_t>(block_rows));
  for (index_t bi = 0; bi < block_rows; ++bi) {
    const index_t r0 = bi * b, r1 = std::min(A.rows(), r0 + b);
    for (index_t p = ptr[r0]; p < ptr[r1]; ++p)
      if (above_threshold(val[p], threshold) && slot[col[p] / b] < 0) {
        slot[col[p] / b] = 0;
        keep[bi].push_back(col[p] / b);
      }
    std::sort(keep[bi].begin(), keep[bi].end());
    for (index_t bj : keep[bi]) slot[bj] = -1;
  }
  return assemble_bsr<T>(A.rows(), A.cols(), b, keep, [&](index_t bi, BsrMatrix<T>& out) {
    const index_t first = out.structure().block_row_ptr()[bi];
    for (std::size_t q = 0; q < keep[bi].size(); ++q) slot[keep[bi][q]] = first + static_cast<index_t>(q);
    const index_t r0 = bi * b, r1 = std::min(A.rows(), r0 + b);
    for (index_t i = r0; i < r1; ++i)
      for (index_t p = ptr[i]; p < ptr[i + 1]; ++p) {
        const index_t k = slot[col[p] / b];
        if (k >= 0) out.block(k)[(i - r0) * b + col[p] % b] = val[p];
      }
    for (index_t bj : keep[bi]) slot[bj] = -1;
  });
}

template <Value T>
CsrMatrix<T> to_csr(const BsrMatrix<T>& A) {
  const BsrStructure& s = A.structure();
  const index_t b = s.block_size();
  std::vector<index_t> ptr(static_cast<std::size_t>(A.rows()) + 1, 0), idx;
  std::vector<T> vals;
  for (index_t i = 0; i < A.rows(); ++i) {
    const index_t bi = i / b, r = i % b;
    for (index_t k = s.block_row_ptr()[bi]; k < s.block_row_ptr()[bi + 1]; ++k) {
      const index_t bj = s.block_col_indices()[k];
      const T* row = A.block(k).data() + r * b;
      for (index_t c = 0; c < s.col_extent(bj); ++c)
        if (detail::is_entry(row[c])) {
          idx.push_back(bj * b + c);
          vals.push_back(row[c]);
        }
    }
    ptr[i + 1] = static_cast<index_t>(idx.size());
  }
  return CsrMatrix<T>(A.rows(), A.cols(), std::move(ptr), std::move(idx), std::move(vals));
}

// ---- transpose, identity, cast -----------------------------------------------------------

template <Value T>
CsrMatrix<T> transpose(const CsrMatrix<T>& A) {
  BscView t = detail::transposed_pattern(A.rows(), A.cols(), A.row_ptr(), A.col_indices());
  std::vector<T> vals = detail::make_vector<T>(A.nnz(), "transpose: values");
  for (std::size_t q = 0; q < vals.size(); ++q) vals[q] = A.values()[t.perm[q]];
  return CsrMatrix<T>(A.cols(), A.rows(), std::move(t.col_ptr), std::move(t.row_idx), std::move(vals));
}

template <Value T>
BsrMatrix<T> transpose(const BsrMatrix<T>& A) {
  const BsrStructure& s = A.structure();
  const index_t b = s.block_size();
  BscView t = detail::transposed_pattern(s.block_rows(), s.block_cols(), s.block_row_ptr(), s.block_col_indices());
  std::vector<T> vals(A.blocks().size());
  for (std::size_t q = 0; q < t.perm.size(); ++q) {
    const T* src = A.blocks().data() + t.perm[q] * b * b;
    T* dst = vals.data() + static_cast<index_t>(q) * b * b;
    for (index_t r = 0; r < b; ++r)
      for (index_t c = 0; c < b; ++c) dst[c * b + r] = src[r * b + c];
  }
  return BsrMatrix<T>(BsrStructure::make(A.cols(), A.rows(), b, std::move(t.col_ptr), std::move(t.row_idx)),
                      std::move(vals));
}

template <Value T>
CsrMatrix<T> eye_csr(index_t n) {
  detail::check_nonnegative(n, "eye_csr: n");
  std::vector<index_t> ptr(static_cast<std::size_t>(n) + 1), idx(static_cast<std::size_t>(n));
  for (index_t i = 0; i <= n; ++i) ptr[i] = i;
  for (index_t i = 0; i < n; ++i) idx[i] = i;
  return CsrMatrix<T>(n, n, std::move(ptr), std::move(idx), std::vector<T>(static_cast<std::size_t>(n), T(1.0f)));
}

template <Value T>
BsrMatrix<T> eye_bsr(index_t n, index_t block_size) {
  detail::check_nonnegative(n, "eye_bsr: n");
  detail::check_block_size(block_size, "eye_bsr");
  const index_t nb = ceil_div(n, block_size);
  std::vector<index_t> ptr(static_cast<std::size_t>(nb) + 1), idx(static_cast<std::size_t>(nb));
  for (index_t i = 0; i <= nb; ++i) ptr[i] = i;
  for (index_t i = 0; i < nb; ++i) idx[i] = i;
  BsrMatrix<T> out(BsrStructure::make(n, n, block_size, std::move(ptr), std::move(idx)));
  for (index_t k = 0; k < nb; ++k)
    for (index_t r = 0; r < out.structure().row_extent(k); ++r) out.block(k)[r * block_size + r] = T(1.0f);
  return out;
}

namespace {

/// The rows' entries (`unit` values each) at column >= row (upper) or <= row (lower), as
/// (ptr, idx, values).
template <Value T>
std::tuple<std::vector<index_t>, std::vector<index_t>, std::vector<T>> keep_triangle(std::span<const index_t> ptr,
                                                                                       std::span<const index_t> idx,
                                                                                       std::span<const T> values,
                                                                                       index_t unit, Triangle uplo) {
  const index_t rows = static_cast<index_t>(ptr.size()) - 1;
  std::vector<index_t> out_ptr = detail::make_vector<index_t>(rows + 1, "triangle: row pointers");
  index_t kept = 0;
  for (index_t i = 0; i < rows; ++i) {
    for (index_t q = ptr[i]; q < ptr[i + 1]; ++q) kept += uplo == Triangle::upper ? idx[q] >= i : idx[q] <= i;
    out_ptr[i + 1] = kept;
  }
  std::vector<index_t> out_idx = detail::make_vector<index_t>(kept, "triangle: indices");
  std::vector<T> out_values = detail::make_vector<T>(detail::checked_mul(kept, unit, "triangle: values"),
                                                     "triangle: values");
  index_t k = 0;
  for (index_t i = 0; i < rows; ++i)
    for (index_t q = ptr[i]; q < ptr[i + 1]; ++q)
      if (uplo == Triangle::upper ? idx[q] >= i : idx[q] <= i) {
        out_idx[k] = idx[q];
        std::copy_n(values.begin() + q * unit, unit, out_values.begin() + k * unit);
        ++k;
      }
  return {std::move(out_ptr), std::move(out_idx), std::move(out_values)};
}

}  // namespace

template <Value T>
CsrMatrix<T> triangle(const CsrMatrix<T>& A, Triangle uplo) {
  auto [ptr, idx, values] = keep_triangle(A.row_ptr(), A.col_indices(), A.values(), 1, uplo);
  return CsrMatrix<T>(A.rows(), A.cols(), std::move(ptr), std::move(idx), std::move(values));
}

template <Value T>
BsrMatrix<T> triangle(const BsrMatrix<T>& A, Triangle uplo) {
  const BsrStructure& s = A.structure();
  auto [ptr, idx, values] =
      keep_triangle(s.block_row_ptr(), s.block_col_indices(), A.blocks(), s.block_size() * s.block_size(), uplo);
  return BsrMatrix<T>(A.rows(), A.cols(), s.block_size(), std::move(ptr), std::move(idx), std::move(values));
}

template <Value To, Value From>
static std::vector<To> cast_values(std::span<const From> v) {
  std::vector<To> out = detail::make_vector<To>(static_cast<index_t>(v.size()), "cast: values");
  std::transform(v.begin(), v.end(), out.begin(), [](From x) { return detail::value_cast<To>(x); });
  return out;
}

template <Value To, Value From>
CsrMatrix<To> cast(const CsrMatrix<From>& A) {
  return CsrMatrix<To>(A.rows(), A.cols(), to_vector(A.row_ptr()), to_vector(A.col_indices()),
                       cast_values<To>(A.values()));
}

template <Value To, Value From>
BsrMatrix<To> cast(const BsrMatrix<From>& A) {
  return BsrMatrix<To>(A.structure_ptr(), cast_values<To>(A.blocks()));
}

template <Value To, Value From>
Dense<To> cast(DenseView<const From> A) {
  Dense<To> out(A.rows, A.cols);
  for (index_t i = 0; i < A.rows; ++i)
    for (index_t j = 0; j < A.cols; ++j) out(i, j) = detail::value_cast<To>(A(i, j));
  return out;
}

#define TRNSPARSE_INSTANTIATE(T)                                                              \
  template Dense<T> to_dense<T>(const CooMatrix<T>&);                                         \
  template Dense<T> to_dense<T>(const CsrMatrix<T>&);                                         \
  template Dense<T> to_dense<T>(const BsrMatrix<T>&);                                         \
  template CooMatrix<T> to_coo<T>(DenseView<const T>, double);                                \
  template CsrMatrix<T> to_csr<T>(DenseView<const T>, double);                                \
  template BsrMatrix<T> to_bsr<T>(DenseView<const T>, index_t, double);                       \
  template CsrMatrix<T> to_csr<T>(const CooMatrix<T>&);                                       \
  template CooMatrix<T> to_coo<T>(const CsrMatrix<T>&);                                       \
  template BsrMatrix<T> to_bsr<T>(const CsrMatrix<T>&, index_t, double);                      \
  template CsrMatrix<T> to_csr<T>(const BsrMatrix<T>&);                                       \
  template CsrMatrix<T> transpose<T>(const CsrMatrix<T>&);                                    \
  template BsrMatrix<T> transpose<T>(const BsrMatrix<T>&);                                    \
  template CsrMatrix<T> eye_csr<T>(index_t);                                                  \
  template BsrMatrix<T> eye_bsr<T>(index_t, index_t);                                         \
  template CsrMatrix<T> triangle<T>(const CsrMatrix<T>&, Triangle);                           \
  template BsrMatrix<T> triangle<T>(const BsrMatrix<T>&, Triangle);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
TRNSPARSE_INSTANTIATE(bf16)
#undef TRNSPARSE_INSTANTIATE

#define TRNSPARSE_INSTANTIATE_CAST(To, From)                          \
  template CsrMatrix<To> cast<To, From>(const CsrMatrix<From>&);      \
  template BsrMatrix<To> cast<To, From>(const BsrMatrix<From>&);      \
  template Dense<To> cast<To, From>(DenseView<const From>);
#define TRNSPARSE_INSTANTIATE_CASTS_FROM(From) \
  TRNSPARSE_INSTANTIATE_CAST(float, From)      \
  TRNSPARSE_INSTANTIATE_CAST(double, From)     \
  TRNSPARSE_INSTANTIATE_CAST(bf16, From)
TRNSPARSE_INSTANTIATE_CASTS_FROM(float)
TRNSPARSE_INSTANTIATE_CASTS_FROM(double)
TRNSPARSE_INSTANTIATE_CASTS_FROM(bf16)
#undef TRNSPARSE_INSTANTIATE_CASTS_FROM
#undef TRNSPARSE_INSTANTIATE_CAST

}  // namespace trnsparse
