// Internal: conjugate gradients with a general Preconditioner (krylov.cpp), which `cg`
// runs when CgOptions::M is set.
#pragma once

#include <span>

#include "trnsparse/solvers.hpp"

namespace trnsparse::solvers {

/// One right-hand side; x0 empty or n values. Checks its arguments as `cg` does.
template <SolverValue T>
SolveResult<T> preconditioned_cg(const LinearOperator<T>& A, std::span<const T> b, std::span<const T> x0,
                                 const CgOptions<T>& options);

}  // namespace trnsparse::solvers
