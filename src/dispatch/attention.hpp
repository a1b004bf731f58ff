// Internal: the attention kernels of the active instruction set (runtime.hpp) for fp32 and
// bf16 operands; the portable reference kernels for double on every instruction set.
#pragma once

#include "kernels/cpu/attention.hpp"

namespace trnsparse::dispatch {

template <class T>
const kernels::cpu::AttentionKernels<T>& attention_kernels();

}  // namespace trnsparse::dispatch
