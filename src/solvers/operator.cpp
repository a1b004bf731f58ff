// Linear operators over the matrix formats, and the Jacobi preconditioner.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "runtime/checks.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse {

namespace {

void check_square(index_t rows, index_t cols, const char* who) {
  if (rows != cols) throw InvalidArgument(detail::concat(who, ": A is ", rows, " x ", cols, ", expected square"));
}

/// 1 / d_i, or InvalidArgument naming the first zero or non-finite diagonal entry.
template <SolverValue T>
std::vector<T> inverse_diagonal(std::vector<T> d) {
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (!(std::isfinite(d[i]) && d[i] != T(0)))
      throw InvalidArgument(detail::concat("jacobi_preconditioner: A(", i, ", ", i, ") = ", d[i],
                                           ", expected a finite non-zero diagonal"));
    d[i] = T(1) / d[i];
  }
  return d;
}

}  // namespace

std::string_view to_string(SolveStatus status) noexcept {
  switch (status) {
    case SolveStatus::converged: return "converged";
    case SolveStatus::max_iterations: return "max_iterations";
    case SolveStatus::breakdown: return "breakdown";
    case SolveStatus::stopped: return "stopped";
    case SolveStatus::completed: return "completed";
  }
  return "unknown";
}

template <SolverValue T>
LinearOperator<T>::LinearOperator(index_t n, Apply apply) : n_(n), apply_(std::move(apply)) {
  detail::check_nonnegative(n, "LinearOperator: n");
  if (!apply_) throw InvalidArgument("LinearOperator: apply is empty, expected a callable");
}

template <SolverValue T>
LinearOperator<T>::LinearOperator(index_t n, Apply apply, Distribution distribution)
    : LinearOperator(n, std::move(apply)) {
  if (!distribution.sum || !distribution.agree)
    throw InvalidArgument("LinearOperator: distribution.sum or distribution.agree is empty, expected callables");
  if (!(distribution.offset >= 0 && distribution.offset <= distribution.global_size - n))
    throw InvalidArgument(detail::concat("LinearOperator: rows [", distribution.offset, ", ", distribution.offset + n,
                                         ") are outside the ", distribution.global_size, " rows of the problem"));
  distributed_ = true;
  distribution_ = std::move(distribution);
}

template <SolverValue T>
LinearOperator<T>::LinearOperator(const CsrMatrix<T>& A)
    : n_(A.rows()), apply_([&A](DenseView<const T> X, DenseView<T> Y) { spmm(T(1), A, X, T(0), Y); }), csr_(&A) {
  check_square(A.rows(), A.cols(), "LinearOperator");
}

template <SolverValue T>
LinearOperator<T>::LinearOperator(const BsrMatrix<T>& A)
    : n_(A.rows()), apply_([&A](DenseView<const T> X, DenseView<T> Y) { spmm(T(1), A, X, T(0), Y); }) {
  check_square(A.rows(), A.cols(), "LinearOperator");
}

template <SolverValue T>
LinearOperator<T>::LinearOperator(const CsrMatrix<T>& A, Triangle uplo)
    : n_(A.rows()), apply_([&A, uplo](DenseView<const T> X, DenseView<T> Y) {
        const auto n = static_cast<std::size_t>(A.rows());
        if (X.cols == 1 && X.ld == 1 && Y.ld == 1) {
          spmv_symmetric(T(1), A, uplo, std::span<const T>(X.data, n), T(0), std::span<T>(Y.data, n));
          return;
        }
        // Strided columns: gather each into a contiguous vector (spmv_symmetric takes spans).
        std::vector<T> x(n), y(n);
        for (index_t j = 0; j < X.cols; ++j) {
          for (std::size_t i = 0; i < n; ++i) x[i] = X(static_cast<index_t>(i), j);
          spmv_symmetric(T(1), A, uplo, std::span<const T>(x), T(0), std::span<T>(y));
          for (std::size_t i = 0; i < n; ++i) Y(static_cast<index_t>(i), j) = y[i];
        }
      }),
      triangle_(&A),
      uplo_(uplo) {
  check_square(A.rows(), A.cols(), "LinearOperator");
}

template <SolverValue T>
void LinearOperator<T>::agree(const std::function<void()>& checks) const {
  std::exception_ptr error;
  try {
    checks();
  } catch (...) {
    error = std::current_exception();
  }
  if (distributed_) distribution_.agree(error);
  else if (error) std::rethrow_exception(error);
}

template <SolverValue T>
void LinearOperator<T>::apply(DenseView<const T> X, DenseView<T> Y) const {
  detail::check_dim(X.rows, n_, "LinearOperator::apply", "X", "rows", "n");
  detail::check_dim(Y.rows, n_, "LinearOperator::apply", "Y", "rows", "n");
  detail::check_dim(Y.cols, X.cols, "LinearOperator::apply", "Y", "columns", "X.cols");
  detail::check_no_alias(X.data, detail::span_bytes(X), Y.data, detail::span_bytes(Y), "LinearOperator::apply", "X",
                         "Y");
  apply_(X, Y);
}

template <SolverValue T>
std::vector<T> jacobi_preconditioner(const CsrMatrix<T>& A) {
  check_square(A.rows(), A.cols(), "jacobi_preconditioner");
  std::vector<T> d = detail::make_vector<T>(A.rows(), "jacobi_preconditioner: diagonal");
  const auto ptr = A.row_ptr();
  const auto col = A.col_indices();
  for (index_t i = 0; i < A.rows(); ++i) {
    const auto first = col.begin() + ptr[i], last = col.begin() + ptr[i + 1];
    const auto it = std::lower_bound(first, last, i);
    if (it != last && *it == i) d[i] = A.values()[it - col.begin()];
  }
  return inverse_diagonal(std::move(d));
}

template <SolverValue T>
std::vector<T> jacobi_preconditioner(const BsrMatrix<T>& A) {
  check_square(A.rows(), A.cols(), "jacobi_preconditioner");
  return inverse_diagonal(bsr_diagonal(A));
}

template class LinearOperator<float>;
template class LinearOperator<double>;
template std::vector<float> jacobi_preconditioner<float>(const CsrMatrix<float>&);
template std::vector<double> jacobi_preconditioner<double>(const CsrMatrix<double>&);
template std::vector<float> jacobi_preconditioner<float>(const BsrMatrix<float>&);
template std::vector<double> jacobi_preconditioner<double>(const BsrMatrix<double>&);

}  // namespace trnsparse
