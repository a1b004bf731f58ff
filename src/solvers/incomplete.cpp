// IC(0) and ILU(0): incomplete factorisations on A's own pattern, applied as two
// level-scheduled triangular solves (triangular.cpp).
//
// The factorisation runs row by row in fp64 over a working copy of the values of the
// pattern (the whole of A for ILU(0), its lower triangle for IC(0); a BSR matrix
// contributes every entry of its stored blocks, zeros included, so the factors keep its
// block pattern), stored in the factors' own entry order: the structures of L and U are
// the only copy of the pattern, and A is walked again for its values on `update`, which
// refactors into the same arrays, so the triangular solvers, which view them, stay
// valid. Row blocks (`blocks`) read nothing outside themselves: they are built and
// factorised side by side on the threads, each block the same bits on any thread. Every
// array is sized before it is filled, on huge pages (runtime/huge_pages.hpp): fresh
// memory costs more to fault in than the factorisation takes, which is also why the
// setup keeps no more than the factors and their working values.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <optional>
#include <vector>

#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
#include "runtime/parallel.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse {

template <SolverValue T>
struct IncompleteFactorization<T>::Impl {
  Kind kind;
  const char* who;
  index_t n = 0;
  // Rows [bounds[k], bounds[k + 1]) form block k; entries between blocks are dropped.
  std::vector<index_t> bounds;
  // The structure the factors were built from (shared with A), to check the one
  // `update` gets, and whether A was BSR.
  std::shared_ptr<const BsrStructure> structure;
  bool from_bsr = false;
  // The working values in fp64, row by row: ILU(0) row i's entries left of the diagonal
  // (L's row without its unit 1), then its diagonal and the entries right of it (U's
  // row); IC(0) L's entries. `pos`: a column's working entry in the current row, else -1
  // (blocks touch disjoint columns, so they share it).
  std::vector<double> w;
  std::vector<index_t> pos;
  CsrMatrix<T> lower{0, 0}, upper{0, 0};
  std::vector<index_t> upper_src;  // IC(0): the entry of L each entry of U = Lᵀ copies
  std::optional<TriangularSolver<T>> lower_solve, upper_solve;

  /// Whether `other` is the structure the factors were built from.
  [[nodiscard]] bool built_from(const std::shared_ptr<const BsrStructure>& other) const {
    return other == structure || *other == *structure;
  }

  [[nodiscard]] index_t blocks() const noexcept { return static_cast<index_t>(bounds.size()) - 1; }
  /// ILU(0): the entries of row i's L left of the diagonal (its row without the unit 1).
  [[nodiscard]] index_t left(index_t i) const noexcept {
    return lower.row_ptr()[i + 1] - lower.row_ptr()[i] - 1;
  }
  /// The first working entry of row i.
  [[nodiscard]] index_t row_start(index_t i) const noexcept {
    return kind == Kind::ilu0 ? lower.row_ptr()[i] - i + upper.row_ptr()[i] : lower.row_ptr()[i];
  }
  /// The working entry of row i's diagonal.
  [[nodiscard]] index_t diagonal(index_t i) const noexcept {
    return kind == Kind::ilu0 ? row_start(i) + left(i) : lower.row_ptr()[i + 1] - 1;
  }

  /// Runs fn(k) for each row block k, side by side on the threads, then rethrows the
  /// error of the first block that threw (the same error for any thread count).
  template <class Fn>
  void per_block(double entries, Fn&& fn) const {
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(blocks()));
    detail::parallel_for(detail::parts_for(blocks(), detail::work_ns(detail::Work::csr, entries)), blocks(),
                         [&](int, index_t k) {
                           try {
                             fn(k);
                           } catch (...) {
                             errors[static_cast<std::size_t>(k)] = std::current_exception();
                           }
                         });
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  /// Calls emit(i, j, at) for the entries of rows [r0, r1) (one block) that the working
  /// pattern keeps: columns within the block, and left of or on the diagonal unless
  /// `keep_upper` (ILU(0)). rows(r0, r1, f) walks A's entries (i, j), at position `at` of
  /// its values, row by row in ascending column order.
  template <class Rows, class Emit>
  static void kept(Rows& rows, index_t r0, index_t r1, bool keep_upper, Emit&& emit) {
    rows(r0, r1, [&](index_t i, index_t j, index_t at) {
      if (j >= r0 && j < r1 && (keep_upper || j <= i)) emit(i, j, at);
    });
  }

  /// The factors' structures from A's rows (`entries` of them stored), with `w` and
  /// `pos` sized: ILU(0) L = the strict lower part and a unit diagonal, U = the diagonal
  /// and upper part; IC(0) L = the working pattern, U = Lᵀ.
  template <class Rows>
  void build(Rows& rows, double entries) {
    const bool ilu = kind == Kind::ilu0;
    std::vector<index_t> lp = detail::make_vector<index_t>(n + 1, "incomplete factorisation: L"),
                         up = detail::make_vector<index_t>(n + 1, "incomplete factorisation: U");
    // Row counts (lp[i + 1], up[i + 1]), block by block; a missing diagonal is an error.
    per_block(entries, [&](index_t k) {
      const index_t r0 = bounds[k], r1 = bounds[k + 1];
      std::vector<char> has_diagonal(static_cast<std::size_t>(r1 - r0), 0);
      kept(rows, r0, r1, ilu, [&](index_t i, index_t j, index_t) {
        if (j < i || !ilu) ++lp[i + 1];
        else ++up[i + 1];
        if (j == i) has_diagonal[static_cast<std::size_t>(i - r0)] = 1;
      });
      for (index_t i = r0; i < r1; ++i) {
        if (!has_diagonal[static_cast<std::size_t>(i - r0)])
          throw InvalidArgument(detail::concat(who, ": row ", i, " of A has no diagonal entry (zero pivot)"));
        if (ilu) ++lp[i + 1];  // the unit 1
      }
    });
    for (index_t i = 0; i < n; ++i) {
      lp[i + 1] += lp[i];
      up[i + 1] += up[i];
    }
    const index_t nl = lp[n], nu = ilu ? up[n] : nl;
    std::vector<index_t> li = detail::make_vector<index_t>(nl, "incomplete factorisation: L"),
                         ui = detail::make_vector<index_t>(nu, "incomplete factorisation: U");
    per_block(static_cast<double>(nl + nu), [&](index_t k) {
      const index_t r0 = bounds[k], r1 = bounds[k + 1];
      // The next free entry of row i in L and in U.
      index_t row = -1, at_l = 0, at_u = 0;
      const auto close = [&] {
        if (ilu && row >= 0) li[static_cast<std::size_t>(at_l)] = row;  // the unit 1, last
      };
      kept(rows, r0, r1, ilu, [&](index_t i, index_t j, index_t) {
        if (i != row) {
          close();
          row = i;
          at_l = lp[i];
          at_u = up[i];
        }
        if (j < i || !ilu) li[static_cast<std::size_t>(at_l++)] = j;
        else ui[static_cast<std::size_t>(at_u++)] = j;
      });
      close();
    });
    if (!ilu) {
      // Lᵀ by a counting sort on the columns: rows of U in ascending column order.
      for (const index_t j : li) ++up[static_cast<std::size_t>(j) + 1];
      for (index_t j = 0; j < n; ++j) up[j + 1] += up[j];
      upper_src = detail::make_vector<index_t>(nl, "incomplete factorisation: U");
      std::vector<index_t> at(up.begin(), up.end() - 1);
      for (index_t i = 0; i < n; ++i)
        for (index_t e = lp[i]; e < lp[i + 1]; ++e) {
          const index_t q = at[static_cast<std::size_t>(li[e])]++;
          ui[q] = i;
          upper_src[q] = e;
        }
    }
    lower = CsrMatrix<T>(n, n, std::move(lp), std::move(li), detail::make_vector<T>(nl, "incomplete factorisation: L"));
    upper = CsrMatrix<T>(n, n, std::move(up), std::move(ui), detail::make_vector<T>(nu, "incomplete factorisation: U"));
    w = detail::make_vector<double>(ilu ? nl - n + nu : nl, "incomplete factorisation: values");
    pos = detail::make_vector<index_t>(n, "incomplete factorisation: columns of a row");
    std::fill(pos.begin(), pos.end(), index_t{-1});
    lower_solve.emplace(lower, Triangle::lower, ilu ? Diagonal::unit : Diagonal::non_unit);
    upper_solve.emplace(upper, Triangle::upper, Diagonal::non_unit);
  }

  /// Loads A's values `a` (walked by `rows`) into the working values and factorises them
  /// into the factors, block by block. Every value is checked finite before any block
  /// factorises.
  template <class Rows>
  void factor(Rows& rows, std::span<const T> a) {
    const bool ilu = kind == Kind::ilu0;
    const auto entries = static_cast<double>(w.size());
    per_block(entries, [&](index_t k) {
      index_t row = -1, at = 0;
      kept(rows, bounds[k], bounds[k + 1], ilu, [&](index_t i, index_t j, index_t src) {
        if (i != row) {
          row = i;
          at = row_start(i);
        }
        const double v = static_cast<double>(a[static_cast<std::size_t>(src)]);
        if (!std::isfinite(v))
          throw InvalidArgument(detail::concat(who, ": A(", i, ", ", j, ") = ", v, ", expected a finite value"));
        w[static_cast<std::size_t>(at++)] = v;
      });
    });
    per_block(entries, [&](index_t k) {
      for (index_t i = bounds[k]; i < bounds[k + 1]; ++i) ilu ? ilu_row(i) : ic_row(i);
    });
    T* lv = lower.values().data();
    T* uv = upper.values().data();
    const double* wv = w.data();
    per_block(entries, [&](index_t k) {
      const auto& lp = lower.row_ptr();
      const auto& up = upper.row_ptr();
      for (index_t i = bounds[k]; i < bounds[k + 1]; ++i) {
        if (ilu) {
          const double* src = wv + row_start(i);
          const index_t l = left(i);
          for (index_t q = 0; q < l; ++q) lv[lp[i] + q] = static_cast<T>(src[q]);
          lv[lp[i] + l] = T(1);
          for (index_t q = up[i]; q < up[i + 1]; ++q) uv[q] = static_cast<T>(src[l + q - up[i]]);
        } else {
          for (index_t e = lp[i]; e < lp[i + 1]; ++e) lv[e] = static_cast<T>(wv[e]);
        }
      }
    });
    if (!ilu)
      for (std::size_t q = 0; q < upper_src.size(); ++q) uv[q] = lv[upper_src[q]];
  }

  /// ILU(0), IKJ: row i -= l_ik (row k of U) for each k < i in its pattern, in order.
  void ilu_row(index_t i) {
    const auto& li = lower.col_indices();
    const auto& lp = lower.row_ptr();
    const auto& ui = upper.col_indices();
    const auto& up = upper.row_ptr();
    double* wv = w.data();
    index_t* at = pos.data();
    const index_t first = row_start(i), l = left(i), d = first + l;
    for (index_t q = 0; q < l; ++q) at[li[lp[i] + q]] = first + q;
    for (index_t q = up[i]; q < up[i + 1]; ++q) at[ui[q]] = d + q - up[i];
    for (index_t q = 0; q < l; ++q) {
      const index_t e = first + q, k = li[lp[i] + q], dk = diagonal(k);
      wv[e] /= wv[dk];
      // Row k of U after its diagonal: columns ui[up[k] + 1 ..], working entries dk + 1 ..
      for (index_t f = up[k] + 1; f < up[k + 1]; ++f)
        if (const index_t c = at[ui[f]]; c >= 0) wv[c] -= wv[e] * wv[dk + f - up[k]];
    }
    if (!(wv[d] != 0.0 && std::isfinite(wv[d])))
      throw InvalidArgument(detail::concat(who, ": zero pivot at row ", i, " (u_ii = ", wv[d], ")"));
    for (index_t q = 0; q < l; ++q) at[li[lp[i] + q]] = -1;
    for (index_t q = up[i]; q < up[i + 1]; ++q) at[ui[q]] = -1;
  }

  /// IC(0): l_ik = (a_ik - sum_{j < k} l_ij l_kj) / l_kk, then l_ii = sqrt(a_ii - sum l_ij²).
  void ic_row(index_t i) {
    const auto& li = lower.col_indices();
    const auto& lp = lower.row_ptr();
    double* wv = w.data();
    index_t* at = pos.data();
    const index_t d = lp[i + 1] - 1;
    for (index_t e = lp[i]; e <= d; ++e) at[li[e]] = e;
    double sq = 0.0;
    for (index_t e = lp[i]; e < d; ++e) {
      const index_t k = li[e];
      double s = wv[e];
      for (index_t f = lp[k]; f < lp[k + 1] - 1; ++f)
        if (const index_t c = at[li[f]]; c >= 0) s -= wv[c] * wv[f];
      wv[e] = s / wv[lp[k + 1] - 1];
      sq += wv[e] * wv[e];
    }
    const double pivot = wv[d] - sq;
    if (!(pivot > 0.0 && std::isfinite(pivot)))
      throw InvalidArgument(detail::concat(who, ": non-positive pivot at row ", i, " (", pivot,
                                           "): A is not positive definite enough for IC(0)"));
    wv[d] = std::sqrt(pivot);
    for (index_t e = lp[i]; e <= d; ++e) at[li[e]] = -1;
  }

  /// A's rows [r0, r1) for `kept`.
  static auto csr_rows(const CsrMatrix<T>& A) {
    return [ptr = A.row_ptr(), idx = A.col_indices()](index_t r0, index_t r1, auto&& emit) {
      for (index_t i = r0; i < r1; ++i)
        for (index_t e = ptr[i]; e < ptr[i + 1]; ++e) emit(i, idx[e], e);
    };
  }
  static auto bsr_rows(const BsrMatrix<T>& A) {
    return [n = A.rows(), b = A.block_size(), bp = A.structure().block_row_ptr(),
            bc = A.structure().block_col_indices()](index_t r0, index_t r1, auto&& emit) {
      for (index_t i = r0; i < r1; ++i) {
        const index_t I = i / b, r = i - I * b;
        for (index_t e = bp[I]; e < bp[I + 1]; ++e)
          for (index_t c = 0; c < b && bc[e] * b + c < n; ++c) emit(i, bc[e] * b + c, (e * b + r) * b + c);
      }
    };
  }

  void init_csr(const CsrMatrix<T>& A) {
    n = A.rows();
    structure = A.structure_ptr();
    auto rows = csr_rows(A);
    build(rows, static_cast<double>(A.nnz()));
    factor(rows, A.values());
  }

  void init_bsr(const BsrMatrix<T>& A) {
    n = A.rows();
    structure = A.structure_ptr();
    from_bsr = true;
    auto rows = bsr_rows(A);
    build(rows, static_cast<double>(A.blocks().size()));
    factor(rows, A.blocks());
  }
};

namespace {

template <class T>
const char* name_of(typename IncompleteFactorization<T>::Kind kind) {
  return kind == IncompleteFactorization<T>::Kind::ilu0 ? "ilu0" : "ic0";
}

template <class M>
void require_square(const M& A, const char* who) {
  if (A.rows() != A.cols())
    throw InvalidArgument(detail::concat(who, ": A is ", A.rows(), " x ", A.cols(), ", expected a square matrix"));
}

/// Row bounds of `blocks` ranges of about equal size over n rows in units of b rows.
std::vector<index_t> block_bounds(index_t n, index_t b, index_t blocks, const char* who) {
  if (blocks < 1) throw InvalidArgument(detail::concat(who, ": blocks = ", blocks, ", expected >= 1"));
  const index_t units = detail::ceil_div(n, b);
  std::vector<index_t> bounds{0};
  for (index_t k = 1; k < blocks; ++k) bounds.push_back(std::min(n, units * k / blocks * b));
  bounds.push_back(n);
  return bounds;
}

}  // namespace

template <SolverValue T>
IncompleteFactorization<T>::IncompleteFactorization(const CsrMatrix<T>& A, Kind kind, index_t blocks)
    : impl_(std::make_unique<Impl>()) {
  impl_->kind = kind;
  impl_->who = name_of<T>(kind);
  require_square(A, impl_->who);
  impl_->bounds = block_bounds(A.rows(), 1, blocks, impl_->who);
  impl_->init_csr(A);
}

template <SolverValue T>
IncompleteFactorization<T>::IncompleteFactorization(const BsrMatrix<T>& A, Kind kind, index_t blocks)
    : impl_(std::make_unique<Impl>()) {
  impl_->kind = kind;
  impl_->who = name_of<T>(kind);
  require_square(A, impl_->who);
  impl_->bounds = block_bounds(A.rows(), A.block_size(), blocks, impl_->who);
  impl_->init_bsr(A);
}

template <SolverValue T> IncompleteFactorization<T>::IncompleteFactorization(IncompleteFactorization&&) noexcept = default;
template <SolverValue T> IncompleteFactorization<T>::~IncompleteFactorization() = default;

template <SolverValue T> index_t IncompleteFactorization<T>::size() const noexcept { return impl_->n; }
template <SolverValue T> std::string_view IncompleteFactorization<T>::name() const noexcept { return impl_->who; }
template <SolverValue T> const CsrMatrix<T>& IncompleteFactorization<T>::lower() const noexcept { return impl_->lower; }
template <SolverValue T> const CsrMatrix<T>& IncompleteFactorization<T>::upper() const noexcept { return impl_->upper; }

template <SolverValue T>
void IncompleteFactorization<T>::apply(std::span<const T> r, std::span<T> z) const {
  const auto& s = *impl_;
  detail::check_dim(static_cast<index_t>(r.size()), s.n, s.who, "r", "elements", "size()");
  detail::check_dim(static_cast<index_t>(z.size()), s.n, s.who, "z", "elements", "size()");
  s.lower_solve->solve(r, z);  // L y = r
  s.upper_solve->solve(z, z);  // U z = y, in place
}

template <SolverValue T>
void IncompleteFactorization<T>::update(const CsrMatrix<T>& A) {
  auto& s = *impl_;
  if (s.from_bsr || !s.built_from(A.structure_ptr()))
    throw InvalidArgument(detail::concat(s.who, ".update: A's structure differs from the one the factors were built from",
                                         s.from_bsr ? " (a BSR matrix)" : ""));
  auto rows = Impl::csr_rows(A);
  s.factor(rows, A.values());
}

template <SolverValue T>
void IncompleteFactorization<T>::update(const BsrMatrix<T>& A) {
  auto& s = *impl_;
  if (!s.from_bsr || !s.built_from(A.structure_ptr()))
    throw InvalidArgument(detail::concat(s.who, ".update: A's structure differs from the one the factors were built from",
                                         s.from_bsr ? "" : " (a CSR matrix)"));
  auto rows = Impl::bsr_rows(A);
  s.factor(rows, A.blocks());
}

template class IncompleteFactorization<float>;
template class IncompleteFactorization<double>;

}  // namespace trnsparse
