// Results never depend on the thread count (runtime.hpp): each output tile has one
// writer and every reduction runs in a fixed order. Every threaded product is run with
// 1, 2 and 3 threads on every supported ISA and the outputs compared byte for byte,
// including shapes with fewer block rows (or block columns, for Aᵀ) than threads, the
// width-1 vector paths, and a skewed structure whose balanced split cuts next to a
// heavy block row.
//
// The library gives a product fewer threads when it has little work (about one thread
// per kThreadGrain multiply-adds, src/ops/run.hpp parts_for): every case here holds at
// least 3 grains per product, checked below, so 3 threads really run. Beyond that the
// cases are small: every OpenMP region costs a wake-up of the workers, milliseconds on a
// loaded machine.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kernel_support.hpp"
#include "ops/run.hpp"
#include "plan/csr_analysis.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {



/// Multiply-adds per thread below which the library stops adding threads (parts_for).
constexpr double kThreadGrain = 1 << 16;

struct DeterminismCase {
  std::string name;
  index_t rows;
  index_t cols;
  index_t b;
  index_t width;  // 1: also spmv, and the vector paths of spmm and spmm_transposed
  PatternSpec pattern{};
};

/// The case whose products run_bsr_product splits by column groups (checked below).
constexpr const char* kHeavyRow = "heavy_block_row_256x256_b32_wide";

std::vector<DeterminismCase> cases() {
  const PatternSpec full{1.0, 0.0, false, 0.0};
  const PatternSpec skewed{0.15, 0.3, true, 0.1};
  return {
      {"two_block_rows_128x192_b64", 128, 192, 64, 17, full},  // 3 threads, 2 block rows (3 block cols)
      {"one_block_row_40x400_b40", 40, 400, 40, 33, full},     // 1 block row, 10 block columns
      {"skewed_240x200_b8", 240, 200, 8, 64, skewed},          // a dense block row among sparse ones
      {kHeavyRow, 256, 256, 32, 264, skewed},                  // the same, wide: split by column groups
      {"odd_b3_93x87", 93, 87, 3, 150, {0.3, 0.2, true, 0.15}},
      {"vector_600x560_b20", 600, 560, 20, 1, full},
      // The small-block kernels (bf16: the pair kernels): SpMV and a narrow SpMM.
      {"small_b3_vector_1800x1790", 1800, 1790, 3, 1, skewed},
      {"small_b5_narrow_600x610", 600, 610, 5, 8, skewed},
      {"small_b2_narrow_802x800", 802, 800, 2, 6, skewed},
  };
}

/// Multiply-adds of a product (or SDDMM) with the stored blocks of `s`, `width` columns.
double block_work(const BsrStructure& s, index_t width) {
  return static_cast<double>(s.n_blocks() * s.block_size() * s.block_size() * width);
}

template <class T>
std::vector<T> values_of_dense(const Dense<T>& d) {
  return {d.values().begin(), d.values().end()};
}

// ---- products -------------------------------------------------------------------------------

/// alpha and beta != 0 (C is read), exact in every type.
template <Value TA>
constexpr acc_t<TA> kAlpha = static_cast<acc_t<TA>>(1.25);
template <Value TA>
constexpr acc_t<TA> kBeta = static_cast<acc_t<TA>>(-0.5);

template <class Pair>
class DeterminismProducts : public Seeded<> {};
TYPED_TEST_SUITE(DeterminismProducts, ProductTypes, TypeNames);

TYPED_TEST(DeterminismProducts, BsrSpmmSpmvAndTransposed) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const auto alpha = kAlpha<TA>;
  const auto beta = kBeta<TA>;
  for (const DeterminismCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const BsrMatrix<TA> A = random_bsr<TA>(this->rng, c.rows, c.cols, c.b, c.pattern);
    ASSERT_GE(block_work(A.structure(), c.width), 3 * kThreadGrain) << "too little work to run 3 threads";
    if (c.name == kHeavyRow)  // spmm must take the column split of ops/run.hpp with 2 and 3 threads
      for (const int parts : {2, 3}) {
        const struct {
          const index_t* ptr;
          index_t width;
        } product{A.structure().block_row_ptr().data(), c.width};
        const detail::SplitBalance balance = detail::split_balance(product, plan(A)->row_split(parts));
        EXPECT_GT(balance.columns, 1.05 * balance.rows) << parts << " parts";
      }
    const Dense<TA> B = random_dense<TA>(this->rng, c.cols, c.width);
    const Dense<TY> C = random_dense<TY>(this->rng, c.rows, c.width);
    const Dense<TA> Bt = random_dense<TA>(this->rng, c.rows, c.width);
    const Dense<TY> Ct = random_dense<TY>(this->rng, c.cols, c.width);
    const Dense<TA> x = random_dense<TA>(this->rng, c.cols, 1);
    const Dense<TY> y = random_dense<TY>(this->rng, c.rows, 1);
    {
      SCOPED_TRACE("spmm");
      expect_thread_independent([&] {
        Dense<TY> out = C;
        spmm(alpha, A, B.view(), beta, out.view());
        return values_of_dense(out);
      });
    }
    if (c.width == 1) {
      SCOPED_TRACE("spmv");
      expect_thread_independent([&] {
        Dense<TY> out = y;
        spmv(alpha, A, x.values(), beta, out.values());
        return values_of_dense(out);
      });
    }
    {
      SCOPED_TRACE("spmm_transposed");
      expect_thread_independent([&] {
        Dense<TY> out = Ct;
        spmm_transposed(alpha, A, Bt.view(), beta, out.view());
        return values_of_dense(out);
      });
    }
  }
}

TYPED_TEST(DeterminismProducts, CsrSpmmAndSpmv) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const auto alpha = kAlpha<TA>;
  const auto beta = kBeta<TA>;
  // Two rows for three threads; one dense row among sparse ones; a narrow B (a partial
  // vector per row, csr_tile.inc); a matrix with enough non-zeros for a threaded spmv.
  struct CsrCase {
    MatrixSpec spec;
    index_t width;
  };
  const CsrCase csr_cases[] = {{{"two_rows_2x3000", 2, 3000, 1.0}, 64},
                               {{"one_dense_row_400x300", 400, 300, 0.05, 123}, 64},
                               {{"narrow_300x2000", 300, 2000, 0.2}, 7},
                               {{"spmv_500x500", 500, 500, 0.9}, 1}};
  for (const auto& [spec, width] : csr_cases) {
    SCOPED_TRACE(spec.name);
    const CsrMatrix<TA> A = csr_from_dense<TA>(random_dense<TA>(this->rng, spec));
    ASSERT_GE(static_cast<double>(A.nnz() * width), 3 * kThreadGrain) << "too little work to run 3 threads";
    const Dense<TA> B = random_dense<TA>(this->rng, spec.cols, width);
    const Dense<TY> C = random_dense<TY>(this->rng, spec.rows, width);
    expect_thread_independent([&, vector = width == 1] {  // clang 14 cannot capture a structured binding
      Dense<TY> out = C;
      if (vector) spmv(alpha, A, B.values(), beta, out.values());
      else spmm(alpha, A, B.view(), beta, out.view());
      return values_of_dense(out);
    });
  }
}

// The half-storage product runs over fixed chunks of rows; mirrored entries that leave
// their chunk are summed in chunk order, whichever thread ran the chunk.
TYPED_TEST(DeterminismProducts, SpmvSymmetric) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  for (const bool arrow : {false, true})
    for (const Triangle uplo : {Triangle::upper, Triangle::lower}) {
      SCOPED_TRACE(::testing::Message() << (arrow ? "arrow, " : "band, ") << (uplo == Triangle::upper ? "upper" : "lower"));
      const CsrMatrix<TA> A = banded_triangle<TA>(this->rng, 50000, {0, 1, 7, 300, 1500}, arrow, uplo);
      ASSERT_GE(static_cast<double>(A.nnz()), 3 * kThreadGrain) << "too little work to run 3 threads";
      if (!arrow) ASSERT_GE(detail::symmetric_chunks(A.rows(), A.row_ptr(), A.col_indices(), uplo).chunks(), 3);
      const Dense<TA> x = random_dense<TA>(this->rng, A.rows(), 1);
      const Dense<TY> y = random_dense<TY>(this->rng, A.rows(), 1);
      expect_thread_independent([&] {
        Dense<TY> out = y;
        spmv_symmetric(kAlpha<TA>, A, uplo, x.values(), kBeta<TA>, out.values());
        return values_of_dense(out);
      });
    }
}

// The BSR half storage runs over fixed chunks of block rows, like the CSR one.
TYPED_TEST(DeterminismProducts, BsrSpmvSymmetric) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  for (const index_t b : {3, 8})
    for (const Triangle uplo : {Triangle::upper, Triangle::lower}) {
      SCOPED_TRACE(::testing::Message() << "b = " << b << (uplo == Triangle::upper ? ", upper" : ", lower"));
      const BsrMatrix<TA> A = to_bsr(banded_triangle<TA>(this->rng, 30001, {0, 1, 5, 100, 700}, false, uplo), b);
      ASSERT_GE(static_cast<double>(A.blocks().size()), 3 * kThreadGrain) << "too little work to run 3 threads";
      const Dense<TA> x = random_dense<TA>(this->rng, A.rows(), 1);
      const Dense<TY> y = random_dense<TY>(this->rng, A.rows(), 1);
      expect_thread_independent([&] {
        Dense<TY> out = y;
        spmv_symmetric(kAlpha<TA>, A, uplo, x.values(), kBeta<TA>, out.values());
        return values_of_dense(out);
      });
    }
}

// Several application threads running products at once (each with its own OpenMP team,
// workspace and plan lookups) get the results of a lone caller.
TYPED_TEST(DeterminismProducts, ConcurrentCallersGetTheSerialResults) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const auto alpha = kAlpha<TA>;
  const auto beta = kBeta<TA>;
  const RuntimeGuard guard;
  set_num_threads(2);
  const BsrMatrix<TA> A = random_bsr<TA>(this->rng, 128, 120, 8, {0.5, 0.1, true, 0.1});
  ASSERT_GE(block_work(A.structure(), 64), 2 * kThreadGrain) << "too little work to run 2 threads";
  const Dense<TA> B = random_dense<TA>(this->rng, 120, 64);
  const Dense<TA> Bt = random_dense<TA>(this->rng, 128, 64);
  const Dense<TY> C = random_dense<TY>(this->rng, 128, 64);
  const Dense<TY> Ct = random_dense<TY>(this->rng, 120, 64);
  Dense<TY> want = C, want_t = Ct;
  spmm(alpha, A, B.view(), beta, want.view());
  spmm_transposed(alpha, A, Bt.view(), beta, want_t.view());
  constexpr int callers = 3, calls = 4;
  std::vector<int> mismatches(callers, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < calls; ++i) {
        Dense<TY> got = C, got_t = Ct;
        spmm(alpha, A, B.view(), beta, got.view());
        spmm_transposed(alpha, A, Bt.view(), beta, got_t.view());
        mismatches[static_cast<std::size_t>(t)] += !same_bytes(got, want) + !same_bytes(got_t, want_t);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < callers; ++t) EXPECT_EQ(mismatches[static_cast<std::size_t>(t)], 0) << "caller " << t;
}

// ---- sampled products -----------------------------------------------------------------------

template <class T>
class DeterminismSampled : public Seeded<> {};
TYPED_TEST_SUITE(DeterminismSampled, ValueTypes, TypeNames);

TYPED_TEST(DeterminismSampled, BsrAndCsr) {
  using T = TypeParam;
  const auto alpha = static_cast<acc_t<T>>(0.75);
  const auto beta = static_cast<acc_t<T>>(2.0);
  for (const DeterminismCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const BsrMatrix<T> initial = random_bsr<T>(this->rng, c.rows, c.cols, c.b, c.pattern);
    ASSERT_GE(block_work(initial.structure(), c.width), 3 * kThreadGrain) << "too little work to run 3 threads";
    const Dense<T> X = random_dense<T>(this->rng, c.rows, c.width);
    const Dense<T> Y = random_dense<T>(this->rng, c.cols, c.width);
    {
      SCOPED_TRACE("bsr");
      expect_thread_independent([&] {
        BsrMatrix<T> out = initial;
        sampled_matmul(alpha, X.view(), Y.view(), beta, out);
        return std::vector<T>(out.blocks().begin(), out.blocks().end());
      });
    }
    {
      SCOPED_TRACE("csr");
      const CsrMatrix<T> csr = csr_from_dense<T>(dense_of(initial));
      ASSERT_GE(static_cast<double>(csr.nnz() * c.width), 3 * kThreadGrain) << "too little work to run 3 threads";
      expect_thread_independent([&] {
        CsrMatrix<T> out = csr;
        sampled_matmul(alpha, X.view(), Y.view(), beta, out);
        return std::vector<T>(out.values().begin(), out.values().end());
      });
    }
  }
}

}  // namespace
}  // namespace trnsparse::test
