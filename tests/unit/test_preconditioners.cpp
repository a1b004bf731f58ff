// Preconditioners and triangular solves against dense references: sptrsv against
// forward and back substitution (CSR and BSR, both triangles, unit and non-unit, blocks
// cut at the edge), block Jacobi against inverted dense blocks, IC(0) and ILU(0) by their
// defining property (the product of the factors equals A on A's pattern) and as exact
// factorisations where no fill is dropped; update(), errors, and thread independence.
#include <algorithm>
#include <cmath>
#include <utility>

#include "kernel_support.hpp"
#include "support.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/preconditioners.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse::test {
namespace {

using ::testing::HasSubstr;

class Preconditioners : public Seeded<> {};

/// A random n x n matrix with about `per_row` entries a row off the diagonal and a
/// dominant diagonal (so every triangle and factorisation is well conditioned).
CsrMatrix<double> dominant(Rng& rng, index_t n, double per_row) {
  Dense<double> D(n, n);
  for (index_t i = 0; i < n; ++i) {
    double sum = 0.0;
    for (index_t j = 0; j < n; ++j)
      if (j != i && rng.bernoulli(per_row / static_cast<double>(n))) {
        D(i, j) = rng.uniform(-1.0, 1.0);
        sum += std::abs(D(i, j));
      }
    D(i, i) = sum + rng.uniform(0.5, 1.5);
  }
  return to_csr(std::as_const(D).view());
}

Dense<double> dense_of(const CsrMatrix<double>& A) {
  Dense<double> D(A.rows(), A.cols());
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t e = A.row_ptr()[i]; e < A.row_ptr()[i + 1]; ++e) D(i, A.col_indices()[e]) = A.values()[e];
  return D;
}

/// x = T⁻¹ b by substitution on the dense triangle of A.
std::vector<double> substitute(const Dense<double>& A, Triangle uplo, Diagonal diag, const std::vector<double>& b) {
  const index_t n = A.rows();
  std::vector<double> x(b);
  const auto row = [&](index_t i) {
    double s = b[i];
    for (index_t j = 0; j < n; ++j)
      if (j != i && (j < i) == (uplo == Triangle::lower)) s -= A(i, j) * x[j];
    x[i] = diag == Diagonal::unit ? s : s / A(i, i);
  };
  if (uplo == Triangle::lower)
    for (index_t i = 0; i < n; ++i) row(i);
  else
    for (index_t i = n - 1; i >= 0; --i) row(i);
  return x;
}

std::vector<double> random_vector(Rng& rng, index_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& e : v) e = rng.uniform(-1.0, 1.0);
  return v;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 1.0;
  for (const double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * scale) << "entry " << i;
}

TEST_F(Preconditioners, SptrsvMatchesSubstitution) {
  for (const index_t n : {1, 7, 60}) {
    const CsrMatrix<double> A = dominant(rng, n, 4.0);
    const Dense<double> D = dense_of(A);
    const std::vector<double> b = random_vector(rng, n);
    for (const Triangle uplo : {Triangle::lower, Triangle::upper})
      for (const Diagonal diag : {Diagonal::non_unit, Diagonal::unit}) {
        const std::vector<double> want = substitute(D, uplo, diag, b);
        std::vector<double> x(b.size());
        sptrsv(A, uplo, diag, b, std::span(x));
        expect_near(x, want, 1e-13);
        // The triangle stored alone (its diagonal at each row's edge, as the factors of
        // ilu0/ic0 are) takes the 32-bit column path: the same sums, the same bits.
        std::vector<index_t> tp{0}, ti;
        std::vector<double> tv;
        for (index_t i = 0; i < n; ++i) {
          for (index_t e = A.row_ptr()[i]; e < A.row_ptr()[i + 1]; ++e)
            if (const index_t j = A.col_indices()[e]; uplo == Triangle::lower ? j <= i : j >= i) {
              ti.push_back(j);
              tv.push_back(A.values()[e]);
            }
          tp.push_back(static_cast<index_t>(ti.size()));
        }
        const CsrMatrix<double> alone(n, n, std::move(tp), std::move(ti), std::move(tv));
        std::vector<double> xa(b.size());
        sptrsv(alone, uplo, diag, b, std::span(xa));
        EXPECT_EQ(xa, x);
        // BSR, blocks of 3 and 4 (cut at the edge when they do not divide n), and x = b.
        for (const index_t bs : {3, 4}) {
          const BsrMatrix<double> B = to_bsr(A, bs);
          std::vector<double> y(b);
          sptrsv(B, uplo, diag, std::span<const double>(y), std::span(y));
          expect_near(y, want, 1e-13);
        }
      }
  }
}

TEST_F(Preconditioners, SptrsvWideLevelsRunOnThreads) {
  // Two levels of 200000 rows: the second half's rows each read two rows of the first.
  // Wide enough for the level-parallel solve; it must match substitution in row order
  // and give the same bits on any thread count.
  const index_t half = 200000, n = 2 * half;
  std::vector<index_t> ptr{0}, idx;
  std::vector<double> val;
  for (index_t i = 0; i < n; ++i) {
    if (i >= half) {
      const index_t a = i - half, c = (i * 7919) % half;
      for (const index_t j : {std::min(a, c), std::max(a, c)}) {
        if (!idx.empty() && ptr.back() < static_cast<index_t>(idx.size()) && idx.back() == j) continue;
        idx.push_back(j);
        val.push_back(-0.5);
      }
    }
    idx.push_back(i);
    val.push_back(2.0 + static_cast<double>(i % 3));
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  const CsrMatrix<double> L(n, n, std::move(ptr), std::move(idx), std::move(val));
  const std::vector<double> b = random_vector(rng, n);
  std::vector<double> want(b.size());
  for (index_t i = 0; i < n; ++i) {
    double s = b[i];
    for (index_t e = L.row_ptr()[i]; e + 1 < L.row_ptr()[i + 1]; ++e) s -= L.values()[e] * want[L.col_indices()[e]];
    want[i] = s * (1.0 / L.values()[L.row_ptr()[i + 1] - 1]);  // the solver multiplies by the reciprocal
  }
  const TriangularSolver<double> T(L, Triangle::lower, Diagonal::non_unit);
  EXPECT_EQ(T.levels(), 2);
  expect_thread_independent([&] {
    std::vector<double> x(b.size());
    T.solve(b, std::span(x));
    EXPECT_EQ(x, want);
    return x;
  });
}

TEST_F(Preconditioners, SptrsvLevels) {
  // A diagonal matrix is one level; a bidiagonal one is n levels; the 7-point Laplacian
  // on an m³ grid in natural order is 3 (m - 1) + 1 wavefronts.
  const index_t m = 5;
  const CsrMatrix<double> P = poisson3d<double>(m);
  const CsrMatrix<double> I = eye_csr<double>(9);
  EXPECT_EQ(TriangularSolver<double>(I, Triangle::lower, Diagonal::non_unit).levels(), 1);
  EXPECT_EQ(TriangularSolver<double>(P, Triangle::lower, Diagonal::non_unit).levels(), 3 * (m - 1) + 1);
  EXPECT_EQ(TriangularSolver<double>(P, Triangle::upper, Diagonal::unit).levels(), 3 * (m - 1) + 1);
}

TEST_F(Preconditioners, SptrsvErrors) {
  const CsrMatrix<double> A = dominant(rng, 6, 2.0);
  std::vector<double> b(6, 1.0), x(6);
  EXPECT_THROW(sptrsv(random_csr<double>(3, 4, 0.5, 1), Triangle::lower, Diagonal::unit, std::span<const double>(b.data(), 3),
                      std::span(x.data(), 3)),
               InvalidArgument);
  EXPECT_THROW(sptrsv(A, Triangle::lower, Diagonal::unit, std::span<const double>(b.data(), 5), std::span(x)),
               DimensionMismatch);
  // A missing (or zero) diagonal: named by its row for a non-unit solve, fine for a unit one.
  CsrMatrix<double> Z = A;
  for (index_t e = Z.row_ptr()[3]; e < Z.row_ptr()[4]; ++e)
    if (Z.col_indices()[e] == 3) Z.values()[static_cast<std::size_t>(e)] = 0.0;
  try {
    sptrsv(Z, Triangle::lower, Diagonal::non_unit, b, std::span(x));
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("row 3"));
  }
  EXPECT_NO_THROW(sptrsv(Z, Triangle::lower, Diagonal::unit, b, std::span(x)));
  const CsrMatrix<double> strict = random_csr<double>(6, 6, 0.0, 1);  // no entries at all
  EXPECT_THROW(sptrsv(strict, Triangle::upper, Diagonal::non_unit, b, std::span(x)), InvalidArgument);
  EXPECT_NO_THROW(sptrsv(strict, Triangle::upper, Diagonal::unit, b, std::span(x)));
  EXPECT_EQ(x, b);
}

TEST_F(Preconditioners, BlockJacobiInvertsDiagonalBlocks) {
  const CsrMatrix<double> A = elasticity3d<double>(2);
  const index_t n = A.rows();
  const Dense<double> D = dense_of(A);
  const std::vector<double> r = random_vector(rng, n);
  std::vector<double> want(r.size());
  for (index_t I = 0; I < n / 3; ++I) {
    // Solve the 3 x 3 block by Cramer's rule.
    double m[3][3];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) m[i][j] = D(3 * I + i, 3 * I + j);
    const auto det3 = [](double a[3][3]) {
      return a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
             a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
    };
    const double det = det3(m);
    for (int c = 0; c < 3; ++c) {
      double mc[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) mc[i][j] = j == c ? r[3 * I + i] : m[i][j];
      want[3 * I + c] = det3(mc) / det;
    }
  }
  std::vector<double> z(r.size());
  BlockJacobi<double>(to_bsr(A, 3)).apply(r, std::span(z));
  expect_near(z, want, 1e-12);
  BlockJacobi<double>(A, 3).apply(r, std::span(z));
  expect_near(z, want, 1e-12);
  // Point Jacobi.
  BlockJacobi<double> J(A);
  J.apply(r, std::span(z));
  for (index_t i = 0; i < n; ++i) EXPECT_DOUBLE_EQ(z[i], r[i] / D(i, i));
  EXPECT_EQ(J.name(), "bjacobi");
  EXPECT_THROW(BlockJacobi<double>(A, 4), InvalidArgument);  // 4 does not divide 54
  CsrMatrix<double> S = A;
  std::fill(S.values().begin(), S.values().end(), 0.0);
  try {
    BlockJacobi<double> bad(S, 3);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("rows [0, 3)"));
  }
  EXPECT_THROW(J.apply(std::span(r.data(), 5), std::span(z)), DimensionMismatch);
}

/// max |(L U)_ij - a_ij| over the stored entries of `pattern` (all of A for ILU(0), its
/// lower triangle for IC(0)).
double pattern_error(const CsrMatrix<double>& pattern, const Dense<double>& A, const CsrMatrix<double>& L,
                     const CsrMatrix<double>& U, bool lower_only) {
  const Dense<double> l = dense_of(L), u = dense_of(U);
  double worst = 0.0;
  for (index_t i = 0; i < pattern.rows(); ++i)
    for (index_t e = pattern.row_ptr()[i]; e < pattern.row_ptr()[i + 1]; ++e) {
      const index_t j = pattern.col_indices()[e];
      if (lower_only && j > i) continue;
      double s = 0.0;
      for (index_t k = 0; k < A.rows(); ++k) s += l(i, k) * u(k, j);
      worst = std::max(worst, std::abs(s - A(i, j)));
    }
  return worst;
}

TEST_F(Preconditioners, IncompleteFactorsMatchAOnItsPattern) {
  const CsrMatrix<double> A = dominant(rng, 40, 5.0);
  const auto ilu = ilu0(A);
  EXPECT_LT(pattern_error(A, dense_of(A), ilu.lower(), ilu.upper(), false), 1e-12);
  const CsrMatrix<double> P = poisson3d<double>(4);
  const auto ic = ic0(P);
  EXPECT_LT(pattern_error(P, dense_of(P), ic.lower(), ic.upper(), true), 1e-12);
  EXPECT_EQ(ilu.name(), "ilu0");
  EXPECT_EQ(ic.name(), "ic0");
  // BSR: the factors keep every entry of the stored blocks (zeros included), and match
  // A on all of them.
  const BsrMatrix<double> B = to_bsr(A, 4);
  const auto block_ilu = ilu0(B);
  EXPECT_GE(block_ilu.lower().nnz() + block_ilu.upper().nnz(), A.nnz() + A.rows());
  EXPECT_LT(pattern_error(block_ilu.lower(), dense_of(A), block_ilu.lower(), block_ilu.upper(), false), 1e-12);
  EXPECT_LT(pattern_error(block_ilu.upper(), dense_of(A), block_ilu.lower(), block_ilu.upper(), false), 1e-12);
}

TEST_F(Preconditioners, IncompleteFactorsAreExactWithoutFill) {
  // A tridiagonal matrix has no fill: ILU(0) and IC(0) are its exact LU and Cholesky.
  const index_t n = 50;
  Dense<double> T(n, n);
  for (index_t i = 0; i < n; ++i) {
    T(i, i) = 2.5;
    if (i > 0) T(i, i - 1) = T(i - 1, i) = -1.0;
  }
  const CsrMatrix<double> A = to_csr(std::as_const(T).view());
  const std::vector<double> x = random_vector(rng, n);
  std::vector<double> b(x.size()), z(x.size());
  spmv(1.0, A, std::span<const double>(x), 0.0, std::span(b));
  ilu0(A).apply(b, std::span(z));
  expect_near(z, x, 1e-12);
  ic0(A).apply(b, std::span(z));
  expect_near(z, x, 1e-12);
  ilu0(to_bsr(A, 7)).apply(b, std::span(z));  // blocks of 7, the last cut at 50
  expect_near(z, x, 1e-12);
}

TEST_F(Preconditioners, UpdateRefactors) {
  const CsrMatrix<double> A = dominant(rng, 30, 4.0);
  CsrMatrix<double> A2 = A;
  for (double& v : A2.values()) v *= 3.0;
  const std::vector<double> r = random_vector(rng, 30);
  std::vector<double> fresh(r.size()), updated(r.size());
  auto M = ilu0(A);
  M.update(A2);
  M.apply(r, std::span(updated));
  ilu0(A2).apply(r, std::span(fresh));
  EXPECT_EQ(updated, fresh);
  BlockJacobi<double> J(A, 3);
  J.update(A2);
  J.apply(r, std::span(updated));
  BlockJacobi<double>(A2, 3).apply(r, std::span(fresh));
  EXPECT_EQ(updated, fresh);
  // Another structure, or the other format: refused.
  EXPECT_THROW(M.update(dominant(rng, 30, 4.0)), InvalidArgument);
  EXPECT_THROW(M.update(to_bsr(A, 3)), InvalidArgument);
  auto Mb = ilu0(to_bsr(A, 3));
  EXPECT_NO_THROW(Mb.update(to_bsr(A2, 3)));
  EXPECT_THROW(Mb.update(A2), InvalidArgument);
}

TEST_F(Preconditioners, FactorisationErrorsNameTheRow) {
  // Row 2 has no diagonal entry; IC(0) of an indefinite matrix; a NaN.
  Dense<double> D(4, 4);
  for (index_t i = 0; i < 4; ++i) D(i, i) = 1.0;
  D(2, 2) = 0.0;
  D(2, 1) = 1.0;
  try {
    (void)ilu0(to_csr(std::as_const(D).view()));
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("row 2"));
  }
  Dense<double> S(2, 2);
  S(0, 0) = 1.0;
  S(0, 1) = S(1, 0) = 2.0;
  S(1, 1) = 1.0;
  try {
    (void)ic0(to_csr(std::as_const(S).view()));
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("row 1"));
  }
  S(1, 1) = std::nan("");
  EXPECT_THROW((void)ilu0(to_csr(std::as_const(S).view())), InvalidArgument);
  EXPECT_THROW((void)ilu0(random_csr<double>(3, 4, 1.0, 1)), InvalidArgument);
  // A zero pivot that elimination creates: [[1, 1], [1, 1]].
  Dense<double> Z(2, 2);
  Z(0, 0) = Z(0, 1) = Z(1, 0) = Z(1, 1) = 1.0;
  try {
    (void)ilu0(to_csr(std::as_const(Z).view()));
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("zero pivot at row 1"));
  }
}

TEST_F(Preconditioners, BlockedFactorisationsSolveBlocksSideBySide) {
  // blocks = 4 drops the couplings between four row ranges: the factors match A on the
  // kept pattern, have no entry across ranges, and give the same bits on any thread count
  // (the ranges are swept side by side). Blocks = 1 is the plain factorisation.
  const CsrMatrix<double> A = convdiff3d<double>(24, 1.0);  // 13824 rows: ranges of 3456
  const auto blocked = ilu0(A, 4);
  const auto plain = ilu0(A);
  EXPECT_LT(blocked.lower().nnz() + blocked.upper().nnz(), plain.lower().nnz() + plain.upper().nnz());
  const index_t n = A.rows();
  const auto range = [n](index_t r) { return r * 4 / n; };
  for (const CsrMatrix<double>* F : {&blocked.lower(), &blocked.upper()})
    for (index_t i = 0; i < n; ++i)
      for (index_t e = F->row_ptr()[i]; e < F->row_ptr()[i + 1]; ++e)
        ASSERT_EQ(range(i), range(F->col_indices()[e])) << "row " << i;
  const std::vector<double> r = random_vector(rng, n);
  std::vector<double> z1(r.size()), z4(r.size());
  plain.apply(r, std::span(z1));
  blocked.apply(r, std::span(z4));
  EXPECT_NE(z1, z4);
  expect_thread_independent([&] {
    std::vector<double> z(r.size()), w(r.size());
    blocked.apply(r, std::span(z));
    ic0(poisson3d<double>(24), 3).apply(r, std::span(w));
    z.insert(z.end(), w.begin(), w.end());
    return z;
  });
  // Still a good preconditioner: GMRES converges in a few more iterations than with one block.
  const std::vector<double> b(static_cast<std::size_t>(n), 1.0);
  const auto g1 = gmres(LinearOperator<double>(A), b, {.tol = 1e-9, .M = &plain});
  const auto g4 = gmres(LinearOperator<double>(A), b, {.tol = 1e-9, .M = &blocked});
  EXPECT_EQ(g4.status, SolveStatus::converged);
  EXPECT_LE(g4.iterations, 2 * g1.iterations);
  EXPECT_THROW((void)ilu0(A, 0), InvalidArgument);
  // BSR: ranges of whole block rows.
  const auto bsr = ilu0(to_bsr(A, 3), 5);
  EXPECT_EQ(bsr.size(), n);
}

TEST_F(Preconditioners, ApplyIsThreadIndependent) {
  const CsrMatrix<double> A = convdiff3d<double>(14, 2.0);
  const std::vector<double> r = random_vector(rng, A.rows());
  const auto M = ilu0(A);
  const auto I = ic0(poisson3d<double>(14));
  const BlockJacobi<double> J(to_bsr(elasticity3d<double>(5), 3));
  const std::vector<double> re = random_vector(rng, J.size());
  expect_thread_independent([&] {
    std::vector<double> z(r.size()), w(r.size()), v(re.size());
    M.apply(r, std::span(z));
    I.apply(r, std::span(w));
    J.apply(re, std::span(v));
    z.insert(z.end(), w.begin(), w.end());
    z.insert(z.end(), v.begin(), v.end());
    return z;
  });
}

TEST_F(Preconditioners, BlockedFactorisationsAreThreadIndependent) {
  // The blocks of ilu0(A, k) / ic0(A, k) are built and factorised side by side: the
  // factors, and the first block's error, must not depend on the thread count.
  const CsrMatrix<double> A = convdiff3d<double>(12, 2.0);
  const CsrMatrix<double> P = poisson3d<double>(12);
  const BsrMatrix<double> E = to_bsr(elasticity3d<double>(4), 3);
  expect_thread_independent([&] {
    std::vector<double> out;
    const auto append = [&](const CsrMatrix<double>& M) {
      for (const double v : M.values()) out.push_back(v);
      for (const index_t j : M.col_indices()) out.push_back(static_cast<double>(j));
    };
    const auto ilu = ilu0(A, 3);
    const auto ic = ic0(P, 3);
    const auto bsr = ic0(E, 2);
    for (const auto* M : {&ilu, &ic, &bsr}) {
      append(M->lower());
      append(M->upper());
    }
    return out;
  });
  // Zero pivots in blocks 1 and 2 of 3 (rows of zeros): block 1's row is reported, on
  // any thread count.
  CsrMatrix<double> Z = poisson3d<double>(6);  // 216 rows: blocks of 72
  for (const index_t row : {100, 200})
    for (index_t e = Z.row_ptr()[row]; e < Z.row_ptr()[row + 1]; ++e) Z.values()[e] = 0.0;
  const RuntimeGuard guard;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    try {
      (void)ilu0(Z, 3);
      ADD_FAILURE() << "ilu0 accepted a zero pivot";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("zero pivot at row 100"));
    }
  }
}

TEST(Generators, ConvectionDiffusion) {
  // Péclet 0 is poisson3d; the convection adds c_d to the diagonal and -c_d upstream.
  const CsrMatrix<double> P = poisson3d<double>(5), C0 = convdiff3d<double>(5, 0.0), C = convdiff3d<double>(5, 2.0);
  EXPECT_EQ(as_doubles(C0.values()), as_doubles(P.values()));
  const Dense<double> D = dense_of(C);
  const index_t centre = 2 + 5 * 2 + 25 * 2;
  EXPECT_DOUBLE_EQ(D(centre, centre), 6.0 + 2.0 + 1.0 + 0.5);
  EXPECT_DOUBLE_EQ(D(centre, centre - 1), -3.0);
  EXPECT_DOUBLE_EQ(D(centre, centre + 1), -1.0);
  EXPECT_DOUBLE_EQ(D(centre, centre - 5), -2.0);
  EXPECT_DOUBLE_EQ(D(centre, centre - 25), -1.5);
  EXPECT_EQ(named_problem<double>("convdiff3d:5:2").values().size(), C.values().size());
  EXPECT_THROW(convdiff3d<double>(4, -1.0), InvalidArgument);
  EXPECT_THROW(named_problem<double>("convdiff3d:4:x"), InvalidArgument);
  const Dense<double> xyz = elasticity3d_coordinates(3);
  EXPECT_EQ(3 * xyz.rows(), elasticity3d<double>(3).rows());
  EXPECT_DOUBLE_EQ(xyz(0, 0), 1.0 / 3.0);
  EXPECT_THROW(elasticity3d_coordinates(0), InvalidArgument);
}

}  // namespace
}  // namespace trnsparse::test
