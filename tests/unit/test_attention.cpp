// Block-sparse attention: forward and backward (fp32, bf16 and double operands) against a
// float64 dense masked-softmax reference (and central finite differences), the CPU
// kernels against the scalar reference kernels on every ISA (bf16 on AVX512-BF16: the
// vdpbf16ps kernels, and the widening AVX-512 ones directly), bitwise determinism across
// thread counts, and argument validation. The masks are tested in test_attention_mask.cpp.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "kernels/cpu/tables.hpp"
#include "kernels/reference/attention.hpp"
#include "kernel_support.hpp"
#include "support.hpp"
#include "trnsparse/attention.hpp"


namespace trnsparse::test {
namespace {

using AttentionRandom = Seeded<>;

// ---- the float64 dense reference -------------------------------------------------------

/// (heads, rows, d) tensors as doubles.
struct Heads64 {
  index_t heads, rows, d;
  std::vector<double> v;
  double& at(index_t h, index_t i, index_t c) { return v[static_cast<std::size_t>((h * rows + i) * d + c)]; }
  double at(index_t h, index_t i, index_t c) const { return v[static_cast<std::size_t>((h * rows + i) * d + c)]; }
};

struct Dense64 {
  Heads64 O;
  std::vector<double> lse;
  Heads64 dQ, dK, dV;
};

/// softmax(Q Kᵀ scale + mask) V in float64, its lse, and (for dO) the gradients.
Dense64 dense_attention(const AttentionMask& m, const Heads64& Q, const Heads64& K, const Heads64& V, double scale,
                        const Heads64* dO) {
  const index_t H = Q.heads, nq = Q.rows, nk = K.rows, d = Q.d;
  Dense64 r{{H, nq, d, std::vector<double>(static_cast<std::size_t>(H * nq * d))},
            std::vector<double>(static_cast<std::size_t>(H * nq)),
            {H, nq, d, std::vector<double>(static_cast<std::size_t>(H * nq * d))},
            {H, nk, d, std::vector<double>(static_cast<std::size_t>(H * nk * d))},
            {H, nk, d, std::vector<double>(static_cast<std::size_t>(H * nk * d))}};
  std::vector<double> s(static_cast<std::size_t>(nk)), p(static_cast<std::size_t>(nk));
  for (index_t h = 0; h < H; ++h)
    for (index_t i = 0; i < nq; ++i) {
      double mx = -INFINITY;
      for (index_t j = 0; j < nk; ++j) {
        double acc = 0;
        for (index_t c = 0; c < d; ++c) acc += Q.at(h, i, c) * K.at(h, j, c);
        s[j] = m.allows(i, j) ? acc * scale : -INFINITY;
        mx = std::max(mx, s[j]);
      }
      if (mx == -INFINITY) continue;  // no allowed key: O = 0, lse = 0, no gradient
      double l = 0;
      for (index_t j = 0; j < nk; ++j) l += std::exp(s[j] - mx);
      r.lse[static_cast<std::size_t>(h * nq + i)] = mx + std::log(l);
      for (index_t j = 0; j < nk; ++j) p[j] = std::exp(s[j] - mx) / l;
      for (index_t c = 0; c < d; ++c) {
        double acc = 0;
        for (index_t j = 0; j < nk; ++j) acc += p[j] * V.at(h, j, c);
        r.O.at(h, i, c) = acc;
      }
      if (dO == nullptr) continue;
      double D = 0;
      for (index_t c = 0; c < d; ++c) D += dO->at(h, i, c) * r.O.at(h, i, c);
      for (index_t j = 0; j < nk; ++j) {
        if (p[j] == 0) continue;
        double dp = 0;
        for (index_t c = 0; c < d; ++c) dp += dO->at(h, i, c) * V.at(h, j, c);
        const double ds = p[j] * (dp - D);
        for (index_t c = 0; c < d; ++c) {
          r.dQ.at(h, i, c) += scale * ds * K.at(h, j, c);
          r.dK.at(h, j, c) += scale * ds * Q.at(h, i, c);
          r.dV.at(h, j, c) += p[j] * dO->at(h, i, c);
        }
      }
    }
  return r;
}

// ---- problems ---------------------------------------------------------------------------

/// An operand value as a double (bf16 through float).
template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, bf16>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}

/// A double rounded to T (to float first for bf16, as the fp32 data of the tests).
template <class T>
T of_double(double v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return T(static_cast<float>(v));
}

template <class T>
struct Problem {
  index_t batch, heads, nq, nk, d;
  std::vector<T> Q, K, V, dO, O, dQ, dK, dV;
  std::vector<acc_t<T>> lse;

  HeadsView<const T> view(const std::vector<T>& x, index_t rows) const { return {x.data(), batch, heads, rows, d}; }
  HeadsView<T> view(std::vector<T>& x, index_t rows) { return {x.data(), batch, heads, rows, d}; }
  Heads64 wide(const std::vector<T>& x, index_t rows) const {
    Heads64 w{batch * heads, rows, d, {}};
    for (const T& v : x) w.v.push_back(as_double(v));
    return w;
  }
  void forward(const AttentionMask& m, acc_t<T> scale = 0) {
    attention_forward<T>(m, view(Q, nq), view(K, nk), view(V, nk), view(O, nq), lse, scale);
  }
  void backward(const AttentionMask& m, acc_t<T> scale = 0) {
    attention_backward<T>(m, view(Q, nq), view(K, nk), view(V, nk), view(O, nq), view(dO, nq), lse, view(dQ, nq),
                          view(dK, nk), view(dV, nk), scale);
  }
};

template <class T>
Problem<T> make_problem(Rng& rng, index_t batch, index_t heads, index_t nq, index_t nk, index_t d, double spread) {
  Problem<T> p{batch, heads, nq, nk, d, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  auto fill = [&](std::vector<T>& x, index_t rows, double amp) {
    x.resize(static_cast<std::size_t>(batch * heads * rows * d));
    for (T& v : x) v = of_double<T>(rng.uniform(-amp, amp));
  };
  fill(p.Q, nq, spread);
  fill(p.K, nk, spread);
  fill(p.V, nk, 1.0);
  fill(p.dO, nq, 1.0);
  p.O.assign(p.Q.size(), of_double<T>(0));
  p.dQ.assign(p.Q.size(), of_double<T>(0));
  p.dK.assign(p.K.size(), of_double<T>(0));
  p.dV.assign(p.K.size(), of_double<T>(0));
  p.lse.assign(static_cast<std::size_t>(batch * heads * nq), NAN);
  return p;
}

/// max |got - want| <= tol * max(1, max |want|).
template <class T>
void expect_close(const std::vector<T>& got, const Heads64& want, double tol, const char* what) {
  double scale = 1, worst = 0;
  for (double w : want.v) scale = std::max(scale, std::fabs(w));
  for (std::size_t t = 0; t < got.size(); ++t) {
    const double g = as_double(got[t]);
    ASSERT_TRUE(std::isfinite(g)) << what << "[" << t << "]";
    worst = std::max(worst, std::fabs(g - want.v[t]));
  }
  EXPECT_LE(worst, tol * scale) << what;
}

/// Tolerance of the forward output O in T, relative to max(1, max |want|): fp32 (fp64)
/// accumulation error over the d- and key-long sums (a few hundred terms at most here).
/// bf16 (u = 2^-8, rounding to nearest errs by at most u/2; the reference sees the same
/// bf16 inputs, widened exactly): S = Q Kᵀ is exact bf16 products summed in fp32, so the
/// rounding that counts is P's to bf16 before P V (the vdpbf16ps kernels; l keeps fp32 P)
/// and O's own. O_i = Σ_j P_ij (1 + δ_ij) V_j / l_i with |δ| <= u/2 is off by at most
/// (u/2) Σ_j P_ij |V_j| / l_i <= (u/2) max |V|, whatever the number of keys (a convex
/// combination), and |V| <= 1 here; with O's rounding, u · (1 + the fp32 terms, ~1e-2
/// of u); 2u leaves a factor 2. (Kernel against reference kernel: both round O, 1.5u.)
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  return std::is_same_v<T, bf16> ? 2 * unit_roundoff<bf16> : 1e-4;
}

/// Tolerance of the gradients, relative to max(1, max |want|), for sums of at most
/// `terms` products (the longer of queries and keys bounds both kinds of sum): four times
/// O's for fp32 and fp64. bf16: each gradient entry sums terms x_k y_k of which one factor
/// was rounded to bf16 (P in dV = Σ P dO, dS in dQ = scale Σ dS K and dK = scale Σ dSᵀ Q),
/// so it errs by at most (u/2) Σ_k |x_k y_k|. For the tests' independent random signs,
/// Σ_k |x_k y_k| is about sqrt(terms) times the largest |Σ_k x_k y_k|, a bound of
/// (u/2) sqrt(terms) relative to the output (the errors themselves partly cancel: about u
/// is seen). dS also carries D = rowsum(dO ∘ O) computed from the bf16 O (|ΔO| <= u
/// above, scale · ΔD · Σ_j P_ij K_j: about u), and the output is rounded (u/2), so
/// u (sqrt(terms) / 2 + 2).
template <class T>
double gradient_tolerance(index_t terms) {
  if constexpr (std::is_same_v<T, bf16>)
    return unit_roundoff<bf16> * (std::sqrt(static_cast<double>(terms)) / 2 + 2);
  else
    return 4 * tolerance<T>();
}

/// Tolerance of the row statistics (lse), relative to 1 + |lse|.
template <class T>
double lse_tolerance() {
  return std::is_same_v<T, double> ? 1e-13 : 1e-5;
}

template <class T>
void check_against_dense(Problem<T>& p, const AttentionMask& m, acc_t<T> scale, bool backward) {
  const double s = scale == 0 ? 1 / std::sqrt(static_cast<double>(static_cast<float>(p.d))) : scale;
  const Heads64 dO = p.wide(p.dO, p.nq);
  const Dense64 ref = dense_attention(m, p.wide(p.Q, p.nq), p.wide(p.K, p.nk), p.wide(p.V, p.nk), s, &dO);
  p.forward(m, scale);
  expect_close(p.O, ref.O, tolerance<T>(), "O");
  for (std::size_t t = 0; t < p.lse.size(); ++t)
    ASSERT_NEAR(p.lse[t], ref.lse[t], lse_tolerance<T>() * (1 + std::fabs(ref.lse[t])));
  if (!backward) return;
  p.backward(m, scale);
  const double tol = gradient_tolerance<T>(std::max(p.nq, p.nk));
  expect_close(p.dQ, ref.dQ, tol, "dQ");
  expect_close(p.dK, ref.dK, tol, "dK");
  expect_close(p.dV, ref.dV, tol, "dV");
}

struct NamedMask {
  std::string name;
  AttentionMask mask;
};

std::vector<NamedMask> all_masks(index_t seq, index_t b) {
  const std::vector<index_t> lengths{seq / 3, 0, seq / 4, seq - seq / 3 - seq / 4};
  return {{"local", mask::local_window(seq, b, 1)},
          {"dilated", mask::dilated(seq, b, 2)},
          {"global", mask::global_tokens(seq, b, 1, 1)},
          {"causal", mask::causal(seq, b)},
          {"document", mask::document(lengths, b)},
          {"document_causal", mask::document(lengths, b, true)},
          {"causal_or_global", mask::unite(mask::causal(seq, b), mask::global_tokens(seq, b, 0, 1))},
          {"causal_and_local", mask::intersect(mask::causal(seq, b), mask::local_window(seq, b, 1))}};
}

template <class T>
class AttentionTyped : public Seeded<> {};
using AttentionTypes = ::testing::Types<float, bf16, double>;
TYPED_TEST_SUITE(AttentionTyped, AttentionTypes);

TYPED_TEST(AttentionTyped, EveryMaskAgainstDenseFloat64) {
  using T = TypeParam;
  const index_t seq = 45, b = 8;  // 45 is not a multiple of the block
  for (const auto& [name, m] : all_masks(seq, b))
    for (index_t d : {32, 64, 100, 128, 256}) {
      SCOPED_TRACE(name + ", d = " + std::to_string(d));
      auto p = make_problem<T>(this->rng, 1, 2, seq, seq, d, 2.0);
      check_against_dense(p, m, 0, true);
    }
}

/// Odd block sizes and head dimensions: the bf16 pair kernels pad keys, queries and d to
/// even with zeros (a block of b keys holds ceil(b / 2) pairs).
TYPED_TEST(AttentionTyped, OddBlockSizeAndHeadDim) {
  using T = TypeParam;
  const index_t seq = 23;
  for (index_t b : {1, 5, 7})
    for (const auto& [name, m] : all_masks(seq, b))
      for (index_t d : {3, 33}) {
        SCOPED_TRACE(name + ", b = " + std::to_string(b) + ", d = " + std::to_string(d));
        auto p = make_problem<T>(this->rng, 1, 1, seq, seq, d, 1.5);
        check_against_dense(p, m, 0, true);
      }
}

TYPED_TEST(AttentionTyped, HeadDimsAndBatchedHeads) {
  using T = TypeParam;
  const auto m = mask::causal(21, 16);  // one full block and two partial diagonal blocks
  for (index_t d : {1, 32, 64, 100, 128, 256, 512}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    auto p = make_problem<T>(this->rng, 2, 3, 21, 21, d, 1.0);
    check_against_dense(p, m, 0, d <= 128);
  }
}

TYPED_TEST(AttentionTyped, BlockOf128WithRaggedSequence) {
  using T = TypeParam;
  const index_t seq = 300;
  for (const auto& m : {mask::causal(seq, 128), mask::local_window(seq, 128, 1), mask::dilated(seq, 128, 2)}) {
    auto p = make_problem<T>(this->rng, 1, 1, seq, seq, 64, 1.5);
    check_against_dense(p, m, 0.3f, true);
  }
}

TYPED_TEST(AttentionTyped, CrossAttentionDenseViews) {
  using T = TypeParam;
  const index_t nq = 19, nk = 33, d = 20, b = 8;
  std::vector<std::uint8_t> grid(3 * 5);
  for (auto& g : grid) g = this->rng.bernoulli(0.6) ? 1 : 0;
  const auto m = mask::from_block_mask(nq, nk, b, grid);
  auto p = make_problem<T>(this->rng, 1, 1, nq, nk, d, 1.0);
  const Heads64 dO = p.wide(p.dO, nq);
  const Dense64 ref = dense_attention(m, p.wide(p.Q, nq), p.wide(p.K, nk), p.wide(p.V, nk), 0.25, &dO);
  // Row-major views with a leading dimension larger than d.
  const index_t ld = d + 3;
  auto padded = [&](const std::vector<T>& x, index_t rows) {
    std::vector<T> y(static_cast<std::size_t>(rows * ld), T(7.0f));
    for (index_t i = 0; i < rows; ++i)
      std::copy_n(x.begin() + i * d, d, y.begin() + i * ld);
    return y;
  };
  auto unpad = [&](const std::vector<T>& y, index_t rows) {
    std::vector<T> x;
    for (index_t i = 0; i < rows; ++i) x.insert(x.end(), y.begin() + i * ld, y.begin() + i * ld + d);
    return x;
  };
  const auto Q = padded(p.Q, nq), K = padded(p.K, nk), V = padded(p.V, nk), dOp = padded(p.dO, nq);
  std::vector<T> O(Q.size(), T(7.0f)), dQ(Q.size(), T(7.0f)), dK(K.size(), T(7.0f)), dV(K.size(), T(7.0f));
  std::vector<acc_t<T>> lse(nq);
  auto cv = [&](const std::vector<T>& x, index_t rows) { return DenseView<const T>(x.data(), rows, d, ld); };
  auto mv = [&](std::vector<T>& x, index_t rows) { return DenseView<T>(x.data(), rows, d, ld); };
  attention_forward<T>(m, cv(Q, nq), cv(K, nk), cv(V, nk), mv(O, nq), lse, 0.25f);
  attention_backward<T>(m, cv(Q, nq), cv(K, nk), cv(V, nk), cv(O, nq), cv(dOp, nq), lse, mv(dQ, nq), mv(dK, nk),
                        mv(dV, nk), 0.25f);
  expect_close(unpad(O, nq), ref.O, tolerance<T>(), "O");
  expect_close(unpad(dQ, nq), ref.dQ, gradient_tolerance<T>(nk), "dQ");
  expect_close(unpad(dK, nk), ref.dK, gradient_tolerance<T>(nk), "dK");
  expect_close(unpad(dV, nk), ref.dV, gradient_tolerance<T>(nk), "dV");
  for (index_t i = 0; i < nq; ++i) {  // columns beyond d untouched
    EXPECT_EQ(as_double(O[i * ld + d]), 7.0);
    EXPECT_EQ(as_double(dQ[i * ld + d + 2]), 7.0);
  }
  for (index_t j = 0; j < nk; ++j) EXPECT_EQ(as_double(dK[j * ld + d]) + as_double(dV[j * ld + d]), 14.0);
}

TYPED_TEST(AttentionTyped, FullyMaskedRowsGiveZerosAndFiniteStatistics) {
  using T = TypeParam;
  // Block row 1 of 3 stores nothing; in block (0, 0) rows 2 and 5 allow no key.
  const index_t seq = 20, b = 8;
  const auto s = BsrStructure::make(seq, seq, b, {0, 2, 2, 3}, {0, 2, 1});
  std::vector<std::uint8_t> elems(3 * b * b, 1);
  for (index_t blk : {0, 1})  // blocks (0, 0) and (0, 2): all of block row 0
    for (index_t c = 0; c < b; ++c) elems[blk * b * b + 2 * b + c] = elems[blk * b * b + 5 * b + c] = 0;
  const AttentionMask m(s, elems);
  auto p = make_problem<T>(this->rng, 1, 2, seq, seq, 16, 1.0);
  for (T& v : p.O) v = of_double<T>(NAN);
  check_against_dense(p, m, 0, true);
  for (index_t h = 0; h < 2; ++h)
    for (index_t i : {2, 5, 8, 12, 15}) {
      EXPECT_EQ(p.lse[h * seq + i], 0.0f);
      for (index_t c = 0; c < 16; ++c) {
        EXPECT_EQ(as_double(p.O[(h * seq + i) * 16 + c]), 0.0);
        EXPECT_EQ(as_double(p.dQ[(h * seq + i) * 16 + c]), 0.0);
      }
    }
}

TYPED_TEST(AttentionTyped, BitwiseEqualForOneTwoThreeThreads) {
  using T = TypeParam;
  const auto m = mask::unite(mask::causal(100, 16), mask::global_tokens(100, 16, 1, 1));
  auto base = make_problem<T>(this->rng, 2, 3, 100, 100, 40, 1.0);
  std::vector<Problem<T>> runs;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    Problem<T> p = base;
    p.forward(m);
    p.backward(m);
    runs.push_back(std::move(p));
  }
  set_num_threads(1);
  for (std::size_t r = 1; r < runs.size(); ++r) {
    auto bits = [](const auto& x) { return std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(x.data()), reinterpret_cast<const std::uint8_t*>(x.data() + x.size())); };
    EXPECT_EQ(bits(runs[r].O), bits(runs[0].O));
    EXPECT_EQ(bits(runs[r].lse), bits(runs[0].lse));
    EXPECT_EQ(bits(runs[r].dQ), bits(runs[0].dQ));
    EXPECT_EQ(bits(runs[r].dK), bits(runs[0].dK));
    EXPECT_EQ(bits(runs[r].dV), bits(runs[0].dV));
  }
}

/// The CPU kernels of every supported ISA against the scalar reference kernels (for
/// double, which runs the reference kernels on every ISA: the dispatch through the API).
/// For bf16 on a CPU with AVX512-BF16, the avx512 entry runs the vdpbf16ps kernels, and
/// the widening AVX-512 kernels, which dispatch passes over there, run from their table.
/// The kernels of every ISA against the reference kernels on one problem: `mk` (slices
/// 1 or batch / heads), query heads `heads` over `kv_heads` key/value heads, the score
/// modifiers `slopes` (one per query head, or none) and `softcap`.
template <class T>
void expect_kernels_match_reference(Rng& rng, const AttentionMask& mk, index_t batch, index_t heads,
                                    index_t kv_heads, std::vector<acc_t<T>> slopes, acc_t<T> softcap) {
  const Isa before = active_isa();
  const index_t n = mk.queries(), d = 36;
  auto p = make_problem<T>(rng, batch, heads, n, n, d, 2.0);
  p.K.resize(static_cast<std::size_t>(batch * kv_heads * n * d));
  p.V.resize(p.K.size());
  p.dK.resize(p.K.size());
  p.dV.resize(p.K.size());
  const BsrStructure& s = mk.structure();
  const auto& bsc = plan(mk.structure_ptr())->transposed();
  // Forward and backward of x with the kernels of `table`, all units on this thread.
  auto run = [&](const kernels::AttentionKernels<T>& table, Problem<T>& x) {
    kernels::AttentionProblem<T> k{};
    k.b = s.block_size();
    k.queries = k.keys = n;
    k.block_rows = k.block_cols = mk.block_rows();
    k.dim = d;
    k.batch = batch;
    k.heads = heads;
    k.kv_group = heads / kv_heads;
    k.mask_batch = mk.batch();
    k.mask_heads = mk.heads();
    k.ptr = s.block_row_ptr().data();
    k.idx = s.block_col_indices().data();
    k.col_ptr = bsc.col_ptr.data();
    k.row_idx = bsc.row_idx.data();
    k.perm = bsc.perm.data();
    k.partial = mk.partial_index().data();
    k.masks = mk.partial_masks().data();
    k.scale = acc_t<T>(1) / std::sqrt(acc_t<T>(d));
    k.alibi = slopes.empty() ? nullptr : slopes.data();
    k.softcap = softcap;
    const index_t q_head = n * d, kv_head = n * d;
    k.Q = {x.Q.data(), d, heads * q_head, q_head};
    k.K = {x.K.data(), d, kv_heads * kv_head, kv_head};
    k.V = {x.V.data(), d, kv_heads * kv_head, kv_head};
    k.O = {x.O.data(), d, heads * q_head, q_head};
    k.lse = x.lse.data();
    k.Oin = {x.O.data(), d, heads * q_head, q_head};
    k.dO = {x.dO.data(), d, heads * q_head, q_head};
    k.lse_in = x.lse.data();
    k.dQ = {x.dQ.data(), d, heads * q_head, q_head};
    k.dK = {x.dK.data(), d, kv_heads * kv_head, kv_head};
    k.dV = {x.dV.data(), d, kv_heads * kv_head, kv_head};
    std::vector<std::byte> work(table.workspace_bytes(k));
    table.forward(k, work.data(), 0, batch * heads * k.block_rows);
    table.backward_dq(k, work.data(), 0, batch * heads * k.block_rows);
    table.backward_dkv(k, work.data(), 0, batch * kv_heads * k.block_cols);
  };
  Problem<T> r = p;  // the reference on the same problem
  run(kernels::reference::attention_kernels<T>(), r);
  auto expect_near_reference = [&](const Problem<T>& q) {
    const Heads64 o{batch * heads, n, d, {}}, kv{batch * kv_heads, n, d, {}};
    auto wide = [](Heads64 shape, const std::vector<T>& x) {
      for (const T& v : x) shape.v.push_back(as_double(v));
      return shape;
    };
    expect_close(q.O, wide(o, r.O), tolerance<T>(), "O");
    for (std::size_t t = 0; t < q.lse.size(); ++t)
      EXPECT_NEAR(q.lse[t], r.lse[t], lse_tolerance<T>() * (1 + std::fabs(r.lse[t])));
    expect_close(q.dQ, wide(o, r.dQ), gradient_tolerance<T>(n), "dQ");
    expect_close(q.dK, wide(kv, r.dK), gradient_tolerance<T>(n * heads / kv_heads), "dK");
    expect_close(q.dV, wide(kv, r.dV), gradient_tolerance<T>(n * heads / kv_heads), "dV");
  };
  for (Isa isa : all_isas) {
    if (!isa_supported(isa)) continue;
    SCOPED_TRACE(std::string(to_string(isa)));
    set_isa(isa);
    Problem<T> q = p;
    run(dispatch::attention_kernels<T>(), q);
    expect_near_reference(q);
  }
  set_isa(before);
}

TYPED_TEST(AttentionTyped, KernelsMatchReferenceOnEveryIsa) {
  using T = TypeParam;
  expect_kernels_match_reference<T>(this->rng, mask::document(std::vector<index_t>{11, 30, 9}, 16, true), 1, 2, 2,
                                    {}, 0);
}

/// Per-(batch, head) masks, grouped-query heads (4 query heads over 2 key/value heads), and
/// ALiBi with soft-capping, on every ISA, against the reference kernels.
TYPED_TEST(AttentionTyped, KernelsMatchReferenceWithSlicesGqaAndScoreMods) {
  using T = TypeParam;
  std::vector<AttentionMask> per_slice;
  for (index_t s = 0; s < 2 * 4; ++s)
    per_slice.push_back(s % 2 == 0 ? mask::causal(45, 16) : mask::local_window(45, 16, s % 3));
  const auto stacked = mask::stack(per_slice, 2, 4);
  const std::vector<acc_t<T>> slopes{0.5, 0.25, 0.125, 0.0625};
  expect_kernels_match_reference<T>(this->rng, stacked, 2, 4, 2, slopes, 0);
  expect_kernels_match_reference<T>(this->rng, stacked, 2, 4, 2, {}, 3);
  expect_kernels_match_reference<T>(this->rng, stacked, 2, 4, 1, slopes, 2);
  // A mask shared by the batch, one per head.
  expect_kernels_match_reference<T>(this->rng, mask::stack(std::span(per_slice).first(4), 1, 4), 2, 4, 4, slopes, 5);
}

/// A (batch, seq, heads, dim) layout read through strides gives the bits of the packed
/// (batch, heads, seq, dim) run; grouped-query heads give the output of K and V repeated
/// per query head (bitwise) and, for dK and dV, the sum over the group's heads.
TEST_F(AttentionRandom, StridedLayoutsAndGroupedQueryHeads) {
  const index_t B = 2, H = 4, G = 2, n = 37, d = 12;
  const auto m = mask::causal(n, 8);
  auto p = make_problem<float>(rng, B, H, n, n, d, 1.0);
  p.forward(m);
  p.backward(m);
  // The same tensors in (B, n, H, d) memory.
  auto bshd = [&](const std::vector<float>& x) {
    std::vector<float> y(x.size());
    for (index_t z = 0; z < B; ++z)
      for (index_t h = 0; h < H; ++h)
        for (index_t i = 0; i < n; ++i)
          for (index_t c = 0; c < d; ++c) y[((z * n + i) * H + h) * d + c] = x[((z * H + h) * n + i) * d + c];
    return y;
  };
  auto view = [&](auto& x) { return HeadsView(x.data(), B, H, n, d, n * H * d, d, H * d); };
  auto Q = bshd(p.Q), K = bshd(p.K), V = bshd(p.V), dO = bshd(p.dO);
  std::vector<float> O(Q.size()), dQ(Q.size()), dK(Q.size()), dV(Q.size()), lse(p.lse.size());
  attention_forward<float>(m, view(std::as_const(Q)), view(std::as_const(K)), view(std::as_const(V)), view(O), lse);
  attention_backward<float>(m, view(std::as_const(Q)), view(std::as_const(K)), view(std::as_const(V)),
                            view(std::as_const(O)), view(std::as_const(dO)), lse, view(dQ), view(dK), view(dV));
  EXPECT_EQ(O, bshd(p.O));
  EXPECT_EQ(lse, p.lse);
  EXPECT_EQ(dQ, bshd(p.dQ));
  EXPECT_EQ(dK, bshd(p.dK));
  EXPECT_EQ(dV, bshd(p.dV));

  // GQA: G key/value heads; the repeated run reads head h / (H / G) for query head h.
  std::vector<float> Kg(static_cast<std::size_t>(B * G * n * d)), Vg(Kg.size());
  for (std::size_t t = 0; t < Kg.size(); ++t) {
    Kg[t] = static_cast<float>(rng.uniform(-1, 1));
    Vg[t] = static_cast<float>(rng.uniform(-1, 1));
  }
  auto repeat = [&](const std::vector<float>& x) {
    std::vector<float> y(p.Q.size());
    for (index_t z = 0; z < B; ++z)
      for (index_t h = 0; h < H; ++h)
        std::copy_n(x.begin() + ((z * G + h / (H / G)) * n) * d, n * d, y.begin() + ((z * H + h) * n) * d);
    return y;
  };
  Problem<float> r = p;
  r.K = repeat(Kg);
  r.V = repeat(Vg);
  r.forward(m);
  r.backward(m);
  std::vector<float> Og(p.Q.size()), dQg(p.Q.size()), dKg(Kg.size()), dVg(Kg.size()), lseg(p.lse.size());
  const HeadsView<const float> q(p.Q.data(), B, H, n, d), kg(Kg.data(), B, G, n, d), vg(Vg.data(), B, G, n, d);
  attention_forward<float>(m, q, kg, vg, HeadsView<float>(Og.data(), B, H, n, d), lseg);
  EXPECT_EQ(Og, r.O);
  attention_backward<float>(m, q, kg, vg, HeadsView<const float>(Og.data(), B, H, n, d),
                            HeadsView<const float>(p.dO.data(), B, H, n, d), lseg,
                            HeadsView<float>(dQg.data(), B, H, n, d), HeadsView<float>(dKg.data(), B, G, n, d),
                            HeadsView<float>(dVg.data(), B, G, n, d));
  EXPECT_EQ(dQg, r.dQ);
  for (index_t z = 0; z < B; ++z)
    for (index_t g = 0; g < G; ++g)
      for (index_t e = 0; e < n * d; ++e) {
        float k_sum = 0, v_sum = 0;
        for (index_t h = g * (H / G); h < (g + 1) * (H / G); ++h) {
          k_sum += r.dK[(z * H + h) * n * d + e];
          v_sum += r.dV[(z * H + h) * n * d + e];
        }
        ASSERT_NEAR(dKg[(z * G + g) * n * d + e], k_sum, 1e-5f * (1 + std::fabs(k_sum)));
        ASSERT_NEAR(dVg[(z * G + g) * n * d + e], v_sum, 1e-5f * (1 + std::fabs(v_sum)));
      }

  // Errors: K's heads must divide Q's; an output whose heads overlap; the mask's slices.
  EXPECT_THROW(attention_forward<float>(m, q, HeadsView<const float>(Kg.data(), B, 3, n, d),
                                        HeadsView<const float>(Vg.data(), B, 3, n, d),
                                        HeadsView<float>(Og.data(), B, H, n, d)),
               DimensionMismatch);
  EXPECT_THROW(attention_forward<float>(m, q, kg, vg, HeadsView<float>(Og.data(), B, H, n, d, n * d, 0, d)),
               InvalidArgument);
  const auto three = mask::stack(std::vector<AttentionMask>(3, m), 1, 3);
  EXPECT_THROW(attention_forward<float>(three, q, kg, vg, HeadsView<float>(Og.data(), B, H, n, d)), DimensionMismatch);
  const std::vector<double> two_slopes{1, 2};
  EXPECT_THROW(attention_forward<float>(m, q, kg, vg, HeadsView<float>(Og.data(), B, H, n, d), {}, 0,
                                        ScoreMod{two_slopes, 0}),
               DimensionMismatch);
  EXPECT_THROW(attention_forward<float>(m, q, kg, vg, HeadsView<float>(Og.data(), B, H, n, d), {}, 0,
                                        ScoreMod{{}, -1}),
               InvalidArgument);
}

/// bf16 runs on the vdpbf16ps kernels on avx512_bf16 and amx (on avx512 on the widening
/// tile kernels, as a CPU without AVX512-BF16 does); fp32 never on them.
TEST(Attention, Bf16PairKernelsOnAvx512Bf16) {
  const Isa before = active_isa();
  const auto pairs = kernels::cpu::avx512bf16::attention_kernels_bf16();
  for (Isa isa : all_isas) {
    if (!isa_supported(isa)) continue;
    SCOPED_TRACE(std::string(to_string(isa)));
    set_isa(isa);
    const auto& k = dispatch::attention_kernels<bf16>();
    const bool want = isa == Isa::avx512_bf16 || isa == Isa::amx;
    EXPECT_EQ(k.forward == pairs.forward, want);
    EXPECT_EQ(k.backward_dq == pairs.backward_dq, want);
    EXPECT_EQ(k.backward_dkv == pairs.backward_dkv, want);
  }
  set_isa(before);
}

/// Gradients against central finite differences of L = Σ dO ∘ O: of the float64 dense
/// reference (checks its gradient formulas, tightly), and of our fp32 forward.
TEST_F(AttentionRandom, GradientsMatchFiniteDifferences) {
  const index_t seq = 10, d = 3, b = 4;
  const auto m = mask::document(std::vector<index_t>{4, 6}, b, true);  // partial blocks
  auto p = make_problem<float>(rng, 1, 1, seq, seq, d, 1.0);
  const double scale = 0.7;
  p.forward(m, 0.7f);
  p.backward(m, 0.7f);
  const Heads64 dO = p.wide(p.dO, seq);
  Heads64 Q = p.wide(p.Q, seq), K = p.wide(p.K, seq), V = p.wide(p.V, seq);
  const Dense64 ref = dense_attention(m, Q, K, V, scale, &dO);
  auto loss64 = [&] {
    const Dense64 f = dense_attention(m, Q, K, V, scale, nullptr);
    return std::inner_product(f.O.v.begin(), f.O.v.end(), dO.v.begin(), 0.0);
  };
  auto loss32 = [&](Problem<float>& x) {
    x.forward(m, 0.7f);
    double l = 0;
    for (std::size_t t = 0; t < x.O.size(); ++t) l += static_cast<double>(x.O[t]) * static_cast<double>(x.dO[t]);
    return l;
  };
  struct Which {
    Heads64* x64;
    std::vector<float>* x32;
    const Heads64* grad64;
    const std::vector<float>* grad32;
  };
  for (const Which& w : {Which{&Q, &p.Q, &ref.dQ, &p.dQ}, Which{&K, &p.K, &ref.dK, &p.dK},
                         Which{&V, &p.V, &ref.dV, &p.dV}})
    for (std::size_t t = 0; t < w.x64->v.size(); ++t) {
      const double h64 = 1e-6, x0 = w.x64->v[t];
      w.x64->v[t] = x0 + h64;
      const double lp = loss64();
      w.x64->v[t] = x0 - h64;
      const double lm = loss64();
      w.x64->v[t] = x0;
      EXPECT_NEAR((lp - lm) / (2 * h64), w.grad64->v[t], 1e-7) << t;

      Problem<float> x = p;
      const float h32 = 1e-2f, y0 = (*w.x32)[t];
      std::vector<float>& target = w.x32 == &p.Q ? x.Q : w.x32 == &p.K ? x.K : x.V;
      target[t] = y0 + h32;
      const double lp32 = loss32(x);
      target[t] = y0 - h32;
      const double lm32 = loss32(x);
      EXPECT_NEAR((lp32 - lm32) / (2.0 * h32), (*w.grad32)[t], 2e-3) << t;
    }
}

/// Gradients of the double kernels against central finite differences of their own
/// forward (L = Σ dO ∘ O), tightly: fp64 statistics and accumulation throughout. A ragged
/// sequence (10 on blocks of 4), partial causal blocks, and a block row with no stored
/// block (its rows: O = 0, no gradient).
TEST_F(AttentionRandom, Float64GradientsMatchFiniteDifferencesOfTheKernel) {
  const index_t seq = 10, d = 3, b = 4;
  const std::vector<std::uint8_t> grid{1, 0, 0, 0, 0, 0, 1, 1, 1};  // block row 1 stores nothing
  const auto m = mask::intersect(mask::document(std::vector<index_t>{4, 6}, b, true),
                                 mask::from_block_mask(seq, seq, b, grid));
  ASSERT_EQ(m.structure().block_row_ptr()[1], m.structure().block_row_ptr()[2]);
  using P = Problem<double>;
  auto p = make_problem<double>(rng, 1, 1, seq, seq, d, 1.0);
  p.forward(m, 0.7);
  p.backward(m, 0.7);
  const Heads64 dO = p.wide(p.dO, seq);
  const Dense64 ref = dense_attention(m, p.wide(p.Q, seq), p.wide(p.K, seq), p.wide(p.V, seq), 0.7, &dO);
  expect_close(p.O, ref.O, tolerance<double>(), "O");
  expect_close(p.dQ, ref.dQ, tolerance<double>(), "dQ");
  expect_close(p.dK, ref.dK, tolerance<double>(), "dK");
  expect_close(p.dV, ref.dV, tolerance<double>(), "dV");
  auto loss = [&](P& x) {
    x.forward(m, 0.7);
    return std::inner_product(x.O.begin(), x.O.end(), x.dO.begin(), 0.0);
  };
  for (auto [x, grad] : {std::pair{&P::Q, &P::dQ}, std::pair{&P::K, &P::dK}, std::pair{&P::V, &P::dV}})
    for (std::size_t t = 0; t < (p.*x).size(); ++t) {
      P y = p;
      const double h = 1e-6, x0 = (p.*x)[t];
      (y.*x)[t] = x0 + h;
      const double lp = loss(y);
      (y.*x)[t] = x0 - h;
      const double lm = loss(y);
      EXPECT_NEAR((lp - lm) / (2 * h), (p.*grad)[t], 1e-8) << t;
    }
  for (index_t i = 4; i < 8; ++i)
    for (index_t c = 0; c < d; ++c) {
      EXPECT_EQ(p.O[static_cast<std::size_t>(i * d + c)], 0.0);
      EXPECT_EQ(p.dQ[static_cast<std::size_t>(i * d + c)], 0.0);
    }
}

TEST(Attention, EmptyShapes) {
  std::vector<float> none, x(5 * 4, 1.0f), o(5 * 4, 9.0f), lse(5, 9.0f);
  // No keys: every query row gets O = 0 and lse = 0.
  const auto no_keys = mask::from_block_mask(5, 0, 4, std::vector<std::uint8_t>{});
  attention_forward<float>(no_keys, DenseView<const float>(x.data(), 5, 4, 4), DenseView<const float>(none.data(), 0, 4, 4),
                           DenseView<const float>(none.data(), 0, 4, 4), DenseView<float>(o.data(), 5, 4, 4), lse);
  EXPECT_THAT(o, ::testing::Each(0.0f));
  EXPECT_THAT(lse, ::testing::Each(0.0f));
  // No queries, and a batch of zero heads.
  const auto empty = mask::causal(0, 4);
  attention_forward<float>(empty, DenseView<const float>(none.data(), 0, 4, 4), DenseView<const float>(none.data(), 0, 4, 4),
                           DenseView<const float>(none.data(), 0, 4, 4), DenseView<float>(none.data(), 0, 4, 4));
  const auto m = mask::causal(5, 4);
  const HeadsView<const float> in{x.data(), 0, 3, 5, 4};
  const HeadsView<float> out{o.data(), 0, 3, 5, 4};
  attention_backward<float>(m, in, in, in, in, in, {}, out, HeadsView<float>{o.data() + 1, 0, 3, 5, 4},
                            HeadsView<float>{o.data() + 2, 0, 3, 5, 4});
}

TEST(Attention, RejectsBadArguments) {
  const auto m = mask::causal(8, 4);
  Dense<float> Q(8, 4), K(8, 4), V(8, 4), O(8, 4), bad(7, 4), wide(8, 600);
  std::vector<float> lse(8), short_lse(7);
  EXPECT_THROW(attention_forward<float>(m, bad.view(), K.view(), V.view(), O.view()), DimensionMismatch);
  EXPECT_THROW(attention_forward<float>(m, Q.view(), bad.view(), V.view(), O.view()), DimensionMismatch);
  EXPECT_THROW(attention_forward<float>(m, Q.view(), K.view(), V.view(), bad.view()), DimensionMismatch);
  EXPECT_THROW(attention_forward<float>(m, Q.view(), K.view(), V.view(), O.view(), short_lse), DimensionMismatch);
  EXPECT_THROW(attention_forward<float>(m, wide.view(), wide.view(), wide.view(), wide.view()), InvalidArgument);
  EXPECT_THROW(attention_forward<float>(m, Q.view(), K.view(), V.view(), O.view(), lse, -1.0f), InvalidArgument);
  EXPECT_THROW(attention_forward<float>(m, Q.view(), K.view(), V.view(), O.view(), lse, NAN), InvalidArgument);
  EXPECT_THROW(attention_forward<float>(m, Q.view(), K.view(), V.view(), DenseView<float>(Q.view())), InvalidArgument);
  Dense<float> dQ(8, 4), dK(8, 4), dV(8, 4);
  EXPECT_THROW(attention_backward<float>(m, Q.view(), K.view(), V.view(), O.view(), O.view(), short_lse, dQ.view(),
                                         dK.view(), dV.view()),
               DimensionMismatch);
  EXPECT_THROW(attention_backward<float>(m, Q.view(), K.view(), V.view(), O.view(), O.view(), lse, dQ.view(),
                                         dQ.view(), dV.view()),
               InvalidArgument);
  EXPECT_THROW(attention_backward<float>(m, Q.view(), K.view(), V.view(), O.view(), O.view(), lse, dQ.view(),
                                         dK.view(), DenseView<float>(V.view())),
               InvalidArgument);
  std::vector<float> q(2 * 8 * 4), o(3 * 8 * 4);
  EXPECT_THROW(attention_forward<float>(m, HeadsView<const float>{q.data(), 1, 2, 8, 4},
                                        HeadsView<const float>{q.data(), 1, 2, 8, 4},
                                        HeadsView<const float>{q.data(), 1, 2, 8, 4}, HeadsView<float>{o.data(), 1, 3, 8, 4}),
               DimensionMismatch);
}

}  // namespace
}  // namespace trnsparse::test
