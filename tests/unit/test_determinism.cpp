// Results never depend on the thread count (runtime.hpp): each output tile has one
// writer and every reduction runs in a fixed order. Every threaded product is run with
// 1, 2 and 3 threads on every supported ISA and the outputs compared byte for byte,
// including shapes with fewer block rows (or block columns, for Aᵀ) than threads and a
// skewed structure whose balanced split cuts next to a heavy block row.
//
// Every OpenMP region costs a wake-up of the worker threads, which on a loaded machine
// is milliseconds: the cases are few and small on purpose.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kernel_support.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {

constexpr int thread_counts[] = {1, 2, 3};

/// Runs `run()` (which returns the output values) with 1, 2 and 3 threads on every ISA
/// and expects the same bytes each time.
template <class F>
void expect_thread_independent(F&& run) {
  const RuntimeGuard guard;
  for_each_isa([&](Isa) {
    std::optional<decltype(run())> first;
    for (const int threads : thread_counts) {
      set_num_threads(threads);
      const auto out = run();
      if (!first) {
        first = out;
        continue;
      }
      ASSERT_EQ(out.size(), first->size());
      EXPECT_EQ(std::memcmp(out.data(), first->data(), out.size() * sizeof(out[0])), 0)
          << "the output with " << threads << " threads differs from the output with 1 thread";
    }
  });
}

struct DeterminismCase {
  std::string name;
  index_t rows;
  index_t cols;
  index_t b;
  index_t width;
  PatternSpec pattern{};
};

std::vector<DeterminismCase> cases() {
  const PatternSpec full{1.0, 0.0, false, 0.0};
  const PatternSpec skewed{0.15, 0.3, true, 0.1};
  return {
      {"one_block_row_5x40_b8", 5, 40, 8, 33, full},       // 1 block row, 5 block columns
      {"one_block_col_40x5_b8", 40, 5, 8, 17, full},       // 5 block rows, 1 block column
      {"two_block_rows_16x24_b8", 16, 24, 8, 2, full},     // 3 threads, 2 block rows
      {"skewed_120x100_b6", 120, 100, 6, 40, skewed},      // a dense block row among sparse
      {"odd_b3_31x29", 31, 29, 3, 19, {}},
  };
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
    {
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
  // Two rows for three threads; one dense row among sparse ones; long rows.
  const MatrixSpec specs[] = {{"two_rows_2x50", 2, 50, 0.5},
                              {"one_dense_row_60x70", 60, 70, 0.05, 31},
                              {"long_rows_3x300", 3, 300, 0.7}};
  for (const MatrixSpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    const CsrMatrix<TA> A = csr_from_dense<TA>(random_dense<TA>(this->rng, spec));
    for (const index_t width : {index_t{1}, index_t{37}, index_t{70}}) {
      SCOPED_TRACE(::testing::Message() << "width " << width);
      const Dense<TA> B = random_dense<TA>(this->rng, spec.cols, width);
      const Dense<TY> C = random_dense<TY>(this->rng, spec.rows, width);
      expect_thread_independent([&] {
        Dense<TY> out = C;
        if (width == 1) spmv(alpha, A, B.values(), beta, out.values());
        else spmm(alpha, A, B.view(), beta, out.view());
        return values_of_dense(out);
      });
    }
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
  const BsrMatrix<TA> A = random_bsr<TA>(this->rng, 45, 38, 4);
  const Dense<TA> B = random_dense<TA>(this->rng, 38, 21);
  const Dense<TA> Bt = random_dense<TA>(this->rng, 45, 21);
  const Dense<TY> C = random_dense<TY>(this->rng, 45, 21);
  const Dense<TY> Ct = random_dense<TY>(this->rng, 38, 21);
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
