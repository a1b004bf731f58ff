// Reference (scalar) attention kernels: the executable specification the CPU kernels
// are tested against. Per head, per query row i, over the allowed keys j of the row's
// stored blocks (block order, then key order), all in fp32:
//   s_ij = scale * (q_i · k_j)
//   forward:  online softmax  m = max s, l = Σ exp(s - m), o_i = Σ exp(s - m) v_j / l,
//             lse_i = m + log l    (no allowed key: o_i = 0, lse_i = 0)
//   backward: p_ij = exp(s_ij - lse_i), D_i = dO_i · O_i, ds_ij = p_ij (dO_i · v_j - D_i),
//             dq_i += scale ds_ij k_j,  dk_j += scale ds_ij q_i,  dv_j += p_ij dO_i
// Kernels receive validated, non-aliasing arguments; they allocate nothing, never throw.
#pragma once

#include "kernels/cpu/attention.hpp"

namespace trnsparse::kernels::reference {

/// O and (if p.lse) lse for every head. `work` holds dim floats.
template <class T>
void attention_forward(const cpu::AttentionProblem<T>& p, float* work) noexcept;

/// dQ, dK, dV for every head. `work` holds (queries + 2 * keys) * dim floats.
template <class T>
void attention_backward(const cpu::AttentionProblem<T>& p, float* work) noexcept;

}  // namespace trnsparse::kernels::reference
