// Iterative solvers: convergence on 3D Poisson and 1138_bus, iteration counts against
// Eigen's ConjugateGradient, multi-RHS against single solves, Chebyshev and Richardson
// against their closed-form errors, power iteration against a dense eigen-solver,
// breakdown and non-convergence, determinism across thread counts.
#include <Eigen/Dense>
#include <Eigen/IterativeLinearSolvers>
#include <Eigen/Sparse>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <numbers>

#include "plan/csr_analysis.hpp"
#include "runtime/checks.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {

using ::testing::HasSubstr;

const std::string data_dir = TRNSPARSE_TEST_DATA_DIR;

CsrMatrix<double> bus1138() { return to_csr(read_matrix_market(data_dir + "/1138_bus.mtx").entries); }

Eigen::SparseMatrix<double, Eigen::RowMajor> to_eigen(const CsrMatrix<double>& A) {
  std::vector<Eigen::Triplet<double>> t;
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t p = A.row_ptr()[i]; p < A.row_ptr()[i + 1]; ++p) t.emplace_back(i, A.col_indices()[p], A.values()[p]);
  Eigen::SparseMatrix<double, Eigen::RowMajor> E(A.rows(), A.cols());
  E.setFromTriplets(t.begin(), t.end());
  return E;
}

/// ||b - A x|| / ||b|| in float64.
double true_rel_residual(const CsrMatrix<double>& A, std::span<const double> b, std::span<const double> x) {
  std::vector<double> Ax(b.size());
  spmv(1.0, A, x, 0.0, std::span(Ax));
  double rr = 0.0, bb = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    rr += (b[i] - Ax[i]) * (b[i] - Ax[i]);
    bb += b[i] * b[i];
  }
  return std::sqrt(rr / bb);
}

double norm(std::span<const double> v) {
  double s = 0.0;
  for (const double e : v) s += e * e;
  return std::sqrt(s);
}

std::vector<double> random_vector(Rng& rng, index_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& e : v) e = rng.uniform(-1.0, 1.0);
  return v;
}

/// Extreme eigenvalues of poisson3d(n): 6 -+ 6 cos(pi / (n + 1)).
std::pair<double, double> poisson_bounds(index_t n) {
  const double c = 6.0 * std::cos(std::numbers::pi / static_cast<double>(n + 1));
  return {6.0 - c, 6.0 + c};
}

/// The diagonal operator diag(d) as a callable.
LinearOperator<double> diagonal_operator(const std::vector<double>& d) {
  return {static_cast<index_t>(d.size()), [&d](DenseView<const double> X, DenseView<double> Y) {
            for (index_t i = 0; i < X.rows; ++i)
              for (index_t j = 0; j < X.cols; ++j) Y(i, j) = d[static_cast<std::size_t>(i)] * X(i, j);
          }};
}

class Solvers : public Seeded<> {};

/// Every column of a block solve equals the single solve of its right-hand side, bit
/// for bit: status, iterations, residual and x.
void expect_columns_are_single_solves(const LinearOperator<double>& op, const Dense<double>& B,
                                      const CgOptions<double>& opt, const BlockSolveResult<double>& block) {
  for (index_t j = 0; j < B.cols(); ++j) {
    SCOPED_TRACE(j);
    std::vector<double> b(static_cast<std::size_t>(B.rows()));
    for (index_t i = 0; i < B.rows(); ++i) b[i] = B(i, j);
    const auto single = cg(op, std::span<const double>(b), opt);
    EXPECT_EQ(block.status[j], single.status);
    EXPECT_EQ(block.iterations[j], single.iterations);
    EXPECT_EQ(block.rel_residual[j], single.rel_residual);
    for (index_t i = 0; i < B.rows(); ++i)  // bits, so that -0 and +0 differ
      ASSERT_EQ(std::bit_cast<std::uint64_t>(block.X(i, j)), std::bit_cast<std::uint64_t>(single.x[i])) << "row " << i;
  }
}

TEST_F(Solvers, CgConvergesOnPoissonForEveryOperatorKind) {
  const CsrMatrix<double> A = poisson3d<double>(12);
  const BsrMatrix<double> B = to_bsr(A, 16);
  const CsrMatrix<double> U = triangle_of(A, Triangle::upper);
  const LinearOperator<double> user(A.rows(), [&A](DenseView<const double> X, DenseView<double> Y) {
    spmm(1.0, A, X, 0.0, Y);
  });
  const std::vector<double> b = random_vector(rng, A.rows());
  const std::vector<double> M = jacobi_preconditioner(A);
  const std::vector<std::pair<const char*, LinearOperator<double>>> ops{
      {"csr", LinearOperator<double>(A)},
      {"bsr", LinearOperator<double>(B)},
      {"symmetric_upper", LinearOperator<double>(U, Triangle::upper)},
      {"callable", user}};
  index_t reference_iterations = -1;
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    for (const bool jacobi : {false, true}) {
      const auto res = cg(op, std::span<const double>(b), {.tol = 1e-10, .max_iter = 500,
                                                           .preconditioner = jacobi ? std::span<const double>(M)
                                                                                    : std::span<const double>()});
      EXPECT_EQ(res.status, SolveStatus::converged);
      EXPECT_LE(res.rel_residual, 1e-10);
      EXPECT_LE(true_rel_residual(A, b, res.x), 2e-10);
      if (reference_iterations < 0) reference_iterations = res.iterations;
      EXPECT_NEAR(res.iterations, reference_iterations, 1);  // Jacobi is a scalar multiple here
    }
  }
}

TEST_F(Solvers, CgIterationCountsMatchEigen) {
  struct Case {
    const char* name;
    CsrMatrix<double> A;
    double tol;
  };
  std::vector<Case> cases;
  cases.push_back({"poisson_16", poisson3d<double>(16), 1e-8});
  cases.push_back({"1138_bus", bus1138(), 1e-8});
  cases.push_back({"1138_bus_tight", bus1138(), 1e-11});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<double> b = random_vector(rng, c.A.rows());
    const auto E = to_eigen(c.A);
    const Eigen::Map<const Eigen::VectorXd> eb(b.data(), static_cast<Eigen::Index>(b.size()));
    Eigen::ConjugateGradient<Eigen::SparseMatrix<double, Eigen::RowMajor>, Eigen::Lower | Eigen::Upper,
                             Eigen::DiagonalPreconditioner<double>>
        solver(E);
    solver.setTolerance(c.tol);
    solver.setMaxIterations(20000);
    const Eigen::VectorXd ex = solver.solve(eb);
    ASSERT_EQ(solver.info(), Eigen::Success);

    const std::vector<double> M = jacobi_preconditioner(c.A);
    const auto res = cg(LinearOperator<double>(c.A), std::span<const double>(b),
                        {.tol = c.tol, .max_iter = 20000, .preconditioner = M});
    ASSERT_EQ(res.status, SolveStatus::converged);
    // Eigen counts the products before its last residual check, minus one (it breaks
    // before incrementing); trnsparse counts every product. Equal up to that one. Near
    // the attainable accuracy of an ill-conditioned matrix (1138_bus at 1e-11) the count
    // follows rounding: trnsparse's SpMV fuses its multiply-adds and Eigen's (built
    // without FMA here) does not, so there the counts agree within 0.5%.
    const double slack = c.tol < 1e-10 ? std::max(1.0, 0.005 * static_cast<double>(solver.iterations())) : 1.0;
    EXPECT_NEAR(static_cast<double>(res.iterations), static_cast<double>(solver.iterations()), slack);
    EXPECT_LE(true_rel_residual(c.A, b, res.x), 10 * c.tol);
  }
}

TEST_F(Solvers, BlockCgEqualsSingleSolves) {
  const CsrMatrix<double> A = poisson3d<double>(10);
  const index_t n = A.rows(), k = 5;
  Dense<double> B = random_dense<double>(rng, n, k);
  for (index_t i = 0; i < n; ++i) B(i, 3) = 0.0;  // a zero column: x = 0, converged in 0 iterations
  const std::vector<double> M = jacobi_preconditioner(A);
  for (const bool csr : {true, false}) {
    SCOPED_TRACE(csr ? "csr (fused p'Ap)" : "bsr");
    const BsrMatrix<double> Ab = to_bsr(A, 8);
    const LinearOperator<double> op = csr ? LinearOperator<double>(A) : LinearOperator<double>(Ab);
    const CgOptions<double> opt{.tol = 1e-9, .max_iter = 500, .preconditioner = M};
    const auto block = cg(op, B.view(), opt);
    for (index_t j = 0; j < k; ++j) {
      SCOPED_TRACE(j);
      std::vector<double> b(static_cast<std::size_t>(n));
      for (index_t i = 0; i < n; ++i) b[i] = B(i, j);
      const auto single = cg(op, std::span<const double>(b), opt);
      EXPECT_EQ(block.status[j], single.status);
      EXPECT_NEAR(block.iterations[j], single.iterations, 1);
      double diff = 0.0;
      for (index_t i = 0; i < n; ++i) diff = std::max(diff, std::fabs(block.X(i, j) - single.x[i]));
      EXPECT_LE(diff, 1e-7 * std::max(1.0, norm(single.x)));
    }
    EXPECT_EQ(block.iterations[3], 0);
    EXPECT_EQ(block.status[3], SolveStatus::converged);
  }
}

TEST_F(Solvers, BlockCgFrozenColumnsKeepTheirSingleSolveBitwise) {
  // Columns that stop at very different iterations: b = 0 (0 iterations), an eigenvector
  // of the Jacobi-preconditioned Poisson operator (1 iteration), and two random columns.
  // A column frozen early must keep its iterate while the others run on (the passes
  // zero its p, r and z and then skip the column without a per-column test), so each
  // column equals its single solve bit for bit.
  const index_t e = 9;
  const CsrMatrix<double> A = poisson3d<double>(e);
  const index_t n = A.rows(), k = 4;
  Dense<double> B = random_dense<double>(rng, n, k);
  const double h = std::numbers::pi / static_cast<double>(e + 1);
  for (index_t i = 0; i < n; ++i) {
    B(i, 1) = 0.0;
    B(i, 2) = std::sin(h * static_cast<double>(i % e + 1)) * std::sin(h * static_cast<double>(i / e % e + 1)) *
              std::sin(h * static_cast<double>(i / (e * e) + 1));
  }
  const std::vector<double> M = jacobi_preconditioner(A);
  // The full matrix, and its stored upper triangle (whose product sums pᵀq itself).
  const CsrMatrix<double> U = triangle_of(A, Triangle::upper);
  for (const bool precond : {true, false})
    for (const bool half : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (precond ? "jacobi, " : "none, ") << (half ? "upper triangle" : "full"));
      CgOptions<double> opt{.tol = 1e-10, .max_iter = 400};
      if (precond) opt.preconditioner = M;
      const LinearOperator<double> op = half ? LinearOperator<double>(U, Triangle::upper) : LinearOperator<double>(A);
      const auto block = cg(op, B.view(), opt);
      EXPECT_EQ(block.iterations[1], 0);
      EXPECT_LE(block.iterations[2], 2);
      EXPECT_GT(block.iterations[0], 10);
      expect_columns_are_single_solves(op, B, opt, block);
    }
}

TEST_F(Solvers, BlockCgOnAStoredTriangleEqualsSingleSolvesBitwise) {
  // Large enough for two reduction chunks (4096 rows each): the single solves sum pᵀq
  // inside the symmetric product, so the block solve must too, column by column.
  const CsrMatrix<double> A = poisson3d<double>(20);
  const CsrMatrix<double> U = triangle_of(A, Triangle::upper);
  const Dense<double> B = random_dense<double>(rng, A.rows(), 3);
  const std::vector<double> M = jacobi_preconditioner(A);
  const CgOptions<double> opt{.tol = 1e-10, .max_iter = 400, .preconditioner = M};
  const LinearOperator<double> op(U, Triangle::upper);
  const auto block = cg(op, B.view(), opt);
  expect_columns_are_single_solves(op, B, opt, block);
}

TEST_F(Solvers, BlockCgBreakdownOfOneColumnLeavesTheOthers) {
  // A = diag(1, 2, ..., m, -1) is indefinite: b = e_0 - e_m has pᵀAp = 0 at once
  // (breakdown, x = 0), while columns inside the positive part converge normally.
  const index_t m = 40, n = m + 1, k = 3;
  std::vector<index_t> ptr(static_cast<std::size_t>(n + 1)), col(static_cast<std::size_t>(n));
  std::vector<double> val(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    ptr[i + 1] = i + 1;
    col[i] = i;
    val[i] = i < m ? static_cast<double>(i + 1) : -1.0;
  }
  const CsrMatrix<double> A(n, n, ptr, col, val);
  Dense<double> B(n, k);
  B(0, 0) = 1.0;
  B(m, 0) = -1.0;
  for (index_t i = 0; i < m; ++i) B(i, 1) = std::cos(static_cast<double>(i));
  B(3, 2) = 2.0;
  const LinearOperator<double> op(A);
  const CgOptions<double> opt{.tol = 1e-12, .max_iter = 200};
  const auto block = cg(op, B.view(), opt);
  EXPECT_EQ(block.status[0], SolveStatus::breakdown);
  EXPECT_EQ(block.status[1], SolveStatus::converged);
  EXPECT_EQ(block.status[2], SolveStatus::converged);
  EXPECT_GT(block.iterations[1], 5);
  expect_columns_are_single_solves(op, B, opt, block);
}

TEST_F(Solvers, CgFromTheSolutionTakesNoIteration) {
  const CsrMatrix<double> A = poisson3d<double>(6);
  const std::vector<double> x_true = random_vector(rng, A.rows());
  std::vector<double> b(x_true.size());
  spmv(1.0, A, std::span<const double>(x_true), 0.0, std::span(b));
  const auto res = cg(LinearOperator<double>(A), std::span<const double>(b), {.tol = 1e-8, .x0 = x_true});
  EXPECT_EQ(res.status, SolveStatus::converged);
  EXPECT_EQ(res.iterations, 0);
  EXPECT_EQ(res.x, x_true);
}

TEST_F(Solvers, CgReportsNonConvergenceWithAFiniteIterate) {
  const CsrMatrix<double> A = poisson3d<double>(12);
  const std::vector<double> b = random_vector(rng, A.rows());
  const auto res = cg(LinearOperator<double>(A), std::span<const double>(b), {.tol = 1e-12, .max_iter = 5});
  EXPECT_EQ(res.status, SolveStatus::max_iterations);
  EXPECT_EQ(res.iterations, 5);
  EXPECT_GT(res.rel_residual, 1e-12);
  EXPECT_LT(res.rel_residual, 1.0);
  EXPECT_NEAR(true_rel_residual(A, b, res.x), res.rel_residual, 1e-10);
}

TEST_F(Solvers, CgReportsBreakdown) {
  const std::vector<double> b{1.0, 1.0};
  {
    SCOPED_TRACE("indefinite A: p'Ap = 0");
    const CsrMatrix<double> A(2, 2, {0, 1, 2}, {0, 1}, {1.0, -1.0});
    const auto res = cg(LinearOperator<double>(A), std::span<const double>(b));
    EXPECT_EQ(res.status, SolveStatus::breakdown);
    EXPECT_EQ(res.iterations, 0);
    EXPECT_EQ(res.x, (std::vector<double>{0.0, 0.0}));
    EXPECT_DOUBLE_EQ(res.rel_residual, 1.0);
  }
  {
    SCOPED_TRACE("NaN in A");
    const CsrMatrix<double> A(2, 2, {0, 1, 2}, {0, 1}, {2.0, std::numeric_limits<double>::quiet_NaN()});
    const auto res = cg(LinearOperator<double>(A), std::span<const double>(b));
    EXPECT_EQ(res.status, SolveStatus::breakdown);
    for (const double v : res.x) EXPECT_TRUE(std::isfinite(v));
  }
  {
    SCOPED_TRACE("indefinite preconditioner: r'z <= 0");
    const CsrMatrix<double> A(2, 2, {0, 1, 2}, {0, 1}, {2.0, 3.0});
    const std::vector<double> M{-1.0, -1.0};
    const auto res = cg(LinearOperator<double>(A), std::span<const double>(b), {.preconditioner = M});
    EXPECT_EQ(res.status, SolveStatus::breakdown);
    EXPECT_EQ(res.x, (std::vector<double>{0.0, 0.0}));
  }
}

TEST_F(Solvers, CallbackSeesEveryIterationAndCanStop) {
  const CsrMatrix<double> A = poisson3d<double>(8);
  const std::vector<double> b = random_vector(rng, A.rows());
  std::vector<std::pair<index_t, double>> seen;
  const auto res = cg(LinearOperator<double>(A), std::span<const double>(b),
                      {.tol = 1e-12, .callback = [&](index_t it, double rel) {
                         seen.emplace_back(it, rel);
                         return it < 3;
                       }});
  EXPECT_EQ(res.status, SolveStatus::stopped);
  EXPECT_EQ(res.iterations, 3);
  ASSERT_EQ(seen.size(), 3u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].first, static_cast<index_t>(i + 1));
  EXPECT_EQ(seen.back().second, res.rel_residual);
}

TEST_F(Solvers, ChebyshevAttainsItsMinimaxErrorAtTheSpectrumEnds) {
  // On diag(d), the error of component i after K steps is exactly p_K(d_i) e0_i with
  // p_K(λ) = T_K((θ - λ)/δ) / T_K(σ): ±1/T_K(σ) at both ends of [lmin, lmax].
  const double lmin = 0.5, lmax = 4.0, theta = 2.25, delta = 1.75, sigma = theta / delta;
  const std::vector<double> d{lmin, 1.0, 2.0, 3.3, lmax};
  const LinearOperator<double> D = diagonal_operator(d);
  const std::vector<double> x_true{1.0, -2.0, 0.5, 3.0, -1.5};
  std::vector<double> b(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) b[i] = d[i] * x_true[i];
  for (const index_t K : {1, 2, 7, 15}) {
    SCOPED_TRACE(K);
    const auto res = chebyshev(D, std::span<const double>(b), lmin, lmax, K);
    EXPECT_EQ(res.status, SolveStatus::completed);
    EXPECT_EQ(res.iterations, K);
    const double T_sigma = std::cosh(static_cast<double>(K) * std::acosh(sigma));   // T_K(σ), σ > 1
    const auto chebT = [K](double t) { return std::cos(static_cast<double>(K) * std::acos(t)); };  // |t| <= 1
    for (std::size_t i = 0; i < d.size(); ++i) {
      const double p = chebT((theta - d[i]) / delta) / T_sigma;
      const double e0 = -x_true[i];  // x0 = 0
      EXPECT_NEAR(res.x[i] - x_true[i], p * e0, 1e-12) << "component " << i;
    }
    EXPECT_NEAR(std::fabs(res.x[0] - x_true[0]), std::fabs(x_true[0]) / T_sigma, 1e-12);
  }
  const auto co = chebyshev_coeffs(lmin, lmax, 3);
  EXPECT_EQ(co.a[0], 0.0);
  EXPECT_DOUBLE_EQ(co.c[0], 1.0 / theta);
}

TEST_F(Solvers, ChebyshevOnPoissonStaysUnderItsBound) {
  const index_t g = 8;
  const CsrMatrix<double> A = poisson3d<double>(g);
  const auto [lmin, lmax] = poisson_bounds(g);
  const std::vector<double> x_true = random_vector(rng, A.rows());
  std::vector<double> b(x_true.size());
  spmv(1.0, A, std::span<const double>(x_true), 0.0, std::span(b));
  const double sigma = (lmax + lmin) / (lmax - lmin);
  for (const index_t K : {5, 20, 40}) {
    SCOPED_TRACE(K);
    const auto res = chebyshev(LinearOperator<double>(A), std::span<const double>(b), lmin, lmax, K);
    std::vector<double> e(x_true.size());
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = res.x[i] - x_true[i];
    const double bound = norm(x_true) / std::cosh(static_cast<double>(K) * std::acosh(sigma));
    EXPECT_LE(norm(e), bound * (1 + 1e-9) + 1e-12);
    EXPECT_NEAR(res.rel_residual, true_rel_residual(A, b, res.x), 1e-10);
  }
}

TEST_F(Solvers, RichardsonMatchesItsClosedForm) {
  const std::vector<double> d{0.5, 1.0, 2.5, 4.0};
  const std::vector<double> x_true{1.0, -1.0, 2.0, 0.25};
  std::vector<double> b(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) b[i] = d[i] * x_true[i];
  const std::vector<double> x0{0.5, 0.5, -0.5, 1.0};
  const double omega = 2.0 / (0.5 + 4.0);
  for (const index_t K : {0, 1, 6, 30}) {
    SCOPED_TRACE(K);
    const auto res = richardson(diagonal_operator(d), std::span<const double>(b), omega, K, std::span<const double>(x0));
    for (std::size_t i = 0; i < d.size(); ++i)
      EXPECT_NEAR(res.x[i] - x_true[i], std::pow(1.0 - omega * d[i], static_cast<double>(K)) * (x0[i] - x_true[i]),
                  1e-13);
  }
  // On Poisson with ω = 2 / (λmin + λmax): ||e_K|| <= ((κ - 1) / (κ + 1))^K ||e_0||.
  const index_t g = 6;
  const CsrMatrix<double> A = poisson3d<double>(g);
  const auto [lmin, lmax] = poisson_bounds(g);
  const std::vector<double> xt = random_vector(rng, A.rows());
  std::vector<double> bp(xt.size());
  spmv(1.0, A, std::span<const double>(xt), 0.0, std::span(bp));
  const auto res = richardson(LinearOperator<double>(A), std::span<const double>(bp), 2.0 / (lmin + lmax), 50);
  std::vector<double> e(xt.size());
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = res.x[i] - xt[i];
  const double kappa = lmax / lmin;
  EXPECT_LE(norm(e), std::pow((kappa - 1) / (kappa + 1), 50.0) * norm(xt) * (1 + 1e-9) + 1e-12);
  EXPECT_EQ(res.status, SolveStatus::completed);
}

TEST_F(Solvers, PowerIterationMatchesADenseEigenSolver) {
  const CsrMatrix<double> A = poisson3d<double>(5);
  const Eigen::MatrixXd dense = Eigen::MatrixXd(to_eigen(A));
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(dense);
  const Eigen::Index top = es.eigenvalues().size() - 1;  // ascending; all positive
  const auto res = power_iteration(LinearOperator<double>(A), 5000, 1e-9);
  ASSERT_TRUE(res.converged);
  EXPECT_NEAR(res.eigenvalue, es.eigenvalues()[top], 1e-10 * es.eigenvalues()[top]);
  double overlap = 0.0;
  for (index_t i = 0; i < A.rows(); ++i) overlap += res.eigenvector[i] * es.eigenvectors()(i, top);
  EXPECT_NEAR(std::fabs(overlap), 1.0, 1e-8);
  EXPECT_EQ(power_iteration(LinearOperator<double>(A), 0, 1e-9).converged, false);
}

TEST_F(Solvers, ResultsAreBitwiseIdenticalForAnyThreadCount) {
  const CsrMatrix<double> A = poisson3d<double>(40);  // 16 reduction chunks
  const BsrMatrix<double> Ab = to_bsr(A, 32);
  // The half-storage operator, whose product sums pᵀq itself, over its own chunks.
  const CsrMatrix<double> U = triangle_of(A, Triangle::upper);
  ASSERT_GE(detail::symmetric_chunks(U.rows(), U.row_ptr(), U.col_indices(), Triangle::upper).chunks(), 3);
  const std::vector<double> b = random_vector(rng, A.rows());
  const std::vector<double> M = jacobi_preconditioner(A);
  const CsrMatrix<double> S = poisson3d<double>(24);
  const Dense<double> B = random_dense<double>(rng, S.rows(), 16);
  const int saved = num_threads();
  std::vector<SolveResult<double>> single, upper;
  std::vector<BlockSolveResult<double>> block;
  std::vector<EigenResult<double>> eig;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    single.push_back(cg(LinearOperator<double>(A), std::span<const double>(b),
                        {.tol = 1e-14, .max_iter = 10, .preconditioner = M}));
    upper.push_back(cg(LinearOperator<double>(U, Triangle::upper), std::span<const double>(b),
                       {.tol = 1e-14, .max_iter = 10, .preconditioner = M}));
    block.push_back(cg(LinearOperator<double>(S), B.view(), {.tol = 1e-14, .max_iter = 10}));
    eig.push_back(power_iteration(LinearOperator<double>(Ab), 10, 0.0));
  }
  set_num_threads(saved);
  for (std::size_t t = 1; t < single.size(); ++t) {
    SCOPED_TRACE(t + 1);
    EXPECT_EQ(single[t].x, single[0].x);
    EXPECT_EQ(single[t].rel_residual, single[0].rel_residual);
    EXPECT_EQ(upper[t].x, upper[0].x);
    EXPECT_EQ(upper[t].rel_residual, upper[0].rel_residual);
    EXPECT_TRUE(same_matrix<double>(block[t].X.view(), block[0].X.view()));
    EXPECT_EQ(block[t].rel_residual, block[0].rel_residual);
    EXPECT_EQ(eig[t].eigenvector, eig[0].eigenvector);
    EXPECT_EQ(eig[t].eigenvalue, eig[0].eigenvalue);
  }
}

TEST_F(Solvers, FloatSolvesConverge) {
  const CsrMatrix<float> A = poisson3d<float>(10);
  const std::vector<float> b(static_cast<std::size_t>(A.rows()), 1.0f);
  const std::vector<float> M = jacobi_preconditioner(A);
  const auto res = cg(LinearOperator<float>(A), std::span<const float>(b), {.tol = 1e-5, .preconditioner = M});
  EXPECT_EQ(res.status, SolveStatus::converged);
  EXPECT_LE(res.rel_residual, 1e-5);
}

TEST_F(Solvers, ArgumentsAreChecked) {
  const CsrMatrix<double> A = poisson3d<double>(3);
  const LinearOperator<double> op(A);
  const std::vector<double> b(27, 1.0), short_b(5, 1.0);
  EXPECT_THAT([&] { (void)cg(op, std::span<const double>(short_b)); }, throws_naming<DimensionMismatch>("b"));
  EXPECT_THAT([&] { (void)cg(op, std::span<const double>(b), {.tol = -1.0}); }, throws_naming<InvalidArgument>("tol"));
  EXPECT_THAT([&] { (void)cg(op, std::span<const double>(b), {.x0 = short_b}); },
              throws_naming<DimensionMismatch>("x0"));
  std::vector<double> nan_b = b;
  nan_b[4] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT([&] { (void)cg(op, std::span<const double>(nan_b)); }, throws_naming<InvalidArgument>("b(4, 0)"));
  const CsrMatrix<double> rect(2, 3);
  EXPECT_THAT([&] { LinearOperator<double>{rect}; }, throws_naming<InvalidArgument>("square"));
  const CsrMatrix<double> zero_diag(2, 2, {0, 1, 1}, {0}, {1.0});
  EXPECT_THAT([&] { (void)jacobi_preconditioner(zero_diag); }, throws_naming<InvalidArgument>("A(1, 1)"));
  EXPECT_THAT([&] { (void)chebyshev_coeffs(2.0, 1.0, 3); }, throws_naming<InvalidArgument>("lmin"));
  EXPECT_THAT([&] { (void)richardson(op, std::span<const double>(b), std::nan(""), 3); },
              throws_naming<InvalidArgument>("omega"));
  std::vector<double> x(27), y(26);
  EXPECT_THAT([&] { op.apply(DenseView<const double>(x.data(), 27, 1, 1), DenseView<double>(y.data(), 26, 1, 1)); },
              throws_naming<DimensionMismatch>("Y"));
  EXPECT_EQ(to_string(SolveStatus::breakdown), "breakdown");
}

}  // namespace
}  // namespace trnsparse::test

namespace trnsparse::test {
namespace {

/// A stored triangle applied to several columns (strided views, gathered column by
/// column) gives the full matrix's product.
TEST(LinearOperatorCoverage, StoredTriangleOnSeveralColumns) {
  const CsrMatrix<double> A = poisson3d<double>(5);
  const CsrMatrix<double> U = triangle_of(A, Triangle::upper);
  const LinearOperator<double> half(U, Triangle::upper), full(A);
  Dense<double> X(A.rows(), 3), Y(A.rows(), 3), Z(A.rows(), 3);
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t j = 0; j < 3; ++j) X(i, j) = std::sin(static_cast<double>(i * 3 + j));
  half.apply(X.view(), Y.view());
  full.apply(X.view(), Z.view());
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t j = 0; j < 3; ++j) EXPECT_NEAR(Y(i, j), Z(i, j), 1e-12);
}

TEST(LinearOperatorCoverage, DistributionAndStatusNames) {
  const auto apply = [](DenseView<const double>, DenseView<double>) {};
  LinearOperator<double>::Distribution d{10, 0, [](std::span<double>) {}, [](const std::exception_ptr&) {}};
  EXPECT_NO_THROW(LinearOperator<double>(4, apply, d));
  auto no_sum = d;
  no_sum.sum = {};
  EXPECT_THROW(LinearOperator<double>(4, apply, no_sum), InvalidArgument);
  auto outside = d;
  outside.offset = 8;
  EXPECT_THROW(LinearOperator<double>(4, apply, outside), InvalidArgument);
  EXPECT_EQ(to_string(SolveStatus::stopped), "stopped");
  EXPECT_EQ(to_string(SolveStatus::completed), "completed");
  EXPECT_EQ(to_string(SolveStatus::breakdown), "breakdown");
}

/// A size beyond what a vector can hold is OverflowError naming what was asked, not
/// std::length_error. (The std::bad_alloc path is the same catch; asking for petabytes to
/// reach it would abort under AddressSanitizer, whose allocator refuses such sizes.)
TEST(LinearOperatorCoverage, MakeVectorBeyondMaxSize) {
  EXPECT_THROW(detail::make_vector<double>(index_t{1} << 61, "huge"), OverflowError);
}

}  // namespace
}  // namespace trnsparse::test
