// AVX-512 attention kernels (compiled with the AVX-512 flags): 8 x 2 registers of 16
// floats per microkernel tile, a degree-6 polynomial 2^x on vectors.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::avx512 {

#include "kernels/cpu/avx512/attention_vec.inc"
#include "kernels/cpu/attention_tile.inc"

template <class T>
AttentionKernels<T> attention_kernels() {
  return attention_detail::table<T, attention_detail::WideProducts>();
}
template AttentionKernels<float> attention_kernels<float>();
template AttentionKernels<bf16> attention_kernels<bf16>();

}  // namespace trnsparse::kernels::cpu::avx512
