/// @file lapack.hpp
/// The LAPACK routines the Hartree-Fock code uses (reference LAPACK or any other
/// implementation of its Fortran interface).
#pragma once

#include <span>
#include <vector>

#include "trnsparse/dense.hpp"

namespace trnsparse::hf::lapack {

/// Eigenvalues (ascending) and eigenvectors of a symmetric matrix: `vectors(i, k)` is
/// component i of vector k.
struct SymmetricEigen {
  std::vector<double> values;
  Dense<double> vectors;
};
/// By dsyev. @throw InvalidArgument if A is not square or dsyev fails.
SymmetricEigen eigh(const Dense<double>& A);

/// Solves A x = b in place of b for a square column-major A (overwritten), by dgesv.
/// Returns false when A is singular.
bool solve(std::span<double> A, std::span<double> b);

}  // namespace trnsparse::hf::lapack
