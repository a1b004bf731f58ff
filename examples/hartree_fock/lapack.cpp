#include "lapack.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "trnsparse/error.hpp"

// The Fortran interface; the trailing lengths are gfortran's hidden string lengths.
extern "C" {
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
            const int* lwork, int* info, std::size_t jobz_len, std::size_t uplo_len);
void dgesv_(const int* n, const int* nrhs, double* a, const int* lda, int* ipiv, double* b, const int* ldb, int* info);
}

namespace trnsparse::hf::lapack {

SymmetricEigen eigh(const Dense<double>& A) {
  if (A.rows() != A.cols())
    throw InvalidArgument("eigh: A is " + std::to_string(A.rows()) + " x " + std::to_string(A.cols()) +
                          ", expected a square matrix");
  const int n = static_cast<int>(A.rows());
  const std::span<const double> in = A.values();
  std::vector<double> a(in.begin(), in.end());  // symmetric: row- and column-major alike
  SymmetricEigen e{std::vector<double>(static_cast<std::size_t>(n)), Dense<double>(n, n)};
  if (n == 0) return e;
  int info = 0;
  int lwork = -1;
  double query = 0.0;
  dsyev_("V", "U", &n, a.data(), &n, e.values.data(), &query, &lwork, &info, 1, 1);
  lwork = std::max(static_cast<int>(query), 1);
  std::vector<double> work(static_cast<std::size_t>(lwork));
  dsyev_("V", "U", &n, a.data(), &n, e.values.data(), work.data(), &lwork, &info, 1, 1);
  if (info != 0) throw InvalidArgument("eigh: dsyev failed with info = " + std::to_string(info));
  for (index_t k = 0; k < n; ++k)  // column k of the column-major result is vector k
    for (index_t i = 0; i < n; ++i) e.vectors(i, k) = a[static_cast<std::size_t>(k * n + i)];
  return e;
}

bool solve(std::span<double> A, std::span<double> b) {
  const int n = static_cast<int>(b.size());
  if (A.size() != b.size() * b.size())
    throw InvalidArgument("solve: A has " + std::to_string(A.size()) + " entries, expected " + std::to_string(n) + "^2");
  std::vector<int> pivots(b.size());
  int info = 0;
  const int one = 1;
  dgesv_(&n, &one, A.data(), &n, pivots.data(), b.data(), &n, &info);
  return info == 0;
}

}  // namespace trnsparse::hf::lapack
