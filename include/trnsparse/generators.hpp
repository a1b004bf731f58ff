/// @file generators.hpp
/// Matrices for tests, examples and benchmarks.
///
///     auto A = trnsparse::poisson3d<double>(16);   // 4096 x 4096, 7-point stencil
#pragma once

#include <cstdint>
#include <string_view>

#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse {

/// The 7-point finite-difference Laplacian on an n x n x n grid with Dirichlet
/// boundaries (6 on the diagonal, -1 for each neighbour), rows in x-fastest order.
/// Symmetric positive definite; n^3 rows. @throw InvalidArgument for n < 0.
template <Value T> CsrMatrix<T> poisson3d(index_t n);
/// Rows [first, last) of `poisson3d(n)`: a (last - first) x n^3 matrix with global
/// column indices, so that each process of a distributed solve builds only its rows.
/// @throw InvalidArgument for n < 0 or unless 0 <= first <= last <= n^3.
template <Value T> CsrMatrix<T> poisson3d_rows(index_t n, index_t first, index_t last);

/// Linear elasticity on a structured mesh of n x n x n cubic trilinear (Q1) hexahedra of
/// side 1/n (Young's modulus 1, Poisson's ratio 0.3, 2 x 2 x 2 Gauss points), clamped on
/// the face x = 0: 3 unknowns (ux, uy, uz) per free node, nodes in x-fastest order, so a
/// node's unknowns form a natural 3 x 3 block and each block row couples to the 27 nodes
/// around it. Symmetric positive definite; 3 n (n + 1)^2 rows.
/// @throw InvalidArgument for n < 1.
template <Value T> CsrMatrix<T> elasticity3d(index_t n);
/// The coordinates (x, y, z) of elasticity3d(n)'s free nodes, in its node order
/// (free nodes x 3): what rigid_body_modes (preconditioners.hpp) needs for AMG.
/// @throw InvalidArgument for n < 1.
Dense<double> elasticity3d_coordinates(index_t n);
/// Upwind convection–diffusion -Δu + Pe (v · ∇u) = f on the unit cube, an n x n x n grid
/// with Dirichlet boundaries (7-point diffusion, first-order upwind convection), with the
/// velocity v = (1, 1/2, 1/4) scaled by `peclet` / (mesh size), i.e. the cell Péclet
/// number. Rows x-fastest, scaled so that diffusion alone is poisson3d's stencil.
/// Nonsymmetric for peclet > 0, an M-matrix for any peclet >= 0; n^3 rows.
/// @throw InvalidArgument for n < 0 or a negative or non-finite peclet.
template <Value T> CsrMatrix<T> convdiff3d(index_t n, double peclet = 1.0);
/// A CFD-like block stencil: `fields` unknowns per node of an n x n x n grid (x-fastest,
/// fields node-major), a 7-point coupling between nodes whose blocks are dense
/// fields x fields matrices: an upwinded convection-diffusion operator in each field plus
/// a fixed coupling between fields. Nonsymmetric, diagonally dominant by rows;
/// fields n^3 rows. @throw InvalidArgument for n < 0 or fields < 1.
template <Value T> CsrMatrix<T> block_stencil3d(index_t n, index_t fields = 5);

/// A rows x cols matrix whose entries are present independently with probability
/// `density`, values uniform in [-1, 1), from a fixed 64-bit generator seeded by
/// `seed` (the same on every platform). O(rows * cols) draws.
/// @throw InvalidArgument for a negative shape or density outside [0, 1].
template <Value T> CsrMatrix<T> random_csr(index_t rows, index_t cols, double density, std::uint64_t seed);

/// An n x n matrix of b x b blocks, each present with probability `block_density` and
/// then full, values uniform in [-1, 1) (edge blocks cut at n), drawn from `seed` as
/// random_csr draws. O(block rows * block columns) draws.
/// @throw InvalidArgument for n < 0, b < 1 or a density outside [0, 1].
template <Value T> CsrMatrix<T> random_blocks(index_t n, index_t b, double block_density, std::uint64_t seed);

/// The matrix a problem specification names (the CLI's --problem, benchmarks):
/// "poisson3d:N", "elasticity3d:N", "convdiff3d:N" or "convdiff3d:N:PECLET",
/// "block_stencil3d:N" or "block_stencil3d:N:FIELDS", and "random_blocks:N:B:DENSITY"
/// (seed 0).
/// @throw InvalidArgument naming the specification, for an unknown name, a malformed or
/// missing number, N outside [1, 2^20], more than 2^32 blocks to draw (random_blocks), or
/// a generator's own argument or size error.
template <Value T> CsrMatrix<T> named_problem(std::string_view spec);

}  // namespace trnsparse
