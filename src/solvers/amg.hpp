// Internal: the hierarchy of smoothed-aggregation AMG (amg_setup.cpp builds it, amg.cpp
// runs the V-cycle over it).
//
// Every level stores its operator with one block size g = gcd(b, k) (b: unknowns per node
// of the fine level, k: near-nullspace vectors): CSR when g = 1, BSR otherwise. A
// prolongator's blocks are b x k (fine level) or k x k (coarse levels), which g divides,
// so P, A and the Galerkin product Pᵀ A P share the block size the library's SpGEMM
// needs (equal block sizes), and no level is ever converted between block sizes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "runtime/parallel.hpp"
#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse::amg {

/// A sparse matrix in g x g blocks: CSR (g = 1) or BSR. Rows of blocks ("block rows")
/// are what passes split; for CSR a block is one entry. Shared and immutable: level 0
/// views the caller's A (a no-op deleter) when its storage serves as is, which saves
/// the copy (for poisson3d:150, 376 MB, more than a second of page faults).
template <SolverValue T>
struct Mat {
  std::shared_ptr<const CsrMatrix<T>> csr;
  std::shared_ptr<const BsrMatrix<T>> bsr;

  static Mat own(CsrMatrix<T>&& A) {
    Mat m;
    m.csr = std::make_shared<const CsrMatrix<T>>(std::move(A));
    return m;
  }
  static Mat own(BsrMatrix<T>&& A) {
    Mat m;
    m.bsr = std::make_shared<const BsrMatrix<T>>(std::move(A));
    return m;
  }
  static Mat view(const CsrMatrix<T>& A) {
    Mat m;
    m.csr = std::shared_ptr<const CsrMatrix<T>>(&A, [](const CsrMatrix<T>*) {});
    return m;
  }
  static Mat view(const BsrMatrix<T>& A) {
    Mat m;
    m.bsr = std::shared_ptr<const BsrMatrix<T>>(&A, [](const BsrMatrix<T>*) {});
    return m;
  }

  [[nodiscard]] index_t g() const noexcept { return bsr ? bsr->block_size() : 1; }
  [[nodiscard]] index_t rows() const noexcept { return bsr ? bsr->rows() : csr->rows(); }
  [[nodiscard]] index_t cols() const noexcept { return bsr ? bsr->cols() : csr->cols(); }
  [[nodiscard]] std::span<const index_t> ptr() const noexcept {
    return bsr ? bsr->structure().block_row_ptr() : csr->row_ptr();
  }
  [[nodiscard]] std::span<const index_t> idx() const noexcept {
    return bsr ? bsr->structure().block_col_indices() : csr->col_indices();
  }
  [[nodiscard]] std::span<const T> vals() const noexcept { return bsr ? bsr->blocks() : csr->values(); }
  /// Stored values (blocks times g²).
  [[nodiscard]] index_t nnz() const noexcept { return static_cast<index_t>(vals().size()); }
  /// y = alpha A x + beta y (the library's threaded, deterministic product).
  void spmv(T alpha, std::span<const T> x, T beta, std::span<T> y) const;
};

/// One level of the hierarchy: its operator and smoother, and (except on the last
/// level) the tentative and smoothed prolongators to the next.
template <SolverValue T>
struct Level {
  index_t node = 1;  // unknowns per node: b on level 0, k below
  Mat<T> A;
  std::vector<T> dinv;     // 1 / a_ii (0 for an unknown a degenerate aggregate left empty)
  double lmax = 0.0;       // estimate of λmax(D⁻¹A)
  std::vector<double> cheb_a, cheb_c;  // Chebyshev coefficients of the smoother
  // A's values in fp32 for the cycle's products with A (AmgOptions::mixed_precision, a
  // CSR level of a double hierarchy), else null.
  detail::Block<float> values32;
  // To the next level (empty on the last one).
  std::vector<std::int32_t> aggregate;  // node -> aggregate
  Mat<T> P_tent, P, R;                  // R = Pᵀ, stored for a row-wise restriction

  /// y = alpha A x + beta y as the V-cycle applies A: on values32 when set. The cycle
  /// uses this one operator everywhere on the level, which keeps M⁻¹ symmetric.
  void cycle_spmv(T alpha, std::span<const T> x, T beta, std::span<T> y) const;
};

/// The last level's dense Cholesky factor L (row-major lower triangle, fp64); an unknown
/// whose pivot vanished (a zero row of a degenerate aggregate) has a zero column and is
/// solved as 0. Without a factor (the last level larger than max_coarse: coarsening
/// stalled or max_levels was reached) the last level is smoothed instead.
struct Coarse {
  index_t n = 0;
  std::vector<double> L;
  std::vector<unsigned char> skip;
  bool factored = false;
};

/// Work vectors of one V-cycle per level: b (right-hand side; level 0 reads the
/// caller's r unless z aliases it), x (solution; level 0 writes the caller's z), r
/// (residual), d (Chebyshev direction); the cut of the passes' rows over threads.
template <SolverValue T>
struct Work {
  std::vector<std::vector<T>> b, x, r, d;
  std::vector<double> dense;  // the last level's solution in fp64
  detail::UnitRanges ranges;
};

/// How A was given: update() checks that a new A has this structure (shared with A: a
/// CSR matrix's pattern is a block-size-1 structure).
struct InputShape {
  bool bsr = false;
  std::shared_ptr<const BsrStructure> structure;

  /// Whether `other` is the structure M was built from.
  [[nodiscard]] bool is(const std::shared_ptr<const BsrStructure>& other) const {
    return other == structure || *other == *structure;
  }
};

/// The level-0 operator as the hierarchy stores it (block size g): A itself, viewed, when
/// its storage serves (CSR with g = 1, BSR with block size g), else a re-blocked copy.
/// Checked: finite, positive diagonal. `who` names the caller in messages.
template <SolverValue T> Mat<T> fine_operator(const CsrMatrix<T>& A, index_t g, const char* who);
template <SolverValue T> Mat<T> fine_operator(const BsrMatrix<T>& A, index_t g, const char* who);

/// Builds the hierarchy below levels[0] (whose A and node are set), level by level: the
/// diagonal, λmax and Chebyshev coefficients; then, when `fresh`, strength, aggregation
/// and the tentative prolongator from the near-nullspace B (rows x k, fp64, row-major),
/// stopping at options.max_coarse rows, options.max_levels levels or when coarsening
/// stalls; then the smoothed prolongator and the Galerkin operator of the next level;
/// at the last level the dense factor. Without `fresh` (update), the levels, aggregates
/// and tentative prolongators are kept and B is not read.
template <SolverValue T>
void build(std::vector<Level<T>>& levels, Coarse& coarse, std::vector<double> B, index_t k,
           const AmgOptions<T>& options, bool fresh);

}  // namespace trnsparse::amg
