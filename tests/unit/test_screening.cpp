// Screening: bounds, quartet and density screening, statistics, and the screened product
// (tiled path and reference twin) against a dense float64 reference.
#include <cmath>
#include <limits>

#include "kernels/reference/screening.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {

template <class T>
class Screening : public Seeded<> {};
using ScreenTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Screening, ScreenTypes);

/// M_ij = [√|r_i| √|c_j| > √t], evaluated as the library documents it.
bool kept(double r, double c, double t) { return std::sqrt(std::fabs(r)) * std::sqrt(std::fabs(c)) > std::sqrt(t); }

template <class T>
Dense<double> masked_dense(const BsrMatrix<T>& A, const std::vector<T>& rd, const std::vector<T>& cd, double t) {
  const Dense<T> a = dense_of(A);
  Dense<double> m(A.rows(), A.cols());
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t j = 0; j < A.cols(); ++j)
      if (kept(rd[i], cd[j], t)) m(i, j) = static_cast<double>(a(i, j));
  return m;
}

template <class T>
Dense<double> widen(DenseView<const T> v) {
  Dense<double> d(v.rows, v.cols);
  for (index_t i = 0; i < v.rows; ++i)
    for (index_t j = 0; j < v.cols; ++j) d(i, j) = static_cast<double>(v(i, j));
  return d;
}

Dense<double> transpose(const Dense<double>& a) {
  Dense<double> t(a.cols(), a.rows());
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < a.cols(); ++j) t(j, i) = a(i, j);
  return t;
}

struct BoundCase {
  const char* name;
  std::vector<double> rows, cols;
};

/// Random bounds over six decades (with one zero) and exponentially decaying ones.
std::vector<BoundCase> bound_cases(Rng& rng, index_t m, index_t n) {
  BoundCase random{"random", {}, {}}, decaying{"decaying", {}, {}};
  for (index_t i = 0; i < m; ++i) random.rows.push_back(std::pow(10.0, rng.uniform(-6.0, 0.0)));
  for (index_t j = 0; j < n; ++j) random.cols.push_back(-std::pow(10.0, rng.uniform(-6.0, 0.0)));  // sign ignored
  random.rows[3] = 0.0;
  for (index_t i = 0; i < m; ++i) decaying.rows.push_back(std::exp(-0.25 * static_cast<double>(i)));
  for (index_t j = 0; j < n; ++j) decaying.cols.push_back(std::exp(-0.25 * static_cast<double>(j)));
  return {random, decaying};
}

template <class T>
std::vector<T> cast_all(const std::vector<double>& v) {
  std::vector<T> out;
  for (const double e : v) out.push_back(static_cast<T>(e));
  return out;
}

TYPED_TEST(Screening, ProductMatchesMaskedDenseAndTheReferenceKernel) {
  using T = TypeParam;
  const index_t m = 70, n = 50, k = 19, b = 16;
  const BsrMatrix<T> A = to_bsr<T>(random_dense<T>(this->rng, m, n, 0.6).view(), b);
  const Dense<T> B = random_dense<T>(this->rng, n, k);
  for (const BoundCase& bc : bound_cases(this->rng, m, n)) {
    const std::vector<T> rd = cast_all<T>(bc.rows), cd = cast_all<T>(bc.cols);
    for (const double t : {0.0, 1e-8, 1e-5, 1e-3, 1e30}) {
      SCOPED_TRACE(std::string(bc.name) + " threshold " + std::to_string(t));
      const Dense<T> C = screened_spmm(A, std::span<const T>(rd), std::span<const T>(cd), B.view(), t);
      const Reference ref = reference_gemm(1.0, masked_dense(A, rd, cd, t), widen<T>(B.view()), 0.0, Dense<double>());
      EXPECT_TRUE(near_reference<T>(C.view(), ref));

      // The reference twin, straight from its arrays.
      std::vector<double> qr, qc;
      for (const T v : rd) qr.push_back(std::sqrt(std::fabs(static_cast<double>(v))));
      for (const T v : cd) qc.push_back(std::sqrt(std::fabs(static_cast<double>(v))));
      const BsrStructure& s = A.structure();
      const kernels::reference::BsrArrays arrays{m, n, b, s.block_rows(), s.block_row_ptr().data(),
                                                 s.block_col_indices().data()};
      Dense<T> twin(m, k);
      kernels::reference::screened_bsr_spmm(arrays, A.blocks().data(), qr.data(), qc.data(), std::sqrt(t), k,
                                            B.view().data, B.ld(), twin.view().data, twin.ld());
      EXPECT_TRUE(near_reference<T>(twin.view(), ref));
      if (t == 1e30) {
        for (const T v : C.values()) EXPECT_EQ(v, T(0));  // nothing kept
      }

      // Into a caller's C holding garbage: every element written, the same bits.
      Dense<T> into(m, k);
      std::fill(into.values().begin(), into.values().end(), std::numeric_limits<T>::quiet_NaN());
      screened_spmm(A, std::span<const T>(rd), std::span<const T>(cd), B.view(), t, into.view());
      EXPECT_TRUE(same_matrix<T>(into.view(), C.view()));
    }
  }
}

TYPED_TEST(Screening, KeepingEverythingIsThePlainProduct) {
  using T = TypeParam;
  const BsrMatrix<T> A = to_bsr<T>(random_dense<T>(this->rng, 40, 40, 0.5).view(), 8);
  const Dense<T> B = random_dense<T>(this->rng, 40, 7);
  const std::vector<T> d(40, T(1));
  const Dense<T> C = screened_spmm(A, std::span<const T>(d), B.view(), 0.0);
  Dense<T> plain(40, 7);
  spmm(acc_t<T>(1), A, B.view(), acc_t<T>(0), plain.view());
  EXPECT_TRUE(same_matrix<T>(C.view(), plain.view()));  // every block full: the same kernel, the same sums
}

TYPED_TEST(Screening, BackwardMatchesDense) {
  using T = TypeParam;
  const index_t m = 45, n = 37, k = 6, b = 8;
  const BsrMatrix<T> A = to_bsr<T>(random_dense<T>(this->rng, m, n, 0.5).view(), b);
  const Dense<T> B = random_dense<T>(this->rng, n, k), dC = random_dense<T>(this->rng, m, k);
  for (const BoundCase& bc : bound_cases(this->rng, m, n)) {
    const std::vector<T> rd = cast_all<T>(bc.rows), cd = cast_all<T>(bc.cols);
    for (const double t : {0.0, 1e-5, 1e30}) {
      SCOPED_TRACE(std::string(bc.name) + " threshold " + std::to_string(t));
      const auto g = screened_spmm_backward(A, std::span<const T>(rd), std::span<const T>(cd), B.view(), dC.view(), t);
      EXPECT_EQ(g.dA.structure_ptr(), A.structure_ptr());
      // dA = (dC Bᵀ) ∘ M at A's stored positions.
      const Dense<T> stored = dense_of(A);
      const std::set<std::pair<index_t, index_t>> blocks = stored_blocks(A.structure());
      Reference ref{Dense<double>(m, n), Dense<double>(m, n), k};
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) {
          if (!blocks.contains({i / b, j / b}) || !kept(rd[i], cd[j], t)) continue;
          for (index_t c = 0; c < k; ++c) {
            ref.value(i, j) += static_cast<double>(dC(i, c)) * static_cast<double>(B(j, c));
            ref.magnitude(i, j) += std::fabs(static_cast<double>(dC(i, c)) * static_cast<double>(B(j, c)));
          }
        }
      EXPECT_TRUE(near_reference<T>(dense_of(g.dA).view(), ref));
      EXPECT_TRUE(padding_is_zero(g.dA));
      // dB = (A ∘ M)ᵀ dC.
      const Reference refB =
          reference_gemm(1.0, transpose(masked_dense(A, rd, cd, t)), widen<T>(dC.view()), 0.0, Dense<double>());
      EXPECT_TRUE(near_reference<T>(g.dB.view(), refB));
    }
  }
}

TYPED_TEST(Screening, ProductIsBitwiseIdenticalForAnyThreadCount) {
  using T = TypeParam;
  const index_t n = 384;
  const BsrMatrix<T> A = to_bsr<T>(random_dense<T>(this->rng, n, n, 0.3).view(), 32);
  std::vector<T> d;
  for (index_t i = 0; i < n; ++i) d.push_back(static_cast<T>(std::exp(-0.02 * static_cast<double>(i))));
  // Width 192: the kept tiles form a triangle (heavy first block rows), so the product
  // splits by column groups (ops/run.hpp) rather than by block rows.
  for (const index_t width : {48, 192}) {
    SCOPED_TRACE(::testing::Message() << "width " << width);
    const Dense<T> B = random_dense<T>(this->rng, n, width);
    const int saved = num_threads();
    std::vector<Dense<T>> results;
    for (const int threads : {1, 2, 3}) {
      set_num_threads(threads);
      results.push_back(screened_spmm(A, std::span<const T>(d), B.view(), 1e-4));
    }
    set_num_threads(saved);
    EXPECT_TRUE(same_matrix<T>(results[1].view(), results[0].view()));
    EXPECT_TRUE(same_matrix<T>(results[2].view(), results[0].view()));
  }
}

TEST(ScreeningUtilities, BoundsQuartetsDensityAndStats) {
  EXPECT_EQ(schwarz_bounds(std::span<const double>(std::vector<double>{4.0, -9.0, 0.0})),
            (std::vector<double>{2.0, 3.0, 0.0}));
  const std::vector<double> Q{2.0, 1.0, 0.1};
  const CsrMatrix<double> pairs = screen_quartets(Q, 0.15);
  EXPECT_TRUE(same_csr(pairs, CsrMatrix<double>(3, 3, {0, 3, 5, 6}, {0, 1, 2, 0, 1, 0}, {4.0, 2.0, 0.2, 2.0, 1.0, 0.2})));
  EXPECT_EQ(screen_quartets(Q, 100.0).nnz(), 0);
  EXPECT_EQ(screen_quartets(Q, 0.0).nnz(), 9);

  const CsrMatrix<double> P(3, 3, {0, 2, 3, 4}, {0, 2, 1, 0}, {1.0, 5.0, 0.1, 0.5});
  // Products Q_i Q_j |P_ij|: (0,0) 4, (0,2) 1, (1,1) 0.1, (2,0) 0.1.
  EXPECT_TRUE(same_csr(density_screen(Q, P, 0.5), CsrMatrix<double>(3, 3, {0, 2, 2, 2}, {0, 2}, {1.0, 5.0})));

  const SparsityStats st = sparsity_stats(P);
  EXPECT_EQ(st.nnz, 4);
  EXPECT_DOUBLE_EQ(st.density, 4.0 / 9.0);
  EXPECT_EQ(st.row_min, 1);
  EXPECT_EQ(st.row_max, 2);
  EXPECT_DOUBLE_EQ(st.row_mean, 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(st.screened_fraction, 5.0 / 9.0);
}

TEST(ScreeningUtilities, ArgumentsAreChecked) {
  const BsrMatrix<double> A = to_bsr<double>(Dense<double>(4, 3).view(), 2);
  const std::vector<double> r(4, 1.0), c(3, 1.0), short_c(2, 1.0);
  const Dense<double> B(3, 2);
  EXPECT_THAT([&] { (void)screened_spmm(A, std::span<const double>(r), std::span<const double>(c), B.view(), -1.0); },
              throws_naming<InvalidArgument>("threshold"));
  EXPECT_THAT(
      [&] { (void)screened_spmm(A, std::span<const double>(r), std::span<const double>(short_c), B.view(), 0.0); },
      throws_naming<DimensionMismatch>("col_diag"));
  std::vector<double> bad = r;
  bad[2] = std::nan("");
  EXPECT_THAT([&] { (void)screened_spmm(A, std::span<const double>(bad), std::span<const double>(c), B.view(), 0.0); },
              throws_naming<InvalidArgument>("row_diag[2]"));
  EXPECT_THAT([&] { (void)screen_quartets(std::vector<double>{1.0, -1.0}, 0.0); }, throws_naming<InvalidArgument>("Q[1]"));
  Dense<double> wrong(4, 3), C(4, 2);
  EXPECT_THAT([&] { screened_spmm(A, std::span<const double>(r), std::span<const double>(c), B.view(), 0.0, wrong.view()); },
              throws_naming<DimensionMismatch>("C"));
  Dense<double> BC(4, 2);  // B's rows are C's first rows: they overlap
  const DenseView<const double> Bpart(BC.values().data(), 3, 2, 2);
  EXPECT_THAT([&] { screened_spmm(A, std::span<const double>(r), std::span<const double>(c), Bpart, 0.0, BC.view()); },
              throws_naming<InvalidArgument>("overlap"));
  screened_spmm(A, std::span<const double>(r), std::span<const double>(c), B.view(), 0.0, C.view());
}

}  // namespace
}  // namespace trnsparse::test
