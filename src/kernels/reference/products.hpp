// Reference (scalar) product kernels: the executable specification that every fast
// kernel is tested against. Plain loops in the obvious order; each output element is
//     acc   = sum over stored entries p of the row, in storage order, of a_p * b_p  (acc_t)
//     out   = alpha * acc + beta * out          (beta == 0: out = alpha * acc, out not read)
// Kernels receive validated, non-aliasing arguments; they allocate nothing and never
// throw. Dense operands are row-major with leading dimensions ldb / ldc.
#pragma once

#include "kernels/products.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::kernels::reference {

/// C(m x k) = alpha * A * B + beta * C for CSR A (m rows) and B with A.cols rows. The
/// values are TV: TA, or float under double operands (the mixed product).
template <Value TA, class TY, class TV = TA>
void csr_spmm(index_t m, index_t k, const index_t* row_ptr, const index_t* col_idx, const TV* values, acc_t<TA> alpha,
              const TA* B, index_t ldb, acc_t<TA> beta, TY* C, index_t ldc) noexcept;

/// Block structure of a BSR operand, as plain arrays.
struct BsrArrays {
  index_t rows;  // logical
  index_t cols;  // logical
  index_t block_size;
  index_t block_rows;
  const index_t* block_row_ptr;
  const index_t* block_col_idx;
};

/// C(rows x k) = alpha * A * B + beta * C for BSR A; B has A.cols rows. Only the logical
/// part of each block is read.
template <Value TA, class TY>
void bsr_spmm(const BsrArrays& A, const TA* blocks, index_t k, acc_t<TA> alpha, const TA* B, index_t ldb,
              acc_t<TA> beta, TY* C, index_t ldc) noexcept;

/// C(cols x k) = alpha * Aᵀ * B + beta * C for BSR A; B has A.rows rows. Each output
/// element sums over block rows, then rows within the block, in order. `work` holds
/// A.cols * k acc_t values.
template <Value TA, class TY>
void bsr_spmm_transposed(const BsrArrays& A, const TA* blocks, index_t k, acc_t<TA> alpha, const TA* B, index_t ldb,
                         acc_t<TA> beta, TY* C, index_t ldc, acc_t<TA>* work) noexcept;

/// SDDMM: block q (block row bi, column bj) = alpha * X[bi rows] Y[bj rows]ᵀ + beta * block,
/// on the logical part of the block; X: rows x k, Y: cols x k.
template <Value T>
void bsr_sddmm(const BsrArrays& A, T* blocks, index_t k, acc_t<T> alpha, const T* X, index_t ldx, const T* Y,
               index_t ldy, acc_t<T> beta) noexcept;

/// SDDMM at CSR positions: values[p] = alpha * X[i] · Y[col p] + beta * values[p].
template <Value T>
void csr_sddmm(index_t m, index_t k, const index_t* row_ptr, const index_t* col_idx, T* values, acc_t<T> alpha,
               const T* X, index_t ldx, const T* Y, index_t ldy, acc_t<T> beta) noexcept;

/// y = alpha * S * x + beta * y, S symmetric n x n of which CSR A stores one triangle
/// with the diagonal (entries already checked to lie in it). `work` holds n acc_t values.
/// Entry (i, j), i != j, contributes a_ij * x_j to row i and a_ij * x_i to row j.
template <Value TA, class TY>
void csr_spmv_symmetric(index_t n, const index_t* row_ptr, const index_t* col_idx, const TA* values, acc_t<TA> alpha,
                        const TA* x, acc_t<TA> beta, TY* y, acc_t<TA>* work) noexcept;

/// y = alpha * S * x + beta * y, S symmetric (A.rows x A.rows) of which BSR A stores the
/// block triangle `upper` (blocks at block column >= block row) or lower, block columns
/// checked to lie in it. A diagonal block is read in its own `upper` triangle only (the
/// other may hold anything). Entry (r, c) read, r != c, contributes a x_c to row r and
/// a x_r to row c. `work` holds A.rows acc_t values.
template <Value TA, class TY>
void bsr_spmv_symmetric(const BsrArrays& A, const TA* blocks, bool upper, acc_t<TA> alpha, const TA* x,
                        acc_t<TA> beta, TY* y, acc_t<TA>* work) noexcept;

// ---- a linear layer with block-sparse weight W (out x in) ------------------------------
// Dense operands are token by token (tokens x features, row-major): X and dX have W.cols
// features, Y and dY have W.rows.

/// Y(t, o) = Σ over the stored blocks of o's block row, in storage order, of
/// Σ_i X(t, i) W(o, i) over the block's logical columns, plus bias[o] (bias may be null).
template <Value TA, class TY>
void linear_forward(const BsrArrays& W, const TA* blocks, index_t tokens, const TA* X, index_t ldx,
                    const acc_t<TA>* bias, TY* Y, index_t ldy) noexcept;

/// dX(t, i) = Σ_o dY(t, o) W(o, i), summed over W's block rows, then rows within the
/// block, in order (bsr_spmm_transposed's order). `work` holds W.cols acc_t values.
template <Value TA, class TY>
void linear_backward_input(const BsrArrays& W, const TA* blocks, index_t tokens, const TA* dY, index_t lddy, TY* dX,
                           index_t lddx, acc_t<TA>* work) noexcept;

/// Every stored block of dW (W's structure): dW(o, i) = Σ_t dY(t, o) X(t, i), tokens in
/// order, on the block's logical part (padding untouched).
template <Value T>
void linear_backward_weight(const BsrArrays& W, T* blocks, index_t tokens, const T* dY, index_t lddy, const T* X,
                            index_t ldx) noexcept;

/// ColumnSums (kernels/products.hpp): out[c] = Σ_r A(r, c), rows in order.
template <Value T>
void column_sums(const T* A, index_t rows, index_t lda, acc_t<T>* out, index_t c0, index_t c1) noexcept;

// The reference kernels in the contract's shapes (kernels/products.hpp), the entries
// dispatch fills where the CPU backend has no kernel of its own.

/// CsrKernels::sddmm over rows [r0, r1), for any T (the CPU tables have float and double).
template <Value T>
void csr_sddmm_rows(const CsrProduct<T, T>& shape, const T* X, index_t ldx, const T* Y, index_t ldy, T* vals,
                    index_t r0, index_t r1) noexcept;

/// The symmetric product of the block triangle `p` (any block size b > 1) in one call on
/// one thread (bsr_spmv_symmetric). `work` holds p.n acc_t values.
template <Value TA, class TY>
void symmetric_whole(const SymmetricProduct<TA, TY>& p, acc_t<TA>* work) noexcept;

}  // namespace trnsparse::kernels::reference
