// The `attn` section: block-sparse attention forward and forward+backward for the masks
// of issue 4, next to (same run, same data) a dense attention built on OpenBLAS SGEMM
// and a vectorised softmax, unmasked and with the mask applied, and our own BSR path at
// 100% block density.
#include "attention.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "baselines.hpp"
#include "common.hpp"
#include "trnsparse/attention.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse::bench {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// x[i] = e^(x[i] - m) for i < n, returning the sum: 2^t with t rounded by the 1.5·2^23
/// trick and a degree-6 polynomial, which the compiler vectorises for each clone.
__attribute__((target_clones("avx512f", "avx2", "default"))) float exp_shift_row(float* __restrict x, index_t n,
                                                                                 float m) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (index_t i = 0; i < n; ++i) {
    float t = (x[i] - m) * 1.44269504f;
    t = t < -127.0f ? -127.0f : t;
    const float r = t + 12582912.0f;
    const float f = (t - (r - 12582912.0f)) * 0.693147181f;
    float p = 1.0f / 720;
    p = p * f + 1.0f / 120;
    p = p * f + 1.0f / 24;
    p = p * f + 1.0f / 6;
    p = p * f + 0.5f;
    p = p * f + 1.0f;
    p = p * f + 1.0f;
    std::int32_t bits;
    std::memcpy(&bits, &r, sizeof bits);
    bits = (bits - 0x4b400000 + 127) << 23;
    float s;
    std::memcpy(&s, &bits, sizeof s);
    x[i] = p * s;
    sum += x[i];
  }
  return sum;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) float max_row(const float* __restrict x, index_t n) {
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (index_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

/// ds = p (dp - D), in place in dp.
__attribute__((target_clones("avx512f", "avx2", "default"))) void softmax_grad_row(const float* __restrict p,
                                                                                   float* __restrict dp, index_t n,
                                                                                   float D) {
#pragma omp simd
  for (index_t i = 0; i < n; ++i) dp[i] = p[i] * (dp[i] - D);
}

/// Dense attention on OpenBLAS: row panels of kPanel queries, S = Q Kᵀ scale (sgemm),
/// masked (if a mask is given) and softmaxed in place, O = P V (sgemm). The backward
/// recomputes P per panel (no seq² buffer), dP = dO Vᵀ, dS = P (dP - D), dQ = dS K,
/// dK += dSᵀ Q, dV += Pᵀ dO (sgemm, beta = 1).
class DenseAttention {
public:
  static constexpr index_t kPanel = 256;

  DenseAttention(index_t seq, index_t d, const AttentionMask* mask, int threads)
      : seq_(seq), d_(d), mask_(mask), threads_(threads), scale_(1.0f / std::sqrt(static_cast<float>(d))),
        S_(static_cast<std::size_t>(kPanel * seq)), dP_(static_cast<std::size_t>(kPanel * seq)),
        lse_(static_cast<std::size_t>(seq)) {}

  void forward(const float* Q, const float* K, const float* V, float* O) {
    for (index_t r0 = 0; r0 < seq_; r0 += kPanel) {
      const index_t rows = std::min(kPanel, seq_ - r0);
      scores(Q, K, r0, rows);
#pragma omp parallel for num_threads(threads_)
      for (index_t r = 0; r < rows; ++r) {
        float* s = S_.data() + r * seq_;
        const float m = max_row(s, seq_);
        const float l = m == kNegInf ? 0.0f : exp_shift_row(s, seq_, m);
        const float inv = l > 0 ? 1 / l : 0.0f;
        for (index_t j = 0; j < seq_; ++j) s[j] *= inv;
        lse_[static_cast<std::size_t>(r0 + r)] = l > 0 ? m + std::log(l) : 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(d_),
                  static_cast<int>(seq_), 1.0f, S_.data(), static_cast<int>(seq_), V, static_cast<int>(d_), 0.0f,
                  O + r0 * d_, static_cast<int>(d_));
    }
  }

  void backward(const float* Q, const float* K, const float* V, const float* O, const float* dO, float* dQ,
                float* dK, float* dV) {
    const int n = static_cast<int>(seq_), d = static_cast<int>(d_);
    for (index_t r0 = 0; r0 < seq_; r0 += kPanel) {
      const index_t rows = std::min(kPanel, seq_ - r0);
      const int m = static_cast<int>(rows);
      scores(Q, K, r0, rows);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, d, 1.0f, dO + r0 * d_, d, V, d, 0.0f, dP_.data(), n);
#pragma omp parallel for num_threads(threads_)
      for (index_t r = 0; r < rows; ++r) {
        float* s = S_.data() + r * seq_;
        exp_shift_row(s, seq_, lse_[static_cast<std::size_t>(r0 + r)]);
        float D = 0;
        for (index_t c = 0; c < d_; ++c) D += dO[(r0 + r) * d_ + c] * O[(r0 + r) * d_ + c];
        softmax_grad_row(s, dP_.data() + r * seq_, seq_, D);
      }
      const float beta = r0 == 0 ? 0.0f : 1.0f;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, n, scale_, dP_.data(), n, K, d, 0.0f,
                  dQ + r0 * d_, d);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, d, m, scale_, dP_.data(), n, Q + r0 * d_, d, beta, dK,
                  d);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, d, m, 1.0f, S_.data(), n, dO + r0 * d_, d, beta, dV, d);
    }
  }

private:
  /// S (rows, seq) = Q[r0 ..] Kᵀ scale, with disallowed pairs set to -inf.
  void scores(const float* Q, const float* K, index_t r0, index_t rows) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(seq_),
                static_cast<int>(d_), scale_, Q + r0 * d_, static_cast<int>(d_), K, static_cast<int>(d_), 0.0f,
                S_.data(), static_cast<int>(seq_));
    if (mask_ == nullptr) return;
    const BsrStructure& s = mask_->structure();
    const index_t b = s.block_size();
    const auto ptr = s.block_row_ptr();
    const auto col = s.block_col_indices();
#pragma omp parallel for num_threads(threads_)
    for (index_t r = 0; r < rows; ++r) {
      const index_t i = r0 + r, bi = i / b;
      float* row = S_.data() + r * seq_;
      index_t next = 0;  // first column not yet decided
      for (index_t k = ptr[bi]; k < ptr[bi + 1]; ++k) {
        const index_t c0 = col[k] * b, c1 = std::min(seq_, c0 + b);
        std::fill(row + next, row + c0, kNegInf);
        const auto e = mask_->element_mask(k);
        if (!e.empty())
          for (index_t c = c0; c < c1; ++c)
            if (e[static_cast<std::size_t>((i % b) * b + c - c0)] == 0) row[c] = kNegInf;
        next = c1;
      }
      std::fill(row + next, row + seq_, kNegInf);
    }
  }

  index_t seq_, d_;
  const AttentionMask* mask_;
  int threads_;
  float scale_;
  std::vector<float> S_, dP_, lse_;
};

template <class T>
std::vector<T> random_values(index_t n, std::uint64_t seed) {
  Rng rng{seed};
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& x : v) x = T(static_cast<float>(rng.symmetric()));
  return v;
}

template <class T>
std::vector<float> widen_all(const std::vector<T>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i]);
  return y;
}

/// max |a - b| / max |b|.
template <class T>
double rel_err(const std::vector<T>& a, const std::vector<float>& b) {
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(static_cast<float>(a[i])) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? worst / scale : worst;
}

struct DenseTimes {
  double fwd_ms, fwd_bwd_ms;
};

/// Times the dense baseline; leaves O and the gradients in the given buffers.
DenseTimes time_dense(DenseAttention& dense, int reps, const std::vector<float>& Q, const std::vector<float>& K,
                      const std::vector<float>& V, const std::vector<float>& dO, std::vector<float>& O,
                      std::vector<float>& dQ, std::vector<float>& dK, std::vector<float>& dV) {
  DenseTimes t{};
  t.fwd_ms = median_ms(reps, [&] { dense.forward(Q.data(), K.data(), V.data(), O.data()); });
  t.fwd_bwd_ms = median_ms(reps, [&] {
    dense.forward(Q.data(), K.data(), V.data(), O.data());
    dense.backward(Q.data(), K.data(), V.data(), O.data(), dO.data(), dQ.data(), dK.data(), dV.data());
  });
  return t;
}

template <class T>
void attention_rows(const Options& o, const Row& head, const Emit& emit) {
  const index_t b = o.block_size;
  // The dense SGEMM rate on this machine: a g^3 product, g = min(2048, the longest sequence).
  const index_t g = std::min<index_t>(2048, *std::max_element(o.sizes.begin(), o.sizes.end()));
  const std::vector<float> A = random_values<float>(g * g, 11), B = random_values<float>(g * g, 12);
  std::vector<float> C(static_cast<std::size_t>(g * g));
  // The faster correct one of this process's OpenBLAS kernel and its own choice in a
  // child (OPENBLAS_CORETYPE unset), as the bsr section's dense baseline.
  double sgemm_ms = gemm_ms(DenseView<const float>(A.data(), g, g, g), DenseView<const float>(B.data(), g, g, g),
                            DenseView<float>(C.data(), g, g, g), o.reps, head_threads(head));
  std::string sgemm_core = openblas_core();
  Options fp32 = o;
  fp32.dtype = "fp32";
  const Row child = dense_child(fp32, g, g, head_threads(head));
  if (field(child, "rel_err") < 1e-3 && field(child, "dense_ms") < sgemm_ms) {
    sgemm_ms = field(child, "dense_ms");
    sgemm_core = child[2].second.substr(1, child[2].second.size() - 2);  // the quoted corename
  }
  const double sgemm_gflops = 2.0 * static_cast<double>(g * g * g) / sgemm_ms / 1e6;
  openblas_set_num_threads(head_threads(head));
  for (index_t seq : o.sizes)
    for (index_t d : o.head_dims) {
      const std::vector<T> Q = random_values<T>(seq * d, 1), K = random_values<T>(seq * d, 2),
                           V = random_values<T>(seq * d, 3), dO = random_values<T>(seq * d, 4);
      const std::vector<float> Qf = widen_all(Q), Kf = widen_all(K), Vf = widen_all(V), dOf = widen_all(dO);
      std::vector<float> Od(Qf.size()), dQd(Qf.size()), dKd(Qf.size()), dVd(Qf.size());
      DenseAttention unmasked(seq, d, nullptr, head_threads(head));
      const DenseTimes plain = time_dense(unmasked, o.reps, Qf, Kf, Vf, dOf, Od, dQd, dKd, dVd);
      const index_t nb = (seq + b - 1) / b;
      const std::pair<const char*, AttentionMask> masks[] = {
          {"local", mask::local_window(seq, b, 1)},
          {"dilated", mask::dilated(seq, b, 4)},
          {"global", mask::global_tokens(seq, b, 1, 1)},
          {"full", mask::local_window(seq, b, nb)}};
      for (const auto& [name, m] : masks) {
        DenseAttention masked(seq, d, &m, head_threads(head));
        const DenseTimes dt = time_dense(masked, o.reps, Qf, Kf, Vf, dOf, Od, dQd, dKd, dVd);
        std::vector<T> O(Q.size()), dQ(Q.size()), dK(Q.size()), dV(Q.size());
        std::vector<float> lse(static_cast<std::size_t>(seq));
        auto view = [&](const std::vector<T>& x) { return DenseView<const T>(x.data(), seq, d, d); };
        auto out = [&](std::vector<T>& x) { return DenseView<T>(x.data(), seq, d, d); };
        auto fwd = [&] { attention_forward<T>(m, view(Q), view(K), view(V), out(O), lse); };
        auto bwd = [&] {
          attention_backward<T>(m, view(Q), view(K), view(V), view(O), view(dO), lse, out(dQ), out(dK), out(dV));
        };
        const double fwd_ms = median_ms(o.reps, fwd);
        const double fwd_bwd_ms = median_ms(o.reps, [&] {
          fwd();
          bwd();
        });
        const double bwd_err = std::max({rel_err(dQ, dQd), rel_err(dK, dKd), rel_err(dV, dVd)});
        const double useful = 4.0 * static_cast<double>(b * b * d) * static_cast<double>(m.n_blocks());  // forward
        const double density = m.structure().block_density();
        const double fwd_gflops = useful / fwd_ms / 1e6, fwd_bwd_gflops = 3.5 * useful / fwd_bwd_ms / 1e6;
        Row row = head;
        row.insert(row.end(), {{"seq", num(seq)},
                               {"head_dim", num(d)},
                               {"block", num(b)},
                               {"mask", str(name)},
                               {"block_density", num(density)},
                               {"fwd_ms", num(fwd_ms)},
                               {"fwd_bwd_ms", num(fwd_bwd_ms)},
                               {"dense_fwd_ms", num(dt.fwd_ms)},
                               {"dense_fwd_bwd_ms", num(dt.fwd_bwd_ms)},
                               {"dense_unmasked_fwd_ms", num(plain.fwd_ms)},
                               {"dense_unmasked_fwd_bwd_ms", num(plain.fwd_bwd_ms)},
                               {"fwd_rel_err", num(rel_err(O, Od))},
                               {"bwd_rel_err", num(bwd_err)},
                               {"fwd_gflops", num(fwd_gflops)},
                               {"fwd_bwd_gflops", num(fwd_bwd_gflops)},
                               {"sgemm_gflops", num(sgemm_gflops)},
                               {"sgemm_core", str(sgemm_core)},
                               {"fwd_vs_sgemm", num(fwd_gflops / sgemm_gflops)},
                               {"fwd_bwd_vs_sgemm", num(fwd_bwd_gflops / sgemm_gflops)},
                               {"speedup_fwd", num(dt.fwd_ms / fwd_ms)},
                               {"speedup_fwd_bwd", num(dt.fwd_bwd_ms / fwd_bwd_ms)},
                               {"target_speedup_fwd_bwd", num(0.5 / density)}});
        if constexpr (std::is_same_v<T, bf16>) {
          // The fp32 kernels on the widened inputs, timed in this run: the bf16 speedup.
          std::vector<float> Of(Qf.size()), lsef(static_cast<std::size_t>(seq));
          const auto fview = [&](const std::vector<float>& x) { return DenseView<const float>(x.data(), seq, d, d); };
          const double fp32_fwd_ms = median_ms(o.reps, [&] {
            attention_forward<float>(m, fview(Qf), fview(Kf), fview(Vf), DenseView<float>(Of.data(), seq, d, d), lsef);
          });
          row.insert(row.end(), {{"fp32_fwd_ms", num(fp32_fwd_ms)}, {"bf16_fwd_speedup", num(fp32_fwd_ms / fwd_ms)}});
        }
        emit(row);
      }
    }
}

}  // namespace

int head_threads(const Row& head) {
  for (const auto& [k, v] : head)
    if (k == "threads") return std::stoi(v);
  return num_threads();
}

void attention_section(const Options& o, const Row& head, const Emit& emit) {
  if (o.dtype == "fp32") return attention_rows<float>(o, head, emit);
  if (o.dtype == "bf16") return attention_rows<bf16>(o, head, emit);
  throw InvalidArgument("bench: --dtype " + o.dtype + " is not available for section attn (fp32 or bf16)");
}

}  // namespace trnsparse::bench
