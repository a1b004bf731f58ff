/// @file integrals.hpp
/// Integrals over a Gaussian basis (computed by libint2) and the Schwarz-screened
/// electron-repulsion supermatrices from which Coulomb (J) and exchange (K) matrices are
/// built with trnsparse block-sparse products.
///
/// Pair index. Shells are ranked along the molecule's longest principal axis
/// (`spatial_shell_order`), so near shells have near ranks. A pair index numbers the
/// shell pairs (i, j) of ranks i ≥ j and, inside each, its basis-function pairs (p, q),
/// p in shell i, q in shell j (p major; a diagonal pair (i, i) holds all its ordered
/// function pairs). It has ≈ nbf²/2 entries; a shell quartet is one rectangle of a
/// supermatrix over (pair, pair), so a screened-out quartet is a zero rectangle. Below,
/// "R > S" compares ranks.
///
/// Supermatrices. For a symmetric density D, with w_RS = 2 for R > S and 1 for R = S:
///     J_pq = Σ_(rs) Jsup[(pq), (rs)] · w_RS D_rs,   Jsup[(pq), (rs)] = (pq|rs)
///     K_pq = Σ_(rs) Ksup[(pq), (rs)] · D_rs,        Ksup[(pq), (rs)] = (pr|qs) + [R > S] (ps|qr)
/// (J and K are symmetric, so the pairs' rows give them whole). Both are
/// `BsrMatrix<double>` with one uniform block size: a block is stored iff a computed
/// quartet writes into it, and J, K cost one `spmv` each. Each has the pair order that
/// gathers its non-zeros into few blocks. Jsup[(pq), (rs)] is kept iff Q_PQ · Q_RS >
/// threshold, so its pairs are sorted by decreasing Q: every row keeps a prefix of the
/// columns, the kept region is one staircase. Ksup[(pq), (rs)] needs p near r and q near
/// s, so its pairs go in rank order (`rank_pairs`): a Kronecker-like pattern, banded
/// blocks in a banded block grid. (Tiling the pair triangle into a few consecutive ranks
/// per tile, Morton-like, stored under 2% fewer Ksup blocks on decane.)
///
/// Screening. Q_PQ = √max_(pq in PQ) |(pq|pq)| (trnsparse `schwarz_bounds` of the shell-pair
/// diagonal); the quartet (PQ|RS) is computed iff Q_PQ · Q_RS > threshold
/// (`screen_quartets`), once per 8-fold permutation class, and scattered into every
/// supermatrix entry it is. libint2's own primitive screening is off (its estimates are
/// not bounds), so the threshold is the only screening and threshold 0 computes every
/// quartet (the unscreened reference).
///
///     auto eri = trnsparse::hf::build_eri(basis, {.threshold = 1e-10, .block_size = 32});
///     eri.coulomb_exchange(D, J, K);   // D, J, K: nbf x nbf
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "basis.hpp"
#include "molecule.hpp"
#include "trnsparse/bsr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse::hf {

/// Overlap, kinetic and nuclear-attraction matrices (nbf x nbf).
struct OneElectron {
  Dense<double> S;
  Dense<double> T;
  Dense<double> V;
};
/// @throw NotSupported for angular momenta beyond this libint2 build.
OneElectron one_electron_integrals(const Basis& basis, const Molecule& molecule);

/// Shell ranks along the largest principal axis of the shell centres (ties by shell
/// number): `order[r]` is the shell of rank r.
std::vector<index_t> spatial_shell_order(const Basis& basis);

/// A shell pair by the ranks (i, j), i ≥ j, of its shells.
using ShellPair = std::pair<index_t, index_t>;

/// Every shell pair of `n_shells` shells in rank order: by i, then j.
std::vector<ShellPair> rank_pairs(index_t n_shells);

/// A pair index described above.
class PairLayout {
public:
  /// `pairs` lists every shell pair once, in pair-index order.
  /// @throw InvalidArgument unless `shell_order` is a permutation of the basis's shells and
  /// `pairs` lists each pair (i, j), i ≥ j, exactly once.
  PairLayout(const Basis& basis, std::vector<index_t> shell_order, const std::vector<ShellPair>& pairs);
  [[nodiscard]] index_t nbf() const noexcept { return nbf_; }
  [[nodiscard]] index_t n_shells() const noexcept { return static_cast<index_t>(shell_.size()); }
  /// The basis shell of rank r, its first function and its size.
  [[nodiscard]] index_t shell(index_t r) const noexcept { return shell_[static_cast<std::size_t>(r)]; }
  [[nodiscard]] index_t first(index_t r) const noexcept { return first_[static_cast<std::size_t>(r)]; }
  [[nodiscard]] index_t size(index_t r) const noexcept { return size_[static_cast<std::size_t>(r)]; }
  /// The number of the shell pair of ranks i ≥ j.
  [[nodiscard]] index_t pair(index_t i, index_t j) const noexcept {
    return id_[static_cast<std::size_t>(i * n_shells() + j)];
  }
  [[nodiscard]] index_t n_pairs() const noexcept { return static_cast<index_t>(ranks_.size()); }
  /// The ranks (i, j), i ≥ j, of shell pair `pq`.
  [[nodiscard]] ShellPair ranks(index_t pq) const noexcept {
    return ranks_[static_cast<std::size_t>(pq)];
  }
  /// First pair index of shell pair `pq`; `offset(n_pairs())` = dim().
  [[nodiscard]] index_t offset(index_t pq) const noexcept { return offset_[static_cast<std::size_t>(pq)]; }
  /// Function pairs: the order of the supermatrices.
  [[nodiscard]] index_t dim() const noexcept { return offset_.back(); }
  /// D (nbf x nbf) gathered into pair order: x[(pq)] = w · D_pq, w = `off_diagonal_weight`
  /// for pairs of two shells and 1 for pairs of one shell.
  void gather(DenseView<const double> D, double off_diagonal_weight, std::span<double> x) const;
  /// The symmetric nbf x nbf matrix whose entries (p, q) and (q, p) are y[(pq)].
  void scatter(std::span<const double> y, DenseView<double> M) const;

private:
  index_t nbf_;
  std::vector<index_t> shell_;  // by rank
  std::vector<index_t> first_;  // by rank
  std::vector<index_t> size_;   // by rank
  std::vector<index_t> id_;     // pair number of ranks (i, j), i >= j, at i * n_shells + j
  std::vector<ShellPair> ranks_;
  std::vector<index_t> offset_;
};

struct EriOptions {
  double threshold = 1e-10;  ///< on the Schwarz product Q_PQ · Q_RS; 0 computes every quartet
  index_t block_size = 32;   ///< BSR block size of both supermatrices, a power of two
};

/// What screening kept and what it cost.
struct EriStats {
  index_t shell_pairs = 0;
  index_t quartets = 0;               ///< unique shell quartets (8-fold symmetry)
  index_t quartets_computed = 0;      ///< of them, those above the threshold
  /// Shell-pair products Q_PQ · Q_RS above the threshold over all (PQ, RS):
  /// `sparsity_stats(screen_quartets(Q, threshold)).density`.
  double kept_quartet_fraction = 0.0;
  index_t blocks = 0;                 ///< blocks of one supermatrix's grid
  index_t coulomb_blocks = 0;         ///< stored in Jsup
  index_t exchange_blocks = 0;        ///< stored in Ksup
  double kept_block_fraction = 0.0;   ///< (coulomb_blocks + exchange_blocks) / (2 blocks)
  double schwarz_seconds = 0.0;       ///< the (PQ|PQ) diagonal
  double structure_seconds = 0.0;     ///< screen_quartets and the two block patterns
  double eri_seconds = 0.0;           ///< the computed quartets, scattered into the supermatrices
};

/// The two supermatrices of a basis.
class EriSupermatrices {
public:
  /// @throw DimensionMismatch when a supermatrix does not match its layout.
  EriSupermatrices(PairLayout coulomb_layout, BsrMatrix<double> coulomb, PairLayout exchange_layout,
                   BsrMatrix<double> exchange, EriStats stats);
  [[nodiscard]] index_t nbf() const noexcept { return coulomb_layout_.nbf(); }
  [[nodiscard]] const PairLayout& coulomb_layout() const noexcept { return coulomb_layout_; }
  [[nodiscard]] const PairLayout& exchange_layout() const noexcept { return exchange_layout_; }
  [[nodiscard]] const BsrMatrix<double>& coulomb() const noexcept { return coulomb_; }
  [[nodiscard]] const BsrMatrix<double>& exchange() const noexcept { return exchange_; }
  [[nodiscard]] const EriStats& stats() const noexcept { return stats_; }
  /// J[D] and K[D] for a symmetric D: two `trnsparse::spmv` over the pair index. Uses
  /// workspaces of the object: one call at a time per object.
  /// @throw DimensionMismatch unless D, J and K are nbf x nbf.
  void coulomb_exchange(DenseView<const double> D, DenseView<double> J, DenseView<double> K) const;

private:
  PairLayout coulomb_layout_;
  PairLayout exchange_layout_;
  BsrMatrix<double> coulomb_;
  BsrMatrix<double> exchange_;
  EriStats stats_;
  mutable std::vector<double> x_;  // workspaces of coulomb_exchange
  mutable std::vector<double> y_;
};

/// Every ERI as a dense nbf² x nbf² matrix, entry (p·nbf + q, r·nbf + s) = (pq|rs), each
/// shell quartet computed on its own (no symmetry, no screening): the reference the
/// supermatrices are tested against. O(nbf⁴) memory, for small bases only.
/// @throw NotSupported as build_eri.
Dense<double> eri_reference(const Basis& basis);

/// Computes the Schwarz diagonal, screens, and fills both supermatrices.
/// @throw InvalidArgument for a negative threshold or a block size that is not a power of
/// two in [1, 1024]; NotSupported for angular momenta beyond this libint2 build.
EriSupermatrices build_eri(const Basis& basis, const EriOptions& options);

}  // namespace trnsparse::hf
