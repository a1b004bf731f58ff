// Algebra on stored values: sums over the union pattern, scaling, per-row counts,
// the diagonal.
#include <algorithm>

#include "runtime/checks.hpp"
#include "runtime/value.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse {

namespace {

using detail::value_cast;
using detail::widen;

/// Merges two sorted compressed-row patterns row by row. For each output entry calls
/// emit(col, pa, pb) with the positions in A and B (-1 where absent). O(nnz(A)+nnz(B)).
template <class Emit>
std::vector<index_t> merge_rows(index_t n_rows, std::span<const index_t> pa, std::span<const index_t> ca,
                                std::span<const index_t> pb, std::span<const index_t> cb, Emit&& emit) {
  std::vector<index_t> ptr(static_cast<std::size_t>(n_rows) + 1, 0);
  index_t n = 0;
  for (index_t i = 0; i < n_rows; ++i) {
    index_t p = pa[i], q = pb[i];
    while (p < pa[i + 1] || q < pb[i + 1]) {
      const index_t col_a = p < pa[i + 1] ? ca[p] : INT64_MAX;
      const index_t col_b = q < pb[i + 1] ? cb[q] : INT64_MAX;
      const index_t col = std::min(col_a, col_b);
      emit(col, col_a == col ? p++ : -1, col_b == col ? q++ : -1);
      ++n;
    }
    ptr[i + 1] = n;
  }
  return ptr;
}

void check_same_shape(const char* who, index_t ra, index_t ca, index_t rb, index_t cb) {
  if (ra != rb || ca != cb)
    throw DimensionMismatch(detail::concat(who, ": A is ", ra, " x ", ca, " but B is ", rb, " x ", cb));
}

/// alpha * a + beta * b in acc_t, with an absent side (nullptr) contributing nothing.
template <Value T>
T axpby(acc_t<T> alpha, const T* a, acc_t<T> beta, const T* b) noexcept {
  acc_t<T> s = 0;
  if (a) s += alpha * widen(*a);
  if (b) s += beta * widen(*b);
  return value_cast<T>(s);
}

}  // namespace

template <Value T>
CsrMatrix<T> sparse_add(acc_t<T> alpha, const CsrMatrix<T>& A, acc_t<T> beta, const CsrMatrix<T>& B) {
  check_same_shape("sparse_add", A.rows(), A.cols(), B.rows(), B.cols());
  std::vector<index_t> cols;
  std::vector<T> vals;
  const auto va = A.values();
  const auto vb = B.values();
  auto ptr = merge_rows(A.rows(), A.row_ptr(), A.col_indices(), B.row_ptr(), B.col_indices(),
                        [&](index_t col, index_t p, index_t q) {
                          cols.push_back(col);
                          vals.push_back(axpby<T>(alpha, p >= 0 ? &va[p] : nullptr, beta, q >= 0 ? &vb[q] : nullptr));
                        });
  return CsrMatrix<T>(A.rows(), A.cols(), std::move(ptr), std::move(cols), std::move(vals));
}

template <Value T>
BsrMatrix<T> sparse_add(acc_t<T> alpha, const BsrMatrix<T>& A, acc_t<T> beta, const BsrMatrix<T>& B) {
  check_same_shape("sparse_add", A.rows(), A.cols(), B.rows(), B.cols());
  if (A.block_size() != B.block_size())
    throw InvalidArgument(detail::concat("sparse_add: A has block size ", A.block_size(), " but B has ", B.block_size()));
  const index_t bb = A.block_size() * A.block_size();
  const BsrStructure& sa = A.structure();
  const BsrStructure& sb = B.structure();
  std::vector<index_t> cols;
  std::vector<T> vals;
  auto ptr = merge_rows(sa.block_rows(), sa.block_row_ptr(), sa.block_col_indices(), sb.block_row_ptr(),
                        sb.block_col_indices(), [&](index_t col, index_t p, index_t q) {
                          cols.push_back(col);
                          for (index_t e = 0; e < bb; ++e)
                            vals.push_back(axpby<T>(alpha, p >= 0 ? &A.blocks()[p * bb + e] : nullptr, beta,
                                                    q >= 0 ? &B.blocks()[q * bb + e] : nullptr));
                        });
  return BsrMatrix<T>(BsrStructure::make(A.rows(), A.cols(), A.block_size(), std::move(ptr), std::move(cols)),
                      std::move(vals));
}

template <Value T>
CsrMatrix<T> sparse_scale(const CsrMatrix<T>& A, acc_t<T> alpha) {
  std::vector<T> vals(A.values().begin(), A.values().end());
  for (T& v : vals) v = value_cast<T>(alpha * widen(v));
  const auto ptr = A.row_ptr();
  const auto col = A.col_indices();
  return CsrMatrix<T>(A.rows(), A.cols(), {ptr.begin(), ptr.end()}, {col.begin(), col.end()}, std::move(vals));
}

template <Value T>
BsrMatrix<T> sparse_scale(const BsrMatrix<T>& A, acc_t<T> alpha) {
  std::vector<T> vals(A.blocks().begin(), A.blocks().end());
  for (T& v : vals) v = value_cast<T>(alpha * widen(v));
  return BsrMatrix<T>(A.structure_ptr(), std::move(vals));
}

template <Value T>
std::vector<index_t> nnz_per_row(const CsrMatrix<T>& A) {
  const auto ptr = A.row_ptr();
  std::vector<index_t> counts(static_cast<std::size_t>(A.rows()));
  for (index_t i = 0; i < A.rows(); ++i) counts[i] = ptr[i + 1] - ptr[i];
  return counts;
}

template <Value T>
std::vector<index_t> nnz_per_row(const BsrMatrix<T>& A) {
  const BsrStructure& s = A.structure();
  const auto ptr = s.block_row_ptr();
  const auto col = s.block_col_indices();
  std::vector<index_t> counts(static_cast<std::size_t>(A.rows()));
  for (index_t bi = 0; bi < s.block_rows(); ++bi) {
    index_t width = 0;
    for (index_t k = ptr[bi]; k < ptr[bi + 1]; ++k) width += s.col_extent(col[k]);
    std::fill_n(counts.begin() + bi * s.block_size(), s.row_extent(bi), width);
  }
  return counts;
}

template <Value T>
std::vector<T> bsr_diagonal(const BsrMatrix<T>& A) {
  const BsrStructure& s = A.structure();
  const index_t b = s.block_size();
  const auto ptr = s.block_row_ptr();
  const auto col = s.block_col_indices();
  std::vector<T> diag(static_cast<std::size_t>(std::min(A.rows(), A.cols())));
  for (index_t bi = 0; bi * b < static_cast<index_t>(diag.size()); ++bi) {
    const auto first = col.begin() + ptr[bi], last = col.begin() + ptr[bi + 1];
    const auto it = std::lower_bound(first, last, bi);
    if (it == last || *it != bi) continue;  // no diagonal block: zeros
    const T* blk = A.blocks().data() + (it - col.begin()) * b * b;
    const index_t end = std::min(b, static_cast<index_t>(diag.size()) - bi * b);
    for (index_t r = 0; r < end; ++r) diag[bi * b + r] = blk[r * b + r];
  }
  return diag;
}

#define TRNSPARSE_INSTANTIATE(T)                                                                       \
  template CsrMatrix<T> sparse_add<T>(acc_t<T>, const CsrMatrix<T>&, acc_t<T>, const CsrMatrix<T>&); \
  template BsrMatrix<T> sparse_add<T>(acc_t<T>, const BsrMatrix<T>&, acc_t<T>, const BsrMatrix<T>&); \
  template CsrMatrix<T> sparse_scale<T>(const CsrMatrix<T>&, acc_t<T>);                              \
  template BsrMatrix<T> sparse_scale<T>(const BsrMatrix<T>&, acc_t<T>);                              \
  template std::vector<index_t> nnz_per_row<T>(const CsrMatrix<T>&);                                 \
  template std::vector<index_t> nnz_per_row<T>(const BsrMatrix<T>&);                                 \
  template std::vector<T> bsr_diagonal<T>(const BsrMatrix<T>&);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
TRNSPARSE_INSTANTIATE(bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
