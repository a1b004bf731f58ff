#include "dispatch/dispatch.hpp"

#include <type_traits>

#include "kernels/cpu/tables.hpp"
#include "kernels/reference/attention.hpp"
#include "kernels/reference/products.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse::dispatch {

namespace cpu = kernels::cpu;
namespace reference = kernels::reference;

namespace {

/// The entry of a per-ISA table for the active ISA (`avx512_bf16`: bf16 tables on
/// vdpbf16ps, the same as `avx512` for other operand types; `amx`: the bf16 BSR table on
/// AMX tiles, the same as `avx512_bf16` for the others).
template <class Table>
const Table& pick(const Table& scalar, const Table& avx2, const Table& avx512, const Table& avx512_bf16,
                  const Table& amx) {
  switch (active_isa()) {
    case Isa::scalar: return scalar;
    case Isa::avx2: return avx2;
    case Isa::avx512: return avx512;
    case Isa::avx512_bf16: return avx512_bf16;
    case Isa::amx: return amx;
  }
  return scalar;
}

/// The active ISA's entry of a table that every ISA builds the same way, each built once
/// (the vdpbf16ps and AMX ones only where the CPU has the instructions).
template <class Table, Table (*Scalar)(), Table (*Avx2)(), Table (*Avx512)(), Table (*Avx512Bf16)() = Avx512,
          Table (*Amx)() = Avx512Bf16>
const Table& per_isa() {
  static const Table scalar = Scalar(), avx2 = Avx2(), avx512 = Avx512();
  static const Table avx512_bf16 = cpu_features().avx512_bf16 ? Avx512Bf16() : avx512;
  static const Table amx = cpu_features().amx ? Amx() : avx512_bf16;
  return pick(scalar, avx2, avx512, avx512_bf16, amx);
}

/// A CSR table whose missing SDDMM (bf16) is the reference's.
template <class TA, class TY, class TV, kernels::CsrKernels<TA, TY, TV> (*Isa)()>
kernels::CsrKernels<TA, TY, TV> csr_table() {
  kernels::CsrKernels<TA, TY, TV> t = Isa();
  if constexpr (std::is_same_v<TA, TY> && std::is_same_v<TA, TV>)
    if (!t.sddmm) t.sddmm = &reference::csr_sddmm_rows<TA>;
  return t;
}

/// The AVX512-BF16 BSR table: bf16 operands on vdpbf16ps, others as AVX-512's.
template <class TA, class TY>
kernels::BsrKernels<TA, TY> avx512bf16_bsr() {
  if constexpr (std::is_same_v<TA, bf16>) return cpu::avx512bf16::bsr_kernels_bf16<TY>();
  else return cpu::avx512::bsr_kernels<TA, TY>();
}

/// The AMX BSR table: bf16 operands on AMX tiles (a linear layer's forward and input
/// gradient) and vdpbf16ps, others as AVX-512's.
template <class TA, class TY>
kernels::BsrKernels<TA, TY> amx_bsr() {
  if constexpr (std::is_same_v<TA, bf16>) return cpu::avx512bf16::bsr_kernels_amx<TY>();
  else return cpu::avx512::bsr_kernels<TA, TY>();
}

/// The AVX512-BF16 symmetric table, likewise.
template <class TA, class TY>
kernels::SymmetricKernels<TA, TY> avx512bf16_symmetric() {
  if constexpr (std::is_same_v<TA, bf16>) return cpu::avx512bf16::symmetric_kernels_bf16<TY>();
  else return cpu::avx512::symmetric_kernels<TA, TY>();
}

/// The AVX512-BF16 SDDMM table, likewise.
template <class T>
kernels::SddmmKernels<T> avx512bf16_sddmm() {
  if constexpr (std::is_same_v<T, bf16>) return cpu::avx512bf16::sddmm_kernels_bf16();
  else return cpu::avx512::sddmm_kernels<T>();
}

/// The AMX SDDMM table, likewise.
template <class T>
kernels::SddmmKernels<T> amx_sddmm() {
  if constexpr (std::is_same_v<T, bf16>) return cpu::avx512bf16::sddmm_kernels_amx();
  else return cpu::avx512::sddmm_kernels<T>();
}

}  // namespace

template <class TA, class TY>
const kernels::BsrKernels<TA, TY>& bsr_kernels() {
  return per_isa<kernels::BsrKernels<TA, TY>, &cpu::scalar::bsr_kernels<TA, TY>, &cpu::avx2::bsr_kernels<TA, TY>,
                 &cpu::avx512::bsr_kernels<TA, TY>, &avx512bf16_bsr<TA, TY>, &amx_bsr<TA, TY>>();
}

template <class TA, class TY>
const kernels::SymmetricKernels<TA, TY>& symmetric_kernels() {
  return per_isa<kernels::SymmetricKernels<TA, TY>, &cpu::scalar::symmetric_kernels<TA, TY>,
                 &cpu::avx2::symmetric_kernels<TA, TY>, &cpu::avx512::symmetric_kernels<TA, TY>,
                 &avx512bf16_symmetric<TA, TY>>();
}

template <class TA, class TY>
WholeSymmetric<TA, TY> symmetric_whole() {
  return &reference::symmetric_whole<TA, TY>;
}

template <class T>
const kernels::SddmmKernels<T>& sddmm_kernels() {
  return per_isa<kernels::SddmmKernels<T>, &cpu::scalar::sddmm_kernels<T>, &cpu::avx2::sddmm_kernels<T>,
                 &cpu::avx512::sddmm_kernels<T>, &avx512bf16_sddmm<T>, &amx_sddmm<T>>();
}

template <class TA, class TY, class TV>
const kernels::CsrKernels<TA, TY, TV>& csr_kernels() {
  return per_isa<kernels::CsrKernels<TA, TY, TV>, &csr_table<TA, TY, TV, &cpu::scalar::csr_kernels<TA, TY, TV>>,
                 &csr_table<TA, TY, TV, &cpu::avx2::csr_kernels<TA, TY, TV>>,
                 &csr_table<TA, TY, TV, &cpu::avx512::csr_kernels<TA, TY, TV>>>();
}

template <class T>
kernels::ColumnSums<T> column_sums() {
  return sddmm_kernels<T>().column_sums;
}

template <class T>
const kernels::CgKernels<T>& cg_kernels() {
  return per_isa<kernels::CgKernels<T>, &cpu::scalar::cg_kernels<T>, &cpu::avx2::cg_kernels<T>,
                 &cpu::avx512::cg_kernels<T>>();
}

template <class T>
const kernels::BasisKernels<T>& basis_kernels() {
  return per_isa<kernels::BasisKernels<T>, &cpu::scalar::basis_kernels<T>, &cpu::avx2::basis_kernels<T>,
                 &cpu::avx512::basis_kernels<T>>();
}

template <class T>
const kernels::AttentionKernels<T>& attention_kernels() {
  if constexpr (std::is_same_v<T, double>) {
    static const kernels::AttentionKernels<T> portable = reference::attention_kernels<T>();
    return portable;
  } else {
    static const kernels::AttentionKernels<T> scalar = cpu::scalar::attention_kernels<T>();
    static const kernels::AttentionKernels<T> avx2 = cpu::avx2::attention_kernels<T>();
    static const kernels::AttentionKernels<T> avx512 = cpu::avx512::attention_kernels<T>();
    static const kernels::AttentionKernels<T> avx512_bf16 = [] {
      if constexpr (std::is_same_v<T, bf16>)
        if (cpu_features().avx512_bf16) return cpu::avx512bf16::attention_kernels_bf16();
      return avx512;
    }();
    return pick(scalar, avx2, avx512, avx512_bf16, avx512_bf16);
  }
}

template <class TA, class TC>
const kernels::SpgemmKernels<TA, TC>& spgemm_kernels() {
  return per_isa<kernels::SpgemmKernels<TA, TC>, &cpu::scalar::spgemm_kernels<TA, TC>,
                 &cpu::avx2::spgemm_kernels<TA, TC>, &cpu::avx512::spgemm_kernels<TA, TC>>();
}

const kernels::SpgemmRowColumns& spgemm_row_columns() {
  static const kernels::SpgemmRowColumns none{0, nullptr}, avx512 = cpu::avx512::spgemm_row_columns();
  return pick(none, none, avx512, avx512, avx512);
}

#define TRNSPARSE_INSTANTIATE(TA, TY)                                                         \
  template const kernels::BsrKernels<TA, TY>& bsr_kernels<TA, TY>();                          \
  template const kernels::SymmetricKernels<TA, TY>& symmetric_kernels<TA, TY>();              \
  template WholeSymmetric<TA, TY> symmetric_whole<TA, TY>();                                  \
  template const kernels::CsrKernels<TA, TY>& csr_kernels<TA, TY, TA>();
TRNSPARSE_INSTANTIATE(float, float)
TRNSPARSE_INSTANTIATE(double, double)
TRNSPARSE_INSTANTIATE(bf16, float)
TRNSPARSE_INSTANTIATE(bf16, bf16)
#undef TRNSPARSE_INSTANTIATE
template const kernels::CsrKernels<double, double, float>& csr_kernels<double, double, float>();
template const kernels::SddmmKernels<float>& sddmm_kernels<float>();
template const kernels::SddmmKernels<double>& sddmm_kernels<double>();
template const kernels::SddmmKernels<bf16>& sddmm_kernels<bf16>();
template kernels::ColumnSums<float> column_sums<float>();
template kernels::ColumnSums<double> column_sums<double>();
template kernels::ColumnSums<bf16> column_sums<bf16>();
template const kernels::CgKernels<float>& cg_kernels<float>();
template const kernels::CgKernels<double>& cg_kernels<double>();
template const kernels::BasisKernels<float>& basis_kernels<float>();
template const kernels::BasisKernels<double>& basis_kernels<double>();
template const kernels::AttentionKernels<float>& attention_kernels<float>();
template const kernels::AttentionKernels<bf16>& attention_kernels<bf16>();
template const kernels::AttentionKernels<double>& attention_kernels<double>();
template const kernels::SpgemmKernels<float, float>& spgemm_kernels<float, float>();
template const kernels::SpgemmKernels<double, double>& spgemm_kernels<double, double>();
template const kernels::SpgemmKernels<bf16, float>& spgemm_kernels<bf16, float>();

}  // namespace trnsparse::dispatch
