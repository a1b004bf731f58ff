// The kernel contract of conjugate gradients' vector passes (solvers/cg.cpp) and of
// GMRES's basis sweeps (solvers/krylov.cpp): the problem as plain arrays and the tables
// of passes a backend provides. The lane layout of the reductions is shared with the
// symmetric products' pᵀq (kernels/products.hpp).
#pragma once

#include "trnsparse/types.hpp"

namespace trnsparse::kernels {

/// Lanes of CG's reductions: row r0 + i of a chunk adds its terms to lane i % kCgLanes
/// (CgKernels, and the pᵀq that SymmetricKernels::combine sums for a stored triangle).
inline constexpr index_t kCgLanes = 8;

/// Conjugate gradients' vector passes over n x k row-major blocks (solvers/cg.cpp; one
/// right-hand side is k = 1). A pass covers rows [r0, r1) of one reduction chunk and adds
/// row r0 + i's terms to lane i % kCgLanes of each reduction: with m reductions, lane l
/// of reduction j sits at lanes[lane_slot(k, j, l, m)]. One column walks kCgLanes rows of
/// one reduction (its lanes contiguous), k columns walk a row's reductions (contiguous
/// by lane). `live[j]` is 0 for a frozen column, which passes with `select` leave alone
/// (update) or zero (direction: p and r); see solvers/cg.cpp.
template <class T>
struct CgBlock {
  index_t k;
  T* x;
  T* r;
  T* p;
  const T* q;
  const T* minv;  // the diagonal preconditioner M⁻¹ (n), or nullptr
  const char* live;
  const T* alpha;  // per column (0 for a frozen one)
  const T* beta;

  static constexpr index_t lane_slot(index_t k, index_t j, index_t l, index_t m) {
    return k == 1 ? j * kCgLanes + l : l * m + j;
  }
};

template <class T>
struct CgKernels {
  /// lanes (m = k): pᵀq per column.
  void (*dot)(const CgBlock<T>&, index_t r0, index_t r1, double* lanes);
  /// x += α p, r -= α q; lanes (m = 2k): rᵀr per column, then rᵀz (z = M⁻¹ r).
  void (*update)(const CgBlock<T>&, bool select, index_t r0, index_t r1, double* lanes);
  /// p = M⁻¹ r + β p.
  void (*direction)(const CgBlock<T>&, bool select, index_t r0, index_t r1);
};

/// GMRES's sweeps over its Krylov basis (solvers/krylov.cpp): k vectors of one solve,
/// vector q at V + q ld, over rows [r0, r1) of one reduction chunk. Reductions sit as a
/// one-column CgBlock's do (reduction j's lane l at lanes[j kCgLanes + l]), and each
/// element's updates run in the order of q, so the results do not depend on the ISA.
template <class T>
struct BasisKernels {
  /// Reductions 2q and 2q + 1 (q < k): v_qᵀa and v_qᵀb; then 2k and 2k + 1: aᵀa and aᵀb.
  void (*dots)(const T* V, index_t ld, index_t k, const T* a, const T* b, index_t r0, index_t r1, double* lanes);
  /// a = (a - V s) scale; then, when b is not null, b = (b - V f) scale - last a.
  void (*update)(const T* V, index_t ld, index_t k, const T* s, const T* f, T scale, T last, T* a, T* b, index_t r0,
                 index_t r1);
  /// out = V y.
  void (*combine)(const T* V, index_t ld, index_t k, const T* y, T* out, index_t r0, index_t r1);
};

}  // namespace trnsparse::kernels
