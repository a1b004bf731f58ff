// AVX-512 attention kernels (compiled with the AVX-512 flags): 8 x 2 registers of 16
// floats per microkernel tile, a degree-6 polynomial 2^x on vectors.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "kernels/cpu/attention.hpp"

// GCC 12 warns falsely inside its own _mm512_reduce_*_ps (_mm256_undefined_ps).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace trnsparse::kernels::cpu::avx512 {

struct AVec {
  using reg = __m512;
  static constexpr int W = 16;
  static __mmask16 lanes(index_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static reg zero() { return _mm512_setzero_ps(); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static reg loadn(const float* p, index_t n, float fill) { return _mm512_mask_loadu_ps(set1(fill), lanes(n), p); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static void storen(float* p, reg v, index_t n) { _mm512_mask_storeu_ps(p, lanes(n), v); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static float hmax(reg v) { return _mm512_reduce_max_ps(v); }
  static float hsum(reg v) { return _mm512_reduce_add_ps(v); }
  /// 2^x: x = n + f, n = round(x), |f| <= 1/2, 2^f by its degree-6 Taylor polynomial
  /// (relative error < 2e-7), 2^n through the exponent bits; 0 below -126.5.
  static reg exp2(reg x) {
    x = _mm512_min_ps(_mm512_max_ps(x, set1(-127.0f)), set1(127.0f));
    const reg n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const reg f = _mm512_mul_ps(_mm512_sub_ps(x, n), set1(0.693147180559945309f));  // f ln 2
    reg p = set1(1.0f / 720);
    p = fma(p, f, set1(1.0f / 120));
    p = fma(p, f, set1(1.0f / 24));
    p = fma(p, f, set1(1.0f / 6));
    p = fma(p, f, set1(0.5f));
    p = fma(p, f, set1(1.0f));
    p = fma(p, f, set1(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  }
};
constexpr int kAttnMR = 8;
constexpr int kAttnNV = 2;

#include "kernels/cpu/attention_tile.inc"

}  // namespace trnsparse::kernels::cpu::avx512
