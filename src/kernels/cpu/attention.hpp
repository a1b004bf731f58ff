// Block-sparse attention as plain arrays, and the table of kernels each instruction set
// provides (attention_tile.inc, instantiated per ISA in <isa>/attention.cpp, for fp32 and
// bf16, plus a bf16 table on vdpbf16ps in avx512bf16/attention.cpp; double operands use
// the reference kernels' table on every ISA).
//
// Work units: the forward and dQ walk unit u = h * block_rows + I (head h, query block
// row I) over the stored blocks of block row I; dK and dV walk u = h * block_cols + J
// over the stored blocks of key block column J (the plan's BSC view). Each unit writes
// only its own output rows: one writer per output tile, any split over threads.
// Kernels allocate nothing and never throw; the caller owns workspace memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "trnsparse/types.hpp"

namespace trnsparse::kernels::cpu {

/// One (batch x heads) tensor: row i of head h at data + h * head_stride + i * ld.
template <class T>
struct HeadOperand {
  T* data;
  index_t ld;
  index_t head_stride;
};

template <class T>
struct AttentionProblem {
  index_t b;           // block size
  index_t queries;     // logical query rows
  index_t keys;        // logical key rows
  index_t block_rows;  // ceil(queries / b)
  index_t block_cols;  // ceil(keys / b)
  index_t dim;         // head dimension
  index_t heads;       // batch * heads
  const index_t* ptr;  // stored blocks by block row (block_rows + 1)
  const index_t* idx;  // their block columns
  const index_t* col_ptr;  // BSC view (backward only): block_cols + 1
  const index_t* row_idx;
  const index_t* perm;
  const index_t* partial;        // per stored block: -1 full, else its mask's position
  const std::uint8_t* masks;     // b * b bytes per partial block, row-major (query, key)
  acc_t<T> scale;                // statistics are acc_t<T>: fp32 (fp32, bf16) or fp64
  HeadOperand<const T> Q, K, V;
  HeadOperand<T> O;              // forward output
  acc_t<T>* lse;                 // forward output (may be null): heads * queries
  HeadOperand<const T> Oin, dO;  // backward inputs
  const acc_t<T>* lse_in;        // backward input
  HeadOperand<T> dQ, dK, dV;     // backward outputs
};

template <class T>
struct AttentionKernels {
  /// Bytes of one thread's workspace.
  std::size_t (*workspace_bytes)(const AttentionProblem<T>&);
  /// O and lse of units [u0, u1) (u = h * block_rows + I).
  void (*forward)(const AttentionProblem<T>&, void* workspace, index_t u0, index_t u1);
  /// dQ of units [u0, u1) (u = h * block_rows + I).
  void (*backward_dq)(const AttentionProblem<T>&, void* workspace, index_t u0, index_t u1);
  /// dK, dV of units [u0, u1) (u = h * block_cols + J).
  void (*backward_dkv)(const AttentionProblem<T>&, void* workspace, index_t u0, index_t u1);
};

#define TRNSPARSE_ATTENTION_TABLES(ns) \
  namespace ns {                       \
  template <class T>                   \
  AttentionKernels<T> attention_kernels(); \
  }
TRNSPARSE_ATTENTION_TABLES(scalar)
TRNSPARSE_ATTENTION_TABLES(avx2)
TRNSPARSE_ATTENTION_TABLES(avx512)
#undef TRNSPARSE_ATTENTION_TABLES

namespace avx512bf16 {
/// bf16 attention with its products on vdpbf16ps; needs AVX512-BF16.
AttentionKernels<bf16> attention_kernels_bf16();
}

}  // namespace trnsparse::kernels::cpu
