// bf16 attention with AVX512-BF16 (compiled with the AVX-512 flags plus -mavx512bf16): the
// passes of attention_tile.inc (online softmax, masking, unit walk; statistics and
// accumulators fp32) with their products on vdpbf16ps, which multiplies pairs of bf16
// along K and accumulates in fp32, twice the fp32 FMA rate.
//   NT products (S = Q Kᵀ, dP = dO Vᵀ, and Sᵀ = K Qᵀ, dPᵀ = V dOᵀ in the dK/dV pass): both
//     operands stay bf16, paired along d (padded to even with a zero). The left operand
//     is its rows, (n, dp) bf16, so pair t of row r is one 32-bit broadcast; the right
//     one is transposed by pairs, (d / 2, np) 32-bit pairs, a register holding pair t of
//     16 rows. scale · log2 e multiplies the fp32 product (Q is not rescaled in bf16).
//   NN products (O += P V, dQ += dS K, dV += Pᵀ dO, dK += dSᵀ Q): the fp32 tile P or dS is
//     rounded to bf16 (nearest even) in place, row r's bf16 in the first half of its fp32
//     row, as FlashAttention rounds P in bf16; the softmax denominator l keeps the fp32
//     P. The right operand is paired along the summed index (keys or queries):
//     (ceil(n / 2), dp) pairs, pair row t holding rows 2t and 2t + 1 interleaved.
// Every tile fits the fp32 slot attention_tile.inc reserves for it (bf16 is half the
// size; ceil(n / 2) <= b pair rows). Sums run in a fixed order, as in the fp32 kernels.
// vdpbf16ps and vcvtne2ps2bf16 flush subnormal inputs and outputs to zero.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::avx512bf16 {

#include "kernels/cpu/avx512/attention_vec.inc"
#include "kernels/cpu/attention_tile.inc"

namespace {

using attention_detail::Dims;
using attention_detail::min_i;

constexpr int kPairMR = 8;  // microkernel rows
constexpr int kPairNV = 2;  // microkernel registers of 16 columns per row

inline __mmask32 lanes32(index_t n) { return n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1u); }
inline __mmask16 lanes16(index_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffffu) : static_cast<__mmask16>((1u << n) - 1u);
}

// ---- microkernel ------------------------------------------------------------------------

/// c(MR, NV·16) = factor · a · b (or, Accumulate, c += a · b) over K pairs: pair t of row
/// r of a at a + 2 (r lda + t), pair t of column j of b at b + 2 (t ldb + j) (bf16 units).
template <bool Accumulate, int MR, int NV>
void micro_pairs(index_t K, const std::uint16_t* a, index_t lda, const std::uint16_t* b, index_t ldb, float* c,
                 index_t ldc, float factor) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Accumulate ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
  for (index_t t = 0; t < K; ++t) {
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + 2 * (t * ldb + 16 * v));
    for (int r = 0; r < MR; ++r) {
      std::uint32_t pair;
      std::memcpy(&pair, a + 2 * (r * lda + t), sizeof pair);
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
    }
  }
  const __m512 f = _mm512_set1_ps(factor);
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v)
      _mm512_storeu_ps(c + r * ldc + 16 * v, Accumulate ? acc[r][v] : _mm512_mul_ps(acc[r][v], f));
}

template <bool Accumulate>
using MicroPairsFn = void (*)(index_t, const std::uint16_t*, index_t, const std::uint16_t*, index_t, float*, index_t,
                              float);

template <bool Accumulate, int NV, int... R>
MicroPairsFn<Accumulate> micro_pairs_rows(std::integer_sequence<int, R...>, int mr) {
  static constexpr MicroPairsFn<Accumulate> table[] = {&micro_pairs<Accumulate, R + 1, NV>...};
  return table[mr - 1];
}

template <bool Accumulate, int... V>
MicroPairsFn<Accumulate> micro_pairs_for(std::integer_sequence<int, V...>, int mr, int nv) {
  using Pick = MicroPairsFn<Accumulate> (*)(std::make_integer_sequence<int, kPairMR>, int);
  static constexpr Pick table[] = {&micro_pairs_rows<Accumulate, V + 1>...};
  return table[nv - 1]({}, mr);
}

/// c(M, N) = factor · a(M, 2K) · b(2K, N) (Accumulate: c += a · b), N a multiple of 16,
/// operands as in micro_pairs: strips of kPairMR rows meeting every panel of
/// kPairNV · 16 columns (the last strip and panel narrower).
template <bool Accumulate>
void gemm_pairs(index_t M, index_t N, index_t K, const std::uint16_t* a, index_t lda, const std::uint16_t* b,
                index_t ldb, float* c, index_t ldc, float factor) {
  constexpr index_t NR = kPairNV * 16;
  for (index_t i = 0; i < M; i += kPairMR) {
    const int mr = static_cast<int>(min_i(kPairMR, M - i));
    for (index_t j = 0; j < N; j += NR) {
      const int nv = static_cast<int>(min_i(NR, N - j) / 16);
      micro_pairs_for<Accumulate>(std::make_integer_sequence<int, kPairNV>{}, mr, nv)(
          K, a + 2 * i * lda, lda, b + 2 * j, ldb, c + i * ldc + j, ldc, factor);
    }
  }
}

// ---- packing ------------------------------------------------------------------------------

/// One step of a 16 x 16 transpose of 32-bit lanes: swaps the off-diagonal S x S blocks
/// of every 2S x 2S block of r (rows i and i + S, i & S = 0, exchange lane halves).
template <int S>
void swap_blocks(__m512i* r) {
  static constexpr auto idx = [] {
    std::array<int, 32> v{};
    for (int j = 0; j < 16; ++j) {
      v[j] = (j & S) != 0 ? 16 + j - S : j;       // row i: its own left block, then i + S's
      v[16 + j] = (j & S) != 0 ? 16 + j : j + S;  // row i + S: i's right block, then its own
    }
    return v;
  }();
  const __m512i lo = _mm512_loadu_si512(idx.data()), hi = _mm512_loadu_si512(idx.data() + 16);
  for (int i = 0; i < 16; ++i)
    if ((i & S) == 0) {
      const __m512i a = r[i], b = r[i + S];
      r[i] = _mm512_permutex2var_epi32(a, lo, b);
      r[i + S] = _mm512_permutex2var_epi32(a, hi, b);
    }
}

/// r (16 rows of 16 32-bit lanes) = rᵀ.
inline void transpose16(__m512i* r) {
  swap_blocks<8>(r);
  swap_blocks<4>(r);
  swap_blocks<2>(r);
  swap_blocks<1>(r);
}

// ---- the products -------------------------------------------------------------------------

/// The products of attention_tile.inc on bf16 pairs (layouts at the top of this file).
struct PairProducts {
  /// (n, dp) bf16 rows, d padded to even with a zero; the factor goes to nt.
  static void pack_lhs(const bf16* src, index_t ld, index_t n, index_t d, float /*applied by nt*/, float* dst,
                       const Dims& z) {
    auto* out = reinterpret_cast<std::uint16_t*>(dst);
    for (index_t r = 0; r < n; ++r) {
      std::memcpy(out + r * z.dp, src + r * ld, static_cast<std::size_t>(d) * sizeof(bf16));
      if (d % 2 != 0) out[r * z.dp + d] = 0;
    }
  }

  /// (ceil(d / 2), np) pairs: pair t of column c = elements 2t, 2t + 1 of row c (zero
  /// for c >= n and for element d), by 16 x 16 tiles of pairs.
  static void pack_nt_rhs(const bf16* src, index_t ld, index_t n, index_t d, float* dst, index_t np) {
    auto* out = reinterpret_cast<std::uint32_t*>(dst);
    const index_t pairs = (d + 1) / 2;
    for (index_t c0 = 0; c0 < np; c0 += 16)
      for (index_t t0 = 0; t0 < pairs; t0 += 16) {
        const __mmask32 k = lanes32(d - 2 * t0);
        __m512i r[16];  // r[i]: pairs t0.. of row c0 + i
        for (index_t i = 0; i < 16; ++i)
          r[i] = c0 + i < n ? _mm512_maskz_loadu_epi16(k, src + (c0 + i) * ld + 2 * t0) : _mm512_setzero_si512();
        transpose16(r);
        for (index_t t = t0; t < min_i(t0 + 16, pairs); ++t) _mm512_storeu_si512(out + t * np + c0, r[t - t0]);
      }
  }

  /// c(M, np) = f · lhs · rhsᵀ over the pairs of d.
  static void nt(index_t M, index_t np, const float* lhs, const float* rhs, float factor, float* c, const Dims& z) {
    gemm_pairs<false>(M, np, (z.d + 1) / 2, reinterpret_cast<const std::uint16_t*>(lhs), z.dp / 2,
                      reinterpret_cast<const std::uint16_t*>(rhs), np, c, z.bp, factor);
  }

  /// (ceil(n / 2), dp) pairs: pair row t interleaves rows 2t and 2t + 1 (zero beyond n
  /// rows and d columns).
  static void pack_nn_rhs(const bf16* src, index_t ld, index_t n, float* dst, const Dims& z) {
    auto* out = reinterpret_cast<std::uint16_t*>(dst);
    // Lanes (x0, y0, x1, y1, ...) of the low and high 16 columns of x and y.
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (index_t t = 0; 2 * t < n; ++t) {
      const bf16* x = src + 2 * t * ld;
      const bool second = 2 * t + 1 < n;
      std::uint16_t* o = out + 2 * t * z.dp;
      for (index_t j = 0; j < z.dp; j += 32) {
        const __mmask32 k = lanes32(std::max<index_t>(z.d - j, 0));
        const __m512i xv = _mm512_maskz_loadu_epi16(k, x + std::min(j, z.d));
        const __m512i yv = second ? _mm512_maskz_loadu_epi16(k, x + ld + std::min(j, z.d)) : _mm512_setzero_si512();
        _mm512_storeu_si512(o + 2 * j, _mm512_permutex2var_epi16(xv, lo, yv));
        if (j + 16 < z.dp) _mm512_storeu_si512(o + 2 * j + 32, _mm512_permutex2var_epi16(xv, hi, yv));
      }
    }
  }

  /// acc(M, dp) += a(M, n) · rhs: a's rows rounded to bf16 in place, then pairs of n.
  static void nn(index_t M, index_t n, float* a, const float* rhs, float* acc, const Dims& z) {
    for (index_t r = 0; r < M; ++r) {
      float* row = a + r * z.bp;
      auto* out = reinterpret_cast<std::uint16_t*>(row);
      // Chunk c's 64 bytes of bf16 end before the fp32 of chunk c + 32 begin: in place.
      for (index_t c = 0; c < n; c += 32) {
        const index_t k = n - c;
        const __m512 x0 = _mm512_maskz_loadu_ps(lanes16(k), row + c);
        const __m512 x1 = k > 16 ? _mm512_maskz_loadu_ps(lanes16(k - 16), row + c + 16) : _mm512_setzero_ps();
        _mm512_mask_storeu_epi16(out + c, lanes32(k + k % 2), (__m512i)_mm512_cvtne2ps_pbh(x1, x0));
      }
    }
    gemm_pairs<true>(M, z.dp, (n + 1) / 2, reinterpret_cast<const std::uint16_t*>(a), z.bp,
                     reinterpret_cast<const std::uint16_t*>(rhs), z.dp, acc, z.dp, 1.0f);
  }
};

}  // namespace

AttentionKernels<bf16> attention_kernels_bf16() { return attention_detail::table<bf16, PairProducts>(); }

}  // namespace trnsparse::kernels::cpu::avx512bf16
