// Conversions between dense, COO, CSR and BSR on every adversarial shape and several
// block sizes; thresholds; transposes; identities; value casts. Each result is checked
// against matrices built independently from raw arrays (support.hpp).
#include <algorithm>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support.hpp"

namespace trnsparse::test {
namespace {

using ::testing::ElementsAre;

const index_t block_sizes[] = {1, 2, 3, 16, 128};

template <Value T>
Dense<T> identity(index_t n) {
  Dense<T> d(n, n);
  for (index_t i = 0; i < n; ++i) d(i, i) = static_cast<T>(1.0);
  return d;
}

template <class T>
class Convert : public Seeded<> {};
TYPED_TEST_SUITE(Convert, ValueTypes, TypeNames);

TYPED_TEST(Convert, DenseCooCsrRoundTrips) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    SCOPED_TRACE(spec.name);
    const Dense<T> a = random_dense<T>(this->rng, spec);
    const CsrMatrix<T> expected = csr_from_dense<T>(a);

    const CooMatrix<T> coo = to_coo<T>(a);
    EXPECT_TRUE(coo.is_canonical());
    EXPECT_THAT(coo.col_indices(), ::testing::ElementsAreArray(expected.col_indices()));
    EXPECT_TRUE(same_matrix<T>(to_dense(coo), a));

    const CsrMatrix<T> csr = to_csr(coo);
    EXPECT_TRUE(same_csr(csr, expected));
    EXPECT_TRUE(same_csr(to_csr<T>(a), expected));
    EXPECT_TRUE(same_matrix<T>(to_dense(csr), a));

    const CooMatrix<T> back = to_coo(csr);
    EXPECT_THAT(back.row_indices(), ::testing::ElementsAreArray(coo.row_indices()));
    EXPECT_THAT(back.col_indices(), ::testing::ElementsAreArray(coo.col_indices()));
    EXPECT_THAT(as_doubles(back.values()), ::testing::ElementsAreArray(as_doubles(coo.values())));
  }
}

TYPED_TEST(Convert, UnsortedCooWithDuplicatesToCsrAndDense) {
  using T = TypeParam;
  const CooMatrix<T> coo(2, 3, {1, 0, 1, 0}, {2, 1, 2, 0}, values_of<T>({1, 2, 3, 4}));
  const CsrMatrix<T> csr = to_csr(coo);
  EXPECT_THAT(csr.row_ptr(), ElementsAre(0, 2, 3));
  EXPECT_THAT(csr.col_indices(), ElementsAre(0, 1, 2));
  EXPECT_THAT(as_doubles(csr.values()), ElementsAre(4, 2, 4));
  EXPECT_THAT(as_doubles(to_dense(coo).values()), ElementsAre(4, 2, 0, 0, 0, 4));
}

TYPED_TEST(Convert, BsrRoundTrips) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<T> a = random_dense<T>(this->rng, spec);
    const CsrMatrix<T> csr = csr_from_dense<T>(a);
    for (const index_t b : block_sizes) {
      SCOPED_TRACE(::testing::Message() << spec.name << ", block size " << b);
      const BsrMatrix<T> from_dense = to_bsr<T>(a, b);
      EXPECT_TRUE(same_bsr(from_dense, bsr_from_dense<T>(a, b, this->rng, 0.0)));
      EXPECT_TRUE(padding_is_zero(from_dense));
      EXPECT_TRUE(same_matrix<T>(to_dense(from_dense), a));
      EXPECT_TRUE(same_bsr(to_bsr(csr, b), from_dense)) << "direct CSR -> BSR differs from the dense path";
      EXPECT_TRUE(same_csr(to_csr(from_dense), csr));
    }
  }
}

TYPED_TEST(Convert, StoredZeroBlocksAreNotCsrEntries) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<T> a = random_dense<T>(this->rng, spec);
    for (const index_t b : {2, 3}) {
      SCOPED_TRACE(::testing::Message() << spec.name << ", block size " << b);
      const BsrMatrix<T> with_zero_blocks = bsr_from_dense<T>(a, b, this->rng, 0.5);
      EXPECT_TRUE(same_matrix<T>(to_dense(with_zero_blocks), a));
      EXPECT_TRUE(same_csr(to_csr(with_zero_blocks), csr_from_dense<T>(a)));
    }
  }
}

TYPED_TEST(Convert, BsrToCsrDropsZerosAndKeepsNan) {
  using T = TypeParam;
  const auto nan = static_cast<T>(std::numeric_limits<double>::quiet_NaN());
  // 3 x 3, b = 2, blocks (0, 0) and (1, 1); a_00 = 0, a_01 = NaN, a_11 = 0, a_22 = 5.
  const BsrMatrix<T> a(3, 3, 2, {0, 1, 2}, {0, 1},
                       {T{}, nan, static_cast<T>(3.0), T{}, static_cast<T>(5.0), T{}, T{}, T{}});
  const CsrMatrix<T> csr = to_csr(a);
  EXPECT_THAT(csr.row_ptr(), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(csr.col_indices(), ElementsAre(1, 0, 2));
  EXPECT_TRUE(is_nan(csr.values()[0]));
  EXPECT_EQ(to_double(csr.values()[1]), 3.0);
  EXPECT_EQ(to_double(csr.values()[2]), 5.0);
}

// Thresholds keep |v| > t strictly, and NaN always.
TYPED_TEST(Convert, ThresholdsKeepStrictlyGreaterAndNan) {
  using T = TypeParam;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Dense<T> a(2, 3, values_of<T>({0.5, -0.75, 0, nan, -0.5, 0.25}));
  const double t = 0.5;

  const CooMatrix<T> coo = to_coo<T>(a, t);
  EXPECT_THAT(coo.row_indices(), ElementsAre(0, 1));
  EXPECT_THAT(coo.col_indices(), ElementsAre(1, 0));
  const CsrMatrix<T> csr = to_csr<T>(a, t);
  EXPECT_THAT(csr.row_ptr(), ElementsAre(0, 1, 2));
  EXPECT_THAT(csr.col_indices(), ElementsAre(1, 0));
  EXPECT_EQ(to_double(csr.values()[0]), -0.75);
  EXPECT_TRUE(is_nan(csr.values()[1]));

  const BsrMatrix<T> b1 = to_bsr<T>(a, 1, t);
  EXPECT_THAT(b1.structure().block_col_indices(), ElementsAre(1, 0));
  EXPECT_TRUE(same_bsr(to_bsr(csr_from_dense<T>(a), 1, t), b1));
  // b = 2: block (0, 0) holds -0.75 and NaN; block (0, 1) only 0 and 0.25.
  for (const BsrMatrix<T>& b2 : {to_bsr<T>(a, 2, t), to_bsr(csr_from_dense<T>(a), 2, t)}) {
    EXPECT_THAT(b2.structure().block_row_ptr(), ElementsAre(0, 1));
    EXPECT_THAT(b2.structure().block_col_indices(), ElementsAre(0));
    EXPECT_EQ(to_double(b2.block(0)[1]), -0.75);
    EXPECT_TRUE(is_nan(b2.block(0)[2]));
  }
}

TYPED_TEST(Convert, RejectsNegativeOrNanThresholdsAndBadBlockSizes) {
  using T = TypeParam;
  const Dense<T> a(2, 2, values_of<T>({1, 0, 0, 1}));
  const CsrMatrix<T> csr = csr_from_dense<T>(a);
  for (const double t : {-1e-300, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    SCOPED_TRACE(::testing::Message() << "threshold " << t);
    EXPECT_THAT([&] { to_coo<T>(a, t); }, throws_naming<InvalidArgument>("threshold"));
    EXPECT_THAT([&] { to_csr<T>(a, t); }, throws_naming<InvalidArgument>("threshold"));
    EXPECT_THAT([&] { to_bsr<T>(a, 2, t); }, throws_naming<InvalidArgument>("threshold"));
    EXPECT_THAT([&] { to_bsr(csr, 2, t); }, throws_naming<InvalidArgument>("threshold"));
  }
  for (const index_t b : {0, -4}) {
    EXPECT_THAT([&] { to_bsr<T>(a, b); }, throws_naming<InvalidArgument>("block_size"));
    EXPECT_THAT([&] { to_bsr(csr, b); }, throws_naming<InvalidArgument>("block_size"));
  }
}

TYPED_TEST(Convert, CsrExplicitZerosDoNotCreateBlocks) {
  using T = TypeParam;
  const CsrMatrix<T> csr(2, 2, {0, 1, 2}, {0, 1}, values_of<T>({3, 0}));
  const BsrMatrix<T> bsr = to_bsr(csr, 1);
  EXPECT_THAT(bsr.structure().block_col_indices(), ElementsAre(0));
  EXPECT_THAT(bsr.structure().block_row_ptr(), ElementsAre(0, 1, 1));
}

TYPED_TEST(Convert, TransposeCsrMatchesDenseTranspose) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    SCOPED_TRACE(spec.name);
    const Dense<T> a = random_dense<T>(this->rng, spec);
    const CsrMatrix<T> csr = csr_from_dense<T>(a);
    const CsrMatrix<T> t = transpose(csr);
    EXPECT_TRUE(same_csr(t, csr_from_dense<T>(transpose_dense<T>(a))));
    EXPECT_TRUE(same_csr(transpose(t), csr));
  }
  // Explicit zeros are entries and move with the transpose.
  const CsrMatrix<T> explicit_zero(2, 3, {0, 2, 2}, {0, 2}, values_of<T>({0, 1}));
  const CsrMatrix<T> t = transpose(explicit_zero);
  EXPECT_THAT(t.row_ptr(), ElementsAre(0, 1, 1, 2));
  EXPECT_THAT(t.col_indices(), ElementsAre(0, 0));
  EXPECT_THAT(as_doubles(t.values()), ElementsAre(0, 1));
}

TYPED_TEST(Convert, TransposeBsrMatchesDenseTranspose) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<T> a = random_dense<T>(this->rng, spec);
    for (const index_t b : block_sizes) {
      SCOPED_TRACE(::testing::Message() << spec.name << ", block size " << b);
      const BsrMatrix<T> bsr = bsr_from_dense<T>(a, b, this->rng, 0.3);
      const BsrMatrix<T> t = transpose(bsr);
      EXPECT_EQ(t.rows(), bsr.cols());
      EXPECT_EQ(t.cols(), bsr.rows());
      EXPECT_EQ(t.block_size(), b);
      std::set<std::pair<index_t, index_t>> transposed_blocks;
      for (const auto& [bi, bj] : stored_blocks(bsr.structure())) transposed_blocks.emplace(bj, bi);
      EXPECT_EQ(stored_blocks(t.structure()), transposed_blocks);
      EXPECT_TRUE(padding_is_zero(t));
      EXPECT_TRUE(same_matrix<T>(to_dense(t), transpose_dense<T>(a)));
      EXPECT_TRUE(same_bsr(transpose(t), bsr));
    }
  }
}

// The public triangles, on every adversarial shape (rectangular ones too): CSR keeps the
// entries on the triangle's side of the diagonal, BSR the blocks, whole.
TYPED_TEST(Convert, TrianglesKeepTheirSideOfTheDiagonal) {
  using T = TypeParam;
  for (const MatrixSpec& spec : adversarial_specs()) {
    const Dense<T> a = random_dense<T>(this->rng, spec);
    const CsrMatrix<T> csr = to_csr(a.view());
    for (const Triangle uplo : {Triangle::upper, Triangle::lower}) {
      const bool upper = uplo == Triangle::upper;
      SCOPED_TRACE(::testing::Message() << spec.name << (upper ? ", upper" : ", lower"));
      Dense<T> side = a;
      for (index_t i = 0; i < a.rows(); ++i)
        for (index_t j = 0; j < a.cols(); ++j)
          if (upper ? j < i : j > i) side(i, j) = T(0.0f);
      EXPECT_TRUE(same_matrix<T>(to_dense(triangle(csr, uplo)), side));
      for (const index_t b : block_sizes) {
        SCOPED_TRACE(::testing::Message() << "block size " << b);
        const BsrMatrix<T> bsr = bsr_from_dense<T>(a, b, this->rng, 0.3);
        const BsrMatrix<T> t = triangle(bsr, uplo);
        std::set<std::pair<index_t, index_t>> kept;
        for (const auto& [bi, bj] : stored_blocks(bsr.structure()))
          if (upper ? bj >= bi : bj <= bi) kept.emplace(bi, bj);
        EXPECT_EQ(stored_blocks(t.structure()), kept);
        EXPECT_TRUE(padding_is_zero(t));
        Dense<T> whole_blocks = to_dense(bsr);
        for (index_t i = 0; i < a.rows(); ++i)
          for (index_t j = 0; j < a.cols(); ++j)
            if (upper ? j / b < i / b : j / b > i / b) whole_blocks(i, j) = T(0.0f);
        EXPECT_TRUE(same_matrix<T>(to_dense(t), whole_blocks));
      }
    }
  }
}

TYPED_TEST(Convert, Identities) {
  using T = TypeParam;
  for (const index_t n : {0, 1, 5, 130}) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    const CsrMatrix<T> csr = eye_csr<T>(n);
    EXPECT_EQ(csr.nnz(), n);
    EXPECT_TRUE(same_matrix<T>(to_dense(csr), identity<T>(n)));
  }
  const std::pair<index_t, index_t> shapes[] = {{0, 4}, {1, 1}, {5, 2}, {7, 3}, {130, 128}, {4, 16}};
  for (const auto& [n, b] : shapes) {
    SCOPED_TRACE(::testing::Message() << "n = " << n << ", block size " << b);
    const BsrMatrix<T> bsr = eye_bsr<T>(n, b);
    EXPECT_EQ(bsr.n_blocks(), ceil_div(n, b));
    EXPECT_EQ(bsr.block_size(), b);
    EXPECT_TRUE(padding_is_zero(bsr)) << "the diagonal must not continue into the padding";
    EXPECT_TRUE(same_matrix<T>(to_dense(bsr), identity<T>(n)));
  }
  EXPECT_EQ(eye_bsr<T>(200).block_size(), default_block_size);
}

// cast<To>(A) keeps the structure (explicit zeros and values that round to zero stay
// stored) and converts each value as static_cast<To> does: exact widening, or rounding
// to nearest even straight from the source type.
TYPED_TEST(Convert, CastsValuesAndKeepsStructure) {
  using From = TypeParam;
  // Values close to bf16 ties, tiny values that round to zero in bf16, and NaN.
  const std::vector<double> wide = {1.0 + 0x1p-8 + 0x1p-30, -(1.0 + 0x1p-8), 3.0, 1e-50, 0.0,
                                    std::numeric_limits<double>::quiet_NaN(), 0.1};
  const auto values = [&] {
    std::vector<From> v;
    for (const double w : wide) v.push_back(static_cast<From>(w));
    return v;
  }();
  const CsrMatrix<From> csr(3, 4, {0, 3, 3, 7}, {0, 1, 3, 0, 1, 2, 3}, values);
  const BsrMatrix<From> bsr(3, 4, 2, {0, 2, 3}, {0, 1, 1}, [&] {
    std::vector<From> blocks(12);
    std::copy(values.begin(), values.end(), blocks.begin());
    return blocks;
  }());
  const Dense<From> dense(1, 7, values);

  const auto check = [&]<Value To>() {
    SCOPED_TRACE(::testing::Message() << type_name<From>() << " -> " << type_name<To>());
    std::vector<To> expected;
    for (const From v : values) expected.push_back(static_cast<To>(v));

    const CsrMatrix<To> c = cast<To>(csr);
    EXPECT_THAT(c.row_ptr(), ::testing::ElementsAreArray(csr.row_ptr()));
    EXPECT_THAT(c.col_indices(), ::testing::ElementsAreArray(csr.col_indices()));
    ASSERT_EQ(c.values().size(), expected.size());
    for (std::size_t p = 0; p < expected.size(); ++p)
      EXPECT_TRUE(same_value(c.values()[p], expected[p])) << "values[" << p << "] " << to_double(c.values()[p]);

    const BsrMatrix<To> b = cast<To>(bsr);
    EXPECT_TRUE(b.structure() == bsr.structure());
    EXPECT_TRUE(padding_is_zero(b));
    EXPECT_TRUE(same_matrix<To>(to_dense(b), cast<To, From>(to_dense(bsr))));

    const Dense<To> d = cast<To, From>(dense);
    EXPECT_TRUE(same_matrix<To>(d, Dense<To>(1, 7, expected)));
  };
  check.template operator()<float>();
  check.template operator()<double>();
  check.template operator()<bf16>();
}

}  // namespace
}  // namespace trnsparse::test
