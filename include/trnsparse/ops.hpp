/// @file ops.hpp
/// Sparse products and algebra. Argument order follows BLAS: `alpha, A, x, beta, y`
/// computes `y = alpha * A * x + beta * y`. When `beta == 0`, y is written without
/// being read (NaN or garbage in y does not propagate). Operands are `TA` (float,
/// double or bf16); products accumulate in `acc_t<TA>` (fp32 for bf16) and write `TY`,
/// which is TA or, for bf16 operands, float. Every function checks shapes and throws
/// `DimensionMismatch` naming both operands.
///
///     std::vector<double> x(A.cols(), 1.0), y(A.rows());
///     trnsparse::spmv(1.0, A, x, 0.0, std::span(y));   // x: any contiguous range of TA
#pragma once

#include <span>
#include <type_traits>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse {

// ---- products ---------------------------------------------------------------------
/// y = alpha * A * x + beta * y.  x: A.cols(), y: A.rows(). O(nnz).
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv(acc_t<TA> alpha, const CsrMatrix<TA>& A, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta, std::span<TY> y);
/// y = alpha * A * x + beta * y on the logical shape. O(stored blocks * b^2).
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv(acc_t<TA> alpha, const BsrMatrix<TA>& A, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta, std::span<TY> y);
/// C = alpha * A * B + beta * C.  B: A.cols() x k, C: A.rows() x k. O(nnz * k).
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm(acc_t<TA> alpha, const CsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B, acc_t<TA> beta, DenseView<TY> C);
/// C = alpha * A * B + beta * C with a block-sparse A. O(stored blocks * b^2 * k).
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B, acc_t<TA> beta, DenseView<TY> C);
/// Returns A * B (A.rows() x B.cols), accumulated in acc_t<TA> and rounded once to TA.
template <Value TA>
Dense<TA> bsr_spmm(const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B);
/// y = alpha * S * x + beta * y for the symmetric S whose `uplo` triangle (with the
/// diagonal) A stores. @throw IndexError if A has an entry outside that triangle;
/// InvalidArgument if A is not square.
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv_symmetric(acc_t<TA> alpha, const CsrMatrix<TA>& A, Triangle uplo, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta,
                    std::span<TY> y);
/// The same for a BSR A storing S's `uplo` block triangle: the blocks at block column >=
/// block row (upper) or <= (lower), each off-diagonal block whole. A diagonal block is
/// read in its own `uplo` triangle only (the other may hold anything: the triangle of a
/// symmetric CSR matrix converted with `to_bsr`, or a whole symmetric block). Block sizes
/// 2 to 6 and 8 run vectorised kernels on several threads; others run the scalar
/// reference kernel on one. @throw IndexError if A has a block outside that triangle;
/// InvalidArgument if A is not square.
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv_symmetric(acc_t<TA> alpha, const BsrMatrix<TA>& A, Triangle uplo,
                    std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta, std::span<TY> y);

// ---- gradients and sampled products ---------------------------------------------------
/// Sampled dense-dense product on out's structure (SDDMM): every stored block k at block
/// (bi, bj) becomes alpha * X[block rows bi] * Y[block rows bj]ᵀ + beta * block_k.
/// X: out.rows() x w, Y: out.cols() x w. Padding stays zero. O(stored blocks * b^2 * w).
template <Value T>
void sampled_matmul(acc_t<T> alpha, DenseView<const std::type_identity_t<T>> X,
                    DenseView<const std::type_identity_t<T>> Y, acc_t<T> beta, BsrMatrix<T>& out);
/// The same at CSR positions: out.values[p] = alpha * X[i] · Y[j] + beta * out.values[p].
template <Value T>
void sampled_matmul(acc_t<T> alpha, DenseView<const std::type_identity_t<T>> X,
                    DenseView<const std::type_identity_t<T>> Y, acc_t<T> beta, CsrMatrix<T>& out);

/// Gradients of C = alpha * A * B given dC: dA = alpha * dC Bᵀ at A's stored positions
/// only (same structure; for BSR the structure is shared), dB = alpha * Aᵀ dC.
template <class M, class T>
struct SpmmGradients {
  M dA;
  Dense<T> dB;
};
template <Value T>
SpmmGradients<BsrMatrix<T>, T> spmm_backward(acc_t<T> alpha, const BsrMatrix<T>& A,
                                             DenseView<const std::type_identity_t<T>> B,
                                             DenseView<const std::type_identity_t<T>> dC);
template <Value T>
SpmmGradients<CsrMatrix<T>, T> spmm_backward(acc_t<T> alpha, const CsrMatrix<T>& A,
                                             DenseView<const std::type_identity_t<T>> B,
                                             DenseView<const std::type_identity_t<T>> dC);
/// C = alpha * Aᵀ * B + beta * C without forming Aᵀ (BSR: through the plan's BSC view).
/// B: A.rows() x k, C: A.cols() x k.
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm_transposed(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B,
                     acc_t<TA> beta, DenseView<TY> C);
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm_transposed(acc_t<TA> alpha, const CsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B,
                     acc_t<TA> beta, DenseView<TY> C);

// ---- algebra ----------------------------------------------------------------------
/// alpha * A + beta * B on the union of the patterns (an entry present in either is
/// kept, even when the sum is zero). O(nnz(A) + nnz(B)).
template <Value T> CsrMatrix<T> sparse_add(acc_t<T> alpha, const CsrMatrix<T>& A, acc_t<T> beta, const CsrMatrix<T>& B);
/// Same on the union of the block patterns.
/// @throw DimensionMismatch for different shapes; InvalidArgument for different block sizes.
template <Value T> BsrMatrix<T> sparse_add(acc_t<T> alpha, const BsrMatrix<T>& A, acc_t<T> beta, const BsrMatrix<T>& B);
/// alpha * A, same structure (shared for BSR).
template <Value T> CsrMatrix<T> sparse_scale(const CsrMatrix<T>& A, acc_t<T> alpha);
template <Value T> BsrMatrix<T> sparse_scale(const BsrMatrix<T>& A, acc_t<T> alpha);
/// Stored entries per row.
template <Value T> std::vector<index_t> nnz_per_row(const CsrMatrix<T>& A);
/// Stored entries per logical row: for each row, the logical columns covered by the
/// stored blocks of its block row.
template <Value T> std::vector<index_t> nnz_per_row(const BsrMatrix<T>& A);
/// The main diagonal a_ii, i < min(rows, cols); zero where no block covers it.
template <Value T> std::vector<T> bsr_diagonal(const BsrMatrix<T>& A);

}  // namespace trnsparse
