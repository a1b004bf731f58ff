// Internal: the products solvers need beyond the public ones: fused with the reduction
// a solver needs next, or on values of another precision.
#pragma once

#include <span>

#include "trnsparse/csr.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// spmv_symmetric(1, A, uplo, x, 0, y) that also returns xᵀy, summed while y is in cache
/// in a fixed order (kCgLanes lanes per chunk of the product, then the chunks
/// in order): the same bits for any thread count. CG's q = A p with pᵀq.
template <Value T>
double spmv_symmetric_dot(const CsrMatrix<T>& A, Triangle uplo, std::span<const T> x, std::span<T> y);

/// y = alpha * A' x + beta * y with A's pattern and fp32 `values` (A.nnz() of them, in
/// A's order) in place of A's own: the mixed product (kernels::CsrProduct), double
/// accumulation. The same bits for any thread count. @throw as spmv, and
/// DimensionMismatch unless values has A.nnz() elements.
void spmv_fp32_values(double alpha, const CsrMatrix<double>& A, std::span<const float> values,
                      std::span<const double> x, double beta, std::span<double> y);

}  // namespace trnsparse::detail
