#include "kernels/reference/screening.hpp"

#include <algorithm>

namespace trnsparse::kernels::reference {

template <Value T>
void screened_bsr_spmm(const BsrArrays& A, const T* blocks, const double* qr, const double* qc, double s, index_t k,
                       const T* B, index_t ldb, T* C, index_t ldc) noexcept {
  const index_t b = A.block_size;
  for (index_t i = 0; i < A.rows; ++i) {
    const index_t bi = i / b, r = i % b;
    for (index_t c = 0; c < k; ++c) {
      acc_t<T> acc = 0;
      for (index_t q = A.block_row_ptr[bi]; q < A.block_row_ptr[bi + 1]; ++q) {
        const index_t j0 = A.block_col_idx[q] * b;
        for (index_t cc = 0; cc < std::min(b, A.cols - j0); ++cc)
          if (qr[i] * qc[j0 + cc] > s)
            acc += static_cast<acc_t<T>>(blocks[q * b * b + r * b + cc]) * static_cast<acc_t<T>>(B[(j0 + cc) * ldb + c]);
      }
      C[i * ldc + c] = static_cast<T>(acc);
    }
  }
}

template void screened_bsr_spmm<float>(const BsrArrays&, const float*, const double*, const double*, double, index_t,
                                       const float*, index_t, float*, index_t) noexcept;
template void screened_bsr_spmm<double>(const BsrArrays&, const double*, const double*, const double*, double, index_t,
                                        const double*, index_t, double*, index_t) noexcept;

}  // namespace trnsparse::kernels::reference
