#include "dispatch/attention.hpp"

#include <type_traits>

#include "kernels/reference/attention.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse::dispatch {

namespace cpu = kernels::cpu;

template <class T>
const cpu::AttentionKernels<T>& attention_kernels() {
  if constexpr (std::is_same_v<T, double>) {  // fp64: the portable reference kernels, any ISA
    static const cpu::AttentionKernels<T> portable = kernels::reference::attention_kernels<T>();
    return portable;
  } else {
    static const cpu::AttentionKernels<T> scalar = cpu::scalar::attention_kernels<T>();
    static const cpu::AttentionKernels<T> avx2 = cpu::avx2::attention_kernels<T>();
    static const cpu::AttentionKernels<T> avx512 = [] {
      if constexpr (std::is_same_v<T, bf16>)
        if (cpu_features().avx512_bf16) return cpu::avx512bf16::attention_kernels_bf16();
      return cpu::avx512::attention_kernels<T>();
    }();
    switch (active_isa()) {
      case Isa::scalar: return scalar;
      case Isa::avx2: return avx2;
      case Isa::avx512: return avx512;
    }
    return scalar;
  }
}

template const cpu::AttentionKernels<float>& attention_kernels<float>();
template const cpu::AttentionKernels<bf16>& attention_kernels<bf16>();
template const cpu::AttentionKernels<double>& attention_kernels<double>();

}  // namespace trnsparse::dispatch
