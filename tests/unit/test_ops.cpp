// Every operation of ops.hpp against a float64 dense reference, on the adversarial
// shapes of support.hpp, every supported (operand, output) type pair and several block
// sizes; plus the generators of generators.hpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/huge_pages.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

const double scalars[] = {0.0, 1.0, -2.5};
const index_t operand_columns[] = {0, 1, 3, 17};
const index_t product_block_sizes[] = {1, 3, 16, 128};


/// y = alpha A x + beta y against the reference, with `a` the widened dense twin of A.
template <Value TA, Value TY, class Matrix>
void check_spmv(Rng& rng, const Matrix& A, const Dense<double>& a, double alpha, double beta) {
  SCOPED_TRACE(::testing::Message() << "alpha = " << alpha << ", beta = " << beta);
  const Dense<TA> x = random_dense<TA>(rng, a.cols(), 1);
  Dense<TY> y = initial_output<TY>(rng, a.rows(), 1, beta);
  const Reference ref = reference_gemm(alpha, a, widen<TA>(x), beta, widen<TY>(y));
  spmv(static_cast<acc_t<TA>>(alpha), A, x.values(), static_cast<acc_t<TA>>(beta), y.values());
  EXPECT_TRUE(near_reference<TA>(y.view(), ref));
}

/// C = alpha A B + beta C against the reference, with B and C strided: B holds NaN
/// beyond its columns (never to be read), C a sentinel (never to be written).
template <Value TA, Value TY, class Matrix>
void check_spmm(Rng& rng, const Matrix& A, const Dense<double>& a, index_t k, double alpha, double beta) {
  SCOPED_TRACE(::testing::Message() << "k = " << k << ", alpha = " << alpha << ", beta = " << beta);
  const Dense<TA> b = random_dense<TA>(rng, a.cols(), k);
  const Dense<TY> c = initial_output<TY>(rng, a.rows(), k, beta);
  const StridedDense<TA> B(b, k + 3, quiet_nan<TA>());
  StridedDense<TY> C(c, k + 2, sentinel_value<TY>());
  spmm(static_cast<acc_t<TA>>(alpha), A, B.view(), static_cast<acc_t<TA>>(beta), C.view());
  EXPECT_TRUE(near_reference<TA>(C.view(), reference_gemm(alpha, a, widen<TA>(b), beta, widen<TY>(c))));
  EXPECT_TRUE(C.padding_holds(sentinel_value<TY>())) << "C was written beyond its columns";
}

// ---- products over every (operand, output) type pair --------------------------------------

template <class Pair>
class Products : public Seeded<> {};
TYPED_TEST_SUITE(Products, ProductTypes, TypeNames);

TYPED_TEST(Products, SpmvCsr) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  for (const MatrixSpec& spec : adversarial_specs()) {
    SCOPED_TRACE(spec.name);
    const Dense<TA> a = random_dense<TA>(this->rng, spec);
    const Dense<double> wide = widen<TA>(a);
    const CsrMatrix<TA> A = csr_from_dense<TA>(a);
    for (const double alpha : scalars)
      for (const double beta : scalars) check_spmv<TA, TY>(this->rng, A, wide, alpha, beta);
  }
}

TYPED_TEST(Products, SpmvBsr) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<TA> a = random_dense<TA>(this->rng, spec);
    const Dense<double> wide = widen<TA>(a);
    for (const index_t b : product_block_sizes) {
      SCOPED_TRACE(::testing::Message() << spec.name << ", block size " << b);
      const BsrMatrix<TA> A = bsr_from_dense<TA>(a, b, this->rng, 0.25);
      for (const double alpha : scalars)
        for (const double beta : scalars) check_spmv<TA, TY>(this->rng, A, wide, alpha, beta);
    }
  }
}

// Each (alpha, beta) pair meets a different operand width k on each shape.
TYPED_TEST(Products, SpmmCsr) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  std::size_t n = 0;
  for (const MatrixSpec& spec : adversarial_specs()) {
    SCOPED_TRACE(spec.name);
    const Dense<TA> a = random_dense<TA>(this->rng, spec);
    const Dense<double> wide = widen<TA>(a);
    const CsrMatrix<TA> A = csr_from_dense<TA>(a);
    for (const double alpha : scalars)
      for (const double beta : scalars)
        check_spmm<TA, TY>(this->rng, A, wide, operand_columns[n++ % std::size(operand_columns)], alpha, beta);
  }
}

TYPED_TEST(Products, SpmmBsr) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  std::size_t n = 0;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<TA> a = random_dense<TA>(this->rng, spec);
    const Dense<double> wide = widen<TA>(a);
    for (const index_t b : product_block_sizes) {
      SCOPED_TRACE(::testing::Message() << spec.name << ", block size " << b);
      const BsrMatrix<TA> A = bsr_from_dense<TA>(a, b, this->rng, 0.25);
      for (const double alpha : scalars)
        for (const double beta : scalars)
          check_spmm<TA, TY>(this->rng, A, wide, operand_columns[n++ % std::size(operand_columns)], alpha, beta);
    }
  }
}

TYPED_TEST(Products, ShapeMismatchesThrow) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const Dense<TA> a = random_dense<TA>(this->rng, 4, 3);
  const CsrMatrix<TA> csr = csr_from_dense<TA>(a);
  const BsrMatrix<TA> bsr = bsr_from_dense<TA>(a, 2, this->rng, 0.0);
  const acc_t<TA> one = 1;
  std::vector<TA> x3(3), x4(4);
  std::vector<TY> y3(3), y4(4);
  Dense<TA> b32(3, 2), b42(4, 2);
  Dense<TY> c42(4, 2), c32(3, 2), c43(4, 3);
  // The message names both operands of the mismatch.
  const auto x_vs_A = throws_naming<DimensionMismatch>("x", "A.cols()");
  const auto y_vs_A = throws_naming<DimensionMismatch>("y", "A.rows()");
  const auto B_vs_A = throws_naming<DimensionMismatch>("B", "A.cols()");
  const auto C_vs_A = throws_naming<DimensionMismatch>("C", "A.rows()");
  const auto C_vs_B = throws_naming<DimensionMismatch>("C", "B.cols");
  EXPECT_THAT([&] { spmv(one, csr, x4, one, std::span(y4)); }, x_vs_A);
  EXPECT_THAT([&] { spmv(one, csr, x3, one, std::span(y3)); }, y_vs_A);
  EXPECT_THAT([&] { spmv(one, bsr, x4, one, std::span(y4)); }, x_vs_A);
  EXPECT_THAT([&] { spmv(one, bsr, x3, one, std::span(y3)); }, y_vs_A);
  EXPECT_THAT([&] { spmm(one, csr, b42, one, c42.view()); }, B_vs_A);
  EXPECT_THAT([&] { spmm(one, csr, b32, one, c32.view()); }, C_vs_A);
  EXPECT_THAT([&] { spmm(one, csr, b32, one, c43.view()); }, C_vs_B);
  EXPECT_THAT([&] { spmm(one, bsr, b42, one, c42.view()); }, B_vs_A);
  EXPECT_THAT([&] { spmm(one, bsr, b32, one, c32.view()); }, C_vs_A);
  EXPECT_THAT([&] { spmm(one, bsr, b32, one, c43.view()); }, C_vs_B);
  EXPECT_NO_THROW(spmv(one, csr, x3, one, std::span(y4)));
  EXPECT_NO_THROW(spmm(one, bsr, b32, one, c42.view()));
}

/// A random symmetric n x n matrix (density about `density` off the diagonal, full diagonal).
template <Value T>
Dense<T> random_symmetric(Rng& rng, index_t n, double density) {
  Dense<T> s = random_dense<T>(rng, n, n, density);
  for (index_t i = 0; i < n; ++i) {
    s(i, i) = random_value<T>(rng);
    for (index_t j = 0; j < i; ++j) s(i, j) = s(j, i);
  }
  return s;
}

template <Value T>
Dense<T> triangle(const Dense<T>& s, Triangle uplo) {
  Dense<T> t(s.rows(), s.cols());
  for (index_t i = 0; i < s.rows(); ++i)
    for (index_t j = 0; j < s.cols(); ++j)
      if (uplo == Triangle::upper ? j >= i : j <= i) t(i, j) = s(i, j);
  return t;
}

TYPED_TEST(Products, SpmvSymmetricMatchesTheFullMatrix) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const std::pair<double, double> alpha_beta[] = {{1.0, 0.0}, {-2.5, 1.0}, {0.0, -2.5}, {-2.5, -2.5}};
  for (const index_t n : {0, 1, 7, 64, 130}) {
    const Dense<TA> s = random_symmetric<TA>(this->rng, n, 0.1);
    for (const Triangle uplo : {Triangle::upper, Triangle::lower}) {
      SCOPED_TRACE(::testing::Message() << "n = " << n << (uplo == Triangle::upper ? ", upper" : ", lower"));
      const CsrMatrix<TA> A = csr_from_dense<TA>(triangle(s, uplo));
      for (const auto& [alpha, beta] : alpha_beta) {
        SCOPED_TRACE(::testing::Message() << "alpha = " << alpha << ", beta = " << beta);
        const Dense<TA> x = random_dense<TA>(this->rng, n, 1);
        Dense<TY> y = initial_output<TY>(this->rng, n, 1, beta);
        const Reference ref = reference_gemm(alpha, widen<TA>(s), widen<TA>(x), beta, widen<TY>(y));
        spmv_symmetric(static_cast<acc_t<TA>>(alpha), A, uplo, x.values(), static_cast<acc_t<TA>>(beta), y.values());
        EXPECT_TRUE(near_reference<TA>(y.view(), ref));
      }
    }
  }
}

TYPED_TEST(Products, SpmvSymmetricRejectsTheWrongTriangleAndNonSquareMatrices) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const acc_t<TA> one = 1;
  std::vector<TA> x(3);
  std::vector<TY> y(3);
  // Lower triangle plus a_02, which lies in the upper one.
  const CsrMatrix<TA> lower_plus(3, 3, {0, 2, 3, 5}, {0, 2, 1, 0, 2}, values_of<TA>({1, 2, 3, 4, 5}));
  EXPECT_THAT([&] { spmv_symmetric(one, lower_plus, Triangle::lower, x, one, std::span(y)); },
              throws_naming<IndexError>("(0, 2)", "col_idx[1]"));
  const CsrMatrix<TA> upper_plus(3, 3, {0, 1, 3, 4}, {0, 0, 1, 2}, values_of<TA>({1, 2, 3, 4}));
  EXPECT_THAT([&] { spmv_symmetric(one, upper_plus, Triangle::upper, x, one, std::span(y)); },
              throws_naming<IndexError>("(1, 0)", "col_idx[1]"));
  EXPECT_NO_THROW(spmv_symmetric(one, upper_plus, Triangle::lower, x, one, std::span(y)));

  const CsrMatrix<TA> wide(3, 4);
  std::vector<TA> x4(4);
  EXPECT_THROW(spmv_symmetric(one, wide, Triangle::upper, x4, one, std::span(y)), InvalidArgument);
  EXPECT_THROW(spmv_symmetric(one, CsrMatrix<TA>(3, 3), Triangle::upper, x4, one, std::span(y)), DimensionMismatch);
}

// The BSR half storage: the element triangle converted to blocks (the diagonal blocks
// hold a triangle), and the block triangle of the whole matrix (they hold whole
// symmetric blocks); both are S.
TYPED_TEST(Products, BsrSpmvSymmetricMatchesTheFullMatrix) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const std::pair<double, double> alpha_beta[] = {{1.0, 0.0}, {-2.5, 1.0}, {0.0, -2.5}};
  for (const index_t n : {0, 1, 7, 64, 130})
    for (const index_t b : {2, 3, 5, 7, 8}) {
      const Dense<TA> s = random_symmetric<TA>(this->rng, n, 0.1);
      for (const Triangle uplo : {Triangle::upper, Triangle::lower})
        for (const bool whole_diagonal : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "n = " << n << ", b = " << b << (uplo == Triangle::upper ? ", upper" : ", lower")
                                            << (whole_diagonal ? ", whole diagonal blocks" : ""));
          BsrMatrix<TA> A = to_bsr(csr_from_dense<TA>(whole_diagonal ? s : triangle(s, uplo)), b);
          if (whole_diagonal) A = triangle(A, uplo);
          for (const auto& [alpha, beta] : alpha_beta) {
            SCOPED_TRACE(::testing::Message() << "alpha = " << alpha << ", beta = " << beta);
            const Dense<TA> x = random_dense<TA>(this->rng, n, 1);
            Dense<TY> y = initial_output<TY>(this->rng, n, 1, beta);
            const Reference ref = reference_gemm(alpha, widen<TA>(s), widen<TA>(x), beta, widen<TY>(y));
            spmv_symmetric(static_cast<acc_t<TA>>(alpha), A, uplo, x.values(), static_cast<acc_t<TA>>(beta),
                           y.values());
            EXPECT_TRUE(near_reference<TA>(y.view(), ref));
          }
        }
    }
}

TYPED_TEST(Products, BsrSpmvSymmetricRejectsBlocksOutsideTheTriangle) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const acc_t<TA> one = 1;
  // 3 x 3 blocks of 2: the upper block triangle plus block (2, 0).
  const BsrMatrix<TA> upper_plus(6, 6, 2, {0, 3, 5, 7}, {0, 1, 2, 1, 2, 0, 2},
                                 std::vector<TA>(7 * 4, static_cast<TA>(1.0f)));
  std::vector<TA> x(6);
  std::vector<TY> y(6);
  EXPECT_THAT([&] { spmv_symmetric(one, upper_plus, Triangle::upper, x, one, std::span(y)); },
              throws_naming<IndexError>("block (2, 0)", "block_col_idx[5]", "upper block triangle"));
  EXPECT_THAT([&] { spmv_symmetric(one, upper_plus, Triangle::lower, x, one, std::span(y)); },
              throws_naming<IndexError>("block (0, 1)", "block_col_idx[1]", "lower block triangle"));
  const BsrMatrix<TA> wide(6, 8, 2, {0, 0, 0, 0}, {}, {});
  std::vector<TA> x8(8);
  EXPECT_THAT([&] { spmv_symmetric(one, wide, Triangle::upper, x8, one, std::span(y)); },
              throws_naming<InvalidArgument>("6 x 8", "square"));
  std::vector<TA> x5(5);
  EXPECT_THROW(spmv_symmetric(one, upper_plus, Triangle::upper, x5, one, std::span(y)), DimensionMismatch);
}

// ---- bsr_spmm and algebra over every value type --------------------------------------------

template <class T>
class Algebra : public Seeded<> {};
TYPED_TEST_SUITE(Algebra, ValueTypes, TypeNames);

TYPED_TEST(Algebra, BsrSpmmReturnsTheProduct) {
  using T = TypeParam;
  std::size_t n = 0;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<T> a = random_dense<T>(this->rng, spec);
    for (const index_t b : product_block_sizes) {
      const index_t k = operand_columns[n++ % std::size(operand_columns)];
      SCOPED_TRACE(::testing::Message() << spec.name << ", block size " << b << ", k = " << k);
      const BsrMatrix<T> A = bsr_from_dense<T>(a, b, this->rng, 0.25);
      const Dense<T> x = random_dense<T>(this->rng, spec.cols, k);
      const Dense<T> got = bsr_spmm(A, StridedDense<T>(x, k + 1, quiet_nan<T>()).view());
      EXPECT_TRUE(near_reference<T>(got.view(), reference_gemm(1.0, widen<T>(a), widen<T>(x), 0.0, {})));
    }
  }
  const BsrMatrix<T> A = eye_bsr<T>(4, 2);
  EXPECT_THROW(bsr_spmm(A, Dense<T>(3, 2)), DimensionMismatch);
}

TYPED_TEST(Algebra, SparseAddCsrKeepsTheUnionPattern) {
  using T = TypeParam;
  const std::pair<double, double> alpha_beta[] = {{1.0, 1.0}, {-2.5, 1.0}, {0.0, -2.5}};
  for (const MatrixSpec& spec : adversarial_specs()) {
    SCOPED_TRACE(spec.name);
    const Dense<T> a = random_dense<T>(this->rng, spec);
    const Dense<T> b = random_dense<T>(this->rng, spec.rows, spec.cols, std::max(spec.density, 0.1));
    Dense<double> in_either(spec.rows, spec.cols);
    for (index_t i = 0; i < spec.rows; ++i)
      for (index_t j = 0; j < spec.cols; ++j) in_either(i, j) = to_double(a(i, j)) != 0 || to_double(b(i, j)) != 0;
    const CsrMatrix<double> union_pattern = csr_from_dense<double>(in_either);
    for (const auto& [alpha, beta] : alpha_beta) {
      SCOPED_TRACE(::testing::Message() << "alpha = " << alpha << ", beta = " << beta);
      const CsrMatrix<T> sum = sparse_add(static_cast<acc_t<T>>(alpha), csr_from_dense<T>(a),
                                          static_cast<acc_t<T>>(beta), csr_from_dense<T>(b));
      EXPECT_THAT(sum.row_ptr(), ElementsAreArray(union_pattern.row_ptr()));
      EXPECT_THAT(sum.col_indices(), ElementsAreArray(union_pattern.col_indices()));
      EXPECT_TRUE(near_reference<T>(dense_of(sum).view(), reference_add(alpha, widen<T>(a), beta, widen<T>(b))));
    }
  }
}

TYPED_TEST(Algebra, SparseAddKeepsCancelledAndExplicitZeroEntries) {
  using T = TypeParam;
  const Dense<T> a = random_dense<T>(this->rng, 9, 11, 0.3);
  const CsrMatrix<T> A = csr_from_dense<T>(a);
  const CsrMatrix<T> difference = sparse_add(acc_t<T>{1}, A, acc_t<T>{-1}, A);
  EXPECT_THAT(difference.row_ptr(), ElementsAreArray(A.row_ptr()));
  EXPECT_THAT(difference.col_indices(), ElementsAreArray(A.col_indices()));
  EXPECT_THAT(as_doubles(difference.values()), ::testing::Each(0.0));

  const CsrMatrix<T> explicit_zero(2, 2, {0, 1, 1}, {1}, values_of<T>({0}));
  const CsrMatrix<T> sum = sparse_add(acc_t<T>{1}, explicit_zero, acc_t<T>{1}, CsrMatrix<T>(2, 2));
  EXPECT_THAT(sum.row_ptr(), ElementsAre(0, 1, 1));
  EXPECT_THAT(sum.col_indices(), ElementsAre(1));

  const BsrMatrix<T> B = bsr_from_dense<T>(a, 3, this->rng, 0.5);
  const BsrMatrix<T> block_difference = sparse_add(acc_t<T>{1}, B, acc_t<T>{-1}, B);
  EXPECT_TRUE(block_difference.structure() == B.structure());
  EXPECT_THAT(as_doubles(block_difference.blocks()), ::testing::Each(0.0));
}

TYPED_TEST(Algebra, SparseAddBsrKeepsTheUnionOfBlocks) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<T> a = random_dense<T>(this->rng, spec);
    const Dense<T> b = random_dense<T>(this->rng, spec.rows, spec.cols, spec.density);
    for (const index_t bs : {1, 3, 16}) {
      SCOPED_TRACE(::testing::Message() << spec.name << ", block size " << bs);
      const BsrMatrix<T> A = bsr_from_dense<T>(a, bs, this->rng, 0.3);
      const BsrMatrix<T> B = bsr_from_dense<T>(b, bs, this->rng, 0.3);
      const BsrMatrix<T> sum = sparse_add(acc_t<T>{-2.5}, A, acc_t<T>{1}, B);
      std::set<std::pair<index_t, index_t>> either = stored_blocks(A.structure());
      either.merge(stored_blocks(B.structure()));
      EXPECT_EQ(stored_blocks(sum.structure()), either);
      EXPECT_EQ(sum.block_size(), bs);
      EXPECT_TRUE(padding_is_zero(sum));
      EXPECT_TRUE(near_reference<T>(dense_of(sum).view(), reference_add(-2.5, widen<T>(a), 1.0, widen<T>(b))));
    }
  }
}

TYPED_TEST(Algebra, SparseAddRejectsMismatchedOperands) {
  using T = TypeParam;
  const acc_t<T> one = 1;
  EXPECT_THROW(sparse_add(one, CsrMatrix<T>(3, 4), one, CsrMatrix<T>(4, 3)), DimensionMismatch);
  EXPECT_THROW(sparse_add(one, CsrMatrix<T>(3, 4), one, CsrMatrix<T>(3, 5)), DimensionMismatch);
  EXPECT_THROW(sparse_add(one, eye_bsr<T>(6, 2), one, eye_bsr<T>(7, 2)), DimensionMismatch);
  EXPECT_THAT([&] { sparse_add(one, eye_bsr<T>(6, 2), one, eye_bsr<T>(6, 3)); },
              throws_naming<InvalidArgument>("block size", "2", "3"));
}

// alpha * v with alpha = -2.5 is exact in fp64 for every value type, so a correctly
// rounded product in any precision equals static_cast<T>(alpha * v).
TYPED_TEST(Algebra, SparseScaleScalesValuesAndKeepsStructure) {
  using T = TypeParam;
  const double alpha = -2.5;
  const Dense<T> a = random_dense<T>(this->rng, 130, 67, 0.1);
  const CsrMatrix<T> A = csr_from_dense<T>(a);
  const CsrMatrix<T> scaled = sparse_scale(A, static_cast<acc_t<T>>(alpha));
  EXPECT_THAT(scaled.row_ptr(), ElementsAreArray(A.row_ptr()));
  EXPECT_THAT(scaled.col_indices(), ElementsAreArray(A.col_indices()));
  for (index_t p = 0; p < A.nnz(); ++p)
    ASSERT_TRUE(same_value(scaled.values()[p], static_cast<T>(alpha * to_double(A.values()[p])))) << p;

  for (const index_t b : {3, 128}) {
    SCOPED_TRACE(::testing::Message() << "block size " << b);
    const BsrMatrix<T> B = bsr_from_dense<T>(a, b, this->rng, 0.3);
    const BsrMatrix<T> scaled_blocks = sparse_scale(B, static_cast<acc_t<T>>(alpha));
    EXPECT_EQ(scaled_blocks.structure_ptr(), B.structure_ptr()) << "the structure is shared";
    EXPECT_TRUE(padding_is_zero(scaled_blocks));
    for (std::size_t p = 0; p < B.blocks().size(); ++p)
      ASSERT_TRUE(same_value(scaled_blocks.blocks()[p], static_cast<T>(alpha * to_double(B.blocks()[p])))) << p;
  }
}

TYPED_TEST(Algebra, NnzPerRow) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    SCOPED_TRACE(spec.name);
    const Dense<T> a = random_dense<T>(this->rng, spec);
    std::vector<index_t> expected(static_cast<std::size_t>(spec.rows));
    for (index_t i = 0; i < spec.rows; ++i)
      for (index_t j = 0; j < spec.cols; ++j) expected[i] += to_double(a(i, j)) != 0;
    EXPECT_EQ(nnz_per_row(csr_from_dense<T>(a)), expected);

    for (const index_t b : {1, 3, 16}) {
      SCOPED_TRACE(::testing::Message() << "block size " << b);
      const BsrMatrix<T> A = bsr_from_dense<T>(a, b, this->rng, 0.3);
      const BsrStructure& s = A.structure();
      std::vector<index_t> covered(static_cast<std::size_t>(spec.rows));
      for (index_t i = 0; i < spec.rows; ++i)
        for (index_t k = s.block_row_ptr()[i / b]; k < s.block_row_ptr()[i / b + 1]; ++k)
          covered[i] += s.col_extent(s.block_col_indices()[k]);
      EXPECT_EQ(nnz_per_row(A), covered);
    }
  }
  // 7 x 5, b = 3, blocks (0, 0), (0, 1) and (2, 1): 3 + 2 columns, none, then 2.
  const BsrMatrix<T> A(BsrStructure::make(7, 5, 3, {0, 2, 2, 3}, {0, 1, 1}));
  EXPECT_THAT(nnz_per_row(A), ElementsAre(5, 5, 5, 0, 0, 0, 2));
}

TYPED_TEST(Algebra, BsrDiagonal) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<T> a = random_dense<T>(this->rng, spec);
    std::vector<double> expected;
    for (index_t i = 0; i < std::min(spec.rows, spec.cols); ++i) expected.push_back(to_double(a(i, i)));
    for (const index_t b : product_block_sizes) {
      SCOPED_TRACE(::testing::Message() << spec.name << ", block size " << b);
      EXPECT_EQ(as_doubles(bsr_diagonal(bsr_from_dense<T>(a, b, this->rng, 0.3))), expected);
    }
  }
  // 6 x 6, b = 2, only off-diagonal blocks: the diagonal is zero.
  const BsrMatrix<T> off(6, 6, 2, {0, 1, 2, 2}, {1, 0}, std::vector<T>(8, static_cast<T>(1.0)));
  EXPECT_THAT(as_doubles(bsr_diagonal(off)), ElementsAre(0, 0, 0, 0, 0, 0));
  // 3 x 5, b = 2: the diagonal has min(3, 5) = 3 entries; a_22 lies in padded block (1, 1).
  const BsrMatrix<T> wide(3, 5, 2, {0, 1, 2}, {0, 1}, values_of<T>({1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_THAT(as_doubles(bsr_diagonal(wide)), ElementsAre(1, 4, 5));
}

// ---- generators ----------------------------------------------------------------------------

template <class T>
class Generators : public Seeded<> {};
TYPED_TEST_SUITE(Generators, ValueTypes, TypeNames);

TYPED_TEST(Generators, Poisson3dIsTheSevenPointStencil) {
  using T = TypeParam;
  for (const index_t n : {0, 1, 2, 5}) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    const CsrMatrix<T> A = poisson3d<T>(n);
    ASSERT_EQ(A.rows(), n * n * n);
    ASSERT_EQ(A.cols(), n * n * n);
    EXPECT_EQ(A.nnz(), 7 * n * n * n - 6 * n * n);
    const Dense<T> d = dense_of(A);
    EXPECT_TRUE(same_matrix<T>(d, transpose_dense<T>(d))) << "not symmetric";
    for (index_t z = 0; z < n; ++z)
      for (index_t y = 0; y < n; ++y)
        for (index_t x = 0; x < n; ++x) {
          const index_t row = x + n * (y + n * z);
          const index_t neighbours = (x > 0) + (x < n - 1) + (y > 0) + (y < n - 1) + (z > 0) + (z < n - 1);
          double row_sum = 0;
          for (index_t j = 0; j < A.cols(); ++j) row_sum += to_double(d(row, j));
          EXPECT_EQ(row_sum, 6.0 - static_cast<double>(neighbours)) << "row " << row;
          EXPECT_EQ(to_double(d(row, row)), 6.0);
          if (x > 0) {
            EXPECT_EQ(to_double(d(row, row - 1)), -1.0);
          }
          if (y > 0) {
            EXPECT_EQ(to_double(d(row, row - n)), -1.0);
          }
          if (z > 0) {
            EXPECT_EQ(to_double(d(row, row - n * n)), -1.0);
          }
        }
  }
  EXPECT_THROW(poisson3d<T>(-1), InvalidArgument);
}

TYPED_TEST(Generators, RandomCsrIsDeterministicAndHasTheRequestedDensity) {
  using T = TypeParam;
  const std::uint64_t seed = this->rng.bits();
  const index_t rows = 200;
  const index_t cols = 300;
  const CsrMatrix<T> a = random_csr<T>(rows, cols, 0.1, seed);
  EXPECT_TRUE(same_csr(random_csr<T>(rows, cols, 0.1, seed), a));
  EXPECT_FALSE(same_csr(random_csr<T>(rows, cols, 0.1, seed + 1), a));
  // nnz ~ Binomial(60000, 0.1): mean 6000, standard deviation 73.5; allow 5 of them.
  EXPECT_NEAR(static_cast<double>(a.nnz()), 0.1 * rows * cols, 5 * 73.5);
  for (const T v : a.values()) {
    ASSERT_GE(to_double(v), -1.0);
    ASSERT_LE(to_double(v), 1.0);  // bf16 may round values just below 1 up to 1
  }
  EXPECT_EQ(random_csr<T>(rows, cols, 0.0, seed).nnz(), 0);
  EXPECT_EQ(random_csr<T>(rows, cols, 1.0, seed).nnz(), rows * cols);
  EXPECT_EQ(random_csr<T>(0, cols, 0.5, seed).nnz(), 0);
  for (const double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()})
    EXPECT_THROW(random_csr<T>(rows, cols, bad, seed), InvalidArgument) << bad;
  EXPECT_THROW(random_csr<T>(-1, cols, 0.5, seed), InvalidArgument);
}

// ---- huge pages for a caller's vectors ---------------------------------------------------

// x and y of a caller's own, on 4 KiB pages, move onto huge pages at the
// kCollapseAfter-th SpMV that streams them (detail::collapse_streamed); the products
// stay the same bits throughout.
TEST(SpmvStreaming, ACallersVectorsMoveOntoHugePagesAfterRepeatedProducts) {
  const CsrMatrix<double> A = poisson3d<double>(100);  // 10^6 rows: x and y of 8 MB
  const auto n = static_cast<std::size_t>(A.rows());
  const Mapping x_map{n * sizeof(double) + (std::size_t{4} << 20)}, y_map{x_map.bytes};
  ASSERT_NE(x_map.p, MAP_FAILED);
  ASSERT_NE(y_map.p, MAP_FAILED);
  auto* x = reinterpret_cast<double*>(x_map.p + 4096);  // off a 2 MiB boundary
  auto* y = reinterpret_cast<double*>(y_map.p + 4096);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i % 7) - 3.0;
  std::vector<double> expected(n);
  spmv(1.0, A, std::span<const double>(x, n), 0.0, std::span<double>(expected));
  for (unsigned call = 1; call <= detail::kCollapseAfter; ++call) {
    spmv(1.0, A, std::span<const double>(x, n), 0.0, std::span<double>(y, n));
    ASSERT_EQ(std::memcmp(y, expected.data(), n * sizeof(double)), 0) << "call " << call;
  }
  if (!kernel_collapses()) GTEST_SKIP() << "this kernel does not collapse memory on request (MADV_COLLAPSE)";
  EXPECT_GE(huge_kb_at(x), 2048);
  EXPECT_GE(huge_kb_at(y), 2048);
}

}  // namespace
}  // namespace trnsparse::test
