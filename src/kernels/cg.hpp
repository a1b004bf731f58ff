// The kernel contract of conjugate gradients' vector passes (solvers/cg.cpp): the
// problem as plain arrays and the table of passes a backend provides. The lane layout of
// the reductions is shared with the symmetric products' pᵀq (kernels/products.hpp).
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

}  // namespace trnsparse::kernels
