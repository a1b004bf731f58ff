#include "kernels/reference/products.hpp"

#include <algorithm>

#include "runtime/value.hpp"

namespace trnsparse::kernels::reference {

namespace {

/// out = alpha * acc + beta * out, with out not read when beta == 0.
template <class Acc, class TY>
void store(TY& out, Acc alpha, Acc acc, Acc beta) noexcept {
  const Acc scaled = alpha * acc;
  out = detail::value_cast<TY>(beta == Acc(0) ? scaled : scaled + beta * static_cast<Acc>(detail::widen(out)));
}

}  // namespace

template <Value TA, class TY, class TV>
void csr_spmm(index_t m, index_t k, const index_t* row_ptr, const index_t* col_idx, const TV* values, acc_t<TA> alpha,
              const TA* B, index_t ldb, acc_t<TA> beta, TY* C, index_t ldc) noexcept {
  for (index_t i = 0; i < m; ++i) {
    for (index_t c = 0; c < k; ++c) {
      acc_t<TA> acc = 0;
      for (index_t p = row_ptr[i]; p < row_ptr[i + 1]; ++p)
        acc += static_cast<acc_t<TA>>(detail::widen(values[p])) * detail::widen(B[col_idx[p] * ldb + c]);
      store(C[i * ldc + c], alpha, acc, beta);
    }
  }
}

template <Value TA, class TY>
void bsr_spmm(const BsrArrays& A, const TA* blocks, index_t k, acc_t<TA> alpha, const TA* B, index_t ldb,
              acc_t<TA> beta, TY* C, index_t ldc) noexcept {
  const index_t b = A.block_size;
  for (index_t bi = 0; bi < A.block_rows; ++bi) {
    const index_t row_end = std::min(b, A.rows - bi * b);
    for (index_t r = 0; r < row_end; ++r) {
      const index_t i = bi * b + r;
      for (index_t c = 0; c < k; ++c) {
        acc_t<TA> acc = 0;
        for (index_t p = A.block_row_ptr[bi]; p < A.block_row_ptr[bi + 1]; ++p) {
          const index_t j0 = A.block_col_idx[p] * b;
          const index_t col_end = std::min(b, A.cols - j0);
          const TA* a = blocks + p * b * b + r * b;  // row r of block p
          for (index_t cc = 0; cc < col_end; ++cc) acc += detail::widen(a[cc]) * detail::widen(B[(j0 + cc) * ldb + c]);
        }
        store(C[i * ldc + c], alpha, acc, beta);
      }
    }
  }
}

template <Value TA, class TY>
void bsr_spmm_transposed(const BsrArrays& A, const TA* blocks, index_t k, acc_t<TA> alpha, const TA* B, index_t ldb,
                         acc_t<TA> beta, TY* C, index_t ldc, acc_t<TA>* work) noexcept {
  const index_t b = A.block_size;
  std::fill(work, work + A.cols * k, acc_t<TA>(0));
  for (index_t bi = 0; bi < A.block_rows; ++bi)
    for (index_t p = A.block_row_ptr[bi]; p < A.block_row_ptr[bi + 1]; ++p) {
      const index_t j0 = A.block_col_idx[p] * b;
      for (index_t r = 0; r < std::min(b, A.rows - bi * b); ++r)
        for (index_t cc = 0; cc < std::min(b, A.cols - j0); ++cc) {
          const acc_t<TA> a = detail::widen(blocks[p * b * b + r * b + cc]);
          for (index_t c = 0; c < k; ++c) work[(j0 + cc) * k + c] += a * detail::widen(B[(bi * b + r) * ldb + c]);
        }
    }
  for (index_t j = 0; j < A.cols; ++j)
    for (index_t c = 0; c < k; ++c) store(C[j * ldc + c], alpha, work[j * k + c], beta);
}

template <Value T>
void bsr_sddmm(const BsrArrays& A, T* blocks, index_t k, acc_t<T> alpha, const T* X, index_t ldx, const T* Y,
               index_t ldy, acc_t<T> beta) noexcept {
  const index_t b = A.block_size;
  for (index_t bi = 0; bi < A.block_rows; ++bi)
    for (index_t p = A.block_row_ptr[bi]; p < A.block_row_ptr[bi + 1]; ++p) {
      const index_t j0 = A.block_col_idx[p] * b;
      for (index_t r = 0; r < std::min(b, A.rows - bi * b); ++r)
        for (index_t cc = 0; cc < std::min(b, A.cols - j0); ++cc) {
          acc_t<T> acc = 0;
          for (index_t c = 0; c < k; ++c)
            acc += detail::widen(X[(bi * b + r) * ldx + c]) * detail::widen(Y[(j0 + cc) * ldy + c]);
          store(blocks[p * b * b + r * b + cc], alpha, acc, beta);
        }
    }
}

template <Value T>
void csr_sddmm(index_t m, index_t k, const index_t* row_ptr, const index_t* col_idx, T* values, acc_t<T> alpha,
               const T* X, index_t ldx, const T* Y, index_t ldy, acc_t<T> beta) noexcept {
  for (index_t i = 0; i < m; ++i)
    for (index_t p = row_ptr[i]; p < row_ptr[i + 1]; ++p) {
      acc_t<T> acc = 0;
      for (index_t c = 0; c < k; ++c) acc += detail::widen(X[i * ldx + c]) * detail::widen(Y[col_idx[p] * ldy + c]);
      store(values[p], alpha, acc, beta);
    }
}

template <Value TA, class TY>
void csr_spmv_symmetric(index_t n, const index_t* row_ptr, const index_t* col_idx, const TA* values, acc_t<TA> alpha,
                        const TA* x, acc_t<TA> beta, TY* y, acc_t<TA>* work) noexcept {
  std::fill(work, work + n, acc_t<TA>(0));
  for (index_t i = 0; i < n; ++i) {
    for (index_t p = row_ptr[i]; p < row_ptr[i + 1]; ++p) {
      const index_t j = col_idx[p];
      const acc_t<TA> a = detail::widen(values[p]);
      work[i] += a * detail::widen(x[j]);
      if (j != i) work[j] += a * detail::widen(x[i]);
    }
  }
  for (index_t i = 0; i < n; ++i) store(y[i], alpha, work[i], beta);
}

template <Value TA, class TY>
void bsr_spmv_symmetric(const BsrArrays& A, const TA* blocks, bool upper, acc_t<TA> alpha, const TA* x,
                        acc_t<TA> beta, TY* y, acc_t<TA>* work) noexcept {
  const index_t n = A.rows, b = A.block_size;
  std::fill(work, work + n, acc_t<TA>(0));
  for (index_t bi = 0; bi < A.block_rows; ++bi)
    for (index_t q = A.block_row_ptr[bi]; q < A.block_row_ptr[bi + 1]; ++q) {
      const index_t bj = A.block_col_idx[q];
      for (index_t r = 0; r < b && bi * b + r < n; ++r)
        for (index_t c = 0; c < b && bj * b + c < n; ++c) {
          if (bi == bj && (upper ? c < r : c > r)) continue;  // the diagonal block's other triangle
          const index_t i = bi * b + r, j = bj * b + c;
          const acc_t<TA> a = detail::widen(blocks[(q * b + r) * b + c]);
          work[i] += a * detail::widen(x[j]);
          if (j != i) work[j] += a * detail::widen(x[i]);
        }
    }
  for (index_t i = 0; i < n; ++i) store(y[i], alpha, work[i], beta);
}

template <Value TA, class TY>
void linear_forward(const BsrArrays& W, const TA* blocks, index_t tokens, const TA* X, index_t ldx,
                    const acc_t<TA>* bias, TY* Y, index_t ldy) noexcept {
  const index_t b = W.block_size;
  for (index_t t = 0; t < tokens; ++t)
    for (index_t o = 0; o < W.rows; ++o) {
      const index_t bi = o / b, r = o % b;
      acc_t<TA> acc = 0;
      for (index_t q = W.block_row_ptr[bi]; q < W.block_row_ptr[bi + 1]; ++q) {
        const index_t j0 = W.block_col_idx[q] * b;
        for (index_t c = 0; c < std::min(b, W.cols - j0); ++c)
          acc += detail::widen(blocks[(q * b + r) * b + c]) * detail::widen(X[t * ldx + j0 + c]);
      }
      store(Y[t * ldy + o], acc_t<TA>(1), acc + (bias ? bias[o] : acc_t<TA>(0)), acc_t<TA>(0));
    }
}

template <Value TA, class TY>
void linear_backward_input(const BsrArrays& W, const TA* blocks, index_t tokens, const TA* dY, index_t lddy, TY* dX,
                           index_t lddx, acc_t<TA>* work) noexcept {
  const index_t b = W.block_size;
  for (index_t t = 0; t < tokens; ++t) {
    std::fill(work, work + W.cols, acc_t<TA>(0));
    for (index_t bi = 0; bi < W.block_rows; ++bi)
      for (index_t q = W.block_row_ptr[bi]; q < W.block_row_ptr[bi + 1]; ++q) {
        const index_t j0 = W.block_col_idx[q] * b;
        for (index_t r = 0; r < std::min(b, W.rows - bi * b); ++r)
          for (index_t c = 0; c < std::min(b, W.cols - j0); ++c)
            work[j0 + c] += detail::widen(blocks[(q * b + r) * b + c]) * detail::widen(dY[t * lddy + bi * b + r]);
      }
    for (index_t i = 0; i < W.cols; ++i) store(dX[t * lddx + i], acc_t<TA>(1), work[i], acc_t<TA>(0));
  }
}

template <Value T>
void linear_backward_weight(const BsrArrays& W, T* blocks, index_t tokens, const T* dY, index_t lddy, const T* X,
                            index_t ldx) noexcept {
  const index_t b = W.block_size;
  for (index_t bi = 0; bi < W.block_rows; ++bi)
    for (index_t q = W.block_row_ptr[bi]; q < W.block_row_ptr[bi + 1]; ++q) {
      const index_t j0 = W.block_col_idx[q] * b;
      for (index_t r = 0; r < std::min(b, W.rows - bi * b); ++r)
        for (index_t c = 0; c < std::min(b, W.cols - j0); ++c) {
          acc_t<T> acc = 0;
          for (index_t t = 0; t < tokens; ++t)
            acc += detail::widen(dY[t * lddy + bi * b + r]) * detail::widen(X[t * ldx + j0 + c]);
          store(blocks[(q * b + r) * b + c], acc_t<T>(1), acc, acc_t<T>(0));
        }
    }
}

template <Value T>
void column_sums(const T* A, index_t rows, index_t lda, acc_t<T>* out, index_t c0, index_t c1) noexcept {
  std::fill(out + c0, out + c1, acc_t<T>(0));
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = c0; c < c1; ++c) out[c] += detail::widen(A[r * lda + c]);
}

template <Value T>
void csr_sddmm_rows(const CsrProduct<T, T>& shape, const T* X, index_t ldx, const T* Y, index_t ldy, T* vals,
                    index_t r0, index_t r1) noexcept {
  csr_sddmm(r1 - r0, shape.width, shape.ptr + r0, shape.idx, vals, shape.alpha, X + r0 * ldx, ldx, Y, ldy,
            shape.beta);
}

template <Value TA, class TY>
void symmetric_whole(const SymmetricProduct<TA, TY>& p, acc_t<TA>* work) noexcept {
  const BsrArrays arrays{p.n, p.n, p.b, (p.n + p.b - 1) / p.b, p.ptr, p.idx};
  bsr_spmv_symmetric(arrays, p.values, p.upper, p.alpha, p.x, p.beta, p.y, work);
}

#define TRNSPARSE_INSTANTIATE(TA, TY)                                                                           \
  template void bsr_spmv_symmetric<TA, TY>(const BsrArrays&, const TA*, bool, acc_t<TA>, const TA*, acc_t<TA>,  \
                                           TY*, acc_t<TA>*) noexcept;                                          \
  template void csr_spmm<TA, TY>(index_t, index_t, const index_t*, const index_t*, const TA*, acc_t<TA>, const TA*, \
                                 index_t, acc_t<TA>, TY*, index_t) noexcept;                                     \
  template void bsr_spmm<TA, TY>(const BsrArrays&, const TA*, index_t, acc_t<TA>, const TA*, index_t, acc_t<TA>,   \
                                 TY*, index_t) noexcept;                                                         \
  template void csr_spmv_symmetric<TA, TY>(index_t, const index_t*, const index_t*, const TA*, acc_t<TA>,         \
                                           const TA*, acc_t<TA>, TY*, acc_t<TA>*) noexcept;         \
  template void bsr_spmm_transposed<TA, TY>(const BsrArrays&, const TA*, index_t, acc_t<TA>, const TA*, index_t,  \
                                            acc_t<TA>, TY*, index_t, acc_t<TA>*) noexcept;       \
  template void symmetric_whole<TA, TY>(const SymmetricProduct<TA, TY>&, acc_t<TA>*) noexcept;              \
  template void linear_forward<TA, TY>(const BsrArrays&, const TA*, index_t, const TA*, index_t,               \
                                       const acc_t<TA>*, TY*, index_t) noexcept;                              \
  template void linear_backward_input<TA, TY>(const BsrArrays&, const TA*, index_t, const TA*, index_t, TY*,   \
                                              index_t, acc_t<TA>*) noexcept;
TRNSPARSE_INSTANTIATE(float, float)
TRNSPARSE_INSTANTIATE(double, double)
TRNSPARSE_INSTANTIATE(bf16, float)
TRNSPARSE_INSTANTIATE(bf16, bf16)
#undef TRNSPARSE_INSTANTIATE
template void csr_spmm<double, double, float>(index_t, index_t, const index_t*, const index_t*, const float*, double,
                                              const double*, index_t, double, double*, index_t) noexcept;

#define TRNSPARSE_INSTANTIATE(T)                                                                                    \
  template void bsr_sddmm<T>(const BsrArrays&, T*, index_t, acc_t<T>, const T*, index_t, const T*, index_t,        \
                             acc_t<T>) noexcept;                                                                    \
  template void csr_sddmm<T>(index_t, index_t, const index_t*, const index_t*, T*, acc_t<T>, const T*, index_t,     \
                             const T*, index_t, acc_t<T>) noexcept;                                         \
  template void csr_sddmm_rows<T>(const CsrProduct<T, T>&, const T*, index_t, const T*, index_t, T*, index_t,      \
                                  index_t) noexcept;                                                            \
  template void linear_backward_weight<T>(const BsrArrays&, T*, index_t, const T*, index_t, const T*,            \
                                          index_t) noexcept;                                                    \
  template void column_sums<T>(const T*, index_t, index_t, acc_t<T>*, index_t, index_t) noexcept;
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
TRNSPARSE_INSTANTIATE(bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse::kernels::reference
