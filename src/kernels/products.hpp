// The kernel contract of the products: each problem as plain arrays, and the table of
// kernels a backend provides for it. Every backend (cpu/<isa>/, reference/) implements
// these tables; dispatch/ is the only code that picks one. A packed product runs in two
// phases on T threads:
//   1. pack:    the dense operand B is copied, block row by block row of B, into the
//               backend's panel layout (zero-padded to whole blocks and panels), so the
//               microkernel streams contiguous memory and never reads outside B;
//   2. compute: each thread owns a contiguous range of output block rows (one writer per
//               output tile) and runs the register-blocked microkernel over their
//               stored blocks, accumulating in a per-thread workspace tile.
// Kernels allocate nothing and never throw; the caller owns packed and workspace memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cg.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::detail {
struct SymmetricChunks;  // plan/csr_analysis.hpp
}  // namespace trnsparse::detail

namespace trnsparse::kernels {

/// C = alpha * op(A) * B + beta * C for a block-sparse A, as plain arrays. Output block
/// row i combines the stored blocks q in [ptr[i], ptr[i+1]): block `block(q)` (row-major
/// b x b; read transposed when `trans_a`) times the b rows of B starting at row idx[q] * b.
/// `packs`, when set, flags the block rows of B some stored block reads (idx); pack
/// skips the others, which compute never reads.
/// A linear layer's products (Y = X Wᵀ + bias as Yᵀ = W Xᵀ, dX = dY W as dXᵀ = Wᵀ dYᵀ)
/// hold the dense operands token by token: `b_transposed` reads B's element (i, c) at
/// B[c * ldb + i] and `c_transposed` writes C's element (o, c) at C[c * ldc + o], so no
/// transposed copy is made; `bias`, when set, adds bias[o] to every element of C's row
/// o. The small-block kernels (kSmallBlockSizes) take none of the three: with any of
/// them set, those block sizes run the packed tiling.
template <class TA, class TY>
struct BsrProduct {
  index_t b;              // block size
  index_t out_rows;       // logical rows of C
  index_t in_rows;        // logical rows of B
  index_t in_block_rows;  // ceil(in_rows / b)
  index_t width;          // columns of B and C
  const index_t* ptr;
  const index_t* idx;
  const std::int32_t* idx32;  // nullptr, or idx in 32 bits (read by the small-block kernels)
  const index_t* perm;        // nullptr: identity
  bool trans_a;
  const TA* blocks;
  index_t stored;               // elements at `blocks` (n_blocks * b * b; 0 without)
  const TA* const* block_at;    // nullptr: blocks + (perm ? perm[q] : q) * b * b
  const unsigned char* packs;   // nullptr: every block row of B
  acc_t<TA> alpha;
  acc_t<TA> beta;
  const TA* B;
  index_t ldb;
  TY* C;
  index_t ldc;
  bool b_transposed = false;
  bool c_transposed = false;
  const acc_t<TA>* bias = nullptr;

  /// Whether B, C and the output are plain row-major arrays (no linear-layer layout).
  [[nodiscard]] bool plain() const { return !b_transposed && !c_transposed && !bias; }
  /// Stored block q's block column (block row of B).
  [[nodiscard]] index_t column(index_t q) const { return idx32 ? index_t{idx32[q]} : idx[q]; }
  /// Where stored block q's values lie among `blocks`, in blocks (its position in A's
  /// storage when the view is permuted).
  [[nodiscard]] index_t slot(index_t q) const { return perm ? perm[q] : q; }
  /// Stored block q's values.
  [[nodiscard]] const TA* block(index_t q) const { return block_at ? block_at[q] : blocks + slot(q) * b * b; }
  /// Whether `n` elements from a (a stored block's values, or past them) lie within
  /// `blocks`: then a kernel may read whole vectors beyond a small block's end.
  [[nodiscard]] bool readable(const TA* a, index_t n) const {
    return !block_at && a >= blocks && a - blocks + n <= stored;
  }
};

/// The block sizes with kernels of their own (small_block_tile.inc: each size compiled
/// separately, the natural blocks of finite-element and CFD matrices); the others run
/// the packed tiling. BsrPlan keeps 32-bit block indices for these sizes, which the
/// small-block kernels read.
inline constexpr index_t kSmallBlockSizes[] = {2, 3, 4, 5, 6, 8};
/// Whether b is one of kSmallBlockSizes. Out of line (products.cpp), so that the ISA
/// translation units, each compiled with its own flags, share one copy.
bool small_block_size(index_t b);

template <class TA, class TY>
struct BsrKernels {
  /// Bytes of the packed B (shared by all threads) and of one thread's workspace.
  std::size_t (*packed_bytes)(const BsrProduct<TA, TY>&);
  std::size_t (*workspace_bytes)(const BsrProduct<TA, TY>&);
  /// Packs block rows [r0, r1) of B.
  void (*pack)(const BsrProduct<TA, TY>&, void* packed, index_t r0, index_t r1);
  /// Computes output block rows [r0, r1) from the fully packed B.
  void (*compute)(const BsrProduct<TA, TY>&, const void* packed, void* workspace, index_t r0, index_t r1);
};

/// Sampled dense-dense product on a block structure (SDDMM): for every stored block k
/// at (bi, bj), block_k = alpha * X[rows of bi] * Y[rows of bj]ᵀ + beta * block_k, the
/// gradient of a BSR product with respect to its stored blocks. X: rows x width,
/// Y: cols x width. Y is packed transposed per block column, then each thread computes
/// the blocks of its block rows. `x_transposed` / `y_transposed` read X(r, k) at
/// X[k * ldx + r] / Y(c, k) at Y[k * ldy + c]: a linear layer's weight gradient
/// dW = dYᵀ X reads dY and X (tokens x features) in place that way.
template <class T>
struct BsrSampled {
  index_t b;
  index_t rows;  // logical rows of the structure (= rows of X)
  index_t cols;  // logical cols of the structure (= rows of Y)
  index_t block_cols;
  index_t width;
  const index_t* ptr;
  const index_t* idx;
  acc_t<T> alpha;
  acc_t<T> beta;
  const T* X;
  index_t ldx;
  const T* Y;
  index_t ldy;
  T* blocks;
  bool x_transposed = false;
  bool y_transposed = false;
};

/// out[c] = Σ_r A[r * lda + c] over rows r in order, in acc_t<T>, for columns [c0, c1):
/// a linear layer's bias gradient (the column sums of dY).
template <class T>
using ColumnSums = void (*)(const T* A, index_t rows, index_t lda, acc_t<T>* out, index_t c0, index_t c1) noexcept;

template <class T>
struct SddmmKernels {
  std::size_t (*packed_bytes)(const BsrSampled<T>&);
  std::size_t (*workspace_bytes)(const BsrSampled<T>&);
  /// Packs block columns [c0, c1) of Yᵀ.
  void (*pack)(const BsrSampled<T>&, void* packed, index_t c0, index_t c1);
  /// Computes the blocks of block rows [r0, r1).
  void (*compute)(const BsrSampled<T>&, const void* packed, void* workspace, index_t r0, index_t r1);
  /// The bias gradient beside the weight gradient's SDDMM.
  ColumnSums<T> column_sums;
};

/// CSR product C = alpha * A * B + beta * C, rows [r0, r1) per call; each element summed
/// over the row's entries in storage order (the reference order) in acc_t<TA>: values
/// are TV and B is TA (bf16 widened as they are read), C is TY. No packing. `idx32`, when
/// not null, holds the same column indices in 32 bits, and the products read it instead
/// of `idx` (a quarter less traffic for double values); SDDMM reads `idx`. TV is TA, or
/// float under double operands (the mixed product: fp32 values widened as they are read,
/// a third less traffic again, for an operator whose values fp32 holds well enough, as
/// AMG's V-cycle).
template <class TA, class TY, class TV = TA>
struct CsrProduct {
  index_t width;    // columns of B and C
  index_t in_rows;  // rows of B (A's columns): the kernels read whole vectors within them
  const index_t* ptr;
  const index_t* idx;
  const std::int32_t* idx32;
  const TV* values;
  acc_t<TA> alpha;
  acc_t<TA> beta;
  const TA* B;
  index_t ldb;
  TY* C;
  index_t ldc;
};

template <class TA, class TY, class TV = TA>
struct CsrKernels {
  void (*spmm)(const CsrProduct<TA, TY, TV>&, index_t r0, index_t r1);
  /// vals[p] = alpha * dot(X[row(p)], Y[col(p)]) + beta * vals[p] for entries of rows
  /// [r0, r1). Float and double only (TA = TY = TV); null in the bf16 and mixed tables.
  void (*sddmm)(const CsrProduct<TA, TY, TV>& shape, const TA* X, index_t ldx, const TA* Y, index_t ldy, TA* vals,
                index_t r0, index_t r1);
};

/// y = alpha * S * x + beta * y for the symmetric S whose upper or lower triangle (with
/// the diagonal, rows sorted) is stored, in two phases over a fixed chunking of the rows
/// (detail::SymmetricChunks): `local` for every chunk, then `combine` for every chunk.
/// `idx32`, when not null, holds the column indices in 32 bits and is read instead of
/// `idx`. With b > 1 (one of kSmallBlockSizes) the structure is a BSR block triangle:
/// its rows are block rows, its entries b x b blocks (row-major), and a diagonal block
/// is read in its own `upper` triangle only. See symmetric_tile.inc.
template <class TA, class TY>
struct SymmetricProduct {
  const index_t* ptr;
  const index_t* idx;
  const std::int32_t* idx32;
  const TA* values;
  bool upper;
  acc_t<TA> alpha;
  acc_t<TA> beta;
  const TA* x;
  TY* y;
  acc_t<TA>* out;     // y itself when TY is acc_t<TA>, else an n-element buffer
  acc_t<TA>* window;  // SymmetricChunks::window_total() * b elements
  index_t b;          // elements per row of the structure: 1 (CSR) or the block size
  index_t n;          // rows of S (of x and y); the last block row may be partial
};

/// Accumulators per row of a chunk's span (SymmetricChunks::max_span) that
/// SymmetricKernels::local needs in `buffer`: one for CSR; for a block row, a b²-lane
/// slot in whole vectors (of at most 16 lanes) and its b own sums.
constexpr index_t symmetric_row_lanes(index_t b) { return b == 1 ? 1 : (b * b + 15) / 16 * 16 + b; }

template <class TA, class TY>
struct SymmetricKernels {
  /// Phase 1 for chunk c; `buffer` holds SymmetricChunks::max_span *
  /// symmetric_row_lanes(b) elements, 64-byte aligned. With `dot` (CSR only)
  /// (the chunk's kCgLanes zeroed sums) not null, it may add the x_i * y_i terms of the
  /// rows it completes (an upper triangle's rows that no other chunk's window reaches).
  void (*local)(const SymmetricProduct<TA, TY>&, const detail::SymmetricChunks&, index_t c, acc_t<TA>* buffer,
                double* dot);
  /// Phase 2 for chunk c; with `dot` not null, adds the x_i * y_i terms of its other
  /// rows, row r0 + i to lane i % kCgLanes (CG's pᵀq): each lane sums phase 1's rows in
  /// ascending order, then the combine's in ascending order.
  void (*combine)(const SymmetricProduct<TA, TY>&, const detail::SymmetricChunks&, index_t c, double* dot);
};

}  // namespace trnsparse::kernels
