// Smoothed-aggregation AMG: the V-cycle as a stationary iteration (contraction, flat in
// the grid size), symmetry and positivity of M⁻¹, rigid-body modes on elasticity, the
// hierarchy against dense references (tentative prolongator, Galerkin product), update
// against a fresh build, thread-count independence, and every argument error.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernel_support.hpp"
#include "solvers/amg.hpp"
#include "support.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse::test {
namespace {

template <class T>
std::vector<T> random_vector(index_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}

template <class T>
double norm(const std::vector<T>& v) {
  double s = 0.0;
  for (const T x : v) s += static_cast<double>(x) * static_cast<double>(x);
  return std::sqrt(s);
}

template <class T>
double dot(const std::vector<T>& a, const std::vector<T>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

/// The average contraction of the residual per step of x += M⁻¹(b - A x) over `steps`
/// steps from x = 0, after `warmup` steps.
template <class T, class Matrix>
double contraction(const Matrix& A, const Amg<T>& M, index_t steps = 8, index_t warmup = 2) {
  const index_t n = A.rows();
  const std::vector<T> b = random_vector<T>(n, 7);
  std::vector<T> x(static_cast<std::size_t>(n), T(0)), r(b), z(static_cast<std::size_t>(n));
  double r0 = 0.0;
  for (index_t it = 0; it < warmup + steps; ++it) {
    if (it == warmup) r0 = norm(r);
    M.apply(r, z);
    for (index_t i = 0; i < n; ++i) x[i] += z[i];
    r = b;
    spmv(T(-1), A, std::span<const T>(x), T(1), std::span<T>(r));
  }
  return std::pow(norm(r) / r0, 1.0 / static_cast<double>(steps));
}

/// Iterations of preconditioned CG to a relative residual of `tol`.
template <class T, class Matrix>
index_t pcg_iterations(const Matrix& A, const Preconditioner<T>& M, double tol = 1e-8) {
  const index_t n = A.rows();
  const std::vector<T> b = random_vector<T>(n, 11);
  std::vector<T> x(static_cast<std::size_t>(n), T(0)), r(b), z(static_cast<std::size_t>(n)), p, q(static_cast<std::size_t>(n));
  M.apply(r, z);
  p = z;
  double rz = dot(r, z);
  const double bn = norm(b);
  for (index_t it = 1; it <= 500; ++it) {
    spmv(T(1), A, std::span<const T>(p), T(0), std::span<T>(q));
    const double alpha = rz / dot(p, q);
    for (index_t i = 0; i < n; ++i) {
      x[i] += static_cast<T>(alpha) * p[i];
      r[i] -= static_cast<T>(alpha) * q[i];
    }
    if (norm(r) <= tol * bn) return it;
    M.apply(r, z);
    const double rz_new = dot(r, z), beta = rz_new / rz;
    rz = rz_new;
    for (index_t i = 0; i < n; ++i) p[i] = z[i] + static_cast<T>(beta) * p[i];
  }
  return 501;
}

template <class T>
std::vector<T> precondition(const Amg<T>& M, const std::vector<T>& r) {
  std::vector<T> z(r.size());
  M.apply(r, z);
  return z;
}

// The V-cycle alone, as a stationary iteration, measured after the first steps have
// removed the oscillatory error: about 0.55 with the default cheap cycle (compact
// distance-2 aggregates on the 7-point stencil, Chebyshev of degree 2), the same for
// every size; CG multiplies it down (15 iterations to 1e-8 on poisson3d:96).
TEST(Amg, VcycleContractsFlatInTheGridSizeOnPoisson) {
  std::vector<double> rho;
  for (const index_t n : {16, 24, 32}) {
    const auto A = poisson3d<double>(n);
    const Amg<double> M(A, {.max_coarse = 100});
    ASSERT_GE(M.levels().size(), 2u) << n;
    rho.push_back(contraction(A, M, 10, 5));
    EXPECT_LT(rho.back(), 0.65) << "poisson3d:" << n;
  }
  EXPECT_LT(rho[2], rho[0] + 0.1);
  // More smoothing contracts faster.
  const auto A = poisson3d<double>(24);
  EXPECT_LT(contraction(A, Amg<double>(A, {.max_coarse = 100, .smoother_degree = 4}), 10, 5), rho[1]);
}

TEST(Amg, FloatContracts) {
  const auto A = poisson3d<float>(20);
  const Amg<float> M(A, {.max_coarse = 100});
  EXPECT_LT(contraction(A, M, 8, 4), 0.65);
}

TEST(Amg, InverseIsSymmetricPositiveDefinite) {
  const auto A = poisson3d<double>(14);
  const Amg<double> M(A, {.max_coarse = 50});
  ASSERT_GE(M.levels().size(), 3u);
  for (std::uint64_t s = 0; s < 4; ++s) {
    const auto u = random_vector<double>(A.rows(), 100 + s), v = random_vector<double>(A.rows(), 200 + s);
    const double uMv = dot(u, precondition(M, v)), vMu = dot(v, precondition(M, u));
    EXPECT_NEAR(uMv, vMu, 1e-12 * norm(u) * norm(v) * 10) << s;
    EXPECT_GT(dot(v, precondition(M, v)), 0.0) << s;
  }
}

TEST(Amg, ElasticityWithRigidBodyModesBeatsConstants) {
  const auto A = elasticity3d<double>(8);
  const auto coords = elasticity3d_coordinates(8);
  const auto B = rigid_body_modes<double>(coords.view());
  const Amg<double> rbm(A, {.block_size = 3, .near_nullspace = B.view(), .max_coarse = 200});
  const Amg<double> constants(A, {.block_size = 3, .max_coarse = 200});
  EXPECT_EQ(rbm.levels()[1].block_size, 6);
  EXPECT_EQ(constants.levels()[1].block_size, 3);
  const index_t it_rbm = pcg_iterations(A, rbm), it_const = pcg_iterations(A, constants);
  EXPECT_LT(it_rbm, it_const);
  EXPECT_LT(contraction(A, rbm), contraction(A, constants));
  // The same from BSR (block size 3 taken from A).
  const auto Ab = to_bsr(A, 3);
  const Amg<double> from_bsr(Ab, {.near_nullspace = B.view(), .max_coarse = 200});
  EXPECT_EQ(from_bsr.levels().size(), rbm.levels().size());
  EXPECT_EQ(precondition(from_bsr, random_vector<double>(A.rows(), 3)), precondition(rbm, random_vector<double>(A.rows(), 3)));
}

TEST(Amg, LevelShapes) {
  const auto A = elasticity3d<double>(8);
  const auto B = rigid_body_modes<double>(elasticity3d_coordinates(8).view());
  const Amg<double> M(A, {.block_size = 3, .near_nullspace = B.view(), .max_coarse = 100});
  const auto L = M.levels();
  ASSERT_GE(L.size(), 3u);
  EXPECT_EQ(L[0].rows, A.rows());
  EXPECT_EQ(L[0].nnz, A.nnz());
  EXPECT_EQ(L[0].block_size, 3);
  for (std::size_t l = 1; l < L.size(); ++l) {
    EXPECT_EQ(L[l].block_size, 6);
    EXPECT_EQ(L[l].rows % 6, 0);
    EXPECT_LT(L[l].rows, L[l - 1].rows);
    EXPECT_LE(L[l].nnz, L[l].rows * L[l].rows);
  }
  EXPECT_LE(L.back().rows, 100);
  EXPECT_GT(L[L.size() - 2].rows, 100);
  EXPECT_EQ(M.name(), "amg");
  EXPECT_EQ(M.size(), A.rows());
  EXPECT_GT(M.setup_seconds(), 0.0);
}

/// The internal hierarchy against dense references: P_tent has orthonormal columns and
/// reproduces B (P_tent R = B), each coarse row count is aggregates x k, and every
/// coarse operator is Pᵀ A P.
template <class T>
void check_hierarchy(const CsrMatrix<T>& A, index_t b, const Dense<T>* B) {
  AmgOptions<T> o{.block_size = b, .max_coarse = 10};
  if (B) o.near_nullspace = B->view();
  const index_t k = B ? B->cols() : b, g = std::gcd(b, k);
  std::vector<amg::Level<T>> levels(1);
  amg::Coarse coarse;
  levels[0].node = b;
  levels[0].A = amg::fine_operator(A, g, "test");
  std::vector<double> Bv(static_cast<std::size_t>(A.rows() * k), 0.0);
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t j = 0; j < k; ++j) Bv[i * k + j] = B ? (*B)(i, j) : (i % b == j ? 1.0 : 0.0);
  amg::build(levels, coarse, Bv, k, o, true);
  ASSERT_GE(levels.size(), 2u);
  const auto dense = [](const amg::Mat<T>& M) { return M.csr ? to_dense(*M.csr) : to_dense(*M.bsr); };
  for (std::size_t l = 0; l + 1 < levels.size(); ++l) {
    SCOPED_TRACE(::testing::Message() << "level " << l);
    const auto& L = levels[l];
    const auto n_agg = *std::max_element(L.aggregate.begin(), L.aggregate.end()) + 1;
    EXPECT_EQ(levels[l + 1].A.rows(), n_agg * k);
    EXPECT_EQ(static_cast<index_t>(L.aggregate.size()), L.A.rows() / L.node);
    const auto Pt = dense(L.P_tent), P = dense(L.P), Ad = dense(L.A), Ac = dense(levels[l + 1].A);
    const index_t n = Ad.rows(), nc = Ac.rows();
    std::vector<double> AP(static_cast<std::size_t>(n * nc), 0.0);
    for (index_t r = 0; r < n; ++r)
      for (index_t c = 0; c < n; ++c)
        if (Ad(r, c) != T(0))
          for (index_t j = 0; j < nc; ++j) AP[r * nc + j] += static_cast<double>(Ad(r, c)) * static_cast<double>(P(c, j));
    for (index_t i = 0; i < nc; ++i)
      for (index_t j = 0; j < nc; ++j) {
        double qq = 0.0, pap = 0.0;
        for (index_t r = 0; r < n; ++r) {
          qq += static_cast<double>(Pt(r, i)) * static_cast<double>(Pt(r, j));
          pap += static_cast<double>(P(r, i)) * AP[r * nc + j];
        }
        EXPECT_NEAR(qq, i == j ? 1.0 : 0.0, 1e-12) << i << ", " << j;
        EXPECT_NEAR(static_cast<double>(Ac(i, j)), pap, 1e-12 * std::fabs(Ac(i, i)) + 1e-14) << i << ", " << j;
      }
    // P = (I - ω/λ D⁻¹A) P_tent, and R = Pᵀ.
    const double sw = o.prolongator_omega / L.lmax;
    const auto Rd = dense(L.R);
    for (index_t r = 0; r < n; ++r)
      for (index_t j = 0; j < nc; ++j) {
        double ap = 0.0;
        for (index_t c = 0; c < n; ++c) ap += static_cast<double>(Ad(r, c)) * static_cast<double>(Pt(c, j));
        const double want = static_cast<double>(Pt(r, j)) - sw / static_cast<double>(Ad(r, r)) * ap;
        EXPECT_NEAR(static_cast<double>(P(r, j)), want, 1e-13 * (1.0 + std::fabs(want))) << r << ", " << j;
        EXPECT_EQ(Rd(j, r), P(r, j));
      }
  }
  if (k == 1) {  // with B = 1, P_tent R = 1: P_tent's columns are normalised indicators
    const auto Pt = dense(levels[0].P_tent);
    for (index_t r = 0; r < Pt.rows(); ++r) {
      double s = 0.0;
      for (index_t c = 0; c < Pt.cols(); ++c) s += Pt(r, c) != T(0) ? 1.0 : 0.0;
      EXPECT_EQ(s, 1.0);
    }
  }
  EXPECT_TRUE(coarse.factored);
  EXPECT_EQ(coarse.n, levels.back().A.rows());
}

TEST(Amg, HierarchyMatchesDenseReferencePoisson) { check_hierarchy<double>(poisson3d<double>(8), 1, nullptr); }

TEST(Amg, HierarchyMatchesDenseReferenceElasticity) {
  const auto B = rigid_body_modes<double>(elasticity3d_coordinates(4).view());
  check_hierarchy<double>(elasticity3d<double>(4), 3, &B);
}

TEST(Amg, HierarchyMatchesDenseReferenceElasticityConstants) {
  check_hierarchy<double>(elasticity3d<double>(4), 3, nullptr);
}

TEST(Amg, TentativeProlongatorReproducesNearNullspace) {
  // P_tent R = B on the fine level, through the internal hierarchy with rigid-body modes.
  const auto A = elasticity3d<double>(4);
  const auto B = rigid_body_modes<double>(elasticity3d_coordinates(4).view());
  std::vector<amg::Level<double>> levels(1);
  amg::Coarse coarse;
  levels[0].node = 3;
  levels[0].A = amg::fine_operator(A, 3, "test");
  std::vector<double> Bv(B.values().begin(), B.values().end());
  amg::build(levels, coarse, Bv, 6, AmgOptions<double>{.block_size = 3, .max_coarse = 30, .max_levels = 2}, true);
  ASSERT_EQ(levels.size(), 2u);
  // Coarse B is not kept; reconstruct R = P_tentᵀ B (Q orthonormal) and check Q R = B.
  const auto Pt = to_dense(*levels[0].P_tent.bsr);
  const index_t n = Pt.rows(), nc = Pt.cols();
  for (index_t j = 0; j < 6; ++j) {
    std::vector<double> rj(static_cast<std::size_t>(nc), 0.0);
    for (index_t c = 0; c < nc; ++c)
      for (index_t r = 0; r < n; ++r) rj[c] += Pt(r, c) * B(r, j);
    for (index_t r = 0; r < n; ++r) {
      double s = 0.0;
      for (index_t c = 0; c < nc; ++c) s += Pt(r, c) * rj[c];
      EXPECT_NEAR(s, B(r, j), 1e-10) << r << ", " << j;
    }
  }
}

TEST(Amg, UpdateEqualsFreshBuild) {
  const auto A = elasticity3d<double>(6);
  const auto B = rigid_body_modes<double>(elasticity3d_coordinates(6).view());
  const AmgOptions<double> o{.block_size = 3, .near_nullspace = B.view(), .max_coarse = 100};
  Amg<double> M(A, o);
  auto A2 = A;
  for (auto& v : A2.values()) v *= 3.0;
  M.update(A2);
  const Amg<double> fresh(A2, o);
  const auto r = random_vector<double>(A.rows(), 5);
  EXPECT_EQ(precondition(M, r), precondition(fresh, r));
  // And back to A: the first build's bits.
  const Amg<double> first(A, o);
  M.update(A);
  EXPECT_EQ(precondition(M, r), precondition(first, r));
  // A BSR build updates from BSR.
  const auto Ab = to_bsr(A, 3);
  Amg<double> Mb(Ab, {.near_nullspace = B.view(), .max_coarse = 100});
  auto Ab2 = Ab;
  for (auto& v : Ab2.blocks()) v *= 3.0;
  Mb.update(Ab2);
  EXPECT_EQ(precondition(Mb, r), precondition(Amg<double>(Ab2, {.near_nullspace = B.view(), .max_coarse = 100}), r));
  // Another structure, or format, is refused.
  const auto other = poisson3d<double>(4);
  EXPECT_THAT([&] { M.update(other); }, throws_naming<InvalidArgument>("amg: update", "structure"));
  EXPECT_THAT([&] { M.update(Ab); }, throws_naming<InvalidArgument>("amg: update", "structure"));
  EXPECT_THAT([&] { Mb.update(A); }, throws_naming<InvalidArgument>("amg: update", "structure"));
  // A failed update's values error names the row.
  auto bad = A;
  bad.values()[0] = -1.0;
  EXPECT_THAT([&] { M.update(bad); }, throws_naming<InvalidArgument>("A(0, 0) = -1"));
}

TEST(Amg, ThreadCountIndependent) {
  const auto P = poisson3d<double>(20);
  const auto r = random_vector<double>(P.rows(), 9);
  expect_thread_independent([&] { return precondition(Amg<double>(P, {.max_coarse = 50}), r); });
  const auto E = elasticity3d<double>(5);
  const auto B = rigid_body_modes<double>(elasticity3d_coordinates(5).view());
  const auto re = random_vector<double>(E.rows(), 9);
  expect_thread_independent(
      [&] { return precondition(Amg<double>(E, {.block_size = 3, .near_nullspace = B.view(), .max_coarse = 50}), re); });
}

// mixed_precision (on by default for double): the cycle applies fp32 copies of its CSR
// levels' values (symmetry and thread independence are checked above, with it on). It
// moves z by about fp32's rounding of A and takes the double cycle's CG iterations;
// update() rounds the new values; a matrix whose values leave fp32's normal range keeps
// double on every level (the double cycle's bits).
TEST(Amg, MixedPrecisionCycle) {
  const auto A = poisson3d<double>(20);
  const AmgOptions<double> o{.max_coarse = 50};
  AmgOptions<double> o64 = o;
  o64.mixed_precision = false;
  Amg<double> mixed(A, o);
  const Amg<double> full(A, o64);
  const auto r = random_vector<double>(A.rows(), 5);
  const auto zm = precondition(mixed, r), zf = precondition(full, r);
  std::vector<double> diff(zm.size());
  for (std::size_t i = 0; i < zm.size(); ++i) diff[i] = zm[i] - zf[i];
  EXPECT_GT(norm(diff), 0.0) << "mixed_precision does not reach the cycle";
  EXPECT_LT(norm(diff), 1e-5 * norm(zf));
  EXPECT_EQ(pcg_iterations(A, mixed), pcg_iterations(A, full));
  auto A3 = A;
  for (auto& v : A3.values()) v *= 3.0;
  mixed.update(A3);
  EXPECT_EQ(precondition(mixed, r), precondition(Amg<double>(A3, o), r));
  for (const double scale : {1e-200, 1e200}) {
    auto S = A;
    for (auto& v : S.values()) v *= scale;
    EXPECT_EQ(precondition(Amg<double>(S, o), r), precondition(Amg<double>(S, o64), r)) << scale;
  }
}

TEST(Amg, SingleLevelIsTheExactInverse) {
  const auto A = poisson3d<double>(6);
  const Amg<double> M(A);
  ASSERT_EQ(M.levels().size(), 1u);
  const auto b = random_vector<double>(A.rows(), 4);
  const auto x = precondition(M, b);
  std::vector<double> r(b);
  spmv(-1.0, A, std::span<const double>(x), 1.0, std::span<double>(r));
  EXPECT_LT(norm(r), 1e-12 * norm(b));
  // z may alias r.
  std::vector<double> y(b);
  M.apply(y, y);
  EXPECT_EQ(y, x);
}

TEST(Amg, SmootherOnlyLastLevelWhenMaxLevelsStops) {
  const auto A = poisson3d<double>(12);
  const Amg<double> M(A, {.max_coarse = 10, .max_levels = 2});
  ASSERT_EQ(M.levels().size(), 2u);
  EXPECT_GT(M.levels()[1].rows, 10);
  EXPECT_LT(contraction(A, M), 0.6);
  const auto u = random_vector<double>(A.rows(), 1), v = random_vector<double>(A.rows(), 2);
  EXPECT_NEAR(dot(u, precondition(M, v)), dot(v, precondition(M, u)), 1e-10 * norm(u) * norm(v));
}

TEST(Amg, PoissonCoarsensAggressively) {
  // Distance-2 aggregation on the 7-point stencil: a coarse level of about 4 % of the
  // rows, then the denser coarse graph aggregates over distance 1.
  const auto A = poisson3d<double>(24);
  const Amg<double> M(A, {.max_coarse = 20});
  const auto L = M.levels();
  ASSERT_GE(L.size(), 3u);
  EXPECT_LT(L[1].rows * 15, L[0].rows);
  EXPECT_GT(L[1].rows * 40, L[0].rows);
  index_t nnz = 0;
  for (const auto& l : L) nnz += l.nnz;
  EXPECT_LT(static_cast<double>(nnz) / static_cast<double>(L[0].nnz), 1.3);  // operator complexity
}

TEST(Amg, PatternGraphEqualsStrengthGraphAtZeroThreshold) {
  // θ = 0 aggregates on A's pattern in place; a θ whose square underflows to 0 takes the
  // strength pass with the same criterion: the same hierarchy, bit for bit.
  for (const bool elasticity : {false, true}) {
    const auto A = elasticity ? elasticity3d<double>(5) : poisson3d<double>(14);
    const index_t b = elasticity ? 3 : 1;
    const Amg<double> M0(A, {.block_size = b, .max_coarse = 20});
    const Amg<double> M1(A, {.block_size = b, .strength_threshold = 1e-300, .max_coarse = 20});
    const auto r = random_vector<double>(A.rows(), 8);
    EXPECT_EQ(precondition(M0, r), precondition(M1, r)) << elasticity;
    EXPECT_EQ(M0.levels().size(), M1.levels().size());
  }
  // A real threshold drops connections: fewer strong neighbours, other aggregates.
  const auto E = elasticity3d<double>(5);
  const Amg<double> M2(E, {.block_size = 3, .strength_threshold = 0.2, .max_coarse = 20});
  EXPECT_LT(contraction(E, M2), 1.0);
}

TEST(Amg, UncoupledNodesStallCoarsening) {
  // A diagonal matrix: every node its own aggregate, no coarser level; 2000 rows > max_coarse,
  // so the single level is smoothed: D⁻¹A = I, and Chebyshev of degree 4 on [0.1, 1.1]
  // leaves |q(1)| = 1 / T_4(1.2) · |T_4(-0.8)| ≈ 0.139 of the error.
  std::vector<index_t> ptr(2001), idx(2000);
  std::vector<double> v(2000);
  for (index_t i = 0; i < 2000; ++i) {
    ptr[i + 1] = i + 1;
    idx[i] = i;
    v[i] = 1.0 + static_cast<double>(i % 7);
  }
  const CsrMatrix<double> A(2000, 2000, ptr, idx, v);
  const Amg<double> M(A);
  ASSERT_EQ(M.levels().size(), 1u);
  const auto b = random_vector<double>(2000, 3);
  const auto x = precondition(M, b);
  for (index_t i = 0; i < 2000; ++i) EXPECT_NEAR(x[i] * v[i], b[i], 0.14 * std::fabs(b[i])) << i;
}

TEST(Amg, RigidBodyModesAreTheNullspaceAwayFromTheClampedFace) {
  const index_t n = 4;
  const auto A = elasticity3d<double>(n);
  const auto X = elasticity3d_coordinates(n);
  const auto B = rigid_body_modes<double>(X.view());
  ASSERT_EQ(B.rows(), A.rows());
  ASSERT_EQ(B.cols(), 6);
  double amax = 0.0;
  for (const double v : A.values()) amax = std::max(amax, std::fabs(v));
  for (index_t j = 0; j < 6; ++j) {
    std::vector<double> m(static_cast<std::size_t>(A.rows())), Am(m.size());
    for (index_t i = 0; i < A.rows(); ++i) m[i] = B(i, j);
    spmv(1.0, A, std::span<const double>(m), 0.0, std::span<double>(Am));
    index_t checked = 0;
    for (index_t node = 0; node < X.rows(); ++node) {
      if (X(node, 0) < 2.0 / n - 1e-12) continue;  // couples to the clamped face
      ++checked;
      for (index_t u = 0; u < 3; ++u) EXPECT_NEAR(Am[3 * node + u], 0.0, 1e-12 * amax * 30) << j << ", " << node;
    }
    EXPECT_GT(checked, 0);
  }
  // Translations are unit vectors; rotations are ω × (p - centroid).
  EXPECT_EQ(B(0, 0), 1.0);
  EXPECT_EQ(B(1, 0), 0.0);
  EXPECT_EQ(B(4, 1), 1.0);
  double c[3] = {0, 0, 0};
  for (index_t i = 0; i < X.rows(); ++i)
    for (index_t d = 0; d < 3; ++d) c[d] += X(i, d) / static_cast<double>(X.rows());
  const index_t i = 7;
  EXPECT_NEAR(B(3 * i + 0, 5), -(X(i, 1) - c[1]), 1e-15);
  EXPECT_NEAR(B(3 * i + 1, 5), X(i, 0) - c[0], 1e-15);
  EXPECT_EQ(B(3 * i + 2, 5), 0.0);
  Dense<double> two(4, 2);
  EXPECT_THAT([&] { (void)rigid_body_modes<double>(two.view()); },
              throws_naming<DimensionMismatch>("rigid_body_modes", "coords", "3"));
  Dense<double> nan(2, 3);
  nan(1, 2) = std::nan("");
  EXPECT_THAT([&] { (void)rigid_body_modes<double>(nan.view()); },
              throws_naming<InvalidArgument>("rigid_body_modes", "coords(1, 2)"));
}

TEST(Amg, BadInput) {
  const auto A = poisson3d<double>(4);
  const auto rect = random_csr<double>(4, 5, 0.5, 1);
  EXPECT_THAT([&] { Amg<double>{rect}; }, throws_naming<InvalidArgument>("amg", "4 x 5", "square"));
  auto zero = A;
  zero.values()[0] = 0.0;
  EXPECT_THAT([&] { Amg<double>{zero}; }, throws_naming<InvalidArgument>("amg", "A(0, 0) = 0"));
  {
    const auto rp = A.row_ptr();
    const auto ci = A.col_indices();
    auto negd = A;
    for (index_t p = rp[5]; p < rp[6]; ++p)
      if (ci[p] == 5) negd.values()[p] = -2.0;
    EXPECT_THAT([&] { Amg<double>{negd}; }, throws_naming<InvalidArgument>("amg", "A(5, 5) = -2"));
  }
  auto nan = A;
  nan.values()[3] = std::nan("");
  EXPECT_THAT([&] { Amg<double>{nan}; }, throws_naming<InvalidArgument>("amg", "non-finite"));
  auto inf = A;
  inf.values()[0] = INFINITY;
  EXPECT_THAT([&] { Amg<double>{inf}; }, throws_naming<InvalidArgument>("amg", "non-finite"));
  // A missing diagonal entry.
  const CsrMatrix<double> nodiag(2, 2, {0, 1, 2}, {1, 0}, {1.0, 1.0});
  EXPECT_THAT([&] { Amg<double>{nodiag}; }, throws_naming<InvalidArgument>("amg", "A(0, 0) = 0"));

  Dense<double> wrong_rows(A.rows() - 1, 1), no_cols(A.rows(), 0), ok(A.rows(), 1);
  EXPECT_THAT([&] { Amg<double>(A, {.near_nullspace = wrong_rows.view()}); },
              throws_naming<DimensionMismatch>("options.near_nullspace", "63 rows", "64"));
  EXPECT_THAT([&] { Amg<double>(A, {.near_nullspace = DenseView<const double>(ok.values().data(), A.rows(), 0, 1)}); },
              throws_naming<InvalidArgument>("options.near_nullspace", "0 columns"));
  (void)no_cols;
  ok(3, 0) = std::nan("");
  EXPECT_THAT([&] { Amg<double>(A, {.near_nullspace = ok.view()}); },
              throws_naming<InvalidArgument>("options.near_nullspace(3, 0)"));
  EXPECT_THAT([&] { Amg<double>(A, {.block_size = 3}); },
              throws_naming<InvalidArgument>("options.block_size = 3", "64 rows"));
  EXPECT_THAT([&] { Amg<double>(A, {.block_size = -1}); }, throws_naming<InvalidArgument>("options.block_size = -1"));
  EXPECT_THAT([&] { Amg<double>(A, {.strength_threshold = -0.1}); },
              throws_naming<InvalidArgument>("options.strength_threshold"));
  EXPECT_THAT([&] { Amg<double>(A, {.strength_threshold = std::nan("")}); },
              throws_naming<InvalidArgument>("options.strength_threshold"));
  EXPECT_THAT([&] { Amg<double>(A, {.max_coarse = 0}); }, throws_naming<InvalidArgument>("options.max_coarse = 0"));
  EXPECT_THAT([&] { Amg<double>(A, {.max_levels = 0}); }, throws_naming<InvalidArgument>("options.max_levels = 0"));
  EXPECT_THAT([&] { Amg<double>(A, {.smoother_degree = 0}); },
              throws_naming<InvalidArgument>("options.smoother_degree = 0"));
  EXPECT_THAT([&] { Amg<double>(A, {.prolongator_omega = 0.0}); },
              throws_naming<InvalidArgument>("options.prolongator_omega"));
  const auto padded = to_bsr(poisson3d<double>(5), 2);
  EXPECT_THAT([&] { Amg<double>{padded}; },
              throws_naming<InvalidArgument>("options.block_size = 2", "125 rows"));

  const Amg<double> M(A);
  std::vector<double> r(63), z(64);
  EXPECT_THAT([&] { M.apply(r, z); }, throws_naming<DimensionMismatch>("amg", "r"));
  std::vector<double> r2(64), z2(65);
  EXPECT_THAT([&] { M.apply(r2, z2); }, throws_naming<DimensionMismatch>("amg", "z"));
}

TEST(Amg, EmptyMatrix) {
  const CsrMatrix<double> A(0, 0);
  const Amg<double> M(A);
  EXPECT_EQ(M.size(), 0);
  std::vector<double> r, z;
  M.apply(r, z);
}

}  // namespace
}  // namespace trnsparse::test
