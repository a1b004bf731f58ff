/// @file screening.hpp
/// Integral screening for quantum chemistry: Schwarz bounds, pair (quartet) and density
/// screening, sparsity statistics, and the screened product `C = (A ∘ M) B` whose mask
///     M_ij = [ q_i · q_j > √threshold ],   q = √|diag|   (row bounds q_i, column bounds q_j)
/// is applied inside the kernel and never materialised. T is float or double.
///
///     std::vector<double> diag = ...;                       // e.g. (ii|ii) integrals
///     auto C = trnsparse::screened_spmm(A, std::span<const double>(diag), B, 1e-10);
#pragma once

#include <concepts>
#include <span>
#include <type_traits>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse {

/// Value types of the screening functions.
template <class T>
concept ScreenValue = std::same_as<T, float> || std::same_as<T, double>;

/// Q_i = √|diag_i| (the Schwarz bound of pair i from its diagonal integral).
/// @throw InvalidArgument naming the first non-finite entry.
template <ScreenValue T> std::vector<double> schwarz_bounds(std::span<const T> diag);

/// The pairs (i, j) with Q_i · Q_j > threshold, as a CSR matrix holding Q_i · Q_j at
/// the kept positions (sort-free: row i keeps the j with Q_j > threshold / Q_i). O(n²).
/// @throw InvalidArgument for threshold < 0 (or NaN) or a negative / non-finite bound.
CsrMatrix<double> screen_quartets(std::span<const double> Q, double threshold);

/// The entries of P with Q_i · Q_j · |P_ij| > threshold (P's other entries dropped).
/// Q has P.rows() = P.cols() entries. @throw as screen_quartets; DimensionMismatch for Q.
template <ScreenValue T> CsrMatrix<T> density_screen(std::span<const double> Q, const CsrMatrix<T>& P, double threshold);

/// Stored entries, density, entries per row and the screened (not stored) fraction.
struct SparsityStats {
  index_t rows = 0;
  index_t cols = 0;
  index_t nnz = 0;
  double density = 0.0;  ///< nnz / (rows · cols); 0 for an empty shape
  index_t row_min = 0;
  double row_mean = 0.0;
  index_t row_max = 0;
  double screened_fraction = 0.0;  ///< 1 - density
};
template <ScreenValue T> SparsityStats sparsity_stats(const CsrMatrix<T>& A);

/// C = (A ∘ M) B with M_ij = [√|row_diag_i| · √|col_diag_j| > √threshold]. Stored blocks
/// of A whose largest bound product is ≤ √threshold are skipped whole, blocks whose
/// smallest product is above it run the plain tile kernel, and only the others are
/// masked element by element (into a per-call copy of those partial blocks).
/// B: A.cols() x k; returns A.rows() x k. O(kept blocks · b² · k).
/// @throw DimensionMismatch for bounds or B of the wrong size; InvalidArgument for a
/// negative threshold or a non-finite diagonal entry.
template <ScreenValue T>
Dense<T> screened_spmm(const BsrMatrix<T>& A, std::span<const std::type_identity_t<T>> row_diag,
                       std::span<const std::type_identity_t<T>> col_diag, DenseView<const std::type_identity_t<T>> B,
                       double threshold);
/// Square A: the same bounds for rows and columns.
template <ScreenValue T>
Dense<T> screened_spmm(const BsrMatrix<T>& A, std::span<const std::type_identity_t<T>> diag,
                       DenseView<const std::type_identity_t<T>> B, double threshold);
/// The same into C (A.rows() x k, overwritten), which an iterative caller (an SCF loop)
/// allocates once. @throw as above; DimensionMismatch for C of the wrong shape;
/// InvalidArgument if C overlaps B or A.
template <ScreenValue T>
void screened_spmm(const BsrMatrix<T>& A, std::span<const std::type_identity_t<T>> row_diag,
                   std::span<const std::type_identity_t<T>> col_diag, DenseView<const std::type_identity_t<T>> B,
                   double threshold, DenseView<T> C);

/// Gradients of C = (A ∘ M) B given dC (A.rows() x k): dA = (dC Bᵀ) ∘ M on A's stored
/// structure (shared; skipped blocks are zero and not computed), dB = (A ∘ M)ᵀ dC.
template <ScreenValue T>
SpmmGradients<BsrMatrix<T>, T> screened_spmm_backward(const BsrMatrix<T>& A,
                                                      std::span<const std::type_identity_t<T>> row_diag,
                                                      std::span<const std::type_identity_t<T>> col_diag,
                                                      DenseView<const std::type_identity_t<T>> B,
                                                      DenseView<const std::type_identity_t<T>> dC, double threshold);

}  // namespace trnsparse
