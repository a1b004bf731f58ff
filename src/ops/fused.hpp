// Internal: products fused with the reduction a solver needs next.
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

}  // namespace trnsparse::detail
