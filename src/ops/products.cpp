// Products: validate the operands, then run the kernel.
#include <type_traits>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "kernels/reference/products.hpp"
#include "ops/run.hpp"
#include "plan/split.hpp"
#include "runtime/checks.hpp"
#include "trnsparse/plan.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse {

namespace {

namespace ref = kernels::reference;
using detail::check_spmm;
using detail::check_spmv;

/// C = alpha * A * B + beta * C for CSR A: float and double run the ISA's kernels on
/// row ranges balanced by non-zeros; bf16 runs the reference kernel.
template <Value TA, class TY>
void csr_product(acc_t<TA> alpha, const CsrMatrix<TA>& A, const TA* B, index_t ldb, index_t k, acc_t<TA> beta, TY* C,
                 index_t ldc) {
  detail::check_no_alias(A.values().data(), A.values().size_bytes(), C, detail::span_bytes(DenseView<TY>(C, A.rows(), k, ldc)),
                         "spmm", "A", "C");
  if constexpr (std::is_same_v<TA, TY> && !std::is_same_v<TA, bf16>) {
    const kernels::cpu::CsrProduct<TA> prod{k, A.row_ptr().data(), A.col_indices().data(), A.values().data(),
                                            alpha, beta, B, ldb, C, ldc};
    const auto& kernel = dispatch::csr_kernels<TA>();
    const auto split = detail::balanced_split(A.row_ptr(), detail::parts_for(A.rows(), static_cast<double>(A.nnz()) * static_cast<double>(k)));
    detail::parallel_parts(static_cast<int>(split.size()) - 1,
                           [&](int t) { kernel.spmm(prod, split[t], split[t + 1]); });
  } else {
    ref::csr_spmm(A.rows(), k, A.row_ptr().data(), A.col_indices().data(), A.values().data(), alpha, B, ldb, beta, C,
                  ldc);
  }
}

}  // namespace

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv(acc_t<TA> alpha, const CsrMatrix<TA>& A, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta,
          std::span<TY> y) {
  check_spmv("spmv", A.rows(), A.cols(), x, y);
  csr_product(alpha, A, x.data(), 1, 1, beta, y.data(), 1);
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv(acc_t<TA> alpha, const BsrMatrix<TA>& A, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta,
          std::span<TY> y) {
  check_spmv("spmv", A.rows(), A.cols(), x, y);
  const auto as_column = [](auto* p, std::size_t n) {
    return DenseView<std::remove_pointer_t<decltype(p)>>(p, static_cast<index_t>(n), 1, 1);
  };
  plan(A)->spmm(alpha, A, as_column(x.data(), x.size()), beta, as_column(y.data(), y.size()));
}
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm(acc_t<TA> alpha, const CsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B, acc_t<TA> beta,
          DenseView<TY> C) {
  check_spmm("spmm", A.rows(), A.cols(), B, C);
  csr_product(alpha, A, B.data, B.ld, B.cols, beta, C.data, C.ld);
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B, acc_t<TA> beta,
          DenseView<TY> C) {
  plan(A)->spmm(alpha, A, B, beta, C);
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
