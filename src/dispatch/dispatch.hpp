// Internal: the kernels of the active instruction set (runtime.hpp), chosen per call
// from tables built once per ISA.
#pragma once

#include "kernels/cpu/kernels.hpp"

namespace trnsparse::dispatch {

template <class TA, class TY>
const kernels::cpu::BsrKernels<TA, TY>& bsr_kernels();
template <class TA, class TY>
const kernels::cpu::SymmetricKernels<TA, TY>& symmetric_kernels();
template <class T>
const kernels::cpu::SddmmKernels<T>& sddmm_kernels();
template <class TA, class TY>
const kernels::cpu::CsrKernels<TA, TY>& csr_kernels();
template <class T>
const kernels::cpu::CgKernels<T>& cg_kernels();

}  // namespace trnsparse::dispatch
