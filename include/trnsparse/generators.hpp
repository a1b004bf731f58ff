/// @file generators.hpp
/// Matrices for tests, examples and benchmarks.
///
///     auto A = trnsparse::poisson3d<double>(16);   // 4096 x 4096, 7-point stencil
#pragma once

#include <cstdint>

#include "trnsparse/csr.hpp"

namespace trnsparse {

/// The 7-point finite-difference Laplacian on an n x n x n grid with Dirichlet
/// boundaries (6 on the diagonal, -1 for each neighbour), rows in x-fastest order.
/// Symmetric positive definite; n^3 rows. @throw InvalidArgument for n < 0.
template <Value T> CsrMatrix<T> poisson3d(index_t n);
/// Rows [first, last) of `poisson3d(n)`: a (last - first) x n^3 matrix with global
/// column indices, so that each process of a distributed solve builds only its rows.
/// @throw InvalidArgument for n < 0 or unless 0 <= first <= last <= n^3.
template <Value T> CsrMatrix<T> poisson3d_rows(index_t n, index_t first, index_t last);

/// A rows x cols matrix whose entries are present independently with probability
/// `density`, values uniform in [-1, 1), from a fixed 64-bit generator seeded by
/// `seed` (the same on every platform). O(rows * cols) draws.
/// @throw InvalidArgument for a negative shape or density outside [0, 1].
template <Value T> CsrMatrix<T> random_csr(index_t rows, index_t cols, double density, std::uint64_t seed);

}  // namespace trnsparse
