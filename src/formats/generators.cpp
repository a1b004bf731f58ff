#include "trnsparse/generators.hpp"

#include "runtime/checks.hpp"
#include "runtime/rng.hpp"
#include "runtime/value.hpp"

namespace trnsparse {

template <Value T>
CsrMatrix<T> poisson3d_rows(index_t n, index_t first, index_t last) {
  detail::check_nonnegative(n, "poisson3d: n");
  const index_t N = detail::checked_mul(detail::checked_mul(n, n, "poisson3d: n^2"), n, "poisson3d: n^3");
  (void)detail::checked_mul(N, 7, "poisson3d: 7 n^3");
  if (!(0 <= first && first <= last && last <= N))
    throw InvalidArgument(detail::concat("poisson3d_rows: rows [", first, ", ", last, ") are not within [0, ", N, ")"));
  const index_t m = last - first;
  std::vector<index_t> ptr(static_cast<std::size_t>(m) + 1, 0), idx;
  std::vector<T> vals;
  idx.reserve(static_cast<std::size_t>(7 * m));
  vals.reserve(static_cast<std::size_t>(7 * m));
  // Row r = x + n*y + n*n*z; neighbours in ascending column order: -z, -y, -x, self, +x, +y, +z.
  const index_t stride[3] = {1, n, n * n};
  for (index_t r = first; r < last; ++r) {
    const index_t coord[3] = {r % n, (r / n) % n, r / (n * n)};
    for (int d = 2; d >= 0; --d)
      if (coord[d] > 0) {
        idx.push_back(r - stride[d]);
        vals.push_back(T(-1.0f));
      }
    idx.push_back(r);
    vals.push_back(T(6.0f));
    for (int d = 0; d < 3; ++d)
      if (coord[d] < n - 1) {
        idx.push_back(r + stride[d]);
        vals.push_back(T(-1.0f));
      }
    ptr[r - first + 1] = static_cast<index_t>(idx.size());
  }
  return CsrMatrix<T>(m, N, std::move(ptr), std::move(idx), std::move(vals));
}

template <Value T>
CsrMatrix<T> poisson3d(index_t n) {
  detail::check_nonnegative(n, "poisson3d: n");
  return poisson3d_rows<T>(n, 0, detail::checked_mul(detail::checked_mul(n, n, "poisson3d: n^2"), n, "poisson3d: n^3"));
}

template <Value T>
CsrMatrix<T> random_csr(index_t rows, index_t cols, double density, std::uint64_t seed) {
  detail::check_nonnegative(rows, "random_csr: rows");
  detail::check_nonnegative(cols, "random_csr: cols");
  if (!(density >= 0.0 && density <= 1.0))
    throw InvalidArgument(detail::concat("random_csr: density = ", density, " must be in [0, 1]"));
  detail::SplitMix64 rng{seed};
  std::vector<index_t> ptr(static_cast<std::size_t>(rows) + 1, 0), idx;
  std::vector<T> vals;
  for (index_t i = 0; i < rows; ++i) {
    for (index_t j = 0; j < cols; ++j)
      if (rng.uniform() < density) {
        idx.push_back(j);
        vals.push_back(detail::value_cast<T>(rng.symmetric()));
      }
    ptr[i + 1] = static_cast<index_t>(idx.size());
  }
  return CsrMatrix<T>(rows, cols, std::move(ptr), std::move(idx), std::move(vals));
}

template CsrMatrix<float> poisson3d_rows<float>(index_t, index_t, index_t);
template CsrMatrix<double> poisson3d_rows<double>(index_t, index_t, index_t);
template CsrMatrix<bf16> poisson3d_rows<bf16>(index_t, index_t, index_t);
template CsrMatrix<float> poisson3d<float>(index_t);
template CsrMatrix<double> poisson3d<double>(index_t);
template CsrMatrix<bf16> poisson3d<bf16>(index_t);
template CsrMatrix<float> random_csr<float>(index_t, index_t, double, std::uint64_t);
template CsrMatrix<double> random_csr<double>(index_t, index_t, double, std::uint64_t);
template CsrMatrix<bf16> random_csr<bf16>(index_t, index_t, double, std::uint64_t);

}  // namespace trnsparse
