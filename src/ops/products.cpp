// Products: validate the operands, then run the kernel.
#include <type_traits>
#include <vector>

#include "kernels/reference/products.hpp"
#include "runtime/checks.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse {

namespace {

namespace ref = kernels::reference;
using detail::check_dim;

ref::BsrArrays arrays(const BsrStructure& s) noexcept {
  return {s.rows(), s.cols(), s.block_size(), s.block_rows(), s.block_row_ptr().data(), s.block_col_indices().data()};
}

template <class TX, class TY>
void check_spmv(const char* who, index_t rows, index_t cols, std::span<const TX> x, std::span<TY> y) {
  check_dim(static_cast<index_t>(x.size()), cols, who, "x", "elements", "A.cols()");
  check_dim(static_cast<index_t>(y.size()), rows, who, "y", "elements", "A.rows()");
  detail::check_no_alias(x.data(), x.size_bytes(), y.data(), y.size_bytes(), who, "x", "y");
}

template <class TB, class TC>
void check_spmm(const char* who, index_t rows, index_t cols, const DenseView<const TB>& B, const DenseView<TC>& C) {
  check_dim(B.rows, cols, who, "B", "rows", "A.cols()");
  check_dim(C.rows, rows, who, "C", "rows", "A.rows()");
  check_dim(C.cols, B.cols, who, "C", "columns", "B.cols");
  detail::check_no_alias(B.data, detail::span_bytes(B), C.data, detail::span_bytes(C), who, "B", "C");
}

}  // namespace

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv(acc_t<TA> alpha, const CsrMatrix<TA>& A, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta,
          std::span<TY> y) {
  check_spmv("spmv", A.rows(), A.cols(), x, y);
  ref::csr_spmm(A.rows(), 1, A.row_ptr().data(), A.col_indices().data(), A.values().data(), alpha, x.data(), 1, beta,
                y.data(), 1);
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv(acc_t<TA> alpha, const BsrMatrix<TA>& A, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta,
          std::span<TY> y) {
  check_spmv("spmv", A.rows(), A.cols(), x, y);
  ref::bsr_spmm(arrays(A.structure()), A.blocks().data(), 1, alpha, x.data(), 1, beta, y.data(), 1);
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm(acc_t<TA> alpha, const CsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B, acc_t<TA> beta,
          DenseView<TY> C) {
  check_spmm("spmm", A.rows(), A.cols(), B, C);
  ref::csr_spmm(A.rows(), B.cols, A.row_ptr().data(), A.col_indices().data(), A.values().data(), alpha, B.data, B.ld,
                beta, C.data, C.ld);
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B, acc_t<TA> beta,
          DenseView<TY> C) {
  check_spmm("spmm", A.rows(), A.cols(), B, C);
  ref::bsr_spmm(arrays(A.structure()), A.blocks().data(), B.cols, alpha, B.data, B.ld, beta, C.data, C.ld);
}

template <Value TA>
Dense<TA> bsr_spmm(const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B) {
  Dense<TA> C(A.rows(), B.cols);
  spmm(acc_t<TA>(1), A, B, acc_t<TA>(0), C.view());
  return C;
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv_symmetric(acc_t<TA> alpha, const CsrMatrix<TA>& A, Triangle uplo, std::span<const std::type_identity_t<TA>> x,
                    acc_t<TA> beta, std::span<TY> y) {
  if (A.rows() != A.cols())
    throw InvalidArgument(detail::concat("spmv_symmetric: A is ", A.rows(), " x ", A.cols(), ", expected square"));
  check_spmv("spmv_symmetric", A.rows(), A.cols(), x, y);
  const auto ptr = A.row_ptr();
  const auto col = A.col_indices();
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t p = ptr[i]; p < ptr[i + 1]; ++p)
      if (uplo == Triangle::upper ? col[p] < i : col[p] > i)
        throw IndexError(detail::concat("spmv_symmetric: A has an entry at (", i, ", ", col[p], "), col_idx[", p,
                                        "], outside the ", uplo == Triangle::upper ? "upper" : "lower",
                                        " triangle it claims to store"));
  std::vector<acc_t<TA>> work = detail::make_vector<acc_t<TA>>(A.rows(), "spmv_symmetric: workspace");
  ref::csr_spmv_symmetric(A.rows(), ptr.data(), col.data(), A.values().data(), alpha, x.data(), beta, y.data(),
                          work.data());
}

#define TRNSPARSE_INSTANTIATE(TA, TY)                                                                              \
  template void spmv<TA, TY>(acc_t<TA>, const CsrMatrix<TA>&, std::span<const TA>, acc_t<TA>, std::span<TY>);    \
  template void spmv<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, std::span<const TA>, acc_t<TA>, std::span<TY>);    \
  template void spmm<TA, TY>(acc_t<TA>, const CsrMatrix<TA>&, DenseView<const TA>, acc_t<TA>, DenseView<TY>);    \
  template void spmm<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, DenseView<const TA>, acc_t<TA>, DenseView<TY>);    \
  template void spmv_symmetric<TA, TY>(acc_t<TA>, const CsrMatrix<TA>&, Triangle, std::span<const TA>, acc_t<TA>, \
                                       std::span<TY>);
TRNSPARSE_INSTANTIATE(float, float)
TRNSPARSE_INSTANTIATE(double, double)
TRNSPARSE_INSTANTIATE(bf16, float)
TRNSPARSE_INSTANTIATE(bf16, bf16)
#undef TRNSPARSE_INSTANTIATE

template Dense<float> bsr_spmm<float>(const BsrMatrix<float>&, DenseView<const float>);
template Dense<double> bsr_spmm<double>(const BsrMatrix<double>&, DenseView<const double>);
template Dense<bf16> bsr_spmm<bf16>(const BsrMatrix<bf16>&, DenseView<const bf16>);

}  // namespace trnsparse
