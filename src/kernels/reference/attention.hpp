// Reference (scalar) attention kernels: the executable specification the CPU kernels
// are tested against, and the kernels of double operands on every instruction set. Per
// (batch, head) slice, per query row i, over the allowed keys j of the row's stored blocks
// of the slice's mask (block order, then key order), all in acc_t<T> (fp32 for fp32 and
// bf16 operands, fp64 for double), with k_j and v_j of the key/value head h / kv_group:
//   x_ij = scale * (q_i · k_j) (+ alibi[h] (j - i)),  s_ij = x_ij, or with soft-capping
//   s_ij = softcap tanh(x_ij / softcap), and s'_ij = ds_ij / dx_ij (1, or 1 - tanh²)
//   forward:  online softmax  m = max s, l = Σ exp(s - m), o_i = Σ exp(s - m) v_j / l,
//             lse_i = m + log l    (no allowed key: o_i = 0, lse_i = 0)
//   backward: p_ij = exp(s_ij - lse_i), D_i = dO_i · O_i, ds_ij = p_ij (dO_i · v_j - D_i) s'_ij,
//             dq_i += scale ds_ij k_j,  dk_j += scale ds_ij q_i,  dv_j += p_ij dO_i
// They walk the same work units as the CPU kernels (kernels/cpu/attention.hpp): the
// forward and dQ by (slice, block row), dK and dV by (key slice, block column) over the
// BSC view, summing dk_j and dv_j over the group's query heads, then query rows, in
// ascending order. One writer per output
// row and a fixed order: results do not depend on how units are split over threads.
// Kernels receive validated, non-aliasing arguments; they allocate nothing, never throw.
#pragma once

#include "kernels/attention.hpp"

namespace trnsparse::kernels::reference {

/// The reference kernels as a table (T = float, bf16 or double); the workspace holds
/// 2 * b * dim values of acc_t<T>.
template <class T>
AttentionKernels<T> attention_kernels();

}  // namespace trnsparse::kernels::reference
