/// @file convert.hpp
/// Conversions between dense, COO, CSR and BSR; transposes; identities; value casts.
/// Thresholds keep an element when `!(|v| <= threshold)`: strictly above the threshold,
/// and NaN is always kept (a NaN is never dropped silently). Thresholds must be >= 0.
///
///     auto csr = trnsparse::to_csr(dense.view(), 1e-12);
///     auto bsr = trnsparse::to_bsr(csr, 64);          // direct, not through dense
///     auto back = trnsparse::to_dense(bsr);
#pragma once

#include "trnsparse/bsr.hpp"
#include "trnsparse/coo.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse {

// ---- to dense (duplicates in COO are summed) --------------------------------------
template <Value T> Dense<T> to_dense(const CooMatrix<T>& A);
template <Value T> Dense<T> to_dense(const CsrMatrix<T>& A);
/// The logical rows x cols matrix; padding is not part of it.
template <Value T> Dense<T> to_dense(const BsrMatrix<T>& A);

// ---- from dense ------------------------------------------------------------------
/// Entries with |a_ij| > threshold (or NaN), row-major order.
template <Value T> CooMatrix<T> to_coo(DenseView<const T> A, double threshold = 0.0);
template <Value T> CsrMatrix<T> to_csr(DenseView<const T> A, double threshold = 0.0);
/// Stores the block (bi, bj) when any of its elements has |a| > threshold (or is NaN).
/// @throw InvalidArgument for block_size < 1 or a negative / NaN threshold.
template <Value T>
BsrMatrix<T> to_bsr(DenseView<const T> A, index_t block_size = default_block_size, double threshold = 0.0);

// ---- between sparse formats -------------------------------------------------------
/// Sorts row-major and sums duplicates. O(nnz + rows).
template <Value T> CsrMatrix<T> to_csr(const CooMatrix<T>& A);
template <Value T> CooMatrix<T> to_coo(const CsrMatrix<T>& A);
/// Direct CSR -> BSR: a block is stored when one of its CSR entries has
/// |v| > threshold (or is NaN). O(nnz + stored blocks * b^2).
template <Value T>
BsrMatrix<T> to_bsr(const CsrMatrix<T>& A, index_t block_size = default_block_size, double threshold = 0.0);
/// Direct BSR -> CSR: every non-zero (or NaN) entry of the logical shape; zeros that
/// blocks carry are not entries. O(stored blocks * b^2).
template <Value T> CsrMatrix<T> to_csr(const BsrMatrix<T>& A);

// ---- transpose, identity, cast ----------------------------------------------------
/// Aᵀ with sorted rows. O(nnz + cols).
template <Value T> CsrMatrix<T> transpose(const CsrMatrix<T>& A);
/// Aᵀ: the transposed block pattern with every block transposed. O(stored values).
template <Value T> BsrMatrix<T> transpose(const BsrMatrix<T>& A);
/// The n x n identity.
template <Value T> CsrMatrix<T> eye_csr(index_t n);
template <Value T> BsrMatrix<T> eye_bsr(index_t n, index_t block_size = default_block_size);
/// The half storage `spmv_symmetric` reads: the entries at column >= row (upper) or
/// <= row (lower). O(nnz + rows).
template <Value T> CsrMatrix<T> triangle(const CsrMatrix<T>& A, Triangle uplo);
/// The block triangle: the blocks at block column >= block row (upper) or <= (lower),
/// diagonal blocks whole (spmv_symmetric reads their own triangle). O(stored values).
template <Value T> BsrMatrix<T> triangle(const BsrMatrix<T>& A, Triangle uplo);
/// Element-wise value conversion (rounding to nearest even when narrowing to bf16).
template <Value To, Value From> CsrMatrix<To> cast(const CsrMatrix<From>& A);
template <Value To, Value From> BsrMatrix<To> cast(const BsrMatrix<From>& A);
template <Value To, Value From> Dense<To> cast(DenseView<const From> A);

}  // namespace trnsparse
