// Sampled products (SDDMM), transposed products and the gradients of the products.
#include "dispatch/dispatch.hpp"
#include "ops/run.hpp"
#include "runtime/parallel.hpp"
#include "runtime/checks.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/plan.hpp"

namespace trnsparse {

namespace {

/// Shapes of X and Y against out (rows x cols), and neither may overlap out's values.
template <class T>
void check_sampled(index_t rows, index_t cols, const DenseView<const T>& X, const DenseView<const T>& Y,
                   std::span<const T> out) {
  const char* who = "sampled_matmul";
  detail::check_dim(X.rows, rows, who, "X", "rows", "out.rows()");
  detail::check_dim(Y.rows, cols, who, "Y", "rows", "out.cols()");
  detail::check_dim(Y.cols, X.cols, who, "Y", "columns", "X.cols");
  detail::check_no_alias(X.data, detail::span_bytes(X), out.data(), out.size_bytes(), who, "X", "out");
  detail::check_no_alias(Y.data, detail::span_bytes(Y), out.data(), out.size_bytes(), who, "Y", "out");
}

template <class T>
void check_backward(index_t rows, index_t cols, const DenseView<const T>& B, const DenseView<const T>& dC) {
  detail::check_dim(B.rows, cols, "spmm_backward", "B", "rows", "A.cols()");
  detail::check_dim(dC.rows, rows, "spmm_backward", "dC", "rows", "A.rows()");
  detail::check_dim(dC.cols, B.cols, "spmm_backward", "dC", "columns", "B.cols");
}

}  // namespace

template <Value T>
void sampled_matmul(acc_t<T> alpha, DenseView<const std::type_identity_t<T>> X,
                    DenseView<const std::type_identity_t<T>> Y, acc_t<T> beta, BsrMatrix<T>& out) {
  check_sampled<T>(out.rows(), out.cols(), X, Y, out.blocks());
  const auto p = plan(out);
  const BsrStructure& s = out.structure();
  const kernels::BsrSampled<T> prob{.b = s.block_size(),
                                    .rows = s.rows(),
                                    .cols = s.cols(),
                                    .block_cols = s.block_cols(),
                                    .width = X.cols,
                                    .ptr = s.block_row_ptr().data(),
                                    .idx = s.block_col_indices().data(),
                                    .alpha = alpha,
                                    .beta = beta,
                                    .X = X.data,
                                    .ldx = X.ld,
                                    .Y = Y.data,
                                    .ldy = Y.ld,
                                    .blocks = out.blocks().data()};
  const int parts = detail::parts_for(s.block_rows(), detail::block_ns(s, X.cols));
  detail::run_packed(dispatch::sddmm_kernels<T>(), prob, s.block_cols(), parts, p->row_split(detail::pieces_for(parts)));
}

template <Value T>
void sampled_matmul(acc_t<T> alpha, DenseView<const std::type_identity_t<T>> X,
                    DenseView<const std::type_identity_t<T>> Y, acc_t<T> beta, CsrMatrix<T>& out) {
  check_sampled<T>(out.rows(), out.cols(), X, Y, out.values());
  const kernels::CsrProduct<T, T> shape{.width = X.cols,
                                        .in_rows = out.cols(),
                                        .ptr = out.row_ptr().data(),
                                        .idx = out.col_indices().data(),
                                        .idx32 = nullptr,
                                        .values = nullptr,
                                        .alpha = alpha,
                                        .beta = beta,
                                        .B = nullptr,
                                        .ldb = 0,
                                        .C = nullptr,
                                        .ldc = 0};
  const auto& kernel = dispatch::csr_kernels<T, T>();
  const double madds = static_cast<double>(out.nnz()) * static_cast<double>(X.cols);
  const int parts = detail::parts_for(out.rows(), detail::work_ns(detail::Work::csr, madds, X.cols));
  const auto pieces = detail::balanced_split(out.row_ptr(), detail::pieces_for(parts));
  detail::parallel_for(parts, static_cast<index_t>(pieces.size()) - 1, [&](int, index_t i) {
    kernel.sddmm(shape, X.data, X.ld, Y.data, Y.ld, out.values().data(), pieces[i], pieces[i + 1]);
  });
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void spmm_transposed(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B,
                     acc_t<TA> beta, DenseView<TY> C) {
  plan(A)->spmm_transposed(alpha, A, B, beta, C);
}

template <Value T>
SpmmGradients<BsrMatrix<T>, T> spmm_backward(acc_t<T> alpha, const BsrMatrix<T>& A,
                                             DenseView<const std::type_identity_t<T>> B,
                                             DenseView<const std::type_identity_t<T>> dC) {
  check_backward(A.rows(), A.cols(), B, dC);
  SpmmGradients<BsrMatrix<T>, T> g{BsrMatrix<T>(A.structure_ptr()), Dense<T>(A.cols(), B.cols)};
  sampled_matmul(alpha, dC, B, acc_t<T>(0), g.dA);
  spmm_transposed(alpha, A, dC, acc_t<T>(0), g.dB.view());
  return g;
}

template <Value T>
SpmmGradients<CsrMatrix<T>, T> spmm_backward(acc_t<T> alpha, const CsrMatrix<T>& A,
                                             DenseView<const std::type_identity_t<T>> B,
                                             DenseView<const std::type_identity_t<T>> dC) {
  check_backward(A.rows(), A.cols(), B, dC);
  SpmmGradients<CsrMatrix<T>, T> g{A, Dense<T>(A.cols(), B.cols)};
  sampled_matmul(alpha, dC, B, acc_t<T>(0), g.dA);
  spmm_transposed(alpha, A, dC, acc_t<T>(0), g.dB.view());
  return g;
}

#define TRNSPARSE_INSTANTIATE_T(T)                                                                               \
  template void sampled_matmul<T>(acc_t<T>, DenseView<const T>, DenseView<const T>, acc_t<T>, BsrMatrix<T>&);  \
  template void sampled_matmul<T>(acc_t<T>, DenseView<const T>, DenseView<const T>, acc_t<T>, CsrMatrix<T>&);  \
  template SpmmGradients<BsrMatrix<T>, T> spmm_backward<T>(acc_t<T>, const BsrMatrix<T>&, DenseView<const T>,   \
                                                           DenseView<const T>);                               \
  template SpmmGradients<CsrMatrix<T>, T> spmm_backward<T>(acc_t<T>, const CsrMatrix<T>&, DenseView<const T>,   \
                                                           DenseView<const T>);
TRNSPARSE_INSTANTIATE_T(float)
TRNSPARSE_INSTANTIATE_T(double)
TRNSPARSE_INSTANTIATE_T(bf16)
#undef TRNSPARSE_INSTANTIATE_T

#define TRNSPARSE_INSTANTIATE(TA, TY)                                                                            \
  template void spmm_transposed<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, DenseView<const TA>, acc_t<TA>,        \
                                        DenseView<TY>);
TRNSPARSE_INSTANTIATE(float, float)
TRNSPARSE_INSTANTIATE(double, double)
TRNSPARSE_INSTANTIATE(bf16, float)
TRNSPARSE_INSTANTIATE(bf16, bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
