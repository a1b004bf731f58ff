// IC(0) and ILU(0): incomplete factorisations on A's own pattern, applied as two
// level-scheduled triangular solves (triangular.cpp).
//
// The factorisation runs row by row in fp64 over a working copy of the pattern (the
// whole of A for ILU(0), its lower triangle for IC(0); a BSR matrix contributes every
// entry of its stored blocks, zeros included, so the factors keep its block pattern).
// The structures of L and U, and for each of their entries the working entry it comes
// from, are built once; `update` refactors into the same arrays, so the triangular
// solvers, which view them, stay valid. Every array is sized before it is filled, on
// huge pages (runtime/huge_pages.hpp): faulting in fresh 4 KiB pages would otherwise
// cost more than the factorisation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
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

  /// Whether `other` is the structure the factors were built from.
  [[nodiscard]] bool built_from(const std::shared_ptr<const BsrStructure>& other) const {
    return other == structure || *other == *structure;
  }
  // The working pattern (CSR), where each entry's value comes from in A's values, and
  // the position of each row's diagonal.
  std::vector<index_t> ptr, idx, src, diag;
  std::vector<double> w;
  std::vector<index_t> pos;  // factor's scratch: column -> entry of the current row, else -1
  CsrMatrix<T> lower{0, 0}, upper{0, 0};
  std::vector<index_t> lower_src, upper_src;  // working entry of each factor entry, -1 for a unit 1
  std::optional<TriangularSolver<T>> lower_solve, upper_solve;

  /// The working pattern from A's rows: entries (row, column, source position) given
  /// row by row in ascending column order by `rows(emit)`.
  template <class Rows>
  void build_pattern(Rows&& rows) {
    const bool keep_upper = kind == Kind::ilu0;
    index_t count = 0;
    const auto same_block = [this](index_t i, index_t j) {
      if (bounds.size() <= 2) return true;
      const auto block = [this](index_t r) { return std::upper_bound(bounds.begin(), bounds.end(), r) - bounds.begin(); };
      return block(i) == block(j);
    };
    rows([&](index_t i, index_t j, index_t) { count += (j <= i || keep_upper) && same_block(i, j); }, [] {});
    ptr = detail::huge_reserved<index_t>(n + 1, "incomplete factorisation: row pointers");
    idx = detail::huge_reserved<index_t>(count, "incomplete factorisation: pattern");
    src = detail::huge_reserved<index_t>(count, "incomplete factorisation: pattern");
    diag = detail::huge_vector<index_t>(n, "incomplete factorisation: diagonal");
    std::fill(diag.begin(), diag.end(), index_t{-1});
    ptr.push_back(0);
    rows([&](index_t i, index_t j, index_t at) {
      if ((j > i && !keep_upper) || !same_block(i, j)) return;
      if (j == i) diag[static_cast<std::size_t>(i)] = static_cast<index_t>(idx.size());
      idx.push_back(j);
      src.push_back(at);
    }, [&] { ptr.push_back(static_cast<index_t>(idx.size())); });
    for (index_t i = 0; i < n; ++i)
      if (diag[static_cast<std::size_t>(i)] < 0)
        throw InvalidArgument(detail::concat(who, ": row ", i, " of A has no diagonal entry (zero pivot)"));
    w = detail::huge_vector<double>(count, "incomplete factorisation: values");
    pos = detail::huge_vector<index_t>(n, "incomplete factorisation: columns of a row");
    std::fill(pos.begin(), pos.end(), index_t{-1});
  }

  /// The factors' structures: ILU(0) L = the strict lower part and a unit diagonal, U =
  /// the diagonal and upper part; IC(0) L = the working pattern, U = Lᵀ.
  void build_factors() {
    const auto nnz = static_cast<index_t>(idx.size());
    index_t nl = 0;  // L: for ILU(0), each row's entries left of the diagonal and a unit 1
    if (kind == Kind::ilu0)
      for (index_t i = 0; i < n; ++i) nl += diag[static_cast<std::size_t>(i)] - ptr[i] + 1;
    else
      nl = nnz;
    const index_t nu = kind == Kind::ilu0 ? nnz + n - nl : nnz;
    const auto reserve = [](index_t count, const char* what) { return detail::huge_reserved<index_t>(count, what); };
    std::vector<index_t> lp = reserve(n + 1, "incomplete factorisation: L"), li = reserve(nl, "incomplete factorisation: L"),
                         up = reserve(n + 1, "incomplete factorisation: U"), ui = reserve(nu, "incomplete factorisation: U");
    lower_src = reserve(nl, "incomplete factorisation: L");
    upper_src = reserve(nu, "incomplete factorisation: U");
    if (kind == Kind::ilu0) {
      lp.push_back(0);
      up.push_back(0);
      for (index_t i = 0; i < n; ++i) {
        const index_t d = diag[static_cast<std::size_t>(i)];
        for (index_t e = ptr[i]; e < d; ++e) {
          li.push_back(idx[e]);
          lower_src.push_back(e);
        }
        li.push_back(i);
        lower_src.push_back(-1);
        for (index_t e = d; e < ptr[i + 1]; ++e) {
          ui.push_back(idx[e]);
          upper_src.push_back(e);
        }
        lp.push_back(static_cast<index_t>(li.size()));
        up.push_back(static_cast<index_t>(ui.size()));
      }
    } else {
      li.assign(idx.begin(), idx.end());
      lp.assign(ptr.begin(), ptr.end());
      for (index_t e = 0; e < nnz; ++e) lower_src.push_back(e);
      // Lᵀ by a counting sort on the columns: rows of U in ascending column order.
      up.assign(static_cast<std::size_t>(n) + 1, 0);
      for (const index_t j : idx) ++up[static_cast<std::size_t>(j) + 1];
      for (index_t j = 0; j < n; ++j) up[j + 1] += up[j];
      ui.resize(static_cast<std::size_t>(nnz));
      upper_src.resize(static_cast<std::size_t>(nnz));
      std::vector<index_t>& at = pos;  // pos is free until factor(): the next slot of each row of U
      std::copy(up.begin(), up.end() - 1, at.begin());
      for (index_t i = 0; i < n; ++i)
        for (index_t e = ptr[i]; e < ptr[i + 1]; ++e) {
          const index_t k = at[static_cast<std::size_t>(idx[e])]++;
          ui[k] = i;
          upper_src[k] = e;
        }
      std::fill(pos.begin(), pos.end(), index_t{-1});
    }
    lower = CsrMatrix<T>(n, n, std::move(lp), std::move(li), detail::huge_vector<T>(nl, "incomplete factorisation: L"));
    upper = CsrMatrix<T>(n, n, std::move(up), std::move(ui), detail::huge_vector<T>(nu, "incomplete factorisation: U"));
    lower_solve.emplace(lower, Triangle::lower, kind == Kind::ilu0 ? Diagonal::unit : Diagonal::non_unit);
    upper_solve.emplace(upper, Triangle::upper, Diagonal::non_unit);
  }

  /// Factorises the values `a` (A's values, indexed by src) into the factors.
  void factor(std::span<const T> a) {
    for (std::size_t e = 0; e < src.size(); ++e) {
      const double v = static_cast<double>(a[static_cast<std::size_t>(src[e])]);
      if (!std::isfinite(v)) {
        const auto row = std::upper_bound(ptr.begin(), ptr.end(), static_cast<index_t>(e)) - ptr.begin() - 1;
        throw InvalidArgument(detail::concat(who, ": A(", row, ", ", idx[e], ") = ", v, ", expected a finite value"));
      }
      w[e] = v;
    }
    for (index_t i = 0; i < n; ++i) {
      for (index_t e = ptr[i]; e < ptr[i + 1]; ++e) pos[static_cast<std::size_t>(idx[e])] = e;
      const index_t d = diag[static_cast<std::size_t>(i)];
      if (kind == Kind::ilu0) {
        // IKJ: row i -= l_ik (row k of U) for each k < i in its pattern, in order.
        for (index_t e = ptr[i]; e < d; ++e) {
          const index_t k = idx[e];
          w[e] /= w[static_cast<std::size_t>(diag[static_cast<std::size_t>(k)])];
          for (index_t f = diag[static_cast<std::size_t>(k)] + 1; f < ptr[k + 1]; ++f)
            if (const index_t at = pos[static_cast<std::size_t>(idx[f])]; at >= 0) w[at] -= w[e] * w[f];
        }
        if (!(w[d] != 0.0 && std::isfinite(w[d])))
          throw InvalidArgument(detail::concat(who, ": zero pivot at row ", i, " (u_ii = ", w[d], ")"));
      } else {
        // l_ik = (a_ik - sum_{j < k} l_ij l_kj) / l_kk, then l_ii = sqrt(a_ii - sum l_ij²).
        double sq = 0.0;
        for (index_t e = ptr[i]; e < d; ++e) {
          const index_t k = idx[e];
          double s = w[e];
          for (index_t f = ptr[k]; f < diag[static_cast<std::size_t>(k)]; ++f)
            if (const index_t at = pos[static_cast<std::size_t>(idx[f])]; at >= 0) s -= w[at] * w[f];
          w[e] = s / w[static_cast<std::size_t>(diag[static_cast<std::size_t>(k)])];
          sq += w[e] * w[e];
        }
        const double pivot = w[d] - sq;
        if (!(pivot > 0.0 && std::isfinite(pivot)))
          throw InvalidArgument(detail::concat(who, ": non-positive pivot at row ", i, " (", pivot,
                                               "): A is not positive definite enough for IC(0)"));
        w[d] = std::sqrt(pivot);
      }
      for (index_t e = ptr[i]; e < ptr[i + 1]; ++e) pos[static_cast<std::size_t>(idx[e])] = -1;
    }
    const auto fill = [&](CsrMatrix<T>& M, const std::vector<index_t>& from) {
      const std::span<T> v = M.values();
      for (std::size_t e = 0; e < from.size(); ++e) v[e] = from[e] < 0 ? T(1) : static_cast<T>(w[static_cast<std::size_t>(from[e])]);
    };
    fill(lower, lower_src);
    fill(upper, upper_src);
  }

  void init_csr(const CsrMatrix<T>& A) {
    n = A.rows();
    structure = A.structure_ptr();
    const auto ptr_a = A.row_ptr();
    const auto idx_a = A.col_indices();
    build_pattern([&](auto&& emit, auto&& end_row) {
      for (index_t i = 0; i < n; ++i) {
        for (index_t e = ptr_a[i]; e < ptr_a[i + 1]; ++e) emit(i, idx_a[e], e);
        end_row();
      }
    });
    build_factors();
    factor(A.values());
  }

  void init_bsr(const BsrMatrix<T>& A) {
    n = A.rows();
    structure = A.structure_ptr();
    from_bsr = true;
    const index_t b = A.block_size(), nb = structure->block_rows();
    const auto bp = structure->block_row_ptr(), bc = structure->block_col_indices();
    build_pattern([&](auto&& emit, auto&& end_row) {
      for (index_t I = 0; I < nb; ++I)
        for (index_t r = 0; r < b && I * b + r < n; ++r) {
          for (index_t e = bp[I]; e < bp[I + 1]; ++e)
            for (index_t c = 0; c < b && bc[e] * b + c < n; ++c) emit(I * b + r, bc[e] * b + c, (e * b + r) * b + c);
          end_row();
        }
    });
    build_factors();
    factor(A.blocks());
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
  s.factor(A.values());
}

template <SolverValue T>
void IncompleteFactorization<T>::update(const BsrMatrix<T>& A) {
  auto& s = *impl_;
  if (!s.from_bsr || !s.built_from(A.structure_ptr()))
    throw InvalidArgument(detail::concat(s.who, ".update: A's structure differs from the one the factors were built from",
                                         s.from_bsr ? "" : " (a CSR matrix)"));
  s.factor(A.blocks());
}

template class IncompleteFactorization<float>;
template class IncompleteFactorization<double>;

}  // namespace trnsparse
