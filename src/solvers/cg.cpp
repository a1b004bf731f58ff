// Conjugate gradients, one or many right-hand sides (one code path: a single right-hand
// side is the n x 1 case, so column j of a block solve is the single solve of column j).
//
// Per iteration, over n x k row-major blocks (k right-hand sides):
//   1. Q = A P with pq_j = P_jᵀ Q_j: for a CSR operator, chunk by chunk (the chunk's rows
//      of Q, then their dot while in cache); otherwise the product, then one pass;
//   2. one pass: X += α P, R -= α Q, with rr_j = R_jᵀ R_j and rz_j = R_jᵀ Z_j, Z = M⁻¹ R;
//   3. one pass: P = Z + β P.
// The preconditioner is diagonal, so Z is recomputed from R where it is needed (the same
// products, so the same bits) instead of being stored: one n x k block less to write
// per iteration. The passes are the active ISA's kernels (kernels/cpu/cg_tile.inc);
// their reductions run through ChunkedSums: fixed order, bitwise the same for any
// thread count.
//
// Frozen columns. When a column freezes (converged, broke down, or stopped), the passes
// of that iteration run with `select`: a frozen column keeps its x and r (a NaN in its
// p or q never reaches x), and the direction pass sets its p and r to exactly zero.
// From then on its α and β are 0 and its q = A·0 = 0, so the plain passes leave x
// unchanged and p, r at zero without looking at the column: the loops carry no
// per-column condition and vectorise.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "ops/fused.hpp"
#include "plan/csr_analysis.hpp"
#include "solvers/chunked.hpp"
#include "solvers/krylov.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse {

namespace {

using solvers::ChunkedSums;
using solvers::for_rows;
using Block = kernels::CgBlock<double>;  // lane_slot does not depend on T

/// The lane layout the CG kernels use for k columns (kernels::CgBlock::lane_slot).
solvers::LaneLayout layout_for(index_t k) {
  return k == 1 ? solvers::LaneLayout::by_reduction : solvers::LaneLayout::by_lane;
}

/// Q = A P (n x k, ld k) and pq_j = P_jᵀ Q_j in pAp[j], through `pq` (m = k) or, for a
/// stored triangle, the symmetric product's own fused sums, column by column for every k
/// (so that column j of a block solve sums as its single solve does); `columns` is 2n
/// scratch values for k > 1.
template <SolverValue T>
void apply_dot(const LinearOperator<T>& A, const kernels::CgBlock<T>& c, T* Q, index_t n, ChunkedSums& pq,
               std::vector<double>& pAp, std::vector<T>& columns) {
  const auto& passes = dispatch::cg_kernels<T>();
  const index_t k = c.k;
  const double elements = static_cast<double>(n) * static_cast<double>(k);
  if (const CsrMatrix<T>* csr = A.csr()) {
    const kernels::CsrProduct<T, T> prod{.width = k,
                                         .in_rows = csr->cols(),
                                         .ptr = csr->row_ptr().data(),
                                         .idx = csr->col_indices().data(),
                                         .idx32 = detail::analyses(*csr).compact(csr->cols(), csr->col_indices()),
                                         .values = csr->values().data(),
                                         .alpha = T(1),
                                         .beta = T(0),
                                         .B = c.p,
                                         .ldb = k,
                                         .C = Q,
                                         .ldc = k};
    const auto& kernel = dispatch::csr_kernels<T, T>();
    pq.run(detail::work_ns(detail::Work::csr, static_cast<double>(csr->nnz()) * static_cast<double>(k), k) +
               detail::work_ns(detail::Work::stream, elements),
           [&](index_t r0, index_t r1, double* lanes) {
             kernel.spmm(prod, r0, r1);
             passes.dot(c, r0, r1, lanes);
           });
  } else if (const CsrMatrix<T>* tri = A.triangle()) {
    if (k == 1) {
      pAp[0] = detail::spmv_symmetric_dot(*tri, A.uplo(), std::span<const T>(c.p, n), std::span<T>(Q, n));
      return;
    }
    columns.resize(static_cast<std::size_t>(2 * n));
    const std::span<T> p(columns.data(), static_cast<std::size_t>(n)), q(columns.data() + n, static_cast<std::size_t>(n));
    for (index_t j = 0; j < k; ++j) {
      for (index_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = c.p[i * k + j];
      pAp[j] = detail::spmv_symmetric_dot(*tri, A.uplo(), std::span<const T>(p), q);
      for (index_t i = 0; i < n; ++i) Q[i * k + j] = q[static_cast<std::size_t>(i)];
    }
    return;
  } else {
    A.apply(DenseView<const T>(c.p, n, k, k), DenseView<T>(Q, n, k, k));
    pq.run(detail::work_ns(detail::Work::stream, 2.0 * elements), [&](index_t r0, index_t r1, double* lanes) { passes.dot(c, r0, r1, lanes); });
  }
  pq.reduce(A);
  for (index_t j = 0; j < k; ++j) pAp[j] = pq.sum(j);
}

template <SolverValue T>
BlockSolveResult<T> block_cg(const LinearOperator<T>& A, DenseView<const T> B, const CgOptions<T>& opt) {
  const char* who = "cg";
  const index_t n = A.size(), k = B.cols;
  A.agree([&] {
    detail::check_dim(B.rows, n, who, "b", "rows", "A.size()");
    if (!(opt.tol >= 0.0)) throw InvalidArgument(detail::concat(who, ": tol = ", opt.tol, " must be >= 0"));
    detail::check_nonnegative(opt.max_iter, "cg: max_iter");
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < k; ++j)
        if (!std::isfinite(B(i, j)))
          throw InvalidArgument(detail::concat(who, ": b(", i, ", ", j, ") = ", B(i, j), ", expected a finite value"));
    solvers::check_vector(opt.x0, detail::checked_mul(n, k, "cg: n * k"), true, who, "x0", "n * k");
    solvers::check_vector(opt.preconditioner, n, true, who, "preconditioner", "A.size()");
  });
  const bool has_x0 = A.any(!opt.x0.empty());  // a process without rows has none but joins the product

  BlockSolveResult<T> res{Dense<T>(n, k), std::vector<index_t>(static_cast<std::size_t>(k), 0),
                          std::vector<double>(static_cast<std::size_t>(k), 0.0),
                          std::vector<SolveStatus>(static_cast<std::size_t>(k), SolveStatus::max_iterations)};
  if (k == 0) return res;
  const std::size_t nk = static_cast<std::size_t>(n * k);
  T* X = res.X.values().data();
  const T* minv = opt.preconditioner.empty() ? nullptr : opt.preconditioner.data();
  std::vector<T> R = detail::make_vector<T>(n * k, "cg: residual"), P = detail::make_vector<T>(n * k, "cg: direction"),
                 Q = detail::make_vector<T>(n * k, "cg: product");
  const double elements = static_cast<double>(nk);
  if (has_x0) {
    std::copy(opt.x0.begin(), opt.x0.end(), X);
    A.apply(DenseView<const T>(X, n, k, k), DenseView<T>(Q.data(), n, k, k));
  }

  // R = B - A X0, P = Z = M⁻¹ R, with bᵀb, rᵀr, rᵀz per column.
  std::vector<double> bb(static_cast<std::size_t>(k)), rz(static_cast<std::size_t>(k));
  std::vector<double> alpha(static_cast<std::size_t>(k)), beta(static_cast<std::size_t>(k));
  std::vector<char> active(static_cast<std::size_t>(k), 1);
  std::vector<T> alpha_t(static_cast<std::size_t>(k)), beta_t(static_cast<std::size_t>(k));
  {
    ChunkedSums init(n, 3 * k, layout_for(k));
    init.run(detail::work_ns(detail::Work::stream, 3.0 * elements), [&](index_t r0, index_t r1, double* lanes) {
      for_rows(r0, r1, [&](index_t i, index_t l) {
        for (index_t j = 0; j < k; ++j) {
          const T bij = B(i, j);
          const T r = has_x0 ? bij - Q[i * k + j] : bij;
          const T z = minv ? minv[i] * r : r;
          R[i * k + j] = r;
          P[i * k + j] = z;
          lanes[Block::lane_slot(k, j, l, 3 * k)] += static_cast<double>(bij) * static_cast<double>(bij);
          lanes[Block::lane_slot(k, k + j, l, 3 * k)] += static_cast<double>(r) * static_cast<double>(r);
          lanes[Block::lane_slot(k, 2 * k + j, l, 3 * k)] += static_cast<double>(r) * static_cast<double>(z);
        }
      });
    });
    init.reduce(A);
    for (index_t j = 0; j < k; ++j) {
      bb[j] = init.sum(j);
      rz[j] = init.sum(2 * k + j);
      if (bb[j] == 0.0) {  // b = 0: x = 0 exactly
        for (index_t i = 0; i < n; ++i) X[i * k + j] = T(0);
        res.status[j] = SolveStatus::converged;
        active[j] = 0;
        continue;
      }
      res.rel_residual[j] = std::sqrt(init.sum(k + j) / bb[j]);
      if (res.rel_residual[j] <= opt.tol) res.status[j] = SolveStatus::converged;
      else if (!(rz[j] > 0.0 && std::isfinite(rz[j]))) res.status[j] = SolveStatus::breakdown;
      else continue;
      active[j] = 0;
    }
  }

  const auto& passes = dispatch::cg_kernels<T>();
  const kernels::CgBlock<T> c{.k = k,
                              .x = X,
                              .r = R.data(),
                              .p = P.data(),
                              .q = Q.data(),
                              .minv = minv,
                              .live = active.data(),
                              .alpha = alpha_t.data(),
                              .beta = beta_t.data()};
  ChunkedSums pq(n, k, layout_for(k)), update(n, 2 * k, layout_for(k));
  std::vector<double> pAp(static_cast<std::size_t>(k));
  std::vector<T> columns;  // apply_dot's scratch for a stored triangle with k > 1
  std::ptrdiff_t zeroed = 0;  // frozen columns whose p and r are zero
  for (index_t it = 1; it <= opt.max_iter && std::ranges::find(active, 1) != active.end(); ++it) {
    apply_dot(A, c, Q.data(), n, pq, pAp, columns);
    for (index_t j = 0; j < k; ++j) {
      if (!active[j]) continue;
      alpha[j] = rz[j] / pAp[j];
      if (!(pAp[j] > 0.0 && std::isfinite(alpha[j]))) {  // A not SPD, or a NaN/inf in A p
        res.status[j] = SolveStatus::breakdown;
        active[j] = 0;
      }
    }
    if (k == 1 && !active[0]) break;  // one column is never frozen inside the passes
    // A frozen column's α is -0: x + (-0)·0 is x for every x, -0 included (+0 would turn
    // -0 into +0).
    for (index_t j = 0; j < k; ++j) alpha_t[j] = active[j] ? static_cast<T>(alpha[j]) : -T(0);
    // Columns frozen but not yet zeroed: this iteration's passes select (see the top).
    const bool select = std::ranges::count(active, 0) > zeroed;
    update.run(detail::work_ns(detail::Work::stream, 5.0 * elements),
               [&](index_t r0, index_t r1, double* lanes) { passes.update(c, select, r0, r1, lanes); });
    update.reduce(A);
    double worst = 0.0;
    for (index_t j = 0; j < k; ++j) {
      if (!active[j]) continue;
      const double rel = std::sqrt(update.sum(j) / bb[j]), rz_new = update.sum(k + j);
      res.iterations[j] = it;
      res.rel_residual[j] = rel;
      worst = std::max(worst, rel);
      if (!std::isfinite(rel)) res.status[j] = SolveStatus::breakdown;
      else if (rel <= opt.tol) res.status[j] = SolveStatus::converged;
      else if (!(rz_new > 0.0 && std::isfinite(rz_new))) res.status[j] = SolveStatus::breakdown;  // M not SPD
      else {
        beta[j] = rz_new / rz[j];
        rz[j] = rz_new;
        continue;
      }
      active[j] = 0;
    }
    if (opt.callback && solvers::stop_requested(A, opt.callback, it, worst)) {
      for (index_t j = 0; j < k; ++j)
        if (active[j]) res.status[j] = SolveStatus::stopped;
      break;
    }
    if (std::ranges::find(active, 1) == active.end()) break;  // no column needs a direction
    for (index_t j = 0; j < k; ++j) beta_t[j] = active[j] ? static_cast<T>(beta[j]) : T(0);
    const bool zeroing = std::ranges::count(active, 0) > zeroed;
    update.run(detail::work_ns(detail::Work::stream, 2.0 * elements), [&](index_t r0, index_t r1, double*) { passes.direction(c, zeroing, r0, r1); });
    zeroed = std::ranges::count(active, 0);
  }
  return res;
}

}  // namespace

template <SolverValue T>
double solvers::product_dot(const LinearOperator<T>& A, const T* p, T* q) {
  const index_t n = A.size();
  T alpha = T(0), beta = T(0);
  char live = 1;
  const kernels::CgBlock<T> c{.k = 1,
                              .x = nullptr,
                              .r = nullptr,
                              .p = const_cast<T*>(p),  // apply_dot and the dot pass only read p
                              .q = q,
                              .minv = nullptr,
                              .live = &live,
                              .alpha = &alpha,
                              .beta = &beta};
  ChunkedSums pq(n, 1, layout_for(1));
  std::vector<double> pAp(1);
  std::vector<T> columns;
  apply_dot(A, c, q, n, pq, pAp, columns);
  return pAp[0];
}

namespace {

/// Checks that a general preconditioner comes alone.
template <SolverValue T>
void check_single_preconditioner(const LinearOperator<T>& A, const CgOptions<T>& options) {
  A.agree([&] {
    if (options.M && !options.preconditioner.empty())
      throw InvalidArgument("cg: give a diagonal preconditioner or M, not both");
  });
}

}  // namespace

template <SolverValue T>
BlockSolveResult<T> cg(const LinearOperator<T>& A, DenseView<const std::type_identity_t<T>> B, const CgOptions<T>& options) {
  check_single_preconditioner(A, options);
  if (!options.M) return block_cg(A, B, options);
  // A general M: column by column, each as its single solve.
  const index_t n = A.size(), k = B.cols;
  detail::check_dim(B.rows, n, "cg", "b", "rows", "A.size()");
  A.agree([&] { solvers::check_vector(options.x0, detail::checked_mul(n, k, "cg: n * k"), true, "cg", "x0", "n * k"); });
  BlockSolveResult<T> res{Dense<T>(n, k), std::vector<index_t>(static_cast<std::size_t>(k), 0),
                          std::vector<double>(static_cast<std::size_t>(k), 0.0),
                          std::vector<SolveStatus>(static_cast<std::size_t>(k), SolveStatus::max_iterations)};
  std::vector<T> b(static_cast<std::size_t>(n)), x0(options.x0.empty() ? 0 : static_cast<std::size_t>(n));
  for (index_t j = 0; j < k; ++j) {
    for (index_t i = 0; i < n; ++i) b[i] = B(i, j);
    for (std::size_t i = 0; i < x0.size(); ++i) x0[i] = options.x0[i * static_cast<std::size_t>(k) + j];
    const SolveResult<T> col = solvers::preconditioned_cg(A, std::span<const T>(b), std::span<const T>(x0), options);
    for (index_t i = 0; i < n; ++i) res.X(i, j) = col.x[i];
    res.iterations[j] = col.iterations;
    res.rel_residual[j] = col.rel_residual;
    res.status[j] = col.status;
  }
  return res;
}

template <SolverValue T>
SolveResult<T> cg(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b, const CgOptions<T>& options) {
  check_single_preconditioner(A, options);
  if (options.M) return solvers::preconditioned_cg(A, b, options.x0, options);
  detail::check_dim(static_cast<index_t>(b.size()), A.size(), "cg", "b", "elements", "A.size()");
  BlockSolveResult<T> block = block_cg(A, DenseView<const T>(b.data(), A.size(), 1, 1), options);
  const std::span<const T> x = block.X.values();
  return {std::vector<T>(x.begin(), x.end()), block.iterations[0], block.rel_residual[0], block.status[0]};
}

#define TRNSPARSE_INSTANTIATE(T)                                                                                  \
  template double solvers::product_dot<T>(const LinearOperator<T>&, const T*, T*);                              \
  template SolveResult<T> cg<T>(const LinearOperator<T>&, std::span<const T>, const CgOptions<T>&);             \
  template BlockSolveResult<T> cg<T>(const LinearOperator<T>&, DenseView<const T>, const CgOptions<T>&);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
