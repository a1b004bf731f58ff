// GMRES, BiCGStab and CG with a general preconditioner: solutions against a dense LU
// solve (Eigen), GMRES's residual history against a modified Gram–Schmidt GMRES, its
// basis kernels against plain loops on every ISA, the true residual behind every
// "converged", breakdown and non-convergence, the callback, argument errors, and thread
// independence.
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernel_support.hpp"
#include "kernels/cpu/tables.hpp"
#include "support.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse::test {
namespace {

using ::testing::HasSubstr;

class Krylov : public Seeded<> {};

std::vector<double> random_vector(Rng& rng, index_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& e : v) e = rng.uniform(-1.0, 1.0);
  return v;
}

/// x = A⁻¹ b by Eigen's dense LU with partial pivoting.
std::vector<double> dense_solve(const CsrMatrix<double>& A, const std::vector<double>& b) {
  const index_t n = A.rows();
  Eigen::MatrixXd D = Eigen::MatrixXd::Zero(n, n);
  for (index_t i = 0; i < n; ++i)
    for (index_t e = A.row_ptr()[i]; e < A.row_ptr()[i + 1]; ++e) D(i, A.col_indices()[e]) = A.values()[e];
  const Eigen::VectorXd x = D.partialPivLu().solve(Eigen::Map<const Eigen::VectorXd>(b.data(), n));
  return {x.data(), x.data() + n};
}

template <class T>
double true_residual(const CsrMatrix<T>& A, std::span<const T> b, std::span<const T> x) {
  std::vector<double> r(b.size());
  double rr = 0.0, bb = 0.0;
  for (index_t i = 0; i < A.rows(); ++i) {
    double s = static_cast<double>(b[i]);
    for (index_t e = A.row_ptr()[i]; e < A.row_ptr()[i + 1]; ++e)
      s -= static_cast<double>(A.values()[e]) * static_cast<double>(x[A.col_indices()[e]]);
    rr += s * s;
    bb += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(rr / bb);
}

double max_relative_error(std::span<const double> x, const std::vector<double>& want) {
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(x[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

TEST_F(Krylov, NonsymmetricSolvesMatchDenseLu) {
  const CsrMatrix<double> A = convdiff3d<double>(8, 3.0);
  const std::vector<double> b = random_vector(rng, A.rows());
  const std::vector<double> want = dense_solve(A, b);
  const LinearOperator<double> op(A);
  const auto ilu = ilu0(A);
  const BlockJacobi<double> jac(A);
  for (const Preconditioner<double>* M : {static_cast<const Preconditioner<double>*>(nullptr),
                                          static_cast<const Preconditioner<double>*>(&jac),
                                          static_cast<const Preconditioner<double>*>(&ilu)})
    for (const index_t restart : {5, 30}) {
      SCOPED_TRACE(testing::Message() << (M ? M->name() : "none") << ", restart " << restart);
      const auto g = gmres(op, b, {.tol = 1e-10, .max_iter = 2000, .restart = restart, .M = M});
      ASSERT_EQ(g.status, SolveStatus::converged);
      EXPECT_LE(g.rel_residual, 1e-10);
      EXPECT_NEAR(true_residual<double>(A, b, g.x), g.rel_residual, 1e-12);
      EXPECT_LT(max_relative_error(g.x, want), 1e-8);
      const auto s = bicgstab(op, b, {.tol = 1e-10, .max_iter = 2000, .M = M});
      ASSERT_EQ(s.status, SolveStatus::converged);
      EXPECT_LE(true_residual<double>(A, b, s.x), 1e-10);
      EXPECT_LT(max_relative_error(s.x, want), 1e-8);
    }
  // ILU(0) needs fewer iterations than none.
  const auto plain = gmres(op, b, {.tol = 1e-10});
  const auto pre = gmres(op, b, {.tol = 1e-10, .M = &ilu});
  EXPECT_LT(pre.iterations, plain.iterations);
}

/// ||b - A x_j|| / ||b|| after each of the first `steps` iterations of unpreconditioned
/// GMRES from x = 0 without a restart: Arnoldi with modified Gram–Schmidt and the least
/// squares problem solved anew each step (Eigen's Householder QR).
std::vector<double> mgs_gmres_history(const CsrMatrix<double>& A, const std::vector<double>& b, index_t steps) {
  const index_t n = A.rows();
  const auto apply = [&](const Eigen::VectorXd& x) {
    Eigen::VectorXd y = Eigen::VectorXd::Zero(n);
    for (index_t i = 0; i < n; ++i)
      for (index_t e = A.row_ptr()[i]; e < A.row_ptr()[i + 1]; ++e) y[i] += A.values()[e] * x[A.col_indices()[e]];
    return y;
  };
  const Eigen::Map<const Eigen::VectorXd> rhs(b.data(), n);
  const double beta = rhs.norm();
  Eigen::MatrixXd V = Eigen::MatrixXd::Zero(n, steps + 1), H = Eigen::MatrixXd::Zero(steps + 1, steps);
  V.col(0) = rhs / beta;
  std::vector<double> history;
  for (index_t j = 0; j < steps; ++j) {
    Eigen::VectorXd w = apply(V.col(j));
    for (index_t q = 0; q <= j; ++q) {
      H(q, j) = V.col(q).dot(w);
      w -= H(q, j) * V.col(q);
    }
    H(j + 1, j) = w.norm();
    V.col(j + 1) = w / H(j + 1, j);
    Eigen::VectorXd g = Eigen::VectorXd::Zero(j + 2);
    g[0] = beta;
    const Eigen::MatrixXd Hj = H.topLeftCorner(j + 2, j + 1);
    const Eigen::VectorXd y = Hj.householderQr().solve(g);
    history.push_back((g - Hj * y).norm() / beta);
  }
  return history;
}

TEST_F(Krylov, GmresResidualsFollowModifiedGramSchmidt) {
  // Delayed CGS2 finishes each Hessenberg column one iteration late, from sums over the
  // operator applied to a vector not yet reorthogonalised; the residual estimates it
  // reports each iteration must still be GMRES's.
  // Eigenvalues over eight decades with a nonsymmetric coupling: the first projection
  // leaves much of w in span(V), so the reorthogonalisation terms are far from rounding.
  const index_t n = 300;
  Dense<double> D(n, n);
  for (index_t i = 0; i < n; ++i) {
    D(i, i) = std::pow(10.0, 8.0 * static_cast<double>(i) / static_cast<double>(n - 1));
    if (i + 1 < n) D(i, i + 1) = 0.5 * D(i, i);
  }
  const CsrMatrix<double> A = to_csr(std::as_const(D).view());
  const std::vector<double> b = random_vector(rng, A.rows());
  const index_t steps = 60;
  const std::vector<double> want = mgs_gmres_history(A, b, steps);
  std::vector<double> got;
  const auto res = gmres(LinearOperator<double>(A), b, {.tol = 0.0, .max_iter = steps, .restart = steps,
                                                        .callback = [&](index_t, double estimate) {
                                                          got.push_back(estimate);
                                                          return true;
                                                        }});
  EXPECT_EQ(res.iterations, steps);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t j = 0; j < want.size(); ++j) {
    SCOPED_TRACE(testing::Message() << "iteration " << j + 1);
    EXPECT_NEAR(got[j], want[j], 1e-7 * want[j] + 1e-13);
  }
  EXPECT_NEAR(res.rel_residual, true_residual<double>(A, b, res.x), 1e-12);
}

/// GMRES's basis kernels of one ISA against plain loops: the same bits, for every group
/// remainder (k from 1 to 9) and ragged chunks.
template <class T>
void check_basis_kernels(const kernels::BasisKernels<T>& K, Rng& rng) {
  constexpr index_t L = kernels::kCgLanes;
  for (const index_t k : {1, 2, 3, 4, 5, 6, 7, 8, 9})
    for (const auto [r0, r1] : {std::pair<index_t, index_t>{0, 37}, {5, 64}, {3, 4}}) {
      SCOPED_TRACE(testing::Message() << "k " << k << ", rows [" << r0 << ", " << r1 << ")");
      const index_t ld = 71;
      std::vector<T> V(static_cast<std::size_t>(k * ld)), a(static_cast<std::size_t>(ld)), b(a.size()), s(V.size() / ld),
          f(s.size()), y(s.size());
      for (auto* v : {&V, &a, &b, &s, &f, &y})
        for (T& e : *v) e = static_cast<T>(rng.uniform(-1.0, 1.0));
      // dots: lane (i - r0) % L of reduction 2q (v_qᵀa), 2q + 1 (v_qᵀb), 2k, 2k + 1 (aᵀa, aᵀb).
      std::vector<double> lanes(static_cast<std::size_t>(2 * (k + 1) * L), 0.5), want = lanes;
      K.dots(V.data(), ld, k, a.data(), b.data(), r0, r1, lanes.data());
      for (index_t q = 0; q <= k; ++q)
        for (index_t i = r0; i < r1; ++i) {
          const double v = static_cast<double>(q < k ? V[q * ld + i] : a[i]);
          want[(2 * q) * L + (i - r0) % L] += v * static_cast<double>(a[i]);
          want[(2 * q + 1) * L + (i - r0) % L] += v * static_cast<double>(b[i]);
        }
      EXPECT_EQ(lanes, want);
      // update, with and without b.
      const T scale = static_cast<T>(0.75), last = static_cast<T>(-0.3);
      for (const bool both : {true, false}) {
        std::vector<T> ga = a, gb = b, wa = a, wb = b;
        K.update(V.data(), ld, k, s.data(), f.data(), scale, last, ga.data(), both ? gb.data() : nullptr, r0, r1);
        for (index_t i = r0; i < r1; ++i) {
          for (index_t q = 0; q < k; ++q) {
            wa[i] -= s[q] * V[q * ld + i];
            wb[i] -= f[q] * V[q * ld + i];
          }
          wa[i] *= scale;
          wb[i] = both ? wb[i] * scale - last * wa[i] : b[i];
        }
        EXPECT_EQ(ga, wa);
        EXPECT_EQ(gb, wb);
      }
      // combine
      std::vector<T> out(a.size(), T(7)), wo = out;
      K.combine(V.data(), ld, k, y.data(), out.data(), r0, r1);
      for (index_t i = r0; i < r1; ++i) {
        wo[i] = y[0] * V[i];
        for (index_t q = 1; q < k; ++q) wo[i] += y[q] * V[q * ld + i];
      }
      EXPECT_EQ(out, wo);
    }
}

TEST_F(Krylov, BasisKernelsMatchPlainLoops) {
  check_basis_kernels(kernels::cpu::scalar::basis_kernels<double>(), rng);
  check_basis_kernels(kernels::cpu::scalar::basis_kernels<float>(), rng);
  if (isa_supported(Isa::avx2)) {
    check_basis_kernels(kernels::cpu::avx2::basis_kernels<double>(), rng);
    check_basis_kernels(kernels::cpu::avx2::basis_kernels<float>(), rng);
  }
  if (isa_supported(Isa::avx512)) {
    check_basis_kernels(kernels::cpu::avx512::basis_kernels<double>(), rng);
    check_basis_kernels(kernels::cpu::avx512::basis_kernels<float>(), rng);
  }
}

TEST_F(Krylov, SinglePrecisionAndInitialGuess) {
  const CsrMatrix<float> A = convdiff3d<float>(6, 1.0);
  std::vector<float> b(static_cast<std::size_t>(A.rows()));
  for (float& v : b) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  const LinearOperator<float> op(A);
  const auto M = ilu0(A);
  const auto g = gmres(op, b, {.tol = 1e-5, .M = &M});
  ASSERT_EQ(g.status, SolveStatus::converged);
  EXPECT_LE(true_residual<float>(A, b, g.x), 2e-5);
  const auto s = bicgstab(op, b, {.tol = 1e-5, .M = &M});
  ASSERT_EQ(s.status, SolveStatus::converged);
  // Starting from the solution: converged in 0 iterations.
  const auto again = gmres(op, b, {.tol = 1e-4, .x0 = g.x});
  EXPECT_EQ(again.status, SolveStatus::converged);
  EXPECT_EQ(again.iterations, 0);
  // b = 0: x = 0 exactly.
  const std::vector<float> zero(b.size(), 0.0f);
  const auto z = bicgstab(op, zero, {.x0 = g.x});
  EXPECT_EQ(z.status, SolveStatus::converged);
  EXPECT_TRUE(std::ranges::all_of(z.x, [](float v) { return v == 0.0f; }));
}

TEST_F(Krylov, CgWithGeneralPreconditioners) {
  const CsrMatrix<double> A = poisson3d<double>(10);
  const std::vector<double> b = random_vector(rng, A.rows());
  const LinearOperator<double> op(A);
  const auto jacobi = jacobi_preconditioner(A);
  const auto diag = cg(op, b, {.tol = 1e-10, .preconditioner = jacobi});
  const auto ic = ic0(A);
  const auto with_ic = cg(op, b, {.tol = 1e-10, .M = &ic});
  ASSERT_EQ(with_ic.status, SolveStatus::converged);
  EXPECT_LE(true_residual<double>(A, b, with_ic.x), 1e-10);
  EXPECT_LT(with_ic.iterations, diag.iterations);
  // Point block Jacobi through M takes Jacobi's iterations.
  const BlockJacobi<double> J(A);
  const auto with_j = cg(op, b, {.tol = 1e-10, .M = &J});
  EXPECT_EQ(with_j.status, SolveStatus::converged);
  EXPECT_NEAR(static_cast<double>(with_j.iterations), static_cast<double>(diag.iterations), 1.0);
  // Several right-hand sides: column j is the single solve of column j.
  Dense<double> B(A.rows(), 2);
  for (index_t i = 0; i < A.rows(); ++i) {
    B(i, 0) = b[i];
    B(i, 1) = 1.0;
  }
  const auto block = cg(op, B.view(), {.tol = 1e-10, .M = &ic});
  EXPECT_EQ(block.iterations[0], with_ic.iterations);
  for (index_t i = 0; i < A.rows(); ++i) EXPECT_EQ(block.X(i, 0), with_ic.x[i]);
  EXPECT_EQ(block.status[1], SolveStatus::converged);
  EXPECT_THROW((void)cg(op, b, {.preconditioner = jacobi, .M = &ic}), InvalidArgument);
  // M not positive definite: breakdown, never "converged".
  CsrMatrix<double> neg = A;
  for (double& v : neg.values()) v = -v;
  const BlockJacobi<double> bad(neg);
  EXPECT_EQ(cg(op, b, {.tol = 1e-10, .M = &bad}).status, SolveStatus::breakdown);
}

TEST_F(Krylov, BreakdownAndLimits) {
  // [[0, 1], [1, 0]] x = [1, 0]: BiCGStab's r̂ᵀ A p is 0 at once; GMRES solves it.
  Dense<double> S(2, 2);
  S(0, 1) = S(1, 0) = 1.0;
  const CsrMatrix<double> A = to_csr(std::as_const(S).view());
  const std::vector<double> b{1.0, 0.0};
  const auto s = bicgstab(LinearOperator<double>(A), b);
  EXPECT_EQ(s.status, SolveStatus::breakdown);
  EXPECT_TRUE(std::ranges::all_of(s.x, [](double v) { return std::isfinite(v); }));
  EXPECT_GT(s.rel_residual, 0.5);
  const auto g = gmres(LinearOperator<double>(A), b);
  EXPECT_EQ(g.status, SolveStatus::converged);
  EXPECT_NEAR(g.x[1], 1.0, 1e-14);
  // Too few iterations: max_iterations, with the true residual of the x returned.
  const CsrMatrix<double> C = convdiff3d<double>(8, 1.0);
  const std::vector<double> c = random_vector(rng, C.rows());
  for (const bool use_gmres : {true, false}) {
    const auto r = use_gmres ? gmres(LinearOperator<double>(C), c, {.tol = 1e-12, .max_iter = 4})
                             : bicgstab(LinearOperator<double>(C), c, {.tol = 1e-12, .max_iter = 4});
    EXPECT_EQ(r.status, SolveStatus::max_iterations);
    EXPECT_EQ(r.iterations, 4);
    EXPECT_NEAR(r.rel_residual, true_residual<double>(C, c, r.x), 1e-14);
  }
  // The callback stops the solve.
  index_t calls = 0;
  const auto stopped = gmres(LinearOperator<double>(C), c,
                             {.tol = 1e-12, .callback = [&](index_t, double) { return ++calls < 3; }});
  EXPECT_EQ(stopped.status, SolveStatus::stopped);
  EXPECT_EQ(stopped.iterations, 3);
}

TEST_F(Krylov, ArgumentErrors) {
  const CsrMatrix<double> A = convdiff3d<double>(3, 1.0);
  const LinearOperator<double> op(A);
  std::vector<double> b(27, 1.0);
  EXPECT_THROW((void)gmres(op, std::span<const double>(b.data(), 26)), DimensionMismatch);
  EXPECT_THROW((void)gmres(op, b, {.restart = 0}), InvalidArgument);
  EXPECT_THROW((void)bicgstab(op, b, {.tol = -1.0}), InvalidArgument);
  EXPECT_THROW((void)bicgstab(op, b, {.max_iter = -1}), InvalidArgument);
  const auto small = ilu0(convdiff3d<double>(2, 1.0));
  try {
    (void)gmres(op, b, {.M = &small});
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("preconditioner M (ilu0) is for 8 rows"));
  }
  b[4] = std::nan("");
  try {
    (void)bicgstab(op, b);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("b[4]"));
  }
}

TEST_F(Krylov, CgWithAmg) {
  // AMG as CG's preconditioner: few iterations, flat in the grid size, the same bits on
  // any thread count.
  std::vector<index_t> counts;
  for (const index_t n : {12, 24}) {
    const CsrMatrix<double> A = poisson3d<double>(n);
    const std::vector<double> b = random_vector(rng, A.rows());
    const Amg<double> M(A);
    const auto res = cg(LinearOperator<double>(A), b, {.tol = 1e-10, .M = &M});
    ASSERT_EQ(res.status, SolveStatus::converged);
    EXPECT_LE(true_residual<double>(A, b, res.x), 1e-10);
    counts.push_back(res.iterations);
  }
  EXPECT_LE(counts[1], counts[0] + counts[0] / 2);
  EXPECT_LE(counts[1], 25);
  const CsrMatrix<double> A = poisson3d<double>(20);
  const std::vector<double> b = random_vector(rng, A.rows());
  expect_thread_independent([&] {
    const Amg<double> M(A);
    return cg(LinearOperator<double>(A), b, {.tol = 1e-10, .M = &M}).x;
  });
}

TEST_F(Krylov, NanInTheMatrixIsABreakdown) {
  CsrMatrix<double> A = convdiff3d<double>(4, 1.0);
  A.values()[5] = std::nan("");
  const std::vector<double> b(static_cast<std::size_t>(A.rows()), 1.0);
  for (const auto& res : {gmres(LinearOperator<double>(A), b), bicgstab(LinearOperator<double>(A), b)}) {
    EXPECT_EQ(res.status, SolveStatus::breakdown);
    EXPECT_TRUE(std::ranges::all_of(res.x, [](double v) { return std::isfinite(v); }));
  }
}

TEST_F(Krylov, ThreadIndependent) {
  const CsrMatrix<double> A = convdiff3d<double>(18, 2.0);  // 5832 rows: two reduction chunks
  const std::vector<double> b = random_vector(rng, A.rows());
  const auto M = ilu0(A);
  expect_thread_independent([&] {
    const LinearOperator<double> op(A);
    std::vector<double> out = gmres(op, b, {.tol = 1e-9, .restart = 10, .M = &M}).x;
    const std::vector<double> s = bicgstab(op, b, {.tol = 1e-9, .M = &M}).x;
    out.insert(out.end(), s.begin(), s.end());
    return out;
  });
}

}  // namespace
}  // namespace trnsparse::test
