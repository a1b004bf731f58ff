// Internal: the attention kernels of the active instruction set (runtime.hpp) for fp32 and
// bf16 operands (bf16 on avx512 with AVX512-BF16: the vdpbf16ps kernels); the portable
// reference kernels for double on every instruction set.
#pragma once

#include "kernels/cpu/attention.hpp"

namespace trnsparse::dispatch {

template <class T>
const kernels::cpu::AttentionKernels<T>& attention_kernels();

}  // namespace trnsparse::dispatch
