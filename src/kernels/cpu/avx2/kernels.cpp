// AVX2 + FMA kernels (compiled with -mavx2 -mfma): 4 x 2 registers of 8 floats / 4
// doubles per microkernel tile, 8 of the 16 ymm registers holding accumulators.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/tables.hpp"
#include "kernels/cpu/prefetch.hpp"
#include "plan/csr_analysis.hpp"

namespace trnsparse::kernels::cpu::avx2 {

template <class Acc>
struct Vec;
template <>
struct Vec<float> {
  using reg = __m256;
  static constexpr int W = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  /// Lanes [0, n) of a vector, n <= W.
  static __m256i lanes(index_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  /// The first n <= W lanes from p, the others zero (nothing read beyond p + n).
  static reg loadn(const float* p, index_t n) { return _mm256_maskload_ps(p, lanes(n)); }
  /// The first n <= W lanes of v to p (nothing written beyond p + n).
  static void storen(float* p, reg v, index_t n) { _mm256_maskstore_ps(p, lanes(n), v); }
  /// W bf16 values from p widened (a bf16 is the upper half of a float).
  static reg load_bf16(const bf16* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  }
  /// n <= W bf16 values from p widened, the rest zero.
  static reg loadn_bf16(const bf16* p, index_t n) {
    alignas(16) std::uint16_t h[W] = {};
    if (n == W) std::memcpy(h, p, sizeof h);
    else std::memcpy(h, p, static_cast<std::size_t>(n) * sizeof *h);
    const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  }
  /// One bf16 widened: inserted as the upper half of a zeroed lane (no trip through a
  /// general register).
  static float widen1(bf16 v) {
    return _mm_cvtss_f32(_mm_castsi128_ps(_mm_insert_epi16(_mm_setzero_si128(), v.bits, 1)));
  }
  /// Lane i of the result is lane lanes[i] of v.
  static reg permute(reg v, const std::int32_t* lanes) {
    return _mm256_permutevar8x32_ps(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes)));
  }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  /// Q values from p in every 128-bit lane, and lane element I of each lane broadcast
  /// across it: a value broadcast from memory takes a load port, which the rows of B
  /// need too, and an in-lane shuffle none, so the shuffles issue at the higher rate
  /// (docs/benchmarks.md, "Small blocks").
  static constexpr int Q = 4;
  static reg quad(const float* p) { return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p)); }
  template <int I>
  static reg splat(reg v) { return _mm256_permute_ps(v, I * 0x55); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static float fma1(float a, float b, float c) { return std::fma(a, b, c); }
  static float hsum(reg v) {  // ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7))
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  /// r[i] lane j becomes r[j] lane i: pairs of rows interleaved, then quads, then the
  /// two 128-bit lanes of two registers gathered.
  static void transpose(reg (&r)[W]) {
    reg t[W], u[W];
    for (int i = 0; i < W; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < W; g += 4) {  // u[g + c], 128-bit lane l: column 4l + c of rows g..g+3
      const __m256d a = _mm256_castps_pd(t[g]), b = _mm256_castps_pd(t[g + 1]);
      const __m256d c = _mm256_castps_pd(t[g + 2]), d = _mm256_castps_pd(t[g + 3]);
      u[g] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
      u[g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
      u[g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, d));
      u[g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, d));
    }
    for (int c = 0; c < 4; ++c) {
      r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
      r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
  }
};
template <>
struct Vec<double> {
  using reg = __m256d;
  static constexpr int W = 4;
  static reg zero() { return _mm256_setzero_pd(); }
  static reg load(const double* p) { return _mm256_loadu_pd(p); }
  static __m256i lanes(index_t n) { return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3)); }
  static reg loadn(const double* p, index_t n) { return _mm256_maskload_pd(p, lanes(n)); }
  static void storen(double* p, reg v, index_t n) { _mm256_maskstore_pd(p, lanes(n), v); }
  static reg permute(reg v, const std::int32_t* lanes) {  // as 32-bit halves: lane l is halves 2l, 2l + 1
    const __m256i l = _mm256_cvtepi32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lanes)));
    const __m256i halves = _mm256_or_si256(_mm256_slli_epi64(l, 33), _mm256_slli_epi64(l, 1));
    return _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(v), _mm256_add_epi32(halves, _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1))));
  }
  static void store(double* p, reg v) { _mm256_storeu_pd(p, v); }
  static reg set1(double x) { return _mm256_set1_pd(x); }
  static constexpr int Q = 2;
  static reg quad(const double* p) { return _mm256_broadcast_pd(reinterpret_cast<const __m128d*>(p)); }
  template <int I>
  static reg splat(reg v) { return _mm256_permute_pd(v, I ? 0xF : 0x0); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_pd(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_pd(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_pd(a, b); }
  static double fma1(double a, double b, double c) { return std::fma(a, b, c); }
  static double hsum(reg v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }
  /// r[i] lane j becomes r[j] lane i.
  static void transpose(reg (&r)[W]) {
    const reg t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    const reg t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
  }
};
template <class Acc>
using Narrow = Vec<Acc>;  // no wider vectors to narrow
constexpr int kVectorRegisters = 16;
constexpr int kMR = 4;
constexpr int kNV = 2;

#include "kernels/cpu/bsr_tile.inc"
#include "kernels/cpu/csr_tile.inc"
#include "kernels/cpu/symmetric_tile.inc"
#include "kernels/cpu/symmetric_table.inc"
#include "kernels/cpu/spgemm_tile.inc"

}  // namespace trnsparse::kernels::cpu::avx2
