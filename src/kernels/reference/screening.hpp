// Reference (scalar) kernel of the screened product: the specification the tiled path
// (ops/screening.cpp) is tested against.
#pragma once

#include "kernels/reference/products.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::kernels::reference {

/// C(rows x k) = (A ∘ M) B with M_ij = [qr[i] * qc[j] > s]: element (i, c) sums, in
/// acc_t, over the stored blocks of i's block row in order and over each block's logical
/// columns in order, the a_ij * B(j, c) whose mask is set. C is written, not read.
template <Value T>
void screened_bsr_spmm(const BsrArrays& A, const T* blocks, const double* qr, const double* qc, double s, index_t k,
                       const T* B, index_t ldb, T* C, index_t ldc) noexcept;

}  // namespace trnsparse::kernels::reference
