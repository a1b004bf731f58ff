// Validation and invariants of the storage formats: every error path of the validating
// constructors (exception type, argument name and first offending position), COO and
// CSR canonicalisation, BSR structure fingerprints, extents and padding.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernel_support.hpp"
#include "runtime/blocks.hpp"
#include "runtime/checks.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {

using ::testing::ElementsAre;

constexpr index_t max_index = std::numeric_limits<index_t>::max();
constexpr index_t two_pow_62 = index_t{1} << 62;

// ---- Dense and DenseView ---------------------------------------------------------------

TEST(DenseView, RejectsNegativeShapes) {
  float x = 0;
  EXPECT_THAT([&] { DenseView<float>(&x, -1, 1, 1); }, throws_naming<InvalidArgument>("rows"));
  EXPECT_THAT([&] { DenseView<float>(&x, 1, -1, 1); }, throws_naming<InvalidArgument>("cols"));
}

TEST(DenseView, RejectsLeadingDimensionBelowColsOrOne) {
  float x = 0;
  EXPECT_THAT([&] { DenseView<float>(&x, 2, 3, 2); }, throws_naming<InvalidArgument>("ld", "2"));
  EXPECT_THAT([&] { DenseView<float>(&x, 0, 0, 0); }, throws_naming<InvalidArgument>("ld", "0"));
  EXPECT_NO_THROW(DenseView<float>(&x, 0, 0, 1));
  EXPECT_NO_THROW(DenseView<float>(&x, 1, 3, 5));
}

TEST(DenseView, RejectsRowsTimesLdOverflow) {
  EXPECT_THAT([] { DenseView<float>(nullptr, two_pow_62, 4, 4); }, throws_naming<OverflowError>("rows * ld"));
  EXPECT_THAT([] { DenseView<float>(nullptr, 3, 1, max_index / 2); }, throws_naming<OverflowError>("rows * ld"));
}

TEST(Dense, RejectsBadShapesAndValueCounts) {
  EXPECT_THAT([] { Dense<float>(-1, 2); }, throws_naming<InvalidArgument>("rows"));
  EXPECT_THAT([] { Dense<float>(2, -3); }, throws_naming<InvalidArgument>("cols"));
  EXPECT_THAT([] { Dense<float>(index_t{1} << 40, index_t{1} << 40); }, throws_naming<OverflowError>("rows * cols"));
  EXPECT_THAT([] { Dense<float>(2, 3, std::vector<float>(5)); }, throws_naming<DimensionMismatch>("values", "5"));
}

TEST(Dense, ShapesLeadingDimensionAndZeroFill) {
  const Dense<double> a(3, 4);
  EXPECT_EQ(a.ld(), 4);
  EXPECT_THAT(a.values(), ::testing::Each(0.0));
  EXPECT_EQ(Dense<double>(3, 0).ld(), 1);
  EXPECT_EQ(Dense<double>(0, 0).view().ld, 1);
  const Dense<float> b(2, 2, {1, 2, 3, 4});
  EXPECT_EQ(b(1, 0), 3.0f);
  EXPECT_EQ(b.view()(0, 1), 2.0f);
}

TEST(Dense, StartsOnACacheLine) {
  // Sizes on either side of glibc's mmap threshold, whose blocks start 16 bytes past a page.
  for (const index_t rows : {1, 3, 100, 40000}) {
    const Dense<double> a(rows, 8);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.values().data()) % 64, 0u) << rows;
    const std::vector<bf16> v(static_cast<std::size_t>(rows * 3), bf16(1.0f));
    const Dense<bf16> b(rows, 3, v);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.values().data()) % 64, 0u) << rows;
    EXPECT_EQ(float(b(rows - 1, 2)), 1.0f);
  }
}

// ---- COO ----------------------------------------------------------------------------------

template <class T>
class Coo : public ::testing::Test {};
TYPED_TEST_SUITE(Coo, ValueTypes, TypeNames);

TYPED_TEST(Coo, RejectsNegativeShapes) {
  using T = TypeParam;
  EXPECT_THAT([] { CooMatrix<T>(-1, 2); }, throws_naming<InvalidArgument>("rows"));
  EXPECT_THAT([] { CooMatrix<T>(2, -1); }, throws_naming<InvalidArgument>("cols"));
  EXPECT_THAT([] { CooMatrix<T>(-4, 2, {}, {}, {}); }, throws_naming<InvalidArgument>("rows"));
}

TYPED_TEST(Coo, RejectsArraysOfDifferentLengths) {
  using T = TypeParam;
  EXPECT_THAT([] { CooMatrix<T>(3, 3, {0, 1, 2}, {0, 1}, values_of<T>({1, 2, 3})); },
              throws_naming<IndexError>("col_idx", "2", "3"));
  EXPECT_THAT([] { CooMatrix<T>(3, 3, {0, 1}, {0, 1}, values_of<T>({1, 2, 3})); },
              throws_naming<IndexError>("values", "3", "2"));
}

TYPED_TEST(Coo, RejectsIndicesOutsideTheShape) {
  using T = TypeParam;
  const auto v = values_of<T>({1, 2, 3});
  EXPECT_THAT([&] { CooMatrix<T>(3, 4, {0, 3, 1}, {0, 0, 0}, v); }, throws_naming<IndexError>("row_idx[1]", "3"));
  EXPECT_THAT([&] { CooMatrix<T>(3, 4, {0, 1, -1}, {0, 0, 0}, v); }, throws_naming<IndexError>("row_idx[2]", "-1"));
  EXPECT_THAT([&] { CooMatrix<T>(3, 4, {0, 1, 2}, {0, 4, 9}, v); }, throws_naming<IndexError>("col_idx[1]", "4"));
  EXPECT_THAT([&] { CooMatrix<T>(3, 4, {0, 1, 2}, {-2, 0, 0}, v); }, throws_naming<IndexError>("col_idx[0]", "-2"));
  CooMatrix<T> a(2, 2);
  EXPECT_THAT([&] { a.push_back(2, 0, T{}); }, throws_naming<IndexError>("push_back(2, 0)"));
  EXPECT_THAT([&] { a.push_back(0, -1, T{}); }, throws_naming<IndexError>("push_back(0, -1)"));
  EXPECT_EQ(a.nnz(), 0);
}

TYPED_TEST(Coo, CanonicalizeSortsSumsDuplicatesAndKeepsExplicitZeros) {
  using T = TypeParam;
  CooMatrix<T> a(3, 4, {2, 0, 1, 0, 2, 1}, {1, 3, 0, 3, 0, 2}, values_of<T>({1, 2, 0, 4, 5, -2}));
  a.push_back(1, 2, static_cast<T>(2.0));  // cancels the (1, 2) entry: an explicit zero
  EXPECT_FALSE(a.is_canonical());
  a.canonicalize();
  EXPECT_TRUE(a.is_canonical());
  EXPECT_THAT(a.row_indices(), ElementsAre(0, 1, 1, 2, 2));
  EXPECT_THAT(a.col_indices(), ElementsAre(3, 0, 2, 0, 1));
  EXPECT_THAT(as_doubles(a.values()), ElementsAre(6, 0, 0, 5, 1));
}

TYPED_TEST(Coo, EmptyAndSortedInputsAreCanonical) {
  using T = TypeParam;
  CooMatrix<T> empty(0, 0);
  EXPECT_TRUE(empty.is_canonical());
  empty.canonicalize();
  EXPECT_EQ(empty.nnz(), 0);
  const CooMatrix<T> sorted(2, 2, {0, 0, 1}, {0, 1, 1}, values_of<T>({1, 2, 3}));
  EXPECT_TRUE(sorted.is_canonical());
  const CooMatrix<T> duplicated(2, 2, {0, 0}, {1, 1}, values_of<T>({1, 2}));
  EXPECT_FALSE(duplicated.is_canonical());
}

// In fp64, (1e17 + 1) - 1e17 == 0 while (1e17 - 1e17) + 1 == 1: the sum tells the order.
TEST(CooCanonicalize, SumsDuplicatesInInputOrder) {
  CooMatrix<double> a(2, 2, {1, 0, 1, 1}, {1, 0, 1, 1}, {1e17, 7.0, 1.0, -1e17});
  a.canonicalize();
  EXPECT_THAT(a.values(), ElementsAre(7.0, 0.0));
}

// ---- CSR ---------------------------------------------------------------------------------

template <class T>
class Csr : public ::testing::Test {};
TYPED_TEST_SUITE(Csr, ValueTypes, TypeNames);

TYPED_TEST(Csr, RejectsNegativeShapes) {
  using T = TypeParam;
  EXPECT_THAT([] { CsrMatrix<T>(-1, 2); }, throws_naming<InvalidArgument>("rows"));
  EXPECT_THAT([] { CsrMatrix<T>(2, -1); }, throws_naming<InvalidArgument>("cols"));
  EXPECT_THAT([] { CsrMatrix<T>(1, -5, {0, 0}, {}, {}); }, throws_naming<InvalidArgument>("cols"));
}

TYPED_TEST(Csr, RejectsMalformedRowPointers) {
  using T = TypeParam;
  const auto v = values_of<T>({1, 2});
  EXPECT_THAT([&] { CsrMatrix<T>(3, 3, {0, 1, 2}, {0, 1}, v); }, throws_naming<IndexError>("row_ptr", "3", "4"));
  EXPECT_THAT([&] { CsrMatrix<T>(2, 3, {1, 1, 2}, {0, 1}, v); }, throws_naming<IndexError>("row_ptr[0]"));
  EXPECT_THAT([&] { CsrMatrix<T>(3, 3, {0, 2, 1, 2}, {0, 1}, v); }, throws_naming<IndexError>("row_ptr[2]"));
  EXPECT_THAT([&] { CsrMatrix<T>(2, 3, {0, 1, 1}, {0, 1}, v); }, throws_naming<IndexError>("row_ptr[2]"));
  EXPECT_THAT([&] { CsrMatrix<T>(3, 3, {0, 4, 4, 2}, {0, 1}, v); }, throws_naming<IndexError>("row_ptr[1]"));
  EXPECT_THAT([&] { CsrMatrix<T>(2, 3, {0, -1, 2}, {0, 1}, v); }, throws_naming<IndexError>("row_ptr[1]"));
}

TYPED_TEST(Csr, RejectsColumnAndValueArraysOfDifferentLengths) {
  using T = TypeParam;
  EXPECT_THAT([] { CsrMatrix<T>(1, 3, {0, 2}, {0, 1}, values_of<T>({1})); }, throws_naming<IndexError>("values", "1"));
}

TYPED_TEST(Csr, RejectsColumnsOutOfRange) {
  using T = TypeParam;
  const auto v = values_of<T>({1, 2, 3});
  EXPECT_THAT([&] { CsrMatrix<T>(2, 4, {0, 1, 3}, {0, 1, 4}, v); },
              throws_naming<IndexError>("col_idx[2]", "4", "row 1"));
  EXPECT_THAT([&] { CsrMatrix<T>(2, 4, {0, 2, 3}, {-1, 1, 2}, v); },
              throws_naming<IndexError>("col_idx[0]", "-1", "row 0"));
  EXPECT_THAT([&] { CsrMatrix<T>(2, 4, {0, 2, 3}, {0, 1, 4}, v, Canonicalize::yes); },
              throws_naming<IndexError>("col_idx[2]"));
}

TYPED_TEST(Csr, RejectsUnsortedOrDuplicateColumnsUnlessCanonicalizing) {
  using T = TypeParam;
  const auto v = values_of<T>({1, 2, 3, 4});
  EXPECT_THAT([&] { CsrMatrix<T>(2, 4, {0, 2, 4}, {0, 3, 2, 1}, v); },
              throws_naming<IndexError>("col_idx[3]", "row 1"));
  EXPECT_THAT([&] { CsrMatrix<T>(2, 4, {0, 2, 4}, {1, 1, 0, 1}, v); },
              throws_naming<IndexError>("col_idx[1]", "row 0"));
}

TYPED_TEST(Csr, CanonicalizeSortsRowsAndSumsDuplicates) {
  using T = TypeParam;
  const CsrMatrix<T> a(3, 4, {0, 3, 3, 6}, {2, 0, 2, 3, 3, 1}, values_of<T>({1, 2, 3, 4, -4, 5}), Canonicalize::yes);
  EXPECT_THAT(a.row_ptr(), ElementsAre(0, 2, 2, 4));
  EXPECT_THAT(a.col_indices(), ElementsAre(0, 2, 1, 3));
  EXPECT_THAT(as_doubles(a.values()), ElementsAre(2, 4, 5, 0));  // (2, 3): 4 - 4 stays an explicit zero
}

TYPED_TEST(Csr, AcceptsEmptyShapesAndExplicitZeros) {
  using T = TypeParam;
  EXPECT_EQ(CsrMatrix<T>(0, 0).row_ptr().size(), 1u);
  EXPECT_EQ(CsrMatrix<T>(0, 7, {0}, {}, {}).nnz(), 0);
  EXPECT_THAT(CsrMatrix<T>(3, 0).row_ptr(), ElementsAre(0, 0, 0, 0));
  const CsrMatrix<T> z(1, 2, {0, 1}, {1}, values_of<T>({0}));
  EXPECT_EQ(z.nnz(), 1);
}

// ---- BsrStructure ----------------------------------------------------------------------------

TEST(BsrStructure, RejectsNegativeShapesAndBlockSizesBelowOne) {
  EXPECT_THAT([] { BsrStructure(-1, 2, 1, {0}, {}); }, throws_naming<InvalidArgument>("rows"));
  EXPECT_THAT([] { BsrStructure(2, -1, 1, {0, 0, 0}, {}); }, throws_naming<InvalidArgument>("cols"));
  EXPECT_THAT([] { BsrStructure(2, 2, 0, {0, 0}, {}); }, throws_naming<InvalidArgument>("block_size", "0"));
  EXPECT_THAT([] { BsrStructure(2, 2, -3, {0, 0}, {}); }, throws_naming<InvalidArgument>("block_size", "-3"));
}

TEST(BsrStructure, RejectsMalformedBlockRowPointers) {
  // 5 x 5 with b = 2: a 3 x 3 grid of blocks.
  EXPECT_THAT([] { BsrStructure(5, 5, 2, {0, 1, 2}, {0, 1}); }, throws_naming<IndexError>("block_row_ptr", "4"));
  EXPECT_THAT([] { BsrStructure(5, 5, 2, {1, 1, 2, 2}, {0, 1}); }, throws_naming<IndexError>("block_row_ptr[0]"));
  EXPECT_THAT([] { BsrStructure(5, 5, 2, {0, 2, 1, 2}, {0, 1}); }, throws_naming<IndexError>("block_row_ptr[2]"));
  EXPECT_THAT([] { BsrStructure(5, 5, 2, {0, 1, 1, 1}, {0, 1}); }, throws_naming<IndexError>("block_row_ptr[3]"));
}

TEST(BsrStructure, RejectsBlockColumnsOutOfRangeUnsortedOrDuplicated) {
  EXPECT_THAT([] { BsrStructure(5, 5, 2, {0, 1, 2, 2}, {0, 3}); },
              throws_naming<IndexError>("block_col_idx[1]", "3"));
  EXPECT_THAT([] { BsrStructure(5, 5, 2, {0, 1, 2, 2}, {-1, 0}); },
              throws_naming<IndexError>("block_col_idx[0]", "-1"));
  EXPECT_THAT([] { BsrStructure(5, 5, 2, {0, 0, 0, 2}, {2, 1}); }, throws_naming<IndexError>("block_col_idx[1]"));
  EXPECT_THAT([] { BsrStructure(5, 5, 2, {0, 2, 2, 2}, {1, 1}); }, throws_naming<IndexError>("block_col_idx[1]"));
}

TEST(BsrStructure, RejectsValueCountOverflow) {
  // One block of 2^62 x 2^62 values.
  EXPECT_THAT([] { BsrStructure(two_pow_62, two_pow_62, two_pow_62, {0, 1}, {0}); },
              throws_naming<OverflowError>("block"));
  // 2^31 x 2^31 = 2^62 values per block fits once, not twice.
  const index_t b = index_t{1} << 31;
  EXPECT_NO_THROW(BsrStructure(b, 2 * b, b, {0, 0}, {}));
  EXPECT_THAT([&] { BsrStructure(b, 2 * b, b, {0, 2}, {0, 1}); }, throws_naming<OverflowError>("block"));
}

TEST(BsrStructure, HandlesLargeLogicalShapes) {
  // 2^40 x (2^40 + 1) with b = 2^31: a 512 x 513 grid whose last block column is one wide.
  const index_t b = index_t{1} << 31;
  const index_t rows = index_t{1} << 40;
  const BsrStructure s(rows, rows + 1, b, std::vector<index_t>(513, 0), {});
  EXPECT_EQ(s.block_rows(), 512);
  EXPECT_EQ(s.block_cols(), 513);
  EXPECT_EQ(s.row_extent(511), b);
  EXPECT_EQ(s.col_extent(512), 1);
  EXPECT_EQ(s.block_density(), 0.0);
  std::vector<index_t> one_block(513, 1);
  one_block[0] = 0;
  EXPECT_NO_THROW(BsrStructure(rows, rows + 1, b, one_block, {512})) << "2^62 values fit";
}

TEST(BsrStructure, ExtentsAndDensityOfAnUnalignedShape) {
  // 7 x 5, b = 3: block rows cover 3, 3, 1 rows; block columns 3, 2 columns.
  const BsrStructure s(7, 5, 3, {0, 2, 2, 3}, {0, 1, 1});
  EXPECT_EQ(s.block_rows(), 3);
  EXPECT_EQ(s.block_cols(), 2);
  EXPECT_EQ(s.n_blocks(), 3);
  EXPECT_EQ(s.row_extent(0), 3);
  EXPECT_EQ(s.row_extent(1), 3);
  EXPECT_EQ(s.row_extent(2), 1);
  EXPECT_EQ(s.col_extent(0), 3);
  EXPECT_EQ(s.col_extent(1), 2);
  EXPECT_DOUBLE_EQ(s.block_density(), 3.0 / 6.0);
}

TEST(BsrStructure, EmptyShapes) {
  const BsrStructure none(0, 0, 4, {0}, {});
  EXPECT_EQ(none.block_rows(), 0);
  EXPECT_EQ(none.block_cols(), 0);
  EXPECT_EQ(none.block_density(), 0.0);
  const BsrStructure no_cols(5, 0, 4, {0, 0, 0}, {});
  EXPECT_EQ(no_cols.block_rows(), 2);
  EXPECT_EQ(no_cols.block_cols(), 0);
  EXPECT_EQ(no_cols.block_density(), 0.0);
}

TEST(BsrStructure, FingerprintsFollowEquality) {
  const auto base = BsrStructure::make(4, 4, 2, {0, 1, 2}, {0, 1});
  const auto same = BsrStructure::make(4, 4, 2, {0, 1, 2}, {0, 1});
  EXPECT_NE(base, same) << "make returns a new handle";
  EXPECT_TRUE(*base == *same);
  EXPECT_EQ(base->fingerprint(), same->fingerprint());

  const std::vector<BsrStructure> different = {
      BsrStructure(3, 4, 2, {0, 1, 2}, {0, 1}),  // rows (same grid)
      BsrStructure(4, 3, 2, {0, 1, 2}, {0, 1}),  // cols (same grid)
      BsrStructure(4, 4, 3, {0, 1, 2}, {0, 1}),  // block size (same grid)
      BsrStructure(4, 4, 2, {0, 0, 2}, {0, 1}),  // block row pointers
      BsrStructure(4, 4, 2, {0, 1, 2}, {1, 1}),  // block columns
      BsrStructure(4, 4, 2, {0, 2, 2}, {0, 1}),
      BsrStructure(4, 4, 2, {0, 0, 0}, {}),
  };
  for (std::size_t i = 0; i < different.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "structure " << i);
    EXPECT_FALSE(different[i] == *base);
    EXPECT_NE(different[i].fingerprint(), base->fingerprint());
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(different[i].fingerprint(), different[j].fingerprint()) << j;
  }
}

// A product's structure and values are arrays the library wrote (detail::Storage over an
// untouched allocation), where the caller's are vectors: copies of both are deep, equal
// and independent, and the copied structure has the same fingerprint.
TEST(BsrStructure, ArraysTheLibraryWroteCopyLikeVectors) {
  const CsrMatrix<double> A = poisson3d<double>(4);
  const CsrMatrix<double> C = multiply(A, A);
  const BsrStructure& s = *C.structure_ptr();
  const BsrStructure copy(s);
  EXPECT_TRUE(copy == s);
  EXPECT_EQ(copy.fingerprint(), s.fingerprint());
  EXPECT_NE(copy.block_col_indices().data(), s.block_col_indices().data());
  const BsrStructure rebuilt(s.rows(), s.cols(), 1, {s.block_row_ptr().begin(), s.block_row_ptr().end()},
                             {s.block_col_indices().begin(), s.block_col_indices().end()});
  EXPECT_TRUE(rebuilt == s);

  CsrMatrix<double> D = C;  // values copied, structure shared
  ASSERT_EQ(D.nnz(), C.nnz());
  EXPECT_NE(D.values().data(), C.values().data());
  EXPECT_TRUE(std::equal(D.values().begin(), D.values().end(), C.values().begin()));
  const double first = C.values()[0];
  D.values()[0] = first + 1.0;
  EXPECT_EQ(C.values()[0], first);
  CsrMatrix<double> E = std::move(D);  // moves keep the array
  EXPECT_EQ(E.values()[0], first + 1.0);
  E = C;
  EXPECT_EQ(E.values()[0], first);
  CsrMatrix<double> F = multiply(A, A);
  const double* written = F.values().data();
  const CsrMatrix<double> G = std::move(F);
  EXPECT_EQ(G.values().data(), written);

  const BsrMatrix<double> Ab = to_bsr(A, 3);
  const BsrMatrix<double> Cb = multiply(Ab, Ab);
  BsrMatrix<double> Db = Cb;
  EXPECT_NE(Db.blocks().data(), Cb.blocks().data());
  EXPECT_TRUE(std::equal(Db.blocks().begin(), Db.blocks().end(), Cb.blocks().begin()));
}

// Arrays from acquire_block are 64-byte aligned at any size (zero too), and a released
// large block comes back for the next request of its size class (not under
// AddressSanitizer, which must see every array's lifetime). Blocks released and taken
// from several threads at once keep what each writes.
TEST(BsrStructure, LargeBlocksAreKeptForTheNextArrayOfTheirSize) {
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{8}, std::size_t{4096}, std::size_t{65536},
                                  std::size_t{100000}, std::size_t{3} << 20}) {
    void* p = detail::acquire_block(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0x5a, bytes);
    detail::release_block(p, bytes);
  }
  detail::release_block(nullptr, 100000);
#if !defined(__SANITIZE_ADDRESS__)
  void* p = detail::acquire_block(440000);  // 108 pages, class 112
  detail::release_block(p, 440000);
  EXPECT_EQ(detail::acquire_block(400000), p) << "a block of the same size class was not reused";  // 98 pages
  detail::release_block(p, 400000);
  EXPECT_GE(detail::kept_block_bytes(), std::size_t{112} * 4096);
  detail::set_kept_block_limit(0);  // unmaps what is kept, and keeps nothing released later
  EXPECT_EQ(detail::kept_block_bytes(), 0u);
  detail::release_block(detail::acquire_block(440000), 440000);
  EXPECT_EQ(detail::kept_block_bytes(), 0u);
  detail::set_kept_block_limit(std::size_t{1} << 20);  // a block above half the limit is not kept
  detail::release_block(detail::acquire_block(600000), 600000);
  EXPECT_EQ(detail::kept_block_bytes(), 0u);
  detail::release_block(detail::acquire_block(440000), 440000);
  EXPECT_EQ(detail::kept_block_bytes(), std::size_t{112} * 4096);
  detail::set_kept_block_limit(std::size_t{256} << 20);
#endif
  std::vector<std::thread> threads;
  std::atomic<bool> intact{true};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &intact] {
      for (int rep = 0; rep < 200; ++rep) {
        const std::size_t n = (std::size_t{16} << 10) * static_cast<std::size_t>(1 + (rep + t) % 7);
        detail::Block<int> a = detail::acquire_array<int>(n);
        std::fill_n(a.get(), n, t * 1000 + rep);
        if (std::count(a.get(), a.get() + n, t * 1000 + rep) != static_cast<std::ptrdiff_t>(n)) intact = false;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(intact.load());
}

// Large arrays the library allocates are advised huge pages before their first touch:
// their mappings carry the kernel's "hg" flag (MADV_HUGEPAGE) from the first whole
// 2 MiB page on, whether or not huge pages were free to back them.
TEST(BsrStructure, LargeArraysTheLibraryAllocatesAreAdvisedHugePages) {
  if (!kernel_shows_advice()) GTEST_SKIP() << "this kernel takes no huge-page advice, or smaps does not show it";
  const auto advised = [](const void* data) { return advised_at(first_huge_page(data)); };
  const index_t n = index_t{3} << 20;  // 24 MiB of doubles
  EXPECT_TRUE(advised(detail::make_vector<double>(n, "test").data()));
  EXPECT_TRUE(advised(Dense<double>(n, 1).values().data()));
  const CsrMatrix<double> A = poisson3d<double>(64);  // 1.8 M entries: 14 MiB of values
  EXPECT_TRUE(advised(A.values().data()));
  EXPECT_TRUE(advised(A.col_indices().data()));
  const CsrMatrix<float> B = cast<float>(A);
  EXPECT_TRUE(advised(B.values().data()));
  EXPECT_TRUE(advised(B.col_indices().data()));
#if !defined(__SANITIZE_ADDRESS__)  // its allocator may hand back memory advised before
  // The caller's own vector is left as its allocator made it.
  std::vector<double> own(static_cast<std::size_t>(n), 1.0);
  EXPECT_FALSE(advised(own.data()));
#endif
}

TEST(BsrStructure, LargeCopiesAreExactOnAnyThreadCount) {
  // 1.5 M column indices (11.7 MiB): the copy runs in 2 MiB pieces on the threads.
  const CsrMatrix<double> A = poisson3d<double>(40);
  const CsrMatrix<double> C = multiply(A, A);
  const BsrStructure& s = *C.structure_ptr();
  ASSERT_GT(s.block_col_indices().size_bytes(), std::size_t{11} << 20);
  const RuntimeGuard guard;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const BsrStructure copy(s);
    EXPECT_TRUE(copy == s) << threads << " threads";
    EXPECT_NE(copy.block_col_indices().data(), s.block_col_indices().data());
  }
  const BsrStructure empty(0, 0, 1, {0}, {});
  EXPECT_TRUE(BsrStructure(empty) == empty);
}

// ---- BsrMatrix --------------------------------------------------------------------------

template <class T>
class Bsr : public ::testing::Test {};
TYPED_TEST_SUITE(Bsr, ValueTypes, TypeNames);

TYPED_TEST(Bsr, RejectsNullStructureAndWrongValueCounts) {
  using T = TypeParam;
  EXPECT_THAT([] { BsrMatrix<T>(nullptr); }, throws_naming<InvalidArgument>("structure"));
  EXPECT_THAT([] { BsrMatrix<T>(nullptr, std::vector<T>{}); }, throws_naming<InvalidArgument>("structure"));
  const auto s = BsrStructure::make(3, 3, 2, {0, 1, 2}, {0, 1});  // 2 blocks of 4
  EXPECT_THAT([&] { BsrMatrix<T>(s, std::vector<T>(7)); }, throws_naming<DimensionMismatch>("blocks", "7", "8"));
  EXPECT_THAT([] { BsrMatrix<T>(3, 3, 2, {0, 1, 2}, {0, 1}, std::vector<T>(9)); },
              throws_naming<DimensionMismatch>("blocks", "9", "8"));
}

TYPED_TEST(Bsr, RawArraysAreValidatedLikeTheStructure) {
  using T = TypeParam;
  EXPECT_THAT([] { BsrMatrix<T>(3, 3, 0, {0}, {}, {}); }, throws_naming<InvalidArgument>("block_size"));
  EXPECT_THAT([] { BsrMatrix<T>(3, 3, 2, {0, 1, 0}, {0}, std::vector<T>(4)); },
              throws_naming<IndexError>("block_row_ptr[2]"));
  EXPECT_THAT([] { BsrMatrix<T>(3, 3, 2, {0, 1, 1}, {2}, std::vector<T>(4)); },
              throws_naming<IndexError>("block_col_idx[0]"));
  EXPECT_THAT([] { BsrMatrix<T>(3, 3, 2, {0, 2, 2}, {1, 0}, std::vector<T>(8)); },
              throws_naming<IndexError>("block_col_idx[1]"));
}

TYPED_TEST(Bsr, ConstructorZeroesPadding) {
  using T = TypeParam;
  // 3 x 3, b = 2: block (0, 0) is all logical; block (1, 1) holds only a_22.
  const auto nan = static_cast<T>(std::numeric_limits<double>::quiet_NaN());
  const BsrMatrix<T> a(BsrStructure::make(3, 3, 2, {0, 1, 2}, {0, 1}), std::vector<T>(8, nan));
  EXPECT_TRUE(padding_is_zero(a));
  for (const T v : a.block(0)) EXPECT_TRUE(is_nan(v));
  EXPECT_TRUE(is_nan(a.block(1)[0]));

  const BsrMatrix<T> raw(3, 3, 2, {0, 1, 2}, {0, 1}, std::vector<T>(8, nan));
  EXPECT_TRUE(padding_is_zero(raw));
  const BsrMatrix<T> zeros(BsrStructure::make(3, 3, 2, {0, 1, 2}, {0, 1}));
  EXPECT_EQ(zeros.blocks().size(), 8u);
  for (const T v : zeros.blocks()) EXPECT_EQ(to_double(v), 0.0);
}

TYPED_TEST(Bsr, ZeroPaddingRestoresTheInvariant) {
  using T = TypeParam;
  BsrMatrix<T> a(BsrStructure::make(7, 5, 3, {0, 1, 1, 2}, {1, 0}));
  for (T& v : a.blocks()) v = static_cast<T>(2.0);
  a.zero_padding();
  EXPECT_TRUE(padding_is_zero(a));
  // Block 0 is block (0, 1): 3 rows x 2 logical columns; block 1 is (2, 0): 1 x 3.
  EXPECT_THAT(as_doubles(a.block(0)), ElementsAre(2, 2, 0, 2, 2, 0, 2, 2, 0));
  EXPECT_THAT(as_doubles(a.block(1)), ElementsAre(2, 2, 2, 0, 0, 0, 0, 0, 0));
}

TYPED_TEST(Bsr, CanonicalizeSortsAndSumsDuplicateBlocks) {
  using T = TypeParam;
  // Block row 0 lists blocks 1, 0, 1 (1 x 1 blocks of a 2 x 2 grid of b = 1).
  const BsrMatrix<T> a(2, 2, 1, {0, 3, 4}, {1, 0, 1, 0}, values_of<T>({1, 2, 3, 4}), Canonicalize::yes);
  EXPECT_THAT(a.structure().block_row_ptr(), ElementsAre(0, 2, 3));
  EXPECT_THAT(a.structure().block_col_indices(), ElementsAre(0, 1, 0));
  EXPECT_THAT(as_doubles(a.blocks()), ElementsAre(2, 4, 4));
  EXPECT_THAT([] { BsrMatrix<T>(2, 2, 1, {0, 2, 2}, {1, 1}, values_of<T>({1, 2})); },
              throws_naming<IndexError>("block_col_idx[1]"));
}

TEST(BsrCanonicalize, SumsDuplicateBlocksInInputOrder) {
  const BsrMatrix<double> a(1, 1, 1, {0, 3}, {0, 0, 0}, {1e17, 1.0, -1e17}, Canonicalize::yes);
  EXPECT_THAT(a.blocks(), ElementsAre(0.0));
}

TYPED_TEST(Bsr, SharesItsStructureAndExposesBlocks) {
  using T = TypeParam;
  const auto s = BsrStructure::make(4, 4, 2, {0, 1, 2}, {1, 0});
  const BsrMatrix<T> a(s, values_of<T>({1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(a.structure_ptr(), s);
  EXPECT_EQ(a.n_blocks(), 2);
  EXPECT_EQ(a.block_size(), 2);
  EXPECT_EQ(a.rows(), 4);
  ASSERT_EQ(a.block(1).size(), 4u);
  EXPECT_EQ(to_double(a.block(1)[0]), 5.0);
  const Dense<T> d = dense_of(a);
  EXPECT_EQ(to_double(d(1, 3)), 4.0);  // block (0, 1)
  EXPECT_EQ(to_double(d(3, 0)), 7.0);  // block (1, 0)
}

}  // namespace
}  // namespace trnsparse::test

namespace trnsparse::test {
namespace {

/// Q1 elasticity: symmetric, 3 x 3 node blocks, 27 neighbours inside, and a linear
/// displacement field (a uniform strain) is in equilibrium at every node whose
/// neighbours are all free and inside the mesh; clamping makes it positive definite.
TEST(Generators, Elasticity3dIsAssembledQ1Elasticity) {
  const index_t n = 4, m = n + 1;
  const CsrMatrix<double> A = elasticity3d<double>(n);
  ASSERT_EQ(A.rows(), 3 * n * m * m);
  const Dense<double> D = to_dense(A);
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t j = 0; j < A.cols(); ++j) ASSERT_NEAR(D(i, j), D(j, i), 1e-12) << i << ", " << j;
  EXPECT_EQ(A.nnz() % 3, 0);
  const auto per_row = nnz_per_row(A);
  EXPECT_EQ(*std::max_element(per_row.begin(), per_row.end()), 81);  // 27 nodes x 3
  // u = (0.1 x + 0.2 y, 0.3 z, 0.05 x) at every free node (x = ix / n, ix >= 1).
  std::vector<double> u(static_cast<std::size_t>(A.rows())), f(u.size());
  index_t k = 0;
  for (index_t z = 0; z < m; ++z)
    for (index_t y = 0; y < m; ++y)
      for (index_t x = 1; x < m; ++x, ++k) {
        const double X = double(x) / n, Y = double(y) / n, Z = double(z) / n;
        u[3 * k] = 0.1 * X + 0.2 * Y;
        u[3 * k + 1] = 0.3 * Z;
        u[3 * k + 2] = 0.05 * X;
      }
  spmv(1.0, A, std::span<const double>(u), 0.0, std::span<double>(f));
  k = 0;
  for (index_t z = 0; z < m; ++z)
    for (index_t y = 0; y < m; ++y)
      for (index_t x = 1; x < m; ++x, ++k) {
        const bool interior = x >= 2 && x < n && y > 0 && y < n && z > 0 && z < n;
        if (!interior) continue;
        for (int c = 0; c < 3; ++c) EXPECT_NEAR(f[static_cast<std::size_t>(3 * k + c)], 0.0, 1e-12) << k;
      }
  // Positive definite: CG converges (it would break down on an indefinite matrix).
  const std::vector<double> b(static_cast<std::size_t>(A.rows()), 1.0);
  EXPECT_TRUE(cg(LinearOperator<double>(A), std::span<const double>(b), {.tol = 1e-10, .max_iter = 2000}).converged());
  EXPECT_THROW(elasticity3d<double>(0), InvalidArgument);
}

/// The 5-field block stencil: dense 5 x 5 node blocks on a 7-point pattern, nonsymmetric,
/// strictly diagonally dominant by rows.
TEST(Generators, BlockStencil3dHasDenseFieldBlocks) {
  const index_t n = 5;
  const CsrMatrix<double> A = block_stencil3d<double>(n);
  ASSERT_EQ(A.rows(), 5 * n * n * n);
  const auto per_row = nnz_per_row(A);
  EXPECT_EQ(*std::max_element(per_row.begin(), per_row.end()), 35);  // 7 nodes x 5 fields
  EXPECT_EQ(*std::min_element(per_row.begin(), per_row.end()), 20);   // a corner: 4 nodes
  const Dense<double> D = to_dense(A);
  bool symmetric = true;
  for (index_t i = 0; i < A.rows(); ++i) {
    double off = 0;
    for (index_t j = 0; j < A.cols(); ++j) {
      if (j != i) off += std::fabs(D(i, j));
      symmetric = symmetric && D(i, j) == D(j, i);
    }
    EXPECT_GT(D(i, i), off) << "row " << i;
  }
  EXPECT_FALSE(symmetric);
  // Its natural 5 x 5 blocks are full: BSR with block 5 stores exactly the entries.
  EXPECT_EQ(to_bsr(A, 5).n_blocks() * 25, A.nnz());
  EXPECT_EQ(block_stencil3d<float>(3, 2).rows(), 54);
  EXPECT_THROW(block_stencil3d<double>(2, 0), InvalidArgument);
  EXPECT_THROW(block_stencil3d<double>(-1), InvalidArgument);
}

/// random_blocks: every b x b block (cut at n on the edges) is stored whole or not at
/// all, values in [-1, 1), the same matrix for the same seed.
TEST(Generators, RandomBlocksStoresWholeBlocks) {
  for (const auto& [n, b] : {std::pair<index_t, index_t>{12, 3}, {10, 3}, {20, 8}, {9, 1}}) {
    SCOPED_TRACE("n " + std::to_string(n) + ", b " + std::to_string(b));
    const CsrMatrix<double> A = random_blocks<double>(n, b, 0.4, 5);
    ASSERT_EQ(A.rows(), n);
    ASSERT_EQ(A.cols(), n);
    // Entries per block, from the CSR arrays.
    const index_t nb = ceil_div(n, b);
    std::vector<index_t> count(static_cast<std::size_t>(nb * nb), 0);
    for (index_t i = 0; i < n; ++i)
      for (index_t p = A.row_ptr()[i]; p < A.row_ptr()[i + 1]; ++p)
        ++count[static_cast<std::size_t>(i / b * nb + A.col_indices()[p] / b)];
    index_t present = 0;
    for (index_t I = 0; I < nb; ++I)
      for (index_t J = 0; J < nb; ++J) {
        const index_t c = count[static_cast<std::size_t>(I * nb + J)];
        const index_t whole = (std::min(n, (I + 1) * b) - I * b) * (std::min(n, (J + 1) * b) - J * b);
        EXPECT_TRUE(c == 0 || c == whole) << "block (" << I << ", " << J << ") holds " << c << " of " << whole;
        present += c > 0;
      }
    EXPECT_GT(present, 0);
    EXPECT_LT(present, nb * nb);  // 0.4 of 9 to 81 blocks: some present, some not (seed 5)
    if (n % b == 0) EXPECT_EQ(A.nnz() % (b * b), 0);
    for (const double v : A.values()) {
      EXPECT_GE(v, -1.0);
      EXPECT_LT(v, 1.0);
    }
    EXPECT_TRUE(same_csr(random_blocks<double>(n, b, 0.4, 5), A));
  }
  EXPECT_FALSE(same_csr(random_blocks<double>(12, 3, 0.4, 6), random_blocks<double>(12, 3, 0.4, 5)));
  // Densities 0 and 1: nothing, and every element.
  EXPECT_EQ(random_blocks<float>(10, 4, 0.0, 1).nnz(), 0);
  EXPECT_EQ(random_blocks<float>(10, 4, 1.0, 1).nnz(), 100);
  EXPECT_EQ(random_blocks<bf16>(0, 4, 0.5, 1).rows(), 0);
  // The natural blocks are full: BSR with block b stores exactly the entries.
  const CsrMatrix<double> A = random_blocks<double>(64, 4, 0.2, 9);
  EXPECT_EQ(to_bsr(A, 4).n_blocks() * 16, A.nnz());
}

TEST(Generators, RandomBlocksRejectsBadArguments) {
  EXPECT_THAT([] { random_blocks<double>(10, 0, 0.5, 1); }, throws_naming<InvalidArgument>("block size"));
  EXPECT_THAT([] { random_blocks<double>(10, -2, 0.5, 1); }, throws_naming<InvalidArgument>("block size"));
  EXPECT_THAT([] { random_blocks<double>(10, 2, -0.1, 1); }, throws_naming<InvalidArgument>("density"));
  EXPECT_THAT([] { random_blocks<double>(10, 2, 1.5, 1); }, throws_naming<InvalidArgument>("density"));
  EXPECT_THAT([] { random_blocks<double>(10, 2, std::nan(""), 1); }, throws_naming<InvalidArgument>("density"));
  EXPECT_THAT([] { random_blocks<double>(-1, 2, 0.5, 1); }, throws_naming<InvalidArgument>("random_blocks: n"));
}

/// A problem too large for the memory fails before it allocates, naming the bytes it
/// would need (a 4096^3 Poisson matrix: 4.8e11 entries, some 7.7 TB).
TEST(Generators, AProblemTooLargeForTheMemoryFailsAtOnce) {
  EXPECT_THAT([] { poisson3d<double>(4096); }, throws_naming<OverflowError>("poisson3d: 481036337152 entries"));
  EXPECT_THAT([] { poisson3d<double>(4096); }, throws_naming<OverflowError>("GB for the CSR arrays"));
  EXPECT_THAT([] { elasticity3d<float>(2048); }, throws_naming<OverflowError>("elasticity3d"));
  EXPECT_THAT([] { block_stencil3d<float>(1024, 8); }, throws_naming<OverflowError>("block_stencil3d"));
}

/// Each form of a problem specification builds what the generator it names builds.
TEST(Generators, NamedProblemIsTheGeneratorItNames) {
  EXPECT_TRUE(same_csr(named_problem<double>("poisson3d:3"), poisson3d<double>(3)));
  EXPECT_TRUE(same_csr(named_problem<double>("elasticity3d:2"), elasticity3d<double>(2)));
  EXPECT_TRUE(same_csr(named_problem<double>("block_stencil3d:2"), block_stencil3d<double>(2)));
  EXPECT_TRUE(same_csr(named_problem<double>("block_stencil3d:2:3"), block_stencil3d<double>(2, 3)));
  EXPECT_TRUE(same_csr(named_problem<double>("random_blocks:10:2:0.5"), random_blocks<double>(10, 2, 0.5, 0)));
  EXPECT_TRUE(same_csr(named_problem<float>("elasticity3d:2"), elasticity3d<float>(2)));
  EXPECT_TRUE(same_csr(named_problem<bf16>("random_blocks:9:4:1"), random_blocks<bf16>(9, 4, 1.0, 0)));
}

TEST(Generators, NamedProblemRejectsBadSpecsNamingThem) {
  for (const std::string spec : {"", "poisson3d", "poisson3d:0", "poisson3d:-3", "poisson3d:x", "poisson3d:3x",
                                 "poisson3d:3:4", "poisson3d:3:", ":3", "heat:3", "POISSON3D:3", "poisson3d:2000000",
                                 "random_blocks:10:2", "random_blocks:10:2:0.5:1", "random_blocks:10:two:0.5",
                                 "block_stencil3d:2:x", "block_stencil3d:2:0", "random_blocks:10:0:0.5",
                                 "random_blocks:10:2:1.5"}) {
    SCOPED_TRACE("spec \"" + spec + "\"");
    EXPECT_THAT([&] { named_problem<double>(spec); }, throws_naming<InvalidArgument>("\"" + spec + "\""));
  }
}

}  // namespace
}  // namespace trnsparse::test
