#include "kernels/reference/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "runtime/value.hpp"

namespace trnsparse::kernels::reference {

#include "kernels/attention_slices.inc"

namespace {

using attention_slices::slice_at;

/// Whether element (r, c) of stored block q is allowed.
template <class T>
bool allowed(const AttentionProblem<T>& p, index_t q, index_t r, index_t c) noexcept {
  const index_t k = p.partial[q];
  return k < 0 || p.masks[k * p.b * p.b + r * p.b + c] != 0;
}

template <class T>
acc_t<T> dot(const T* x, const T* y, index_t n) noexcept {
  acc_t<T> acc = 0;
  for (index_t c = 0; c < n; ++c) acc += detail::widen(x[c]) * detail::widen(y[c]);
  return acc;
}

/// The modified score of query i and key j of query head h from q · k, and its
/// derivative with respect to q · k · scale: ALiBi, then soft-capping.
template <class T>
std::pair<acc_t<T>, acc_t<T>> score(const AttentionProblem<T>& p, index_t h, index_t i, index_t j,
                                    acc_t<T> qk) noexcept {
  using A = acc_t<T>;
  A s = p.scale * qk;
  if (p.alibi != nullptr) s += p.alibi[h] * static_cast<A>(j - i);
  if (p.softcap > 0) {
    const A t = std::tanh(s / p.softcap);
    return {p.softcap * t, A(1) - t * t};
  }
  return {s, A(1)};
}

/// Calls f(j) for every allowed key j of query row i = bi * b + r of mask slice m, in
/// block order then key order.
template <class T, class F>
void for_each_key(const AttentionProblem<T>& p, index_t m, index_t bi, index_t r, F&& f) noexcept {
  const index_t row = m * p.block_rows + bi;
  for (index_t q = p.ptr[row]; q < p.ptr[row + 1]; ++q) {
    const index_t j0 = (p.idx[q] - m * p.block_cols) * p.b;
    const index_t cols = std::min(p.b, p.keys - j0);
    for (index_t c = 0; c < cols; ++c)
      if (allowed(p, q, r, c)) f(j0 + c);
  }
}

template <class T>
std::size_t workspace_bytes(const AttentionProblem<T>& p) {
  return static_cast<std::size_t>(2 * p.b * p.dim) * sizeof(acc_t<T>);
}

/// O and (if p.lse) lse of the query rows of units [u0, u1), u = (z heads + h) block_rows + I.
template <class T>
void forward(const AttentionProblem<T>& p, void* workspace, index_t u0, index_t u1) {
  using A = acc_t<T>;
  const index_t d = p.dim;
  A* acc = static_cast<A*>(workspace);
  for (index_t u = u0; u < u1; ++u) {
    const auto sl = attention_slices::query_slice(p, u);
    const index_t bi = u % p.block_rows;
    const T* Q = slice_at(p.Q, sl.z, sl.h);
    const T* K = slice_at(p.K, sl.z, sl.k);
    const T* V = slice_at(p.V, sl.z, sl.k);
    for (index_t i = bi * p.b; i < std::min(p.queries, (bi + 1) * p.b); ++i) {
      A m = -std::numeric_limits<A>::infinity(), l = 0;
      std::fill(acc, acc + d, A(0));
      for_each_key(p, sl.m, bi, i - bi * p.b, [&](index_t j) {
        const A s = score(p, sl.h, i, j, dot(Q + i * p.Q.ld, K + j * p.K.ld, d)).first;
        const A m_new = std::max(m, s);
        const A alpha = std::exp(m - m_new), e = std::exp(s - m_new);
        l = l * alpha + e;
        for (index_t c = 0; c < d; ++c) acc[c] = acc[c] * alpha + e * detail::widen(V[j * p.V.ld + c]);
        m = m_new;
      });
      T* o = slice_at(p.O, sl.z, sl.h) + i * p.O.ld;
      for (index_t c = 0; c < d; ++c) o[c] = detail::value_cast<T>(l > 0 ? acc[c] / l : A(0));
      if (p.lse != nullptr) p.lse[attention_slices::lse_offset(p, sl.z, sl.h) + i] = l > 0 ? m + std::log(l) : A(0);
    }
  }
}

/// dQ of the query rows of units [u0, u1), u = (z heads + h) block_rows + I.
template <class T>
void backward_dq(const AttentionProblem<T>& p, void* workspace, index_t u0, index_t u1) {
  using A = acc_t<T>;
  const index_t d = p.dim;
  A* dq = static_cast<A*>(workspace);
  for (index_t u = u0; u < u1; ++u) {
    const auto sl = attention_slices::query_slice(p, u);
    const index_t bi = u % p.block_rows;
    const T* K = slice_at(p.K, sl.z, sl.k);
    const T* V = slice_at(p.V, sl.z, sl.k);
    for (index_t i = bi * p.b; i < std::min(p.queries, (bi + 1) * p.b); ++i) {
      const T* qi = slice_at(p.Q, sl.z, sl.h) + i * p.Q.ld;
      const T* doi = slice_at(p.dO, sl.z, sl.h) + i * p.dO.ld;
      const A D = dot(doi, slice_at(p.Oin, sl.z, sl.h) + i * p.Oin.ld, d);
      const A lse = p.lse_in[attention_slices::lse_offset(p, sl.z, sl.h) + i];
      std::fill(dq, dq + d, A(0));
      for_each_key(p, sl.m, bi, i - bi * p.b, [&](index_t j) {
        const T* kj = K + j * p.K.ld;
        const auto [s, ds_dx] = score(p, sl.h, i, j, dot(qi, kj, d));
        const A prob = std::exp(s - lse);
        const A ds = prob * (dot(doi, V + j * p.V.ld, d) - D) * ds_dx;
        for (index_t c = 0; c < d; ++c) dq[c] += p.scale * ds * detail::widen(kj[c]);
      });
      T* out = slice_at(p.dQ, sl.z, sl.h) + i * p.dQ.ld;
      for (index_t c = 0; c < d; ++c) out[c] = detail::value_cast<T>(dq[c]);
    }
  }
}

/// dK and dV of the key rows of units [u0, u1), u = (z kv_heads + k) block_cols + J: for
/// each query head of k's group in order, the stored blocks of block column J of its mask
/// slice in BSC order, their query rows in ascending order.
template <class T>
void backward_dkv(const AttentionProblem<T>& p, void* workspace, index_t u0, index_t u1) {
  using A = acc_t<T>;
  const index_t d = p.dim, kv_heads = p.heads / p.kv_group;
  A* dk = static_cast<A*>(workspace);  // (b, d)
  A* dv = dk + p.b * d;                // (b, d)
  for (index_t u = u0; u < u1; ++u) {
    const index_t g = u / p.block_cols, bj = u % p.block_cols, z = g / kv_heads, k = g % kv_heads;
    const index_t j0 = bj * p.b, cols = std::min(p.b, p.keys - j0);
    const T* K = slice_at(p.K, z, k) + j0 * p.K.ld;
    const T* V = slice_at(p.V, z, k) + j0 * p.V.ld;
    std::fill(dk, dk + 2 * p.b * d, A(0));
    for (index_t h = k * p.kv_group; h < (k + 1) * p.kv_group; ++h) {
      const index_t m = attention_slices::mask_slice(p, z, h), col = m * p.block_cols + bj;
      for (index_t t = p.col_ptr[col]; t < p.col_ptr[col + 1]; ++t) {
        const index_t bi = p.row_idx[t] - m * p.block_rows, q = p.perm[t];
        for (index_t r = 0; r < std::min(p.b, p.queries - bi * p.b); ++r) {
          const index_t i = bi * p.b + r;
          const T* qi = slice_at(p.Q, z, h) + i * p.Q.ld;
          const T* doi = slice_at(p.dO, z, h) + i * p.dO.ld;
          const A D = dot(doi, slice_at(p.Oin, z, h) + i * p.Oin.ld, d);
          const A lse = p.lse_in[attention_slices::lse_offset(p, z, h) + i];
          for (index_t c = 0; c < cols; ++c) {
            if (!allowed(p, q, r, c)) continue;
            const auto [s, ds_dx] = score(p, h, i, j0 + c, dot(qi, K + c * p.K.ld, d));
            const A prob = std::exp(s - lse);
            const A ds = prob * (dot(doi, V + c * p.V.ld, d) - D) * ds_dx;
            for (index_t e = 0; e < d; ++e) {
              dk[c * d + e] += p.scale * ds * detail::widen(qi[e]);
              dv[c * d + e] += prob * detail::widen(doi[e]);
            }
          }
        }
      }
    }
    for (index_t c = 0; c < cols; ++c)
      for (index_t e = 0; e < d; ++e) {
        slice_at(p.dK, z, k)[(j0 + c) * p.dK.ld + e] = detail::value_cast<T>(dk[c * d + e]);
        slice_at(p.dV, z, k)[(j0 + c) * p.dV.ld + e] = detail::value_cast<T>(dv[c * d + e]);
      }
  }
}

}  // namespace

template <class T>
AttentionKernels<T> attention_kernels() {
  return {&workspace_bytes<T>, &forward<T>, &backward_dq<T>, &backward_dkv<T>};
}

template AttentionKernels<float> attention_kernels<float>();
template AttentionKernels<bf16> attention_kernels<bf16>();
template AttentionKernels<double> attention_kernels<double>();

}  // namespace trnsparse::kernels::reference
