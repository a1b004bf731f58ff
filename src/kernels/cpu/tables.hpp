// The CPU backend's kernel tables: one set per instruction set, each compiled in its own
// translation unit with its own flags (scalar/, avx2/, avx512/, avx512bf16/), implementing
// the contract of kernels/products.hpp, kernels/cg.hpp, kernels/attention.hpp and
// kernels/spgemm.hpp. Only dispatch/ names them.
//   products, for (TA, TY) in {(float, float), (double, double), (bf16, float), (bf16, bf16)}, and
//   the CSR product with fp32 values under double operands;
//   BSR SDDMM for T in {float, double, bf16}; CSR SDDMM (CsrKernels::sddmm), CG passes and
//   GMRES's basis sweeps for T in {float, double}; attention for T in {float, bf16}; SpGEMM for (TA, TC) in
//   {(float, float), (double, double), (bf16, float)}.
#pragma once

#include "kernels/attention.hpp"
#include "kernels/cg.hpp"
#include "kernels/products.hpp"
#include "kernels/spgemm.hpp"

namespace trnsparse::kernels::cpu {

#define TRNSPARSE_ISA_TABLES(ns)                                              \
  namespace ns {                                                                      \
  template <class TA, class TY> BsrKernels<TA, TY> bsr_kernels();                     \
  template <class TA, class TY> SymmetricKernels<TA, TY> symmetric_kernels();         \
  template <class T> SddmmKernels<T> sddmm_kernels();                                 \
  template <class TA, class TY, class TV = TA> CsrKernels<TA, TY, TV> csr_kernels();  \
  template <class T> CgKernels<T> cg_kernels();                                       \
  template <class T> BasisKernels<T> basis_kernels();                                 \
  template <class T> AttentionKernels<T> attention_kernels();                         \
  template <class TA, class TC> SpgemmKernels<TA, TC> spgemm_kernels();               \
  }
TRNSPARSE_ISA_TABLES(scalar)
TRNSPARSE_ISA_TABLES(avx2)
TRNSPARSE_ISA_TABLES(avx512)
#undef TRNSPARSE_ISA_TABLES

/// The symbolic phase's rows of few products, sorted in registers (the other ISAs have
/// none: the plan marks their columns).
namespace avx512 {
SpgemmRowColumns spgemm_row_columns();
}

/// bf16 operands only, on vdpbf16ps; needs AVX512-BF16 (and for bsr_kernels_amx, AMX).
namespace avx512bf16 {
/// Pair products (an even block size; otherwise the avx512 widening kernel runs).
template <class TY> BsrKernels<bf16, TY> bsr_kernels_bf16();
/// The same with a linear layer's forward and input gradient (blocks of a multiple of
/// 16) on AMX tiles (TDPBF16PS); needs AMX-TILE and AMX-BF16 (CpuFeatures::amx).
template <class TY> BsrKernels<bf16, TY> bsr_kernels_amx();
/// SDDMM with K in pairs.
SddmmKernels<bf16> sddmm_kernels_bf16();
/// The same with a linear layer's dW (blocks of a multiple of 16) on AMX tiles.
SddmmKernels<bf16> sddmm_kernels_amx();
/// Symmetric products with pair kernels for block triangles (CSR triangles run
/// symmetric_tile.inc's loop).
template <class TY> SymmetricKernels<bf16, TY> symmetric_kernels_bf16();
AttentionKernels<bf16> attention_kernels_bf16();
}  // namespace avx512bf16

}  // namespace trnsparse::kernels::cpu
