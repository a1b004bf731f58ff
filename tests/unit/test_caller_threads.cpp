// Several threads of the caller using the library at once, as Python threads do (the
// bindings release the GIL around every product, solve and attention call): the plan
// cache, the per-matrix CSR analyses built on first use, the per-thread workspaces and
// the OpenMP teams each call starts must not race, and every call must return the bits
// it returns alone. `make tsan` runs these under ThreadSanitizer (the suite matches its
// *Thread* filter), which is how the Python entry points are covered there: the Python
// package itself cannot load a TSan-instrumented library.
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "kernel_support.hpp"
#include "support.hpp"
#include "trnsparse/attention.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse::test {
namespace {

constexpr int kCallers = 4;
constexpr int kRounds = 3;

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Runs work(caller) on kCallers threads at once, kRounds times each, and expects every
/// result to equal `alone` (the result of one call with no other caller).
template <class R, class F>
void expect_same_from_every_caller(const R& alone, F&& work) {
  std::vector<std::vector<R>> results(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) results[c].push_back(work(c));
    });
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c)
    for (int r = 0; r < kRounds; ++r) EXPECT_TRUE(same(results[c][r], alone)) << "caller " << c << ", round " << r;
}

class CallerThreads : public Seeded<> {
protected:
  void SetUp() override {
    set_num_threads(2);  // each call runs its own OpenMP team beside the other callers'
  }
  void TearDown() override { set_num_threads(threads_); }

private:
  int threads_ = num_threads();
};

TEST_F(CallerThreads, BsrProductsShareOnePlan) {
  clear_plan_cache();
  // A small block size (the small-block kernels) and a large one (the packed tiling).
  for (const index_t b : {3, 32}) {
    SCOPED_TRACE(::testing::Message() << "block size " << b);
    const BsrMatrix<float> A = random_bsr<float>(rng, 200, 190, b);
    const Dense<float> B = random_dense<float>(rng, 190, 9);
    const auto product = [&] {
      Dense<float> C(200, 9);
      spmm(1.0f, A, B.view(), 0.0f, C.view());
      std::vector<float> y(200), yt(190);
      spmv(1.0f, A, std::span<const float>(B.values().data(), 190), 0.0f, std::span(y));
      spmv(1.0f, transpose(A), std::span<const float>(B.values().data(), 200), 0.0f, std::span(yt));
      std::vector<float> out(C.values().begin(), C.values().end());
      out.insert(out.end(), y.begin(), y.end());
      out.insert(out.end(), yt.begin(), yt.end());
      return out;
    };
    const std::vector<float> alone = product();
    clear_plan_cache();  // every caller finds the cache empty and plans at once
    expect_same_from_every_caller(alone, [&](int) { return product(); });
  }
}

TEST_F(CallerThreads, CsrAnalysesBuiltOnceUnderConcurrentFirstUse) {
  const CsrMatrix<double> A = poisson3d<double>(12);
  const std::vector<double> x(static_cast<std::size_t>(A.cols()), 0.5);
  const auto product = [](const CsrMatrix<double>& M, const CsrMatrix<double>& U, std::span<const double> v) {
    std::vector<double> y(static_cast<std::size_t>(M.rows())), z(y.size());
    spmv(1.0, M, v, 0.0, std::span(y));  // the 32-bit column indices
    Dense<double> Z(M.cols(), 1);
    spmm_transposed(1.0, M, DenseView<const double>(v.data(), M.rows(), 1, 1), 0.0, Z.view());  // the transpose
    spmv_symmetric(1.0, U, Triangle::upper, v, 0.0, std::span(z));  // the symmetric chunks
    y.insert(y.end(), Z.values().begin(), Z.values().end());
    y.insert(y.end(), z.begin(), z.end());
    return y;
  };
  const std::vector<double> alone = product(A, triangle_of(A, Triangle::upper), x);
  // Fresh matrices share nothing built: the callers race to build their analyses first.
  const CsrMatrix<double> fresh = poisson3d<double>(12), fresh_upper = triangle_of(fresh, Triangle::upper);
  expect_same_from_every_caller(alone, [&](int) { return product(fresh, fresh_upper, x); });
}

TEST_F(CallerThreads, SolvesOnOneOperator) {
  const CsrMatrix<double> A = poisson3d<double>(10);
  const LinearOperator<double> op(A);
  const std::vector<double> b(static_cast<std::size_t>(A.rows()), 1.0);
  const auto solve = [&] { return cg(op, std::span<const double>(b), CgOptions<double>{.tol = 1e-10}).x; };
  const std::vector<double> alone = solve();
  expect_same_from_every_caller(alone, [&](int) { return solve(); });
}

TEST_F(CallerThreads, AttentionOnOneMask) {
  const index_t seq = 256, dim = 32, heads = 2;
  const AttentionMask mask = mask::causal(seq, 64);
  const Dense<float> qkv = random_dense<float>(rng, 3 * heads * seq, dim);
  const float* base = qkv.values().data();
  const auto heads_at = [&](int i) { return HeadsView<const float>(base + i * heads * seq * dim, 1, heads, seq, dim); };
  const auto forward = [&] {
    std::vector<float> o(static_cast<std::size_t>(heads * seq * dim));
    attention_forward(mask, heads_at(0), heads_at(1), heads_at(2), HeadsView<float>(o.data(), 1, heads, seq, dim));
    return o;
  };
  const std::vector<float> alone = forward();
  expect_same_from_every_caller(alone, [&](int) { return forward(); });
}

}  // namespace
}  // namespace trnsparse::test
