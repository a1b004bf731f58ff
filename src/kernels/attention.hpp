// The kernel contract of block-sparse attention: the problem as plain arrays, and the
// table of kernels a backend provides (cpu/: attention_tile.inc per ISA for fp32 and
// bf16, and a bf16 table on vdpbf16ps; reference/: every type, and the one dispatch
// picks for double operands).
//
// Work units: the forward and dQ walk unit u = s * block_rows + I (query slice
// s = z * heads + h, query block row I) over the stored blocks of the mask slice of (z, h)
// in block row I; dK and dV walk u = g * block_cols + J (key slice g = z * kv_heads + k)
// over block column J of the mask slice of every query head of k's group, in head order
// (the plan's BSC view). Each unit writes only its own output rows: one writer per
// output tile, any split over threads. Slice addressing is in attention_slices.inc.
// Kernels allocate nothing and never throw; the caller owns workspace memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "trnsparse/types.hpp"

namespace trnsparse::kernels {

/// One (batch, heads, rows, cols) tensor: row i of slice (z, h) at
/// data + z * batch_stride + h * head_stride + i * ld.
template <class T>
struct HeadOperand {
  T* data;
  index_t ld;
  index_t batch_stride;
  index_t head_stride;
};

template <class T>
struct AttentionProblem {
  index_t b;           // block size
  index_t queries;     // logical query rows of a slice
  index_t keys;        // logical key rows of a slice
  index_t block_rows;  // ceil(queries / b)
  index_t block_cols;  // ceil(keys / b)
  index_t dim;         // head dimension
  index_t batch;       // batch elements
  index_t heads;       // query heads
  index_t kv_group;    // query heads per key/value head (GQA; 1 without)
  index_t mask_batch;  // the mask's slices: 1 (shared) or batch
  index_t mask_heads;  //                    1 (shared) or heads
  const index_t* ptr;  // stored blocks by stacked block row (mask slices * block_rows + 1)
  const index_t* idx;  // their stacked block columns (mask slice * block_cols + J)
  const index_t* col_ptr;  // BSC view of the stacked structure (backward only)
  const index_t* row_idx;
  const index_t* perm;
  const index_t* partial;        // per stored block: -1 full, else its mask's position
  const std::uint8_t* masks;     // b * b bytes per partial block, row-major (query, key)
  acc_t<T> scale;                // statistics are acc_t<T>: fp32 (fp32, bf16) or fp64
  const acc_t<T>* alibi;         // per query head: s += alibi[h] (j - i); null: none
  acc_t<T> softcap;              // s = softcap tanh(s / softcap) after ALiBi; 0: none
  HeadOperand<const T> Q, K, V;  // K and V have heads / kv_group heads
  HeadOperand<T> O;              // forward output
  acc_t<T>* lse;                 // forward output (may be null): (batch * heads) * queries
  HeadOperand<const T> Oin, dO;  // backward inputs
  const acc_t<T>* lse_in;        // backward input
  HeadOperand<T> dQ, dK, dV;     // backward outputs
};

template <class T>
struct AttentionKernels {
  /// Bytes of one thread's workspace.
  std::size_t (*workspace_bytes)(const AttentionProblem<T>&);
  /// O and lse of units [u0, u1) (u = (z * heads + h) * block_rows + I).
  void (*forward)(const AttentionProblem<T>&, void* workspace, index_t u0, index_t u1);
  /// dQ of units [u0, u1) (u = (z * heads + h) * block_rows + I).
  void (*backward_dq)(const AttentionProblem<T>&, void* workspace, index_t u0, index_t u1);
  /// dK, dV of units [u0, u1) (u = (z * kv_heads + k) * block_cols + J).
  void (*backward_dkv)(const AttentionProblem<T>&, void* workspace, index_t u0, index_t u1);
};

}  // namespace trnsparse::kernels
