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
acc_t<T> dot(const T* x, const T* y, index_t n) noexcept {
  acc_t<T> acc = 0;
  for (index_t c = 0; c < n; ++c) acc += detail::widen(x[c]) * detail::widen(y[c]);
  return acc;
}

/// Calls f(j) for every allowed key j of query row i = bi * b + r, in block order then
/// key order.
template <class T, class F>
void for_each_key(const cpu::AttentionProblem<T>& p, index_t bi, index_t r, F&& f) noexcept {
  for (index_t q = p.ptr[bi]; q < p.ptr[bi + 1]; ++q) {
    const index_t j0 = p.idx[q] * p.b;
    const index_t cols = std::min(p.b, p.keys - j0);
    for (index_t c = 0; c < cols; ++c)
      if (allowed(p, q, r, c)) f(j0 + c);
  }
}

template <class T>
std::size_t workspace_bytes(const cpu::AttentionProblem<T>& p) {
  return static_cast<std::size_t>(2 * p.b * p.dim) * sizeof(acc_t<T>);
}

/// O and (if p.lse) lse of the query rows of units [u0, u1), u = h * block_rows + I.
template <class T>
void forward(const cpu::AttentionProblem<T>& p, void* workspace, index_t u0, index_t u1) {
  using A = acc_t<T>;
  const index_t d = p.dim;
  A* acc = static_cast<A*>(workspace);
  for (index_t u = u0; u < u1; ++u) {
    const index_t h = u / p.block_rows, bi = u % p.block_rows;
    const T* Q = p.Q.data + h * p.Q.head_stride;
    const T* K = p.K.data + h * p.K.head_stride;
    const T* V = p.V.data + h * p.V.head_stride;
    for (index_t i = bi * p.b; i < std::min(p.queries, (bi + 1) * p.b); ++i) {
      A m = -std::numeric_limits<A>::infinity(), l = 0;
      std::fill(acc, acc + d, A(0));
      for_each_key(p, bi, i - bi * p.b, [&](index_t j) {
        const A s = p.scale * dot(Q + i * p.Q.ld, K + j * p.K.ld, d);
        const A m_new = std::max(m, s);
        const A alpha = std::exp(m - m_new), e = std::exp(s - m_new);
        l = l * alpha + e;
        for (index_t c = 0; c < d; ++c) acc[c] = acc[c] * alpha + e * detail::widen(V[j * p.V.ld + c]);
        m = m_new;
      });
      T* o = p.O.data + h * p.O.head_stride + i * p.O.ld;
      for (index_t c = 0; c < d; ++c) o[c] = detail::value_cast<T>(l > 0 ? acc[c] / l : A(0));
      if (p.lse != nullptr) p.lse[h * p.queries + i] = l > 0 ? m + std::log(l) : A(0);
    }
  }
}

/// dQ of the query rows of units [u0, u1), u = h * block_rows + I.
template <class T>
void backward_dq(const cpu::AttentionProblem<T>& p, void* workspace, index_t u0, index_t u1) {
  using A = acc_t<T>;
  const index_t d = p.dim;
  A* dq = static_cast<A*>(workspace);
  for (index_t u = u0; u < u1; ++u) {
    const index_t h = u / p.block_rows, bi = u % p.block_rows;
    const T* K = p.K.data + h * p.K.head_stride;
    const T* V = p.V.data + h * p.V.head_stride;
    for (index_t i = bi * p.b; i < std::min(p.queries, (bi + 1) * p.b); ++i) {
      const T* qi = p.Q.data + h * p.Q.head_stride + i * p.Q.ld;
      const T* doi = p.dO.data + h * p.dO.head_stride + i * p.dO.ld;
      const A D = dot(doi, p.Oin.data + h * p.Oin.head_stride + i * p.Oin.ld, d);
      const A lse = p.lse_in[h * p.queries + i];
      std::fill(dq, dq + d, A(0));
      for_each_key(p, bi, i - bi * p.b, [&](index_t j) {
        const T* kj = K + j * p.K.ld;
        const A prob = std::exp(p.scale * dot(qi, kj, d) - lse);
        const A ds = prob * (dot(doi, V + j * p.V.ld, d) - D);
        for (index_t c = 0; c < d; ++c) dq[c] += p.scale * ds * detail::widen(kj[c]);
      });
      T* out = p.dQ.data + h * p.dQ.head_stride + i * p.dQ.ld;
      for (index_t c = 0; c < d; ++c) out[c] = detail::value_cast<T>(dq[c]);
    }
  }
}

/// dK and dV of the key rows of units [u0, u1), u = h * block_cols + J: the stored
/// blocks of block column J in BSC order, their query rows in ascending order.
template <class T>
void backward_dkv(const cpu::AttentionProblem<T>& p, void* workspace, index_t u0, index_t u1) {
  using A = acc_t<T>;
  const index_t d = p.dim;
  A* dk = static_cast<A*>(workspace);  // (b, d)
  A* dv = dk + p.b * d;                // (b, d)
  for (index_t u = u0; u < u1; ++u) {
    const index_t h = u / p.block_cols, bj = u % p.block_cols;
    const index_t j0 = bj * p.b, cols = std::min(p.b, p.keys - j0);
    const T* K = p.K.data + h * p.K.head_stride + j0 * p.K.ld;
    const T* V = p.V.data + h * p.V.head_stride + j0 * p.V.ld;
    std::fill(dk, dk + 2 * p.b * d, A(0));
    for (index_t t = p.col_ptr[bj]; t < p.col_ptr[bj + 1]; ++t) {
      const index_t bi = p.row_idx[t], q = p.perm[t];
      for (index_t r = 0; r < std::min(p.b, p.queries - bi * p.b); ++r) {
        const index_t i = bi * p.b + r;
        const T* qi = p.Q.data + h * p.Q.head_stride + i * p.Q.ld;
        const T* doi = p.dO.data + h * p.dO.head_stride + i * p.dO.ld;
        const A D = dot(doi, p.Oin.data + h * p.Oin.head_stride + i * p.Oin.ld, d);
        const A lse = p.lse_in[h * p.queries + i];
        for (index_t c = 0; c < cols; ++c) {
          if (!allowed(p, q, r, c)) continue;
          const A prob = std::exp(p.scale * dot(qi, K + c * p.K.ld, d) - lse);
          const A ds = prob * (dot(doi, V + c * p.V.ld, d) - D);
          for (index_t e = 0; e < d; ++e) {
            dk[c * d + e] += p.scale * ds * detail::widen(qi[e]);
            dv[c * d + e] += prob * detail::widen(doi[e]);
          }
        }
      }
    }
    for (index_t c = 0; c < cols; ++c)
      for (index_t e = 0; e < d; ++e) {
        p.dK.data[h * p.dK.head_stride + (j0 + c) * p.dK.ld + e] = detail::value_cast<T>(dk[c * d + e]);
        p.dV.data[h * p.dV.head_stride + (j0 + c) * p.dV.ld + e] = detail::value_cast<T>(dv[c * d + e]);
      }
  }
}

}  // namespace

template <class T>
cpu::AttentionKernels<T> attention_kernels() {
  return {&workspace_bytes<T>, &forward<T>, &backward_dq<T>, &backward_dkv<T>};
}

template cpu::AttentionKernels<float> attention_kernels<float>();
template cpu::AttentionKernels<bf16> attention_kernels<bf16>();
template cpu::AttentionKernels<double> attention_kernels<double>();

}  // namespace trnsparse::kernels::reference
