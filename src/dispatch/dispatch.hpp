// Internal: the only code that names a backend. Each function returns the kernels of the
// active instruction set (runtime.hpp) for the contract of kernels/ (products.hpp, cg.hpp,
// attention.hpp, spgemm.hpp), from tables built once per ISA; where the CPU backend has no kernel of
// its own, the entry is the reference backend's.
#pragma once

#include "kernels/attention.hpp"
#include "kernels/cg.hpp"
#include "kernels/products.hpp"
#include "kernels/spgemm.hpp"

namespace trnsparse::dispatch {

template <class TA, class TY>
const kernels::BsrKernels<TA, TY>& bsr_kernels();
template <class TA, class TY>
const kernels::SymmetricKernels<TA, TY>& symmetric_kernels();
/// A block triangle's symmetric product whose block size has no chunked kernels (not in
/// kSmallBlockSizes): one call on one thread; `work` holds n acc_t<TA> values.
template <class TA, class TY>
using WholeSymmetric = void (*)(const kernels::SymmetricProduct<TA, TY>&, acc_t<TA>* work) noexcept;
template <class TA, class TY>
WholeSymmetric<TA, TY> symmetric_whole();
template <class T>
const kernels::SddmmKernels<T>& sddmm_kernels();
/// For TA = TY = TV, CsrKernels::sddmm is set for every value type (bf16: the
/// reference's); (double, double, float) is the mixed product, without SDDMM.
template <class TA, class TY, class TV = TA>
const kernels::CsrKernels<TA, TY, TV>& csr_kernels();
/// The bias gradient's column sums: the reference's on every ISA (a streaming pass
/// that the compiler vectorises across columns).
template <class T>
kernels::ColumnSums<T> column_sums();
template <class T>
const kernels::CgKernels<T>& cg_kernels();
template <class T>
const kernels::BasisKernels<T>& basis_kernels();
/// fp32 and bf16: the active ISA's (bf16 with AVX512-BF16: the vdpbf16ps kernels);
/// double: the reference kernels on every ISA.
template <class T>
const kernels::AttentionKernels<T>& attention_kernels();
/// (TA, TC) in {(float, float), (double, double), (bf16, float)}.
template <class TA, class TC>
const kernels::SpgemmKernels<TA, TC>& spgemm_kernels();
/// The symbolic phase's short rows: AVX-512's on AVX-512 ISAs, none (a null `columns`)
/// on the others.
const kernels::SpgemmRowColumns& spgemm_row_columns();

}  // namespace trnsparse::dispatch
