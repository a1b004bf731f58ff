// Structure plans (plan.hpp): the balanced row and column splits, the transposed (BSC)
// view, the LRU plan cache and its counters, structure checks, concurrent lookups; and
// the runtime (runtime.hpp): ISA selection, thread count, and their environment variables.
#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernel_support.hpp"
#include "ops/run.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {

// ---- splits -----------------------------------------------------------------------------

/// A structure whose block row i stores `counts[i]` blocks (columns 0 .. counts[i]-1).
std::shared_ptr<const BsrStructure> with_row_counts(const std::vector<index_t>& counts) {
  const index_t block_cols = std::max<index_t>(1, counts.empty() ? 1 : *std::ranges::max_element(counts));
  std::vector<index_t> ptr{0}, idx;
  for (const index_t c : counts) {
    for (index_t j = 0; j < c; ++j) idx.push_back(j);
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  const index_t b = 2;
  return BsrStructure::make(static_cast<index_t>(counts.size()) * b, block_cols * b, b, std::move(ptr),
                            std::move(idx));
}

/// A structure whose block column j stores `counts[j]` blocks (block rows 0 .. counts[j]-1).
std::shared_ptr<const BsrStructure> with_col_counts(const std::vector<index_t>& counts) {
  const index_t block_rows = counts.empty() ? 0 : *std::ranges::max_element(counts);
  std::vector<index_t> ptr{0}, idx;
  for (index_t i = 0; i < block_rows; ++i) {
    for (index_t j = 0; j < static_cast<index_t>(counts.size()); ++j)
      if (i < counts[static_cast<std::size_t>(j)]) idx.push_back(j);
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  const index_t b = 3;
  return BsrStructure::make(block_rows * b, static_cast<index_t>(counts.size()) * b, b, std::move(ptr),
                            std::move(idx));
}

struct CountsCase {
  std::string name;
  std::vector<index_t> counts;
};

void PrintTo(const CountsCase& c, std::ostream* os) { *os << c.name; }

std::vector<CountsCase> skewed_counts() {
  std::vector<index_t> heavy_first(20, 1), heavy_last(20, 1), heavy_middle(21, 0), geometric, uniform(30, 3),
      random(50);
  heavy_first.front() = 40;
  heavy_last.back() = 40;
  heavy_middle[10] = 60;
  for (index_t c = 1; c <= 64; c *= 2) geometric.push_back(c);
  Rng rng(base_seed() ^ fnv1a("skewed_counts"));
  for (index_t& c : random) c = rng.bernoulli(0.1) ? 30 + rng.below(30) : rng.below(4);
  return {{"no_block_rows", {}},
          {"single", {5}},
          {"all_empty", std::vector<index_t>(10, 0)},
          {"heavy_first", heavy_first},
          {"heavy_last", heavy_last},
          {"heavy_middle", heavy_middle},
          {"geometric", geometric},
          {"uniform", uniform},
          {"random_skewed", random}};
}

/// `split` covers [0, n) with parts contiguous monotone ranges, and each part costs at
/// most the ideal share plus one row: with cost(i) = counts[i] + 1 (stored blocks plus the
/// row's own output work), part t costs <= ceil(total / parts) + max cost of its rows
/// (the split cuts at the first boundary reaching each target, so it overshoots a target
/// by less than the last row it takes).
::testing::AssertionResult balanced(std::span<const index_t> split, const std::vector<index_t>& counts, int parts) {
  const auto n = static_cast<index_t>(counts.size());
  if (static_cast<int>(split.size()) != parts + 1)
    return ::testing::AssertionFailure() << "split has " << split.size() << " entries for " << parts << " parts";
  if (split.front() != 0 || split.back() != n)
    return ::testing::AssertionFailure() << "split covers [" << split.front() << ", " << split.back() << "), not [0, "
                                         << n << ")";
  if (!std::ranges::is_sorted(split)) return ::testing::AssertionFailure() << "split is not monotone";
  index_t total = 0;
  for (const index_t c : counts) total += c + 1;
  const index_t ideal = (total + parts - 1) / parts;
  for (int t = 0; t < parts; ++t) {
    index_t cost = 0, heaviest = 0;
    for (index_t i = split[t]; i < split[t + 1]; ++i) {
      cost += counts[static_cast<std::size_t>(i)] + 1;
      heaviest = std::max(heaviest, counts[static_cast<std::size_t>(i)] + 1);
    }
    if (cost > ideal + heaviest)
      return ::testing::AssertionFailure() << "part " << t << " [" << split[t] << ", " << split[t + 1] << ") costs "
                                           << cost << " > ideal " << ideal << " + heaviest row " << heaviest;
  }
  return ::testing::AssertionSuccess();
}

class PlanSplit : public ::testing::TestWithParam<CountsCase> {};

TEST_P(PlanSplit, RowSplitCoversAndBalancesBlockRows) {
  const auto& counts = GetParam().counts;
  const BsrPlan p(with_row_counts(counts));
  for (const int parts : {1, 2, 3, 4, 5, 8, 64}) {
    SCOPED_TRACE(::testing::Message() << parts << " parts");
    EXPECT_TRUE(balanced(p.row_split(parts), counts, parts));
    EXPECT_EQ(p.row_split(parts).data(), p.row_split(parts).data()) << "the split is not cached";
  }
}

TEST_P(PlanSplit, ColSplitCoversAndBalancesBlockColumns) {
  const auto& counts = GetParam().counts;
  const BsrPlan p(with_col_counts(counts));
  ASSERT_EQ(p.structure().block_cols(), static_cast<index_t>(counts.size()));
  for (const int parts : {1, 2, 3, 4, 5, 8, 64}) {
    SCOPED_TRACE(::testing::Message() << parts << " parts");
    EXPECT_TRUE(balanced(p.col_split(parts), counts, parts));
  }
}

INSTANTIATE_TEST_SUITE_P(PlanSkewed, PlanSplit, ::testing::ValuesIn(skewed_counts()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(PlanSplitArguments, RejectsFewerThanOnePart) {
  const BsrPlan p(with_row_counts({1, 2}));
  EXPECT_THROW((void)p.row_split(0), InvalidArgument);
  EXPECT_THROW((void)p.col_split(-1), InvalidArgument);
  EXPECT_THROW(BsrPlan(nullptr), InvalidArgument);
  EXPECT_THROW((void)plan(std::shared_ptr<const BsrStructure>()), InvalidArgument);
}

// ---- the transposed view ------------------------------------------------------------------

class PlanTransposed : public Seeded<> {};

// The BSC view equals transpose(A)'s block pattern, and perm points each of its blocks at
// the block of A it transposes.
TEST_F(PlanTransposed, MatchesTransposeAndPermMapsBlocks) {
  struct Case {
    index_t rows, cols, b;
  };
  for (const Case c : {Case{0, 0, 2}, Case{0, 7, 3}, Case{6, 0, 3}, Case{1, 1, 1}, Case{7, 5, 3}, Case{40, 37, 4},
                       Case{33, 70, 8}, Case{65, 9, 2}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " b=" << c.b);
    const BsrMatrix<double> A = random_bsr<double>(rng, c.rows, c.cols, c.b);
    const BsrMatrix<double> At = transpose(A);
    const BsrPlan p(A.structure_ptr());
    const BscView& t = p.transposed();
    EXPECT_EQ(&t, &p.transposed()) << "the view is rebuilt";
    const BsrStructure& s = A.structure();
    EXPECT_THAT(t.col_ptr, ::testing::ElementsAreArray(At.structure().block_row_ptr()));
    EXPECT_THAT(t.row_idx, ::testing::ElementsAreArray(At.structure().block_col_indices()));
    ASSERT_EQ(t.perm.size(), static_cast<std::size_t>(s.n_blocks()));
    std::vector<index_t> sorted = t.perm;
    std::ranges::sort(sorted);
    std::vector<index_t> iota(sorted.size());
    std::iota(iota.begin(), iota.end(), index_t{0});
    EXPECT_EQ(sorted, iota) << "perm is not a permutation of the stored blocks";
    const index_t b = c.b;
    for (index_t j = 0; j + 1 < static_cast<index_t>(t.col_ptr.size()); ++j)
      for (index_t q = t.col_ptr[j]; q < t.col_ptr[j + 1]; ++q) {
        const index_t k = t.perm[q], bi = t.row_idx[q];
        ASSERT_GE(k, s.block_row_ptr()[bi]);
        ASSERT_LT(k, s.block_row_ptr()[bi + 1]) << "perm[" << q << "] is not in block row " << bi;
        EXPECT_EQ(s.block_col_indices()[k], j) << "perm[" << q << "] is not in block column " << j;
        for (index_t r = 0; r < b; ++r)
          for (index_t cc = 0; cc < b; ++cc) ASSERT_EQ(At.block(q)[r * b + cc], A.block(k)[cc * b + r]);
      }
  }
}

TEST_F(PlanTransposed, IsBuiltOnceUnderConcurrentFirstUse) {
  const BsrPlan p(random_structure(rng, 60, 50, 4, {}));
  std::vector<const BscView*> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t) threads.emplace_back([&, t] { seen[t] = &p.transposed(); });
  for (auto& th : threads) th.join();
  for (const BscView* v : seen) EXPECT_EQ(v, seen.front());
  EXPECT_EQ(seen.front()->perm.size(), static_cast<std::size_t>(p.structure().n_blocks()));
}

// ---- the cache ------------------------------------------------------------------------------

/// Starts from an empty cache and restores the capacity (and empties the cache) after.
class PlanCache : public Seeded<> {
protected:
  PlanCache() : capacity_(plan_cache_stats().capacity) { clear_plan_cache(); }
  ~PlanCache() override {
    set_plan_cache_capacity(capacity_);
    clear_plan_cache();
  }

  static std::shared_ptr<const BsrStructure> diagonal(index_t n, index_t b) {
    std::vector<index_t> ptr{0}, idx;
    for (index_t i = 0; i < ceil_div(n, b); ++i) {
      idx.push_back(i);
      ptr.push_back(i + 1);
    }
    return BsrStructure::make(n, n, b, std::move(ptr), std::move(idx));
  }

  static ::testing::AssertionResult stats_are(std::uint64_t hits, std::uint64_t misses, std::size_t size) {
    const PlanCacheStats s = plan_cache_stats();
    if (s.hits == hits && s.misses == misses && s.size == size) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "hits " << s.hits << ", misses " << s.misses << ", size " << s.size
                                         << "; expected " << hits << ", " << misses << ", " << size;
  }

private:
  std::size_t capacity_;
};

TEST_F(PlanCache, CountsHitsAndMissesByStructure) {
  EXPECT_TRUE(stats_are(0, 0, 0));
  EXPECT_EQ(plan_cache_stats().capacity, 64u) << "default capacity";
  const auto s1 = diagonal(8, 2);
  const auto p1 = plan(s1);
  EXPECT_TRUE(stats_are(0, 1, 1));
  EXPECT_EQ(p1->structure_ptr(), s1);
  EXPECT_EQ(plan(s1), p1) << "same structure object";
  EXPECT_TRUE(stats_are(1, 1, 1));
  const auto s1_again = diagonal(8, 2);  // equal, built separately
  ASSERT_NE(s1_again, s1);
  EXPECT_EQ(plan(s1_again), p1) << "equal structure built separately";
  EXPECT_TRUE(stats_are(2, 1, 1));
  EXPECT_NE(plan(diagonal(7, 2)), p1) << "same block pattern, other logical shape";
  EXPECT_NE(plan(BsrStructure::make(8, 7, 2, {0, 1, 2, 3, 4}, {0, 1, 2, 3})), p1) << "other column count";
  EXPECT_NE(plan(diagonal(8, 4)), p1) << "other block size";
  EXPECT_NE(plan(BsrStructure::make(8, 8, 2, {0, 1, 1, 2, 3}, {0, 2, 3})), p1) << "other pattern";
  EXPECT_TRUE(stats_are(2, 5, 5));
  const BsrMatrix<float> A(s1_again);
  EXPECT_EQ(plan(A), p1) << "plan(matrix) looks up its structure";
  EXPECT_TRUE(stats_are(3, 5, 5));
}

// Two structure objects with the same content share one plan, and the second is compared
// with the first in full (every block index: as long as a product from memory) once, not
// on every lookup: the bench's candidates, converted afresh for each width, ran 2x slower.
TEST_F(PlanCache, ComparesAnEqualStructureOnce) {
  const auto s1 = diagonal(12, 3), s2 = diagonal(12, 3);
  const auto p1 = plan(s1);
  EXPECT_EQ(plan_cache_stats().comparisons, 0u);
  EXPECT_EQ(plan(s2), p1);
  EXPECT_EQ(plan_cache_stats().comparisons, 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(plan(s2), p1);
  EXPECT_EQ(plan(s1), p1);
  EXPECT_EQ(plan_cache_stats().comparisons, 1u) << "an equal structure compared again";
  EXPECT_TRUE(stats_are(5, 1, 1));
  // Another object, equal too, at whatever address: compared once itself.
  const auto s3 = diagonal(12, 3);
  EXPECT_EQ(plan(s3), p1);
  EXPECT_EQ(plan(s3), p1);
  EXPECT_EQ(plan_cache_stats().comparisons, 2u);
  // An unequal structure with the same fingerprint cannot be built on purpose; an unequal
  // one with another fingerprint is never compared.
  EXPECT_NE(plan(diagonal(12, 4)), p1);
  EXPECT_EQ(plan_cache_stats().comparisons, 2u);
  // Products of a matrix on a fourth equal object: the lookup compares it once, and the
  // plan's own check of A's structure then knows it.
  const BsrMatrix<float> A(diagonal(12, 3));
  const Dense<float> B = random_dense<float>(rng, 12, 2);
  Dense<float> C(12, 2);
  for (int i = 0; i < 3; ++i) spmm(1.0f, A, B.view(), 0.0f, C.view());
  EXPECT_EQ(plan_cache_stats().comparisons, 3u);
  EXPECT_TRUE(p1->same_structure(A.structure_ptr()));
  EXPECT_FALSE(p1->same_structure(diagonal(12, 4)));
  EXPECT_FALSE(p1->same_structure(nullptr));
}

TEST_F(PlanCache, ProductsReuseTheCachedPlan) {
  const BsrMatrix<float> A = random_bsr<float>(rng, 20, 18, 4);
  const Dense<float> B = random_dense<float>(rng, 18, 3);
  Dense<float> C(20, 3);
  spmm(1.0f, A, B.view(), 0.0f, C.view());
  const PlanCacheStats first = plan_cache_stats();
  EXPECT_EQ(first.size, 1u);
  EXPECT_GE(first.misses, 1u);
  spmm(1.0f, A, B.view(), 0.0f, C.view());
  const PlanCacheStats second = plan_cache_stats();
  EXPECT_EQ(second.misses, first.misses) << "a second product with the same structure missed";
  EXPECT_GT(second.hits, first.hits);
  EXPECT_EQ(second.size, 1u);
}

TEST_F(PlanCache, EvictsTheLeastRecentlyUsed) {
  set_plan_cache_capacity(2);
  const auto s1 = diagonal(4, 1), s2 = diagonal(5, 1), s3 = diagonal(6, 1);
  const auto p1 = plan(s1);
  const auto p2 = plan(s2);
  EXPECT_TRUE(stats_are(0, 2, 2));
  EXPECT_EQ(plan(s1), p1);  // s1 becomes the most recent: s1, s2
  plan(s3);                 // evicts s2: s3, s1
  EXPECT_TRUE(stats_are(1, 3, 2));
  EXPECT_EQ(plan(s1), p1);  // s1, s3
  EXPECT_TRUE(stats_are(2, 3, 2));
  EXPECT_NE(plan(s2), p2) << "s2 should have been evicted";  // evicts s3: s2, s1
  EXPECT_TRUE(stats_are(2, 4, 2));
  plan(s1);  // hit: s1, s2
  plan(s3);  // miss: evicts s2
  EXPECT_TRUE(stats_are(3, 5, 2));
  // Shrinking evicts down to the most recent.
  set_plan_cache_capacity(1);
  EXPECT_EQ(plan_cache_stats().size, 1u);
  EXPECT_EQ(plan_cache_stats().capacity, 1u);
  plan(s3);
  EXPECT_TRUE(stats_are(4, 5, 1)) << "the most recent plan (s3) was not kept";
  // An evicted plan held elsewhere still works.
  EXPECT_EQ(p2->row_split(2).back(), s2->block_rows());
  // Capacity 0 caches nothing, yet plan() still returns a working plan.
  set_plan_cache_capacity(0);
  EXPECT_TRUE(stats_are(4, 5, 0));
  const auto p = plan(s1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->structure_ptr(), s1);
  EXPECT_TRUE(stats_are(4, 6, 0));
}

TEST_F(PlanCache, ClearDropsPlansAndCountersButHeldPlansStayValid) {
  const BsrMatrix<double> A = random_bsr<double>(rng, 12, 10, 3);
  const auto p = plan(A);
  plan(A);
  EXPECT_TRUE(stats_are(1, 1, 1));
  clear_plan_cache();
  EXPECT_TRUE(stats_are(0, 0, 0));
  const Dense<double> B = random_dense<double>(rng, 10, 2);
  Dense<double> C1(12, 2), C2(12, 2);
  p->spmm(1.0, A, B.view(), 0.0, C1.view());
  spmm(1.0, A, B.view(), 0.0, C2.view());
  EXPECT_TRUE(same_bytes(C1, C2));
  EXPECT_NE(plan(A), p) << "a fresh plan after clear";
}

// A plan checks the matrix it is given: a different structure is an error, an equal one
// built separately is fine.
TEST_F(PlanCache, PlanRejectsAMatrixOfAnotherStructure) {
  const auto s = diagonal(6, 2);
  const BsrPlan p(s);
  const BsrMatrix<float> other(diagonal(6, 3));
  const BsrMatrix<float> equal(diagonal(6, 2));
  const Dense<float> B(6, 2);
  Dense<float> C(6, 2);
  EXPECT_THAT([&] { p.spmm(1.0f, other, B.view(), 0.0f, C.view()); }, throws_naming<InvalidArgument>("spmm"));
  EXPECT_THAT([&] { p.spmm_transposed(1.0f, other, B.view(), 0.0f, C.view()); },
              throws_naming<InvalidArgument>("spmm_transposed"));
  EXPECT_NO_THROW(p.spmm(1.0f, equal, B.view(), 0.0f, C.view()));
  EXPECT_NO_THROW(p.spmm_transposed(1.0f, equal, B.view(), 0.0f, C.view()));
}

// Several threads look up a few structures at once: one miss per structure, every other
// lookup a hit, one plan per structure, and splits computed concurrently agree.
TEST_F(PlanCache, ConcurrentLookupsAddUp) {
  const std::vector<std::shared_ptr<const BsrStructure>> structures = {diagonal(10, 2), diagonal(11, 2),
                                                                       random_structure(rng, 40, 40, 4, {})};
  constexpr int n_threads = 4, lookups = 50;
  std::vector<std::vector<std::shared_ptr<const BsrPlan>>> seen(n_threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < lookups; ++i) {
        const auto& s = structures[static_cast<std::size_t>(t + i) % structures.size()];
        seen[static_cast<std::size_t>(t)].push_back(plan(s));
        (void)seen[static_cast<std::size_t>(t)].back()->row_split(1 + (t + i) % 3);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_TRUE(stats_are(n_threads * lookups - structures.size(), structures.size(), structures.size()));
  for (int t = 0; t < n_threads; ++t)
    for (int i = 0; i < lookups; ++i) {
      const auto& s = structures[static_cast<std::size_t>(t + i) % structures.size()];
      EXPECT_EQ(seen[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)], plan(s));
    }
}

// ---- runtime --------------------------------------------------------------------------------

TEST(RuntimeIsa, NamesAndFeatures) {
  EXPECT_EQ(to_string(Isa::scalar), "scalar");
  EXPECT_EQ(to_string(Isa::avx2), "avx2");
  EXPECT_EQ(to_string(Isa::avx512), "avx512");
  EXPECT_EQ(to_string(Isa::avx512_bf16), "avx512_bf16");
  EXPECT_EQ(to_string(Isa::amx), "amx");
  for (const Isa isa : all_isas) EXPECT_EQ(isa_named(to_string(isa)), isa);
  EXPECT_THAT([] { (void)isa_named("AVX2"); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  ::testing::HasSubstr("isa AVX2 is not one of scalar, avx2, avx512, avx512_bf16, amx")));
  const CpuFeatures& f = cpu_features();
  EXPECT_TRUE(isa_supported(Isa::scalar));
  EXPECT_EQ(isa_supported(Isa::avx2), f.avx2_fma);
  EXPECT_EQ(isa_supported(Isa::avx512), f.avx512);
  EXPECT_EQ(isa_supported(Isa::avx512_bf16), f.avx512_bf16);
  EXPECT_EQ(isa_supported(Isa::amx), f.amx);
  EXPECT_TRUE(!f.avx512 || f.avx2_fma) << "AVX-512 without AVX2";
  EXPECT_TRUE(!f.avx512_bf16 || f.avx512) << "AVX512-BF16 without AVX-512";
  EXPECT_TRUE(!f.amx || f.avx512_bf16) << "AMX without AVX512-BF16";
  EXPECT_TRUE(isa_supported(active_isa()));
}

TEST(RuntimeIsa, SetIsaSelectsEverySupportedIsa) {
  const RuntimeGuard guard;
  for (const Isa isa : supported_isas()) {
    set_isa(isa);
    EXPECT_EQ(active_isa(), isa);
  }
}

TEST(RuntimeIsa, SetIsaRejectsAnUnsupportedIsa) {
  std::optional<Isa> unsupported;
  for (const Isa isa : all_isas)
    if (!isa_supported(isa)) unsupported = isa;
  if (!unsupported) GTEST_SKIP() << "this CPU supports every ISA (scalar, avx2, avx512): none to reject";
  const RuntimeGuard guard;
  const Isa before = active_isa();
  EXPECT_THAT([&] { set_isa(*unsupported); }, throws_naming<NotSupported>("set_isa", to_string(*unsupported)));
  EXPECT_EQ(active_isa(), before);
}

TEST(RuntimeThreads, SetNumThreads) {
  const RuntimeGuard guard;
  EXPECT_GE(num_threads(), 1);
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  EXPECT_THAT([] { set_num_threads(0); }, throws_naming<InvalidArgument>("set_num_threads", "0"));
  EXPECT_THROW(set_num_threads(-2), InvalidArgument);
  EXPECT_EQ(num_threads(), 3) << "a rejected count changed the setting";
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
}

// The environment is read once, on first use, so each case runs in a fresh process: a
// "threadsafe" death test re-executes this binary and runs the statement there.
class RuntimeEnvironmentDeathTest : public ::testing::Test {
protected:
  RuntimeEnvironmentDeathTest() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  /// Sets (or, with nullptr, unsets) an environment variable until the test ends.
  void set_env(const char* name, const char* value) { env_.set(name, value); }

private:
  EnvGuard env_;
};

/// Exits 0 when `check()` holds, 1 otherwise (and 2 on any exception).
template <class F>
[[noreturn]] void exit_with(F&& check) {
  try {
    std::exit(check() ? 0 : 1);
  } catch (...) {
    std::exit(2);
  }
}

TEST_F(RuntimeEnvironmentDeathTest, IsaComesFromTrnsparseIsa) {
  for (const Isa isa : supported_isas()) {
    SCOPED_TRACE(to_string(isa));
    const std::string name(to_string(isa));
    set_env("TRNSPARSE_ISA", name.c_str());
    EXPECT_EXIT(exit_with([&] { return active_isa() == isa; }), ::testing::ExitedWithCode(0), "");
  }
  const Isa best = isa_supported(Isa::amx)           ? Isa::amx
                   : isa_supported(Isa::avx512_bf16) ? Isa::avx512_bf16
                   : isa_supported(Isa::avx512)    ? Isa::avx512
                   : isa_supported(Isa::avx2)      ? Isa::avx2
                                                   : Isa::scalar;
  set_env("TRNSPARSE_ISA", nullptr);
  EXPECT_EXIT(exit_with([&] { return active_isa() == best; }), ::testing::ExitedWithCode(0), "")
      << "without TRNSPARSE_ISA the best supported ISA is active";
}

TEST_F(RuntimeEnvironmentDeathTest, UnknownOrUnsupportedIsaIsNotSupported) {
  std::vector<std::string> rejected{"AVX2"};  // names are lower case
  for (const Isa isa : all_isas)
    if (!isa_supported(isa)) rejected.emplace_back(to_string(isa));
  for (const std::string& name : rejected) {
    SCOPED_TRACE(name);
    set_env("TRNSPARSE_ISA", name.c_str());
    EXPECT_EXIT(exit_with([] {
                  try {
                    (void)active_isa();
                  } catch (const NotSupported&) {
                    return true;
                  }
                  return false;
                }),
                ::testing::ExitedWithCode(0), "");
  }
}

TEST_F(RuntimeEnvironmentDeathTest, ThreadsComeFromTrnsparseNumThreads) {
  set_env("TRNSPARSE_NUM_THREADS", "3");
  EXPECT_EXIT(exit_with([] { return num_threads() == 3; }), ::testing::ExitedWithCode(0), "");
  for (const char* bad : {"0", "2x"}) {
    SCOPED_TRACE(bad);
    set_env("TRNSPARSE_NUM_THREADS", bad);
    EXPECT_EXIT(exit_with([] {
                  try {
                    (void)num_threads();
                  } catch (const InvalidArgument&) {
                    return true;
                  }
                  return false;
                }),
                ::testing::ExitedWithCode(0), "");
  }
}

}  // namespace
}  // namespace trnsparse::test
