// Products: validate the operands, then run the kernel.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "ops/fused.hpp"
#include "ops/run.hpp"
#include "ops/symmetric.hpp"
#include "plan/csr_analysis.hpp"
#include "runtime/parallel.hpp"
#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
#include "runtime/workspace.hpp"
#include "trnsparse/plan.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse {

namespace {

using detail::check_spmm;
using detail::check_spmv;

/// C = alpha * A * B + beta * C for the CSR arrays of an m-row A and a B of n rows
/// (idx32: the column indices in 32 bits, or null; values: TA, or fp32 under double
/// operands): the ISA's kernels on row ranges balanced by non-zeros.
template <Value TA, class TY, class TV>
void csr_product(acc_t<TA> alpha, index_t m, index_t n, std::span<const index_t> ptr, const index_t* idx,
                 const std::int32_t* idx32, std::span<const TV> values, const TA* B, index_t ldb, index_t k,
                 acc_t<TA> beta, TY* C, index_t ldc) {
  detail::check_no_alias(values.data(), values.size_bytes(), C, detail::span_bytes(DenseView<TY>(C, m, k, ldc)),
                         "spmm", "A", "C");
  const kernels::CsrProduct<TA, TY, TV> prod{.width = k,
                                             .in_rows = n,
                                             .ptr = ptr.data(),
                                             .idx = idx,
                                             .idx32 = idx32,
                                             .values = values.data(),
                                             .alpha = alpha,
                                             .beta = beta,
                                             .B = B,
                                             .ldb = ldb,
                                             .C = C,
                                             .ldc = ldc};
  const auto& kernel = dispatch::csr_kernels<TA, TY, TV>();
  const int parts =
      detail::parts_for(m, detail::work_ns(detail::Work::csr, static_cast<double>(values.size()) * static_cast<double>(k), k));
  const auto pieces = detail::balanced_split(ptr, detail::pieces_for(parts));
  detail::parallel_for(parts, static_cast<index_t>(pieces.size()) - 1,
                       [&](int, index_t i) { kernel.spmm(prod, pieces[i], pieces[i + 1]); });
}

template <Value TA, class TY>
void csr_product(acc_t<TA> alpha, const CsrMatrix<TA>& A, const TA* B, index_t ldb, index_t k, acc_t<TA> beta, TY* C,
                 index_t ldc) {
  csr_product(alpha, A.rows(), A.cols(), A.row_ptr(), A.col_indices().data(),
              detail::analyses(A).compact(A.cols(), A.col_indices()), A.values(), B, ldb, k, beta, C, ldc);
}

/// An SpMV streams x and y beside the matrix, and every stream has to be on huge pages
/// for the product to run faster on them (docs/benchmarks.md, "SpMV and CSR products"):
/// the caller's vectors move there once they have been streamed often
/// (detail::collapse_streamed); the library's own are born there.
template <class X, class Y>
void collapse_vectors(std::span<X> x, std::span<Y> y) {
  detail::collapse_streamed(x.data(), x.size_bytes());
  detail::collapse_streamed(y.data(), y.size_bytes());
}

}  // namespace

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv(acc_t<TA> alpha, const CsrMatrix<TA>& A, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta,
          std::span<TY> y) {
  check_spmv("spmv", A.rows(), A.cols(), x, y);
  collapse_vectors(x, y);
  csr_product(alpha, A, x.data(), 1, 1, beta, y.data(), 1);
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv(acc_t<TA> alpha, const BsrMatrix<TA>& A, std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta,
          std::span<TY> y) {
  check_spmv("spmv", A.rows(), A.cols(), x, y);
  collapse_vectors(x, y);
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

/// Aᵀ B as the product of the cached transposed pattern with A's values gathered into
/// its order: O(nnz) per call, no structure built.
template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm_transposed(acc_t<TA> alpha, const CsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B,
                     acc_t<TA> beta, DenseView<TY> C) {
  check_spmm("spmm_transposed", A.cols(), A.rows(), B, C, "A.cols()", "A.rows()");
  detail::check_no_alias(A.values().data(), A.values().size_bytes(), C.data, detail::span_bytes(C), "spmm_transposed",
                         "A", "C");
  const BscView& t = detail::analyses(A).transposed(A.rows(), A.cols(), A.row_ptr(), A.col_indices());
  TA* values = reinterpret_cast<TA*>(detail::thread_workspace(sizeof(TA) * static_cast<std::size_t>(A.nnz())));
  for (std::size_t q = 0; q < t.perm.size(); ++q) values[q] = A.values()[t.perm[q]];
  csr_product(alpha, A.cols(), A.rows(), std::span<const index_t>(t.col_ptr), t.row_idx.data(), nullptr,
              std::span<const TA>(values, t.perm.size()), B.data, B.ld, B.cols, beta, C.data, C.ld);
}

namespace {

/// y = alpha * S * x + beta * y for the symmetric S stored as A's `uplo` triangle; with
/// `dot` not null, also x_i * y_i summed per chunk into the chunk's kCgLanes
/// lanes of `dot` (chunks * lanes values).
template <Value TA, class TY>
void symmetric_product(acc_t<TA> alpha, const CsrMatrix<TA>& A, Triangle uplo, std::span<const TA> x,
                       acc_t<TA> beta, std::span<TY> y, std::vector<double>* dot) {
  if (A.rows() != A.cols())
    throw InvalidArgument(detail::concat("spmv_symmetric: A is ", A.rows(), " x ", A.cols(), ", expected square"));
  check_spmv("spmv_symmetric", A.rows(), A.cols(), x, y);
  const auto ptr = A.row_ptr();
  const auto col = A.col_indices();
  const detail::SymmetricChunks& s = detail::analyses(A).symmetric(A.rows(), ptr, col, uplo);
  detail::check_triangle(s, uplo, false);
  const kernels::SymmetricProduct<TA, TY> prod{.ptr = ptr.data(),
                                               .idx = col.data(),
                                               .idx32 = detail::analyses(A).compact(A.cols(), col),
                                               .values = A.values().data(),
                                               .upper = uplo == Triangle::upper,
                                               .alpha = alpha,
                                               .beta = beta,
                                               .x = x.data(),
                                               .y = y.data(),
                                               .out = nullptr,
                                               .window = nullptr,
                                               .b = 1,
                                               .n = A.rows()};
  detail::run_symmetric(prod, s, static_cast<double>(A.nnz()), dot);
}

}  // namespace

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv_symmetric(acc_t<TA> alpha, const CsrMatrix<TA>& A, Triangle uplo, std::span<const std::type_identity_t<TA>> x,
                    acc_t<TA> beta, std::span<TY> y) {
  collapse_vectors(x, y);
  symmetric_product(alpha, A, uplo, x, beta, y, nullptr);
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmv_symmetric(acc_t<TA> alpha, const BsrMatrix<TA>& A, Triangle uplo, std::span<const std::type_identity_t<TA>> x,
                    acc_t<TA> beta, std::span<TY> y) {
  collapse_vectors(x, y);
  plan(A)->spmv_symmetric(alpha, A, uplo, x, beta, y);
}

void detail::spmv_fp32_values(double alpha, const CsrMatrix<double>& A, std::span<const float> values,
                              std::span<const double> x, double beta, std::span<double> y) {
  check_spmv("spmv_fp32_values", A.rows(), A.cols(), x, y);
  detail::check_dim(static_cast<index_t>(values.size()), A.nnz(), "spmv_fp32_values", "values", "elements", "A.nnz()");
  csr_product(alpha, A.rows(), A.cols(), A.row_ptr(), A.col_indices().data(),
              detail::analyses(A).compact(A.cols(), A.col_indices()), values, x.data(), 1, 1, beta, y.data(), 1);
}

template <Value T>
double detail::spmv_symmetric_dot(const CsrMatrix<T>& A, Triangle uplo, std::span<const T> x, std::span<T> y) {
  std::vector<double> lanes;
  symmetric_product(acc_t<T>(1), A, uplo, x, acc_t<T>(0), y, &lanes);
  double total = 0.0;
  for (std::size_t c = 0; c < lanes.size(); c += kernels::kCgLanes) {
    double chunk = 0.0;
    for (index_t l = 0; l < kernels::kCgLanes; ++l) chunk += lanes[c + static_cast<std::size_t>(l)];
    total += chunk;
  }
  return total;
}
template double detail::spmv_symmetric_dot(const CsrMatrix<float>&, Triangle, std::span<const float>, std::span<float>);
template double detail::spmv_symmetric_dot(const CsrMatrix<double>&, Triangle, std::span<const double>,
                                           std::span<double>);

#define TRNSPARSE_INSTANTIATE(TA, TY)                                                                              \
  template void spmv<TA, TY>(acc_t<TA>, const CsrMatrix<TA>&, std::span<const TA>, acc_t<TA>, std::span<TY>);    \
  template void spmv<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, std::span<const TA>, acc_t<TA>, std::span<TY>);    \
  template void spmm<TA, TY>(acc_t<TA>, const CsrMatrix<TA>&, DenseView<const TA>, acc_t<TA>, DenseView<TY>);    \
  template void spmm<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, DenseView<const TA>, acc_t<TA>, DenseView<TY>);    \
  template void spmv_symmetric<TA, TY>(acc_t<TA>, const CsrMatrix<TA>&, Triangle, std::span<const TA>, acc_t<TA>, \
                                       std::span<TY>);                                                          \
  template void spmv_symmetric<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, Triangle, std::span<const TA>, acc_t<TA>, \
                                       std::span<TY>);                                                          \
  template void spmm_transposed<TA, TY>(acc_t<TA>, const CsrMatrix<TA>&, DenseView<const TA>, acc_t<TA>,        \
                                        DenseView<TY>);
TRNSPARSE_INSTANTIATE(float, float)
TRNSPARSE_INSTANTIATE(double, double)
TRNSPARSE_INSTANTIATE(bf16, float)
TRNSPARSE_INSTANTIATE(bf16, bf16)
#undef TRNSPARSE_INSTANTIATE

template Dense<float> bsr_spmm<float>(const BsrMatrix<float>&, DenseView<const float>);
template Dense<double> bsr_spmm<double>(const BsrMatrix<double>&, DenseView<const double>);
template Dense<bf16> bsr_spmm<bf16>(const BsrMatrix<bf16>&, DenseView<const bf16>);

}  // namespace trnsparse
