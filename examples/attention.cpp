// Block-sparse attention, forward and backward, on (batch 1, heads 2, seq 700, d 64)
// with a causal mask plus the first key block visible to every query (block 128; 700
// is not a multiple of it),
// checked against a dense float64 masked softmax written out in full below.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include <trnsparse/attention.hpp>

int main() {
  using trnsparse::index_t;
  const index_t heads = 2, seq = 700, d = 64, b = 128;
  const index_t nb = (seq + b - 1) / b;
  std::vector<std::uint8_t> first_column(static_cast<std::size_t>(nb * nb), 0);
  for (index_t i = 0; i < nb; ++i) first_column[static_cast<std::size_t>(i * nb)] = 1;
  const auto mask = trnsparse::mask::unite(trnsparse::mask::causal(seq, b),
                                           trnsparse::mask::from_block_mask(seq, seq, b, first_column));
  std::printf("mask: %lld stored blocks (%.1f%% of the grid), %lld partial\n",
              static_cast<long long>(mask.n_blocks()), 100.0 * mask.structure().block_density(),
              static_cast<long long>(mask.n_partial()));

  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&] {
    std::vector<float> x(static_cast<std::size_t>(heads * seq * d));
    for (float& v : x) v = dist(gen);
    return x;
  };
  const std::vector<float> Q = random(), K = random(), V = random(), dO = random();
  std::vector<float> O(Q.size()), dQ(Q.size()), dK(Q.size()), dV(Q.size()), lse(heads * seq);
  auto in = [&](const std::vector<float>& x) { return trnsparse::HeadsView<const float>{x.data(), 1, heads, seq, d}; };
  auto out = [&](std::vector<float>& x) { return trnsparse::HeadsView<float>{x.data(), 1, heads, seq, d}; };
  trnsparse::attention_forward<float>(mask, in(Q), in(K), in(V), out(O), lse);
  trnsparse::attention_backward<float>(mask, in(Q), in(K), in(V), in(O), in(dO), lse, out(dQ), out(dK), out(dV));

  // The dense path in float64: P = softmax(Q Kᵀ / sqrt(d) + mask), O = P V, and the gradients.
  const double scale = 1 / std::sqrt(static_cast<double>(d));
  double err_o = 0, err_g = 0, mag_o = 0, mag_g = 0;
  std::vector<double> p(seq), gq(seq * d), gk(seq * d), gv(seq * d);
  for (index_t h = 0; h < heads; ++h) {
    const index_t base = h * seq * d;
    std::fill(gq.begin(), gq.end(), 0.0);
    std::fill(gk.begin(), gk.end(), 0.0);
    std::fill(gv.begin(), gv.end(), 0.0);
    for (index_t i = 0; i < seq; ++i) {
      double mx = -INFINITY, l = 0, D = 0;
      for (index_t j = 0; j < seq; ++j) {
        double s = 0;
        for (index_t c = 0; c < d; ++c) s += double{Q[base + i * d + c]} * K[base + j * d + c];
        p[j] = mask.allows(i, j) ? s * scale : -INFINITY;
        mx = std::max(mx, p[j]);
      }
      for (index_t j = 0; j < seq; ++j) l += p[j] = std::exp(p[j] - mx);
      for (index_t c = 0; c < d; ++c) {
        double o = 0;
        for (index_t j = 0; j < seq; ++j) o += p[j] / l * V[base + j * d + c];
        err_o = std::max(err_o, std::fabs(o - O[base + i * d + c]));
        mag_o = std::max(mag_o, std::fabs(o));
        D += o * dO[base + i * d + c];
      }
      for (index_t j = 0; j < seq; ++j) {
        if (p[j] == 0) continue;
        double dp = 0;
        for (index_t c = 0; c < d; ++c) dp += double{dO[base + i * d + c]} * V[base + j * d + c];
        const double ds = p[j] / l * (dp - D);
        for (index_t c = 0; c < d; ++c) {
          gq[i * d + c] += scale * ds * K[base + j * d + c];
          gk[j * d + c] += scale * ds * Q[base + i * d + c];
          gv[j * d + c] += p[j] / l * dO[base + i * d + c];
        }
      }
    }
    for (index_t t = 0; t < seq * d; ++t)
      for (const auto& [ref, got] : {std::pair{gq[t], dQ[base + t]}, std::pair{gk[t], dK[base + t]},
                                     std::pair{gv[t], dV[base + t]}}) {
        err_g = std::max(err_g, std::fabs(ref - got));
        mag_g = std::max(mag_g, std::fabs(ref));
      }
  }
  const double rel_o = err_o / mag_o, rel_g = err_g / mag_g;
  const bool ok = rel_o < 1e-5 && rel_g < 1e-4;
  std::printf("forward rel. error %.2e, backward rel. error %.2e: %s\n", rel_o, rel_g, ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
