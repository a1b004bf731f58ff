#include "dispatch/attention.hpp"

#include "trnsparse/runtime.hpp"

namespace trnsparse::dispatch {

namespace cpu = kernels::cpu;

template <class T>
const cpu::AttentionKernels<T>& attention_kernels() {
  static const cpu::AttentionKernels<T> scalar = cpu::scalar::attention_kernels<T>();
  static const cpu::AttentionKernels<T> avx2 = cpu::avx2::attention_kernels<T>();
  static const cpu::AttentionKernels<T> avx512 = cpu::avx512::attention_kernels<T>();
  switch (active_isa()) {
    case Isa::scalar: return scalar;
    case Isa::avx2: return avx2;
    case Isa::avx512: return avx512;
  }
  return scalar;
}

template const cpu::AttentionKernels<float>& attention_kernels<float>();
template const cpu::AttentionKernels<bf16>& attention_kernels<bf16>();

}  // namespace trnsparse::dispatch
