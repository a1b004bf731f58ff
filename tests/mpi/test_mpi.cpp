// The MPI layer, run by CTest under mpirun with 1, 2, 3 and 4 processes. Every process
// builds the same global matrices and operands (fixed seeds), runs the distributed
// operation on its rows and compares them to the single-process result computed locally.
// Tests are collective: every process runs every test in the same order, and assertions
// that could end a test early on one process only are avoided (EXPECT, not ASSERT).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpi/collective.hpp"
#include "trnsparse/trnsparse.hpp"
#include "trnsparse/mpi.hpp"

namespace trnsparse::mpi::test {
namespace {

using ::testing::HasSubstr;

const std::string data_dir = TRNSPARSE_TEST_DATA_DIR;

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

/// Deterministic operand values in [-1, 1).
std::vector<double> values(index_t n, std::uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (double& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = static_cast<double>(s >> 11) * 0x1.0p-52 - 1.0;
  }
  return v;
}

template <class T>
std::vector<T> cast_vector(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

CsrMatrix<double> from_file(const std::string& name) { return to_csr(read_matrix_market(data_dir + "/" + name).entries); }

/// A + Aᵀ + n I: symmetric positive definite, from a random pattern.
CsrMatrix<double> random_spd(index_t n, double density, std::uint64_t seed) {
  const CsrMatrix<double> R = random_csr<double>(n, n, density, seed);
  const CsrMatrix<double> S = sparse_add(1.0, R, 1.0, transpose(R));
  return sparse_add(1.0, S, static_cast<double>(n) * density + 4.0, eye_csr<double>(n));
}

/// Block rows [bounds[rank], bounds[rank + 1]) of a global CSR matrix in the local format.
template <class Local>
Local own_rows(const CsrMatrix<double>& A, index_t b, const Partition& p);

template <>
CsrMatrix<double> own_rows(const CsrMatrix<double>& A, index_t, const Partition& p) {
  const index_t f = p.first(rank()), l = p.first(rank() + 1);
  std::vector<index_t> ptr(static_cast<std::size_t>(l - f + 1));
  for (index_t i = f; i <= l; ++i) ptr[i - f] = A.row_ptr()[i] - A.row_ptr()[f];
  const auto col = A.col_indices();
  const auto val = A.values();
  return CsrMatrix<double>(l - f, A.cols(), std::move(ptr), {col.begin() + A.row_ptr()[f], col.begin() + A.row_ptr()[l]},
                           {val.begin() + A.row_ptr()[f], val.begin() + A.row_ptr()[l]});
}

template <>
BsrMatrix<double> own_rows(const CsrMatrix<double>& A, index_t b, const Partition& p) {
  const BsrMatrix<double> G = to_bsr(A, b);
  const index_t f = p.first(rank()), l = p.first(rank() + 1), bb = b * b;
  const auto ptr = G.structure().block_row_ptr();
  std::vector<index_t> lp(static_cast<std::size_t>(l - f + 1));
  for (index_t i = f; i <= l; ++i) lp[i - f] = ptr[i] - ptr[f];
  const auto col = G.structure().block_col_indices();
  const auto val = G.blocks();
  const index_t rows = std::min(A.rows(), l * b) - std::min(A.rows(), f * b);
  return BsrMatrix<double>(rows, A.cols(), b, std::move(lp), {col.begin() + ptr[f], col.begin() + ptr[l]},
                           {val.begin() + ptr[f] * bb, val.begin() + ptr[l] * bb});
}

/// Block row ptr of A at block size b (for partitions).
std::vector<index_t> block_ptr(const CsrMatrix<double>& A, index_t b) {
  if (b == 1) return {A.row_ptr().begin(), A.row_ptr().end()};
  const BsrMatrix<double> G = to_bsr(A, b);
  return {G.structure().block_row_ptr().begin(), G.structure().block_row_ptr().end()};
}

template <class Local>
DistMatrix<Local> scatter_global(const CsrMatrix<double>& A, index_t b, const Partition* p = nullptr) {
  if constexpr (std::is_same_v<Local, CsrMatrix<double>>) {
    return DistMatrix<Local>::scatter(MPI_COMM_WORLD, rank() == 0 ? &A : nullptr, 0, p);
  } else {
    std::optional<BsrMatrix<double>> G;
    if (rank() == 0) G = to_bsr(A, b);
    return DistMatrix<Local>::scatter(MPI_COMM_WORLD, G ? &*G : nullptr, 0, p);
  }
}

/// Checks Y (this process's rows of α A X + β Y0) against the single-process product.
/// fp64 sums of at most `row nnz` terms of size ≤ |a||x|: a relative 1e-13 of the
/// row's absolute sum bounds the difference of two summation orders.
template <class Local>
void expect_product(const DistMatrix<Local>& D, const CsrMatrix<double>& A, index_t k, const std::string& what) {
  const index_t n = A.rows();
  const std::vector<double> xg = values(n * k, 7), y0 = values(n * k, 8);
  Dense<double> ref(n, k, y0);
  spmm(0.5, A, DenseView<const double>(xg.data(), n, k, k), -1.25, ref.view());
  Dense<double> mag(n, k);
  std::vector<double> absx(xg.size());
  std::ranges::transform(xg, absx.begin(), [](double v) { return std::fabs(v); });
  std::vector<double> absv(A.values().begin(), A.values().end());
  for (double& v : absv) v = std::fabs(v);
  const CsrMatrix<double> absA(n, n, {A.row_ptr().begin(), A.row_ptr().end()},
                               {A.col_indices().begin(), A.col_indices().end()}, std::move(absv));
  spmm(0.5, absA, DenseView<const double>(absx.data(), n, k, k), 0.0, mag.view());
  const index_t off = D.row_offset(), m = D.local_rows();
  std::vector<double> Y(y0.begin() + off * k, y0.begin() + (off + m) * k), Y2 = Y;
  D.spmm(0.5, DenseView<const double>(xg.data() + off * k, m, k, k), -1.25, DenseView<double>(Y.data(), m, k, k));
  D.spmm(0.5, DenseView<const double>(xg.data() + off * k, m, k, k), -1.25, DenseView<double>(Y2.data(), m, k, k));
  index_t bad = 0;
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < k; ++j) {
      const double want = ref(off + i, j), tol = 1e-13 * (mag(off + i, j) + 1.25 * std::fabs(y0[(off + i) * k + j])) + 1e-300;
      if (!(std::fabs(Y[i * k + j] - want) <= tol) && bad++ < 3)
        ADD_FAILURE() << what << ": row " << off + i << " col " << j << ": " << Y[i * k + j] << " vs " << want;
    }
  EXPECT_EQ(bad, 0) << what;
  EXPECT_TRUE(Y == Y2) << what << ": two runs differ";
}

std::vector<std::pair<std::string, CsrMatrix<double>>> matrices() {
  std::vector<std::pair<std::string, CsrMatrix<double>>> m;
  m.emplace_back("poisson 9^3", poisson3d<double>(9));
  m.emplace_back("1138_bus", from_file("1138_bus.mtx"));
  m.emplace_back("ani1", from_file("ani1.mtx"));
  m.emplace_back("random 301", random_csr<double>(301, 301, 0.03, 11));
  m.emplace_back("random 5 (fewer rows than processes x blocks)", random_csr<double>(5, 5, 0.5, 12));
  return m;
}

TEST(MpiProducts, CsrMatchesSingleProcessBalancedAndUneven) {
  for (const auto& [name, A] : matrices()) {
    for (index_t k : {1, 3}) {
      expect_product(scatter_global<CsrMatrix<double>>(A, 1), A, k, name + " scatter k=" + std::to_string(k));
      // Uneven: process p gets a share proportional to p + 1 of the rows; own rows.
      std::vector<index_t> bounds(static_cast<std::size_t>(world()) + 1, 0);
      const index_t total = world() * (world() + 1) / 2;
      for (int p = 0; p < world(); ++p) bounds[p + 1] = A.rows() * ((p + 1) * (p + 2) / 2) / total;
      const Partition uneven(bounds);
      expect_product(DistMatrix<CsrMatrix<double>>(MPI_COMM_WORLD, own_rows<CsrMatrix<double>>(A, 1, uneven)), A, k,
                     name + " uneven k=" + std::to_string(k));
    }
  }
}

TEST(MpiProducts, BsrMatchesSingleProcessForBlockSizes) {
  for (const auto& [name, A] : matrices())
    for (index_t b : {1, 3, 16}) {
      const std::string what = name + " b=" + std::to_string(b);
      expect_product(scatter_global<BsrMatrix<double>>(A, b), A, 2, what + " scatter");
      const Partition p = Partition::balanced(block_ptr(A, b), world());
      expect_product(DistMatrix<BsrMatrix<double>>(MPI_COMM_WORLD, own_rows<BsrMatrix<double>>(A, b, p)), A, 1,
                     what + " own rows");
    }
}

TEST(MpiProducts, AProcessWithNoRows) {
  const CsrMatrix<double> A = poisson3d<double>(6);
  // Everything on the last process, then everything on process 0.
  for (int owner : {world() - 1, 0}) {
    std::vector<index_t> bounds(static_cast<std::size_t>(world()) + 1, 0);
    for (int p = owner; p < world(); ++p) bounds[p + 1] = A.rows();
    const Partition one(bounds);
    const auto D = scatter_global<CsrMatrix<double>>(A, 1, &one);
    EXPECT_EQ(D.local_rows(), rank() == owner ? A.rows() : 0);
    expect_product(D, A, 2, "all rows on process " + std::to_string(owner));
  }
}

TEST(MpiProducts, PartitionBalancesStoredBlocks) {
  // Rows with 1, 2, 3, ... entries: a balanced cut gives each part about the same count.
  std::vector<index_t> ptr{0};
  for (index_t i = 0; i < 1000; ++i) ptr.push_back(ptr.back() + i + 1);
  for (int parts : {1, 2, 3, 4, 7}) {
    const Partition p = Partition::balanced(ptr, parts);
    ASSERT_EQ(p.parts(), parts);
    for (int q = 0; q < parts; ++q) {
      const double share = static_cast<double>(ptr[p.first(q + 1)] - ptr[p.first(q)]) / static_cast<double>(ptr.back());
      EXPECT_NEAR(share, 1.0 / parts, 0.01) << parts << " parts, part " << q;
    }
  }
  EXPECT_THROW(Partition({1, 2}), InvalidArgument);
  EXPECT_THROW(Partition({0, 2, 1}), InvalidArgument);
  EXPECT_THROW(Partition::balanced(ptr, 0), InvalidArgument);
}

TEST(MpiProducts, DistributedVectorsRoundTrip) {
  const CsrMatrix<double> A = from_file("1138_bus.mtx");
  const auto D = scatter_global<CsrMatrix<double>>(A, 1);
  std::optional<Dense<double>> G;
  if (rank() == 0) G = Dense<double>(A.rows(), 2, values(A.rows() * 2, 3));
  const Dense<double> mine = scatter_rows(D, G ? &*G : nullptr, 2);
  EXPECT_EQ(mine.rows(), D.local_rows());
  const Dense<double> back = gather_rows(D, mine.view());
  if (rank() == 0) EXPECT_TRUE(std::ranges::equal(back.values(), G->values()));
  else EXPECT_EQ(back.rows(), 0);
}

TEST(MpiRead, EveryProcessReadsItsSliceOfAMatrixMarketFile) {
  for (const std::string name : {"1138_bus.mtx", "ani1.mtx"}) {
    const CsrMatrix<double> A = from_file(name);
    const auto C = DistCsrMatrix<double>::read_matrix_market(MPI_COMM_WORLD, data_dir + "/" + name);
    EXPECT_EQ(C.rows(), A.rows());
    EXPECT_EQ(C.global_stored(), A.nnz()) << name;
    expect_product(C, A, 2, name + " read csr");
    // Balanced by stored entries: no process holds much more than its share (plus a row).
    const index_t share = A.nnz() / world(), row_max = 64;
    EXPECT_LE(C.local_stored(), share + row_max) << name;
    const auto B = DistBsrMatrix<double>::read_matrix_market(MPI_COMM_WORLD, data_dir + "/" + name, 4);
    EXPECT_EQ(B.global_stored(), to_bsr(A, 4).n_blocks()) << name;
    expect_product(B, A, 1, name + " read bsr b=4");
  }
  EXPECT_THROW(DistCsrMatrix<double>::read_matrix_market(MPI_COMM_WORLD, data_dir + "/no_such_file.mtx"), IoError);
  EXPECT_THROW(DistCsrMatrix<double>::read_matrix_market(MPI_COMM_WORLD, data_dir + "/1138_bus.mtx", 2), InvalidArgument);
}

TEST(MpiRead, AMalformedLineIsAnErrorOnEveryProcessWithItsLine) {
  // A bad value on the last data line: read by the last process only.
  const std::string path = testing::TempDir() + "/trnsparse_mpi_bad_" + std::to_string(world()) + ".mtx";
  if (rank() == 0) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n4 4 4\n1 1 1\n2 2 1\n3 3 1\n4 4 x\n");
    std::fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    (void)DistCsrMatrix<double>::read_matrix_market(MPI_COMM_WORLD, path);
    ADD_FAILURE() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 6) << e.what();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) std::remove(path.c_str());
}

// ---- solvers ---------------------------------------------------------------------------

/// CG on the distributed matrix against CG in one process on the same format.
/// `slack`: the iteration counts may differ by this many. On an ill-conditioned matrix
/// (1138_bus: κ ≈ 1e6) CG's loss of orthogonality amplifies the rounding of a different
/// summation order (per-process partial sums) into a different count, by up to about 1%
/// at tol = 1e-10; on well-conditioned ones the counts are equal.
template <class Local>
void expect_cg_matches(const CsrMatrix<double>& A, index_t b, const std::string& what, index_t slack = 0) {
  const auto D = scatter_global<Local>(A, b);
  const std::vector<double> rhs = values(A.rows(), 21);
  // The single-process solve in the same format (the same kernels' rounding).
  const auto single = [&] {
    if constexpr (std::is_same_v<Local, CsrMatrix<double>>) {
      return trnsparse::cg(LinearOperator<double>(A), rhs,
                           {.tol = 1e-10, .max_iter = 5000, .preconditioner = jacobi_preconditioner(A)});
    } else {
      const BsrMatrix<double> G = to_bsr(A, b);
      return trnsparse::cg(LinearOperator<double>(G), rhs,
                           {.tol = 1e-10, .max_iter = 5000, .preconditioner = jacobi_preconditioner(G)});
    }
  }();
  const std::vector<double> mine(rhs.begin() + D.row_offset(), rhs.begin() + D.row_offset() + D.local_rows());
  const auto Mloc = jacobi_preconditioner(D);
  const auto dist = cg(D, mine, {.tol = 1e-10, .max_iter = 5000, .preconditioner = Mloc});
  EXPECT_EQ(dist.status, single.status) << what;
  EXPECT_NEAR(static_cast<double>(dist.iterations), static_cast<double>(single.iterations), static_cast<double>(slack))
      << what;
  if (slack == 0) EXPECT_NEAR(dist.rel_residual, single.rel_residual, 1e-3 * single.rel_residual) << what;
  EXPECT_LE(dist.rel_residual, 1e-10) << what;
  double err = 0.0, norm = 0.0;
  for (index_t i = 0; i < D.local_rows(); ++i) {
    err = std::max(err, std::fabs(dist.x[i] - single.x[D.row_offset() + i]));
    norm = std::max(norm, std::fabs(single.x[D.row_offset() + i]));
  }
  // Both solves reach a relative residual of 1e-10: their difference is of that order
  // times the condition number, far below 1e-6 for these matrices.
  EXPECT_LE(err, 1e-6 * std::max(norm, 1.0)) << what;
  const auto again = cg(D, mine, {.tol = 1e-10, .max_iter = 5000, .preconditioner = Mloc});
  EXPECT_TRUE(again.x == dist.x) << what << ": two runs differ";
}

TEST(MpiSolvers, CgSameIterationsAsOneProcess) {
  expect_cg_matches<CsrMatrix<double>>(poisson3d<double>(12), 1, "poisson 12^3 csr");
  expect_cg_matches<BsrMatrix<double>>(poisson3d<double>(12), 8, "poisson 12^3 bsr b=8");
  expect_cg_matches<CsrMatrix<double>>(random_spd(400, 0.02, 5), 1, "random spd");
  expect_cg_matches<CsrMatrix<double>>(from_file("1138_bus.mtx"), 1, "1138_bus csr", 15);
  expect_cg_matches<BsrMatrix<double>>(from_file("1138_bus.mtx"), 4, "1138_bus bsr b=4", 15);
}

TEST(MpiSolvers, ChebyshevAndPowerIterationMatchOneProcess) {
  const CsrMatrix<double> A = poisson3d<double>(10);
  const auto D = scatter_global<CsrMatrix<double>>(A, 1);
  const std::vector<double> rhs = values(A.rows(), 4);
  const std::vector<double> mine(rhs.begin() + D.row_offset(), rhs.begin() + D.row_offset() + D.local_rows());
  const double lmin = 6.0 - 6.0 * std::cos(M_PI / 11), lmax = 6.0 + 6.0 * std::cos(M_PI / 11);
  const auto single = trnsparse::chebyshev(LinearOperator<double>(A), rhs, lmin, lmax, 40);
  const auto dist = chebyshev(D, mine, lmin, lmax, 40);
  EXPECT_EQ(dist.status, single.status);
  EXPECT_NEAR(dist.rel_residual, single.rel_residual, 1e-9 * single.rel_residual + 1e-15);
  for (index_t i = 0; i < D.local_rows(); ++i) EXPECT_NEAR(dist.x[i], single.x[D.row_offset() + i], 1e-12);

  const auto ps = trnsparse::power_iteration(LinearOperator<double>(A), 300, 1e-6);
  const auto pd = power_iteration(D, 300, 1e-6);
  EXPECT_EQ(pd.iterations, ps.iterations);
  EXPECT_EQ(pd.converged, ps.converged);
  EXPECT_NEAR(pd.eigenvalue, ps.eigenvalue, 1e-10 * ps.eigenvalue);
  for (index_t i = 0; i < D.local_rows(); ++i) EXPECT_NEAR(pd.eigenvector[i], ps.eigenvector[D.row_offset() + i], 1e-9);
}

TEST(MpiSolvers, KrylovWithRankLocalPreconditioners) {
  // GMRES and BiCGStab with ILU(0) of each process's diagonal part (block Jacobi over the
  // processes), and CG with IC(0) likewise: converged to tol on the true residual, the
  // same iterations and x on every process count's repeat, x near the single solve's.
  const CsrMatrix<double> A = convdiff3d<double>(9, 2.0), P = poisson3d<double>(9);
  for (const bool symmetric : {false, true}) {
    const CsrMatrix<double>& G = symmetric ? P : A;
    const auto D = scatter_global<CsrMatrix<double>>(G, 1);
    const std::vector<double> rhs = values(G.rows(), 7);
    const std::vector<double> mine(rhs.begin() + D.row_offset(), rhs.begin() + D.row_offset() + D.local_rows());
    const auto single = trnsparse::gmres(LinearOperator<double>(G), rhs, {.tol = 1e-12, .max_iter = 5000});
    const auto M = symmetric ? ic0(D.diagonal_part()) : ilu0(D.diagonal_part());
    std::vector<SolveResult<double>> runs;
    if (symmetric) runs.push_back(cg(D, mine, {.tol = 1e-10, .max_iter = 5000, .M = &M}));
    else {
      runs.push_back(gmres(D, mine, {.tol = 1e-10, .max_iter = 5000, .restart = 20, .M = &M}));
      runs.push_back(bicgstab(D, mine, {.tol = 1e-10, .max_iter = 5000, .M = &M}));
    }
    for (const auto& dist : runs) {
      EXPECT_EQ(dist.status, SolveStatus::converged);
      EXPECT_LE(dist.rel_residual, 1e-10);
      for (index_t i = 0; i < D.local_rows(); ++i) EXPECT_NEAR(dist.x[i], single.x[D.row_offset() + i], 1e-7);
    }
    // Every process agrees on the count.
    const double its = static_cast<double>(runs[0].iterations);
    double lo = its, hi = its;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo, hi);
  }
  // M on some processes only: an error on every process.
  const auto D = scatter_global<CsrMatrix<double>>(A, 1);
  const auto M = ilu0(D.diagonal_part());
  const std::vector<double> mine(static_cast<std::size_t>(D.local_rows()), 1.0);
  if (world() > 1) EXPECT_THROW((void)gmres(D, mine, {.M = rank() == 0 ? &M : nullptr}), InvalidArgument);
}

TEST(MpiSolvers, FloatCg) {
  const CsrMatrix<float> A = poisson3d<float>(8);
  const auto D = DistCsrMatrix<float>::scatter(MPI_COMM_WORLD, rank() == 0 ? &A : nullptr);
  const std::vector<float> rhs(static_cast<std::size_t>(D.local_rows()), 1.0f);
  const auto res = cg(D, rhs, {.tol = 1e-5});
  EXPECT_TRUE(res.converged());
  const auto single = trnsparse::cg(LinearOperator<float>(A), std::vector<float>(A.rows(), 1.0f), {.tol = 1e-5});
  EXPECT_NEAR(static_cast<double>(res.iterations), static_cast<double>(single.iterations), 1.0);
}

TEST(MpiSolvers, ProcessesWithoutRowsJoinPreconditionedSolvesWithX0) {
  // All rows on the last process (the others own nothing), and a matrix with fewer block
  // rows than processes: Jacobi and x0 must work, and agree with one process.
  const CsrMatrix<double> A = poisson3d<double>(5);
  std::vector<index_t> bounds(static_cast<std::size_t>(world()) + 1, 0);
  bounds.back() = A.rows();
  const Partition last(bounds);
  for (const Partition* p : {&last, static_cast<const Partition*>(nullptr)}) {
    const auto D = scatter_global<CsrMatrix<double>>(A, 1, p);
    const std::vector<double> rhs = values(A.rows(), 31), x0g = values(A.rows(), 32);
    const auto single = trnsparse::cg(LinearOperator<double>(A), rhs,
                                      {.tol = 1e-10, .preconditioner = jacobi_preconditioner(A), .x0 = x0g});
    const std::vector<double> b(rhs.begin() + D.row_offset(), rhs.begin() + D.row_offset() + D.local_rows()),
        x0(x0g.begin() + D.row_offset(), x0g.begin() + D.row_offset() + D.local_rows());
    const auto dist = cg(D, b, {.tol = 1e-10, .preconditioner = jacobi_preconditioner(D), .x0 = x0});
    EXPECT_EQ(dist.iterations, single.iterations);
    EXPECT_TRUE(dist.converged());
    for (index_t i = 0; i < D.local_rows(); ++i) EXPECT_NEAR(dist.x[i], single.x[D.row_offset() + i], 1e-8);
    const auto cheb = chebyshev(D, b, 0.5, 11.5, 20, x0);
    EXPECT_EQ(cheb.status, SolveStatus::completed);
  }
  // With a BSR block larger than the matrix: one block row, one process holds it.
  const auto B = scatter_global<BsrMatrix<double>>(A, 128);
  std::vector<double> ones(static_cast<std::size_t>(B.local_rows()), 1.0);
  EXPECT_TRUE(cg(B, ones, {.tol = 1e-8, .preconditioner = jacobi_preconditioner(B)}).converged());
}

TEST(MpiSolvers, ACallbackStoppingOnOneProcessStopsAll) {
  const CsrMatrix<double> A = poisson3d<double>(8);
  const auto D = scatter_global<CsrMatrix<double>>(A, 1);
  std::vector<double> b(static_cast<std::size_t>(D.local_rows()), 1.0);
  const int stopper = world() - 1;
  const auto res = cg(D, b, {.tol = 1e-12, .callback = [&](index_t it, double) { return !(rank() == stopper && it == 3); }});
  EXPECT_EQ(res.status, SolveStatus::stopped);
  EXPECT_EQ(res.iterations, 3);
  // A callback throwing on one process: it rethrows there, the others stop.
  bool threw = false;
  SolveResult<double> r2;
  try {
    r2 = cg(D, b, {.tol = 1e-12, .callback = [&](index_t it, double) {
                     if (rank() == 0 && it == 2) throw std::runtime_error("callback failed");
                     return true;
                   }});
  } catch (const std::runtime_error&) {
    threw = true;
  }
  EXPECT_EQ(threw, rank() == 0);
  if (rank() != 0) EXPECT_EQ(r2.status, SolveStatus::stopped);
}

TEST(MpiSolvers, TheDistributedOperatorAgreesOnErrorsInTheCoreSolvers) {
  // trnsparse::cg on mpi::linear_operator, with a NaN in b on the last process only.
  const CsrMatrix<double> A = poisson3d<double>(4);
  const auto D = scatter_global<CsrMatrix<double>>(A, 1);
  std::vector<double> b(static_cast<std::size_t>(D.local_rows()), 1.0);
  if (rank() == world() - 1 && !b.empty()) b.back() = std::nan("");
  EXPECT_THROW(trnsparse::cg(linear_operator(D), std::span<const double>(b)), InvalidArgument);
  EXPECT_THROW(trnsparse::richardson(linear_operator(D), std::span<const double>(b), 0.1, 3), InvalidArgument);
}

TEST(MpiProducts, GatherAndScatterRowsOnUnevenPartitions) {
  const CsrMatrix<double> A = poisson3d<double>(4);
  std::vector<index_t> bounds(static_cast<std::size_t>(world()) + 1, 0);
  for (int p = 1; p <= world(); ++p) bounds[p] = p == world() ? A.rows() : std::min<index_t>(A.rows(), 7 * p * p);
  const Partition uneven(bounds);
  const auto D = scatter_global<CsrMatrix<double>>(A, 1, &uneven);
  std::optional<Dense<double>> G;
  if (rank() == world() - 1) G = Dense<double>(A.rows(), 3, values(A.rows() * 3, 5));
  const Dense<double> mine = scatter_rows(D, G ? &*G : nullptr, 3, world() - 1);
  EXPECT_EQ(mine.rows(), D.local_rows());
  const Dense<double> back = gather_rows(D, mine.view(), world() - 1);
  if (rank() == world() - 1) EXPECT_TRUE(std::ranges::equal(back.values(), G->values()));
}

// ---- errors: every process throws, none hangs ---------------------------------------

TEST(MpiErrors, MismatchedShapesThrowOnEveryProcess) {
  // Process 0 claims one more column than the others (with >1 process), or the rows do not sum to the columns.
  const index_t cols = 10 + (world() > 1 && rank() == 0 ? 1 : 0);
  const CsrMatrix<double> mine(world() > 1 ? 10 / world() : 9, cols);
  EXPECT_THROW(DistCsrMatrix<double>(MPI_COMM_WORLD, mine), InvalidArgument);

  const CsrMatrix<double> A = poisson3d<double>(4);
  const auto D = scatter_global<CsrMatrix<double>>(A, 1);
  // A wrong x length on the last process only.
  std::vector<double> x(static_cast<std::size_t>(D.local_rows() + (rank() == world() - 1 ? 1 : 0)), 1.0),
      y(static_cast<std::size_t>(D.local_rows()));
  try {
    D.spmv(1.0, x, 0.0, y);
    ADD_FAILURE() << "no error";
  } catch (const DimensionMismatch& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("x")) << e.what();
    if (rank() != world() - 1) EXPECT_THAT(std::string(e.what()), HasSubstr("process " + std::to_string(world() - 1)));
  }
  // Different panel widths on different processes.
  const index_t k = 1 + (world() > 1 && rank() == 1 ? 1 : 0);
  std::vector<double> X(static_cast<std::size_t>(D.local_rows() * k), 1.0), Y(X.size());
  if (world() > 1)
    EXPECT_THROW(D.spmm(1.0, DenseView<const double>(X.data(), D.local_rows(), k, k), 0.0,
                        DenseView<double>(Y.data(), D.local_rows(), k, k)),
                 DimensionMismatch);
  // A NaN in b on process 0 only.
  std::vector<double> b(static_cast<std::size_t>(D.local_rows()), 1.0);
  if (rank() == 0 && !b.empty()) b[0] = std::nan("");
  EXPECT_THROW(cg(D, b), InvalidArgument);
  // max_iter differing between processes.
  std::vector<double> ones(static_cast<std::size_t>(D.local_rows()), 1.0);
  if (world() > 1) EXPECT_THROW(cg(D, ones, {.max_iter = 10 + rank()}), InvalidArgument);
  // Scatter of a non-square matrix.
  const CsrMatrix<double> R(4, 5);
  EXPECT_THROW(DistCsrMatrix<double>::scatter(MPI_COMM_WORLD, rank() == 0 ? &R : nullptr), InvalidArgument);
  EXPECT_THROW(DistCsrMatrix<double>::scatter(MPI_COMM_WORLD, nullptr), InvalidArgument);
}

/// Throws exception kind `kind` with message "what" (ParseError: of "file.mtx", line 7).
[[noreturn]] void throw_kind(int kind) {
  switch (kind) {
    case 0: throw InvalidArgument("what");
    case 1: throw DimensionMismatch("what");
    case 2: throw IndexError("what");
    case 3: throw OverflowError("what");
    case 4: throw IoError("what");
    case 5: throw ParseError("file.mtx", 7, "what");
    case 6: throw NotSupported("what");
    case 7: throw std::runtime_error("what");
    default: throw 42;  // not an exception class: "unknown exception"
  }
}

/// Whether `error` is of kind `kind` (throw_kind's numbering; 7 and 8 arrive as
/// std::runtime_error on the processes that did not throw them).
bool is_kind(const std::exception_ptr& error, int kind) {
  try {
    std::rethrow_exception(error);
  } catch (const ParseError& e) {
    return kind == 5 && std::string(e.source()) == "file.mtx" && e.line() == 7;
  } catch (const InvalidArgument&) {
    return kind == 0;
  } catch (const DimensionMismatch&) {
    return kind == 1;
  } catch (const IndexError&) {
    return kind == 2;
  } catch (const OverflowError&) {
    return kind == 3;
  } catch (const IoError&) {
    return kind == 4;
  } catch (const NotSupported&) {
    return kind == 6;
  } catch (const std::runtime_error&) {
    return kind == 7 || kind == 8;
  } catch (const int&) {
    return kind == 8;
  } catch (...) {
    return false;
  }
}

// detail::agree (mpi/collective.hpp) carries every kind of error from the process that
// threw it to all the others: the same type (ParseError with its file and line), the
// thrower's message after "process p: ", and the thrower itself rethrows its own.
TEST(MpiErrors, EveryKindOfErrorReachesEveryProcess) {
  const int thrower = world() - 1;
  for (int kind = 0; kind <= 8; ++kind) {
    SCOPED_TRACE(::testing::Message() << "kind " << kind);
    std::exception_ptr error;
    try {
      detail::agree(MPI_COMM_WORLD, [&] {
        if (rank() == thrower) throw_kind(kind);
      });
    } catch (...) {
      error = std::current_exception();
    }
    ASSERT_TRUE(error) << "no error on process " << rank();
    EXPECT_TRUE(is_kind(error, kind));
    if (rank() == thrower) continue;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      const std::string expected = kind == 8 ? "unknown exception" : "what";
      EXPECT_THAT(std::string(e.what()), HasSubstr(expected)) << e.what();
      EXPECT_THAT(std::string(e.what()), HasSubstr(kind == 5 ? "(read by process " + std::to_string(thrower) + ")"
                                                              : "process " + std::to_string(thrower) + ": "))
          << e.what();
    }
  }
  // No error anywhere: nothing thrown.
  EXPECT_NO_THROW(detail::agree(MPI_COMM_WORLD, [] {}));
  // An MPI count beyond INT_MAX is an OverflowError naming the message.
  EXPECT_THROW((void)detail::count(index_t{1} << 32, "test message"), OverflowError);
  EXPECT_THROW((void)detail::count(-1, "test message"), OverflowError);
  // allsum adds in process order: every process gets the same total.
  std::vector<double> partial{static_cast<double>(rank() + 1), 1.0};
  detail::allsum(MPI_COMM_WORLD, partial);
  EXPECT_EQ(partial[0], world() * (world() + 1) / 2.0);
  EXPECT_EQ(partial[1], static_cast<double>(world()));
}

/// Prints the failures of a non-root process (rank 0 keeps Google Test's own printer).
class RankFailures : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[process %d] %s:%d: %s\n", rank(), r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }
};

}  // namespace
}  // namespace trnsparse::mpi::test

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new trnsparse::mpi::test::RankFailures);
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
