// The kernel contract of the sparse × sparse product (SpGEMM, Gustavson's row-wise
// algorithm): the numeric phase as plain arrays, and the table a backend provides. The
// symbolic phase (which entries C has) is index work only and lives with the plan
// (plan/spgemm_plan.cpp); a kernel fills the values of a structure it is given.
//
// One kernel reaches into the symbolic phase: the columns of a row of few products
// (SpgemmRowColumns), sorted in registers where the ISA has a way without branches.
//
// Both operands are seen as compressed rows: the left one, L, over C's rows and the
// right one, R, over C's columns. A transposed operand is its transposed view (BscView:
// rows of Lᵀ are columns of L) with `perm` mapping a position of the view to the stored
// entry and, for blocks, `trans` reading each b x b block transposed. So one kernel
// computes A·B, Aᵀ·B and A·Bᵀ, and the gradients of A·B sampled on A's or B's pattern.
// Kernels allocate nothing and never throw; the caller owns the workspace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "trnsparse/types.hpp"

namespace trnsparse::kernels {

/// Runs of consecutive columns kept per row (SpgemmOperand::runs).
inline constexpr int kRowRuns = 16;

/// C's columns up to which a CSR `multiply` (A·B) finds C's structure without a plan,
/// and an unsampled CSR product whose R is read entry by entry (no runs) sums each row in
/// a dense accumulator of them whatever its repeated rows (SpgemmKernels::numeric).
inline constexpr index_t kNarrowColumns = 64;

/// One operand as compressed rows of stored entries (b x b blocks, b = 1 for CSR).
template <class T>
struct SpgemmOperand {
  const index_t* ptr;
  const index_t* idx;
  const std::int32_t* idx32;  // nullptr, or idx in 32 bits (read instead of idx)
  const index_t* perm;        // nullptr: entry q's values at vals + q·b², else at vals + perm[q]·b²
  bool trans;                 // blocks read transposed (b > 1)
  const T* vals;
  const double* norms;  // nullptr, or each stored block's Frobenius norm (indexed like vals)
  // nullptr, or repeats[k] = 1 when row k has the same columns as row k - 1 (so its
  // entries follow row k - 1's, one for one): a kernel may read such rows together.
  const std::uint8_t* repeats;
  // nullptr, or each row's runs of consecutive columns: row k's entries, in order, are
  // runs of runs[k·kRowRuns + u] entries for u = 0, 1, ... up to the first zero. A row
  // whose runs do not fit (more than kRowRuns, counting a run of more than 255 as
  // several) has only zeros and is read entry by entry. Only on an operand read by rows
  // (no perm): a run's values are then consecutive, and in an unsampled product so are
  // its columns' positions in C's row, which holds them all, so a kernel may read a run
  // as vectors.
  const std::uint8_t* runs;

  [[nodiscard]] index_t column(index_t q) const { return idx32 ? index_t{idx32[q]} : idx[q]; }
  [[nodiscard]] index_t slot(index_t q) const { return perm ? perm[q] : q; }
};

/// C's values (row-major b x b blocks, in C's storage order) for rows [r0, r1) of
///     C(i, j) = Σ over L's entries (i, k) in storage order, then R's entries (k, j) in
///               storage order, of L(i, k) · R(k, j)
/// accumulated in TC (acc_t of the operands) from zero; a block product sums
/// L(r, t)·R(t, c) over t ascending. Every (i, j) the sum reaches lies in C's row i,
/// unless `sampled`: then C's structure is any pattern (a gradient's), and terms landing
/// outside it are skipped. With norms on both operands, a block product whose bound
/// ‖L_ik‖·‖R_kj‖ is at or below `skip` is left out (the filtered multiply of DBCSR).
template <class TA, class TC>
struct SpgemmProduct {
  index_t b;         // block size, 1 for CSR
  index_t cols;      // (block) columns of C: positions the workspace maps
  index_t products;  // block products of all C's rows (a kernel may choose its loops by it)
  SpgemmOperand<TA> L;
  SpgemmOperand<TA> R;
  const index_t* c_ptr;
  const index_t* c_idx;
  TC* c_vals;
  bool sampled;
  double skip;  // used only with L.norms and R.norms
};

/// The symbolic phase's rows of few block products, where marking columns in memory and
/// reading the marks back (plan/spgemm_plan.cpp) costs a mispredicted branch for about
/// every entry of L's row and every group of C's columns it touches.
struct SpgemmRowColumns {
  /// Rows of at most this many block products (Σ of R's row lengths over L's row).
  index_t max_products;
  /// Writes the distinct columns of R's rows l_idx[q] for q in [q0, q1) to `out` in
  /// ascending order and returns their number; null on an ISA without the kernel. The
  /// rows hold `products` ≤ max_products columns in all (Σ of their lengths), each below
  /// 2^31 - 1; out has room for max_products + 16 (past the columns written it is
  /// scratch).
  index_t (*columns)(const index_t* l_idx, index_t q0, index_t q1, const index_t* r_ptr, const index_t* r_idx,
                     index_t products, index_t* out) noexcept;
};

template <class TA, class TC>
struct SpgemmKernels {
  /// Bytes of one thread's workspace (the column → position map, or a dense accumulator
  /// of C's columns).
  std::size_t (*workspace_bytes)(const SpgemmProduct<TA, TC>&);
  /// Prepares a workspace of workspace_bytes once per call, before any rows run on it.
  void (*prepare)(const SpgemmProduct<TA, TC>&, void* workspace);
  /// Computes the values of C's rows [r0, r1).
  void (*numeric)(const SpgemmProduct<TA, TC>&, void* workspace, index_t r0, index_t r1);
};

}  // namespace trnsparse::kernels
