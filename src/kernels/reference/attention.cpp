#include "kernels/reference/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/value.hpp"

namespace trnsparse::kernels::reference {

namespace {

/// Whether element (r, c) of stored block q is allowed.
template <class T>
bool allowed(const cpu::AttentionProblem<T>& p, index_t q, index_t r, index_t c) noexcept {
  const index_t k = p.partial[q];
  return k < 0 || p.masks[k * p.b * p.b + r * p.b + c] != 0;
}

template <class T>
float dot(const T* x, const T* y, index_t n) noexcept {
  float acc = 0;
  for (index_t c = 0; c < n; ++c) acc += detail::widen(x[c]) * detail::widen(y[c]);
  return acc;
}

/// Calls f(j, q, r, c) for every allowed key j of query row i = bi * b + r, in block
/// order then key order (q: stored block, c: key within the block).
template <class T, class F>
void for_each_key(const cpu::AttentionProblem<T>& p, index_t bi, index_t r, F&& f) noexcept {
  for (index_t q = p.ptr[bi]; q < p.ptr[bi + 1]; ++q) {
    const index_t j0 = p.idx[q] * p.b;
    const index_t cols = std::min(p.b, p.keys - j0);
    for (index_t c = 0; c < cols; ++c)
      if (allowed(p, q, r, c)) f(j0 + c);
  }
}

}  // namespace

template <class T>
void attention_forward(const cpu::AttentionProblem<T>& p, float* work) noexcept {
  const index_t d = p.dim;
  float* acc = work;
  for (index_t h = 0; h < p.heads; ++h) {
    const T* Q = p.Q.data + h * p.Q.head_stride;
    const T* K = p.K.data + h * p.K.head_stride;
    const T* V = p.V.data + h * p.V.head_stride;
    for (index_t i = 0; i < p.queries; ++i) {
      float m = -std::numeric_limits<float>::infinity(), l = 0;
      std::fill(acc, acc + d, 0.0f);
      for_each_key(p, i / p.b, i % p.b, [&](index_t j) {
        const float s = p.scale * dot(Q + i * p.Q.ld, K + j * p.K.ld, d);
        const float m_new = std::max(m, s);
        const float alpha = std::exp(m - m_new), e = std::exp(s - m_new);
        l = l * alpha + e;
        for (index_t c = 0; c < d; ++c) acc[c] = acc[c] * alpha + e * detail::widen(V[j * p.V.ld + c]);
        m = m_new;
      });
      T* o = p.O.data + h * p.O.head_stride + i * p.O.ld;
      for (index_t c = 0; c < d; ++c) o[c] = detail::value_cast<T>(l > 0 ? acc[c] / l : 0.0f);
      if (p.lse != nullptr) p.lse[h * p.queries + i] = l > 0 ? m + std::log(l) : 0.0f;
    }
  }
}

template <class T>
void attention_backward(const cpu::AttentionProblem<T>& p, float* work) noexcept {
  const index_t d = p.dim;
  float* dq = work;
  float* dk = dq + p.queries * d;
  float* dv = dk + p.keys * d;
  for (index_t h = 0; h < p.heads; ++h) {
    const T* Q = p.Q.data + h * p.Q.head_stride;
    const T* K = p.K.data + h * p.K.head_stride;
    const T* V = p.V.data + h * p.V.head_stride;
    const T* O = p.Oin.data + h * p.Oin.head_stride;
    const T* dO = p.dO.data + h * p.dO.head_stride;
    const float* lse = p.lse_in + h * p.queries;
    std::fill(work, work + (p.queries + 2 * p.keys) * d, 0.0f);
    for (index_t i = 0; i < p.queries; ++i) {
      const T* qi = Q + i * p.Q.ld;
      const T* doi = dO + i * p.dO.ld;
      const float D = dot(doi, O + i * p.Oin.ld, d);
      for_each_key(p, i / p.b, i % p.b, [&](index_t j) {
        const T* kj = K + j * p.K.ld;
        const float prob = std::exp(p.scale * dot(qi, kj, d) - lse[i]);
        const float ds = prob * (dot(doi, V + j * p.V.ld, d) - D);
        for (index_t c = 0; c < d; ++c) {
          dq[i * d + c] += p.scale * ds * detail::widen(kj[c]);
          dk[j * d + c] += p.scale * ds * detail::widen(qi[c]);
          dv[j * d + c] += prob * detail::widen(doi[c]);
        }
      });
    }
    for (index_t i = 0; i < p.queries; ++i)
      for (index_t c = 0; c < d; ++c) p.dQ.data[h * p.dQ.head_stride + i * p.dQ.ld + c] = detail::value_cast<T>(dq[i * d + c]);
    for (index_t j = 0; j < p.keys; ++j)
      for (index_t c = 0; c < d; ++c) {
        p.dK.data[h * p.dK.head_stride + j * p.dK.ld + c] = detail::value_cast<T>(dk[j * d + c]);
        p.dV.data[h * p.dV.head_stride + j * p.dV.ld + c] = detail::value_cast<T>(dv[j * d + c]);
      }
  }
}

template void attention_forward<float>(const cpu::AttentionProblem<float>&, float*) noexcept;
template void attention_forward<bf16>(const cpu::AttentionProblem<bf16>&, float*) noexcept;
template void attention_backward<float>(const cpu::AttentionProblem<float>&, float*) noexcept;
template void attention_backward<bf16>(const cpu::AttentionProblem<bf16>&, float*) noexcept;

}  // namespace trnsparse::kernels::reference
