// Sparse × sparse products: validate → plan (symbolic, cached) → numeric kernel →
// optional drop filter.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/spgemm.hpp"
#include "plan/csr_analysis.hpp"
#include "runtime/huge_pages.hpp"
#include "runtime/parallel.hpp"
#include "runtime/value.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/spgemm.hpp"

namespace trnsparse {

namespace {

using detail::concat;

template <Value T>
std::string describe(const CsrMatrix<T>& A, const CsrMatrix<T>& B) {
  return concat("A is ", A.rows(), " x ", A.cols(), " (CSR), B is ", B.rows(), " x ", B.cols(), " (CSR)");
}
template <Value T>
std::string describe(const BsrMatrix<T>& A, const BsrMatrix<T>& B) {
  return detail::describe_operands(A.structure(), B.structure());
}

const char* form_name(SpgemmForm form) {
  switch (form) {
    case SpgemmForm::a_b: return "multiply";
    case SpgemmForm::at_b: return "multiply (Aᵀ·B)";
    case SpgemmForm::a_bt: return "multiply_transposed";
  }
  return "multiply";
}

void check_tolerance(const char* who, double tol, const detail::DescribeOperands& operands) {
  if (!(tol >= 0.0))
    throw InvalidArgument(concat(who, ": drop_tolerance = ", tol, " must be >= 0 (and not NaN): ", operands()));
}

/// The 32-bit column indices the CSR kernel reads for a right operand read by rows.
template <Value T>
const std::int32_t* right_idx32(const CsrMatrix<T>& B, bool transposed) {
  return transposed ? nullptr : detail::analyses(B).compact(B.cols(), B.col_indices());
}
template <Value T>
const std::int32_t* right_idx32(const BsrMatrix<T>&, bool) {
  return nullptr;
}

/// Each stored block's Frobenius norm, in double (the filtered multiply's bounds).
template <Value T>
std::vector<double> block_norms(const BsrMatrix<T>& A) {
  const index_t bb = A.block_size() * A.block_size();
  std::vector<double> n = detail::make_vector<double>(A.n_blocks(), "multiply: block norms");
  const auto v = A.blocks();
  for (index_t q = 0; q < A.n_blocks(); ++q) {
    double s = 0.0;
    for (index_t e = 0; e < bb; ++e) {
      const double x = static_cast<double>(detail::widen(v[q * bb + e]));
      s += x * x;
    }
    n[q] = std::sqrt(s);
  }
  return n;
}

/// C's entries (bb values each) kept by the drop rule: !(norm <= tol), NaN kept.
template <class TC>
bool kept(const TC* v, index_t bb, double tol) {
  double s = 0.0;
  for (index_t e = 0; e < bb; ++e) s += static_cast<double>(v[e]) * static_cast<double>(v[e]);
  return !(std::sqrt(s) <= tol);
}

/// Compressed rows of C with the entries at or below `tol` left out.
template <class TC>
struct Filtered {
  std::vector<index_t> ptr, idx;
  std::vector<TC> vals;
};
template <class TC>
Filtered<TC> filter(const BsrStructure& c, std::span<const TC> vals, double tol) {
  const index_t bb = c.block_size() * c.block_size();
  const auto ptr = c.block_row_ptr();
  const auto idx = c.block_col_indices();
  Filtered<TC> f;
  f.ptr = detail::make_vector<index_t>(c.block_rows() + 1, "multiply: row pointers");
  f.idx = detail::huge_reserved<index_t>(c.n_blocks(), "multiply: column indices");
  f.vals = detail::huge_reserved<TC>(c.n_blocks() * bb, "multiply: values");
  for (index_t i = 0; i < c.block_rows(); ++i) {
    for (index_t e = ptr[i]; e < ptr[i + 1]; ++e) {
      const TC* v = vals.data() + e * bb;
      if (!kept(v, bb, tol)) continue;
      f.idx.push_back(idx[e]);
      f.vals.insert(f.vals.end(), v, v + bb);
    }
    f.ptr[i + 1] = static_cast<index_t>(f.idx.size());
  }
  return f;
}

}  // namespace

// ---- SpgemmPlan: numeric phase ----------------------------------------------------------

template <Value T>
bool SpgemmPlan::applies_to(const CsrMatrix<T>& A, const CsrMatrix<T>& B) const {
  return a_->same_structure(A.structure_ptr()) && b_->same_structure(B.structure_ptr());
}
template <Value T>
bool SpgemmPlan::applies_to(const BsrMatrix<T>& A, const BsrMatrix<T>& B) const {
  return a_->same_structure(A.structure_ptr()) && b_->same_structure(B.structure_ptr());
}

namespace {

/// The numeric phase of `plan` for A and B into `out` (stored() · b² values), with the
/// filtered multiply's bounds when `skip` > 0 (BSR).
template <class Matrix, class TC>
void numeric_into(const SpgemmPlan& plan, const Matrix& A, const Matrix& B, TC* out, double skip) {
  const std::string who = form_name(plan.form());
  if (!plan.applies_to(A, B))
    throw InvalidArgument(concat(who, ": the operands' structures are not the plan's: ", describe(A, B)));
  using T = detail::value_of<Matrix>;
  const bool left_t = plan.form() == SpgemmForm::at_b, right_t = plan.form() == SpgemmForm::a_bt;
  std::vector<double> na, nb;
  if constexpr (std::is_same_v<Matrix, BsrMatrix<T>>)
    if (skip > 0.0) {
      na = block_norms(A);
      nb = block_norms(B);
    }
  const BsrStructure& c = *plan.structure();
  const kernels::SpgemmProduct<T, TC> prob{
      .b = c.block_size(),
      .cols = c.block_cols(),
      .products = plan.cost().back(),
      .L = detail::spgemm_operand(plan.left(), left_t, detail::stored_values(A).data(), nullptr,
                                  detail::or_null(na), detail::or_null(plan.left_repeats())),
      .R = detail::spgemm_operand(plan.right(), right_t, detail::stored_values(B).data(), right_idx32(B, right_t),
                                  detail::or_null(nb), detail::or_null(plan.right_repeats()),
                                  detail::or_null(plan.right_runs())),
      .c_ptr = c.block_row_ptr().data(),
      .c_idx = c.block_col_indices().data(),
      .c_vals = out,
      .sampled = false,
      .skip = skip};
  detail::run_spgemm(prob, plan.cost());
}

template <class TC, class Matrix>
void check_output(const char* who, const SpgemmPlan& plan, const Matrix& A, const Matrix& B, std::span<TC> values) {
  const index_t bb = plan.structure()->block_size() * plan.structure()->block_size();
  detail::check_dim(static_cast<index_t>(values.size()), plan.stored() * bb, who, "values", "elements",
                    "stored() * b * b");
  const auto a = detail::stored_values(A), b = detail::stored_values(B);
  detail::check_no_alias(a.data(), a.size_bytes(), values.data(), values.size_bytes(), who, "A", "values");
  detail::check_no_alias(b.data(), b.size_bytes(), values.data(), values.size_bytes(), who, "B", "values");
}

/// The numeric phase into the caller's values. A loop of products with new values writes
/// them all each time: they move onto huge pages once written often
/// (detail::collapse_streamed), as an SpMV's vectors do, since C's stores to 4 KiB pages
/// slow a large phase (docs/spgemm.md, "Where the time goes"); the library's own results
/// are born there.
template <class Matrix, class TC>
void numeric_to(const SpgemmPlan& plan, const Matrix& A, const Matrix& B, std::span<TC> values) {
  check_output("SpgemmPlan::numeric", plan, A, B, values);
  detail::collapse_streamed(values.data(), values.size_bytes());
  numeric_into(plan, A, B, values.data(), 0.0);
}

}  // namespace

template <Value T>
void SpgemmPlan::numeric(const CsrMatrix<T>& A, const CsrMatrix<T>& B, std::span<acc_t<T>> values) const {
  numeric_to(*this, A, B, values);
}
template <Value T>
void SpgemmPlan::numeric(const BsrMatrix<T>& A, const BsrMatrix<T>& B, std::span<acc_t<T>> values) const {
  numeric_to(*this, A, B, values);
}

namespace {

/// A product's values, written by `numeric(vals)` for structure c, as a new matrix of
/// that structure, or of a structure of its own when entries are dropped.
template <class Matrix, class Numeric>
auto product_of(const std::shared_ptr<const BsrStructure>& c, double drop_tolerance, Numeric&& numeric) {
  using T = detail::value_of<Matrix>;
  using TC = acc_t<T>;
  constexpr bool blocked = std::is_same_v<Matrix, BsrMatrix<T>>;
  using Result = std::conditional_t<blocked, BsrMatrix<TC>, CsrMatrix<TC>>;
  // Untouched: the numeric phase writes every value, and its threads fault in the pages
  // of the rows they do.
  const index_t n_vals = c->n_blocks() * c->block_size() * c->block_size();
  detail::Block<TC> vals = detail::huge_untouched<TC>(n_vals, "multiply: C's values");
  numeric(vals.get());
  if (drop_tolerance > 0.0) {
    Filtered<TC> f = filter(*c, std::span<const TC>(vals.get(), static_cast<std::size_t>(n_vals)), drop_tolerance);
    return Result(detail::trusted_structure(c->rows(), c->cols(), c->block_size(), std::move(f.ptr), std::move(f.idx)),
                  std::move(f.vals));
  }
  return Result(c, detail::Storage<TC>(std::move(vals), static_cast<std::size_t>(n_vals)), detail::Written{});
}

/// The plan's product of A and B, sharing the plan's output structure unless entries
/// are dropped.
template <class Matrix>
auto multiply_with(const SpgemmPlan& plan, const Matrix& A, const Matrix& B, double drop_tolerance) {
  check_tolerance(form_name(plan.form()), drop_tolerance, [&] { return describe(A, B); });
  // A BSR product also skips block products whose norm bound is at or below the
  // tolerance (numeric_into; a CSR entry's products are single multiplications).
  return product_of<Matrix>(plan.structure(), drop_tolerance,
                            [&](auto* vals) { numeric_into(plan, A, B, vals, drop_tolerance); });
}

}  // namespace

template <Value T>
CsrMatrix<acc_t<T>> SpgemmPlan::multiply(const CsrMatrix<T>& A, const CsrMatrix<T>& B, double drop_tolerance) const {
  return multiply_with(*this, A, B, drop_tolerance);
}
template <Value T>
BsrMatrix<acc_t<T>> SpgemmPlan::multiply(const BsrMatrix<T>& A, const BsrMatrix<T>& B, double drop_tolerance) const {
  return multiply_with(*this, A, B, drop_tolerance);
}

// ---- the products ----------------------------------------------------------------------

template <Value T>
std::shared_ptr<const SpgemmPlan> spgemm_plan(const CsrMatrix<T>& A, const CsrMatrix<T>& B, SpgemmForm form) {
  detail::check_spgemm_operands(form_name(form), *A.structure_ptr(), *B.structure_ptr(), form,
                                [&] { return describe(A, B); });
  return detail::cached_spgemm_plan(A.structure_ptr(), B.structure_ptr(), form);
}
template <Value T>
std::shared_ptr<const SpgemmPlan> spgemm_plan(const BsrMatrix<T>& A, const BsrMatrix<T>& B, SpgemmForm form) {
  detail::check_spgemm_operands(form_name(form), A.structure(), B.structure(), form, [&] { return describe(A, B); });
  return detail::cached_spgemm_plan(A.structure_ptr(), B.structure_ptr(), form);
}

namespace {

/// Wakes the threads a product of A and B is likely to take (wake_team) before the
/// serial steps ahead of its first team: the plan's lookup, row costs, repeated rows and
/// scratch, or the result's allocation. Its block products are estimated as A's stored
/// blocks times the mean length of B's block rows, and costed as the plan costs them.
template <class Matrix>
void wake_threads(const Matrix& A, const Matrix& B) {
  const BsrStructure &a = *A.structure_ptr(), &b = *B.structure_ptr();
  const double products = static_cast<double>(a.n_blocks()) * static_cast<double>(b.n_blocks()) /
                          static_cast<double>(std::max<index_t>(1, b.block_rows()));
  detail::wake_team(detail::parts_for(a.block_rows(), detail::work_ns(detail::Work::spgemm, products)));
}

/// A·B in CSR when C has at most kNarrowColumns columns: C's structure found without a
/// plan (detail::narrow_structure), then the numeric kernel. A plan's bookkeeping, its
/// cache and the lookup cost more than such a product's own work when it is small
/// (docs/spgemm.md, "Narrow products"), and this symbolic phase, one OR of a word for
/// each entry of A, costs less than a plan's at any size.
template <Value T>
CsrMatrix<acc_t<T>> narrow_product(const CsrMatrix<T>& A, const CsrMatrix<T>& B, double drop_tolerance) {
  const BsrStructure &a = *A.structure_ptr(), &b = *B.structure_ptr();
  const detail::NarrowStructure n = detail::narrow_structure(
      {a.block_rows(), a.block_row_ptr().data(), a.block_col_indices().data()},
      {b.block_rows(), b.block_row_ptr().data(), b.block_col_indices().data()}, b.block_cols());
  const BsrStructure& c = *n.c;
  return product_of<CsrMatrix<T>>(n.c, drop_tolerance, [&](acc_t<T>* vals) {
    detail::run_spgemm(
        kernels::SpgemmProduct<T, acc_t<T>>{
            .b = 1,
            .cols = c.block_cols(),
            .products = n.cost.back(),
            .L = detail::spgemm_operand(a, A.values().data(), nullptr, nullptr, detail::or_null(n.l_repeats)),
            .R = detail::spgemm_operand(b, B.values().data(), nullptr, nullptr, detail::or_null(n.r_repeats),
                                        detail::or_null(n.runs)),
            .c_ptr = c.block_row_ptr().data(),
            .c_idx = c.block_col_indices().data(),
            .c_vals = vals,
            .sampled = false,
            .skip = 0.0},
        n.cost);
  });
}

template <class Matrix>
auto product(const Matrix& A, const Matrix& B, SpgemmForm form, double drop_tolerance) {
  check_tolerance(form_name(form), drop_tolerance, [&] { return describe(A, B); });
  using T = detail::value_of<Matrix>;
  if constexpr (std::is_same_v<Matrix, CsrMatrix<T>>)
    if (form == SpgemmForm::a_b && B.cols() <= kernels::kNarrowColumns) {
      detail::check_spgemm_operands(form_name(form), *A.structure_ptr(), *B.structure_ptr(), form,
                                    [&] { return describe(A, B); });
      return narrow_product(A, B, drop_tolerance);
    }
  wake_threads(A, B);
  return spgemm_plan(A, B, form)->multiply(A, B, drop_tolerance);
}

}  // namespace

template <Value T>
CsrMatrix<acc_t<T>> multiply(const CsrMatrix<T>& A, const CsrMatrix<T>& B, double drop_tolerance) {
  return product(A, B, SpgemmForm::a_b, drop_tolerance);
}
template <Value T>
BsrMatrix<acc_t<T>> multiply(const BsrMatrix<T>& A, const BsrMatrix<T>& B, double drop_tolerance) {
  return product(A, B, SpgemmForm::a_b, drop_tolerance);
}
template <Value T>
CsrMatrix<acc_t<T>> multiply_transposed(const CsrMatrix<T>& A, const CsrMatrix<T>& B, double drop_tolerance) {
  return product(A, B, SpgemmForm::a_bt, drop_tolerance);
}
template <Value T>
BsrMatrix<acc_t<T>> multiply_transposed(const BsrMatrix<T>& A, const BsrMatrix<T>& B, double drop_tolerance) {
  return product(A, B, SpgemmForm::a_bt, drop_tolerance);
}

namespace {

template <class Matrix>
auto triple(const Matrix& P, const Matrix& A, double drop_tolerance) {
  const auto operands = [&] {
    return concat("P is ", P.rows(), " x ", P.cols(), ", A is ", A.rows(), " x ", A.cols());
  };
  check_tolerance("galerkin", drop_tolerance, operands);
  if (A.rows() != A.cols() || A.cols() != P.rows())
    throw DimensionMismatch(concat("galerkin: Pᵀ·A·P needs a square A with A.cols() == P.rows(): ", operands()));
  const auto AP = product(A, P, SpgemmForm::a_b, 0.0);
  using TC = detail::value_of<std::remove_cvref_t<decltype(AP)>>;
  using T = detail::value_of<Matrix>;
  if constexpr (std::is_same_v<T, TC>) {
    return product(P, AP, SpgemmForm::at_b, drop_tolerance);
  } else {
    return product(cast<TC>(P), AP, SpgemmForm::at_b, drop_tolerance);
  }
}

}  // namespace

template <Value T>
CsrMatrix<acc_t<T>> galerkin(const CsrMatrix<T>& P, const CsrMatrix<T>& A, double drop_tolerance) {
  return triple(P, A, drop_tolerance);
}
template <Value T>
BsrMatrix<acc_t<T>> galerkin(const BsrMatrix<T>& P, const BsrMatrix<T>& A, double drop_tolerance) {
  if (P.block_size() != A.block_size())
    throw InvalidArgument(concat("galerkin: block sizes differ: P has ", P.block_size(), ", A has ", A.block_size()));
  return triple(P, A, drop_tolerance);
}

#define TRNSPARSE_INSTANTIATE(T)                                                                                   \
  template bool SpgemmPlan::applies_to(const CsrMatrix<T>&, const CsrMatrix<T>&) const;                          \
  template bool SpgemmPlan::applies_to(const BsrMatrix<T>&, const BsrMatrix<T>&) const;                          \
  template void SpgemmPlan::numeric(const CsrMatrix<T>&, const CsrMatrix<T>&, std::span<acc_t<T>>) const;        \
  template void SpgemmPlan::numeric(const BsrMatrix<T>&, const BsrMatrix<T>&, std::span<acc_t<T>>) const;        \
  template CsrMatrix<acc_t<T>> SpgemmPlan::multiply(const CsrMatrix<T>&, const CsrMatrix<T>&, double) const;     \
  template BsrMatrix<acc_t<T>> SpgemmPlan::multiply(const BsrMatrix<T>&, const BsrMatrix<T>&, double) const;     \
  template std::shared_ptr<const SpgemmPlan> spgemm_plan(const CsrMatrix<T>&, const CsrMatrix<T>&, SpgemmForm);  \
  template std::shared_ptr<const SpgemmPlan> spgemm_plan(const BsrMatrix<T>&, const BsrMatrix<T>&, SpgemmForm);  \
  template CsrMatrix<acc_t<T>> multiply(const CsrMatrix<T>&, const CsrMatrix<T>&, double);                       \
  template BsrMatrix<acc_t<T>> multiply(const BsrMatrix<T>&, const BsrMatrix<T>&, double);                       \
  template CsrMatrix<acc_t<T>> multiply_transposed(const CsrMatrix<T>&, const CsrMatrix<T>&, double);            \
  template BsrMatrix<acc_t<T>> multiply_transposed(const BsrMatrix<T>&, const BsrMatrix<T>&, double);            \
  template CsrMatrix<acc_t<T>> galerkin(const CsrMatrix<T>&, const CsrMatrix<T>&, double);                       \
  template BsrMatrix<acc_t<T>> galerkin(const BsrMatrix<T>&, const BsrMatrix<T>&, double);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
TRNSPARSE_INSTANTIATE(bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
