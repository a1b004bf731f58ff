// Internal: conjugate gradients with a general Preconditioner (krylov.cpp), which `cg`
// runs when CgOptions::M is set, and the fused product it shares with `cg` (cg.cpp).
#pragma once

#include <span>

#include "trnsparse/solvers.hpp"

namespace trnsparse::solvers {

/// One right-hand side; x0 empty or n values. Checks its arguments as `cg` does.
template <SolverValue T>
SolveResult<T> preconditioned_cg(const LinearOperator<T>& A, std::span<const T> b, std::span<const T> x0,
                                 const CgOptions<T>& options);

/// q = A p and pᵀq (fp64, ChunkedSums order), fused into the product's pass for a CSR
/// operator or a stored triangle as CG's own iterations do (cg.cpp).
template <SolverValue T>
double product_dot(const LinearOperator<T>& A, const T* p, T* q);

}  // namespace trnsparse::solvers
