// Internal: the attention kernels of the active instruction set (runtime.hpp).
#pragma once

#include "kernels/cpu/attention.hpp"

namespace trnsparse::dispatch {

template <class T>
const kernels::cpu::AttentionKernels<T>& attention_kernels();

}  // namespace trnsparse::dispatch
