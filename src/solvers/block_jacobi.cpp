// Block Jacobi: the inverses of A's diagonal blocks, applied block row by block row.
// Each block is inverted in fp64 by Gauss–Jordan elimination with partial pivoting; a
// block whose largest remaining pivot is zero (or that holds a non-finite value) is
// reported by its first row.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/checks.hpp"
#include "runtime/parallel.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse {

namespace {

/// Inverts the b x b row-major block `a` (fp64, overwritten) into `inv`; false when it
/// is singular or not finite.
bool invert(std::vector<double>& a, std::vector<double>& inv, index_t b) {
  std::fill(inv.begin(), inv.end(), 0.0);
  for (index_t i = 0; i < b; ++i) inv[i * b + i] = 1.0;
  for (index_t c = 0; c < b; ++c) {
    index_t p = c;
    for (index_t r = c + 1; r < b; ++r)
      if (std::abs(a[r * b + c]) > std::abs(a[p * b + c])) p = r;
    const double pivot = a[p * b + c];
    if (!(pivot != 0.0 && std::isfinite(pivot))) return false;
    if (p != c)
      for (index_t k = 0; k < b; ++k) {
        std::swap(a[p * b + k], a[c * b + k]);
        std::swap(inv[p * b + k], inv[c * b + k]);
      }
    for (index_t k = 0; k < b; ++k) {
      a[c * b + k] /= pivot;
      inv[c * b + k] /= pivot;
    }
    for (index_t r = 0; r < b; ++r) {
      if (r == c) continue;
      const double f = a[r * b + c];
      if (f == 0.0) continue;
      for (index_t k = 0; k < b; ++k) {
        a[r * b + k] -= f * a[c * b + k];
        inv[r * b + k] -= f * inv[c * b + k];
      }
    }
  }
  return std::all_of(inv.begin(), inv.end(), [](double v) { return std::isfinite(v); });
}

/// Fills `inverses` with the inverted diagonal blocks that `block(I, out)` writes (the
/// b x b fp64 block of block row I, zero where A stores nothing, and the identity past
/// the last row when b does not divide n).
template <class T, class Block>
void invert_blocks(index_t n, index_t b, std::vector<T>& inverses, Block&& block) {
  const index_t nb = detail::ceil_div(n, b);
  inverses.assign(static_cast<std::size_t>(nb * b * b), T(0));
  std::vector<double> a(static_cast<std::size_t>(b * b)), inv(a.size());
  for (index_t I = 0; I < nb; ++I) {
    std::fill(a.begin(), a.end(), 0.0);
    block(I, a.data());
    for (index_t r = n - I * b; r < b; ++r) a[r * b + r] = 1.0;
    if (!invert(a, inv, b))
      throw InvalidArgument(detail::concat("bjacobi: the diagonal block of rows [", I * b, ", ", std::min(n, I * b + b),
                                           ") of A is singular or not finite"));
    for (std::size_t k = 0; k < inv.size(); ++k) inverses[static_cast<std::size_t>(I * b * b) + k] = static_cast<T>(inv[k]);
  }
}

}  // namespace

template <SolverValue T>
BlockJacobi<T>::BlockJacobi(const BsrMatrix<T>& A) {
  if (A.rows() != A.cols())
    throw InvalidArgument(detail::concat("bjacobi: A is ", A.rows(), " x ", A.cols(), ", expected a square matrix"));
  n_ = A.rows();
  b_ = A.block_size();
  update(A);
}

template <SolverValue T>
BlockJacobi<T>::BlockJacobi(const CsrMatrix<T>& A, index_t block_size) {
  if (A.rows() != A.cols())
    throw InvalidArgument(detail::concat("bjacobi: A is ", A.rows(), " x ", A.cols(), ", expected a square matrix"));
  if (block_size < 1 || A.rows() % block_size != 0)
    throw InvalidArgument(detail::concat("bjacobi: block_size = ", block_size, ", expected >= 1 and dividing A's ",
                                         A.rows(), " rows"));
  n_ = A.rows();
  b_ = block_size;
  update(A);
}

template <SolverValue T>
void BlockJacobi<T>::update(const CsrMatrix<T>& A) {
  if (A.rows() != n_ || A.cols() != n_)
    throw InvalidArgument(detail::concat("bjacobi.update: A is ", A.rows(), " x ", A.cols(), ", expected ", n_, " x ", n_));
  const auto ptr = A.row_ptr();
  const auto idx = A.col_indices();
  const auto val = A.values();
  const index_t b = b_;
  invert_blocks(n_, b, inverses_, [&](index_t I, double* out) {
    for (index_t r = 0; r < b; ++r) {
      const index_t i = I * b + r;
      for (index_t e = ptr[i]; e < ptr[i + 1]; ++e)
        if (idx[e] >= I * b && idx[e] < I * b + b) out[r * b + idx[e] - I * b] = static_cast<double>(val[e]);
    }
  });
}

template <SolverValue T>
void BlockJacobi<T>::update(const BsrMatrix<T>& A) {
  if (A.rows() != n_ || A.cols() != n_ || A.block_size() != b_)
    throw InvalidArgument(detail::concat("bjacobi.update: A is ", A.rows(), " x ", A.cols(), " with block size ",
                                         A.block_size(), ", expected ", n_, " x ", n_, " with block size ", b_));
  const auto ptr = A.structure().block_row_ptr();
  const auto idx = A.structure().block_col_indices();
  const index_t b = b_;
  invert_blocks(n_, b, inverses_, [&](index_t I, double* out) {
    for (index_t e = ptr[I]; e < ptr[I + 1]; ++e)
      if (idx[e] == I) {
        const auto blk = A.block(e);
        for (index_t k = 0; k < b * b; ++k) out[k] = static_cast<double>(blk[static_cast<std::size_t>(k)]);
      }
  });
}

template <SolverValue T>
void BlockJacobi<T>::apply(std::span<const T> r, std::span<T> z) const {
  detail::check_dim(static_cast<index_t>(r.size()), n_, "bjacobi", "r", "elements", "size()");
  detail::check_dim(static_cast<index_t>(z.size()), n_, "bjacobi", "z", "elements", "size()");
  const index_t b = b_, nb = detail::ceil_div(n_, b);
  constexpr index_t kBlocksPerUnit = 1024;
  const index_t units = detail::ceil_div(nb, kBlocksPerUnit);
  const int parts = detail::parts_for(units, detail::work_ns(detail::Work::stream, static_cast<double>(n_ * (b + 2))));
  detail::parallel_for(parts, units, [&](int, index_t u) {
    for (index_t I = u * kBlocksPerUnit; I < std::min(nb, (u + 1) * kBlocksPerUnit); ++I) {
      const T* inv = inverses_.data() + I * b * b;
      const index_t r0 = I * b, rows = std::min(b, n_ - r0);
      for (index_t i = 0; i < rows; ++i) {
        double s = 0.0;
        for (index_t j = 0; j < rows; ++j) s += static_cast<double>(inv[i * b + j]) * static_cast<double>(r[r0 + j]);
        z[r0 + i] = static_cast<T>(s);
      }
    }
  });
}

template class BlockJacobi<float>;
template class BlockJacobi<double>;

}  // namespace trnsparse
