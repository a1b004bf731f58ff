#include "dispatch/dispatch.hpp"

#include <algorithm>
#include <type_traits>

#include "trnsparse/runtime.hpp"

namespace trnsparse::kernels::cpu {

bool small_block_size(index_t b) { return std::ranges::find(kSmallBlockSizes, b) != std::end(kSmallBlockSizes); }

}  // namespace trnsparse::kernels::cpu

namespace trnsparse::dispatch {

namespace cpu = kernels::cpu;

namespace {

/// The entry of a per-ISA table for the active ISA.
template <class Table>
const Table& pick(const Table& scalar, const Table& avx2, const Table& avx512) {
  switch (active_isa()) {
    case Isa::scalar: return scalar;
    case Isa::avx2: return avx2;
    case Isa::avx512: return avx512;
  }
  return scalar;
}

/// The active ISA's entry of a table that every ISA builds the same way, each built once.
template <class Table, Table (*Scalar)(), Table (*Avx2)(), Table (*Avx512)()>
const Table& per_isa() {
  static const Table scalar = Scalar(), avx2 = Avx2(), avx512 = Avx512();
  return pick(scalar, avx2, avx512);
}

}  // namespace

template <class TA, class TY>
const cpu::BsrKernels<TA, TY>& bsr_kernels() {
  static const cpu::BsrKernels<TA, TY> scalar = cpu::scalar::bsr_kernels<TA, TY>();
  static const cpu::BsrKernels<TA, TY> avx2 = cpu::avx2::bsr_kernels<TA, TY>();
  static const cpu::BsrKernels<TA, TY> avx512 = [] {
    if constexpr (std::is_same_v<TA, bf16>)
      if (cpu_features().avx512_bf16) return cpu::avx512bf16::bsr_kernels_bf16<TY>();
    return cpu::avx512::bsr_kernels<TA, TY>();
  }();
  return pick(scalar, avx2, avx512);
}

template <class TA, class TY>
const cpu::SymmetricKernels<TA, TY>& symmetric_kernels() {
  return per_isa<cpu::SymmetricKernels<TA, TY>, &cpu::scalar::symmetric_kernels<TA, TY>,
                 &cpu::avx2::symmetric_kernels<TA, TY>, &cpu::avx512::symmetric_kernels<TA, TY>>();
}

template <class T>
const cpu::SddmmKernels<T>& sddmm_kernels() {
  return per_isa<cpu::SddmmKernels<T>, &cpu::scalar::sddmm_kernels<T>, &cpu::avx2::sddmm_kernels<T>,
                 &cpu::avx512::sddmm_kernels<T>>();
}

template <class TA, class TY>
const cpu::CsrKernels<TA, TY>& csr_kernels() {
  return per_isa<cpu::CsrKernels<TA, TY>, &cpu::scalar::csr_kernels<TA, TY>, &cpu::avx2::csr_kernels<TA, TY>,
                 &cpu::avx512::csr_kernels<TA, TY>>();
}

template <class T>
const cpu::CgKernels<T>& cg_kernels() {
  return per_isa<cpu::CgKernels<T>, &cpu::scalar::cg_kernels<T>, &cpu::avx2::cg_kernels<T>,
                 &cpu::avx512::cg_kernels<T>>();
}

template const cpu::BsrKernels<float, float>& bsr_kernels<float, float>();
template const cpu::BsrKernels<double, double>& bsr_kernels<double, double>();
template const cpu::BsrKernels<bf16, float>& bsr_kernels<bf16, float>();
template const cpu::BsrKernels<bf16, bf16>& bsr_kernels<bf16, bf16>();
template const cpu::SymmetricKernels<float, float>& symmetric_kernels<float, float>();
template const cpu::SymmetricKernels<double, double>& symmetric_kernels<double, double>();
template const cpu::SymmetricKernels<bf16, float>& symmetric_kernels<bf16, float>();
template const cpu::SymmetricKernels<bf16, bf16>& symmetric_kernels<bf16, bf16>();
template const cpu::SddmmKernels<float>& sddmm_kernels<float>();
template const cpu::SddmmKernels<double>& sddmm_kernels<double>();
template const cpu::SddmmKernels<bf16>& sddmm_kernels<bf16>();
template const cpu::CsrKernels<float, float>& csr_kernels<float, float>();
template const cpu::CsrKernels<double, double>& csr_kernels<double, double>();
template const cpu::CsrKernels<bf16, float>& csr_kernels<bf16, float>();
template const cpu::CsrKernels<bf16, bf16>& csr_kernels<bf16, bf16>();
template const cpu::CgKernels<float>& cg_kernels<float>();
template const cpu::CgKernels<double>& cg_kernels<double>();

}  // namespace trnsparse::dispatch
