// AVX2 + FMA attention kernels: 4 x 2 registers of 8 floats per microkernel tile, the
// same 2^x polynomial as AVX-512.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::avx2 {

struct AVec {
  using reg = __m256;
  static constexpr int W = 8;
  static __m256i lanes(index_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static reg zero() { return _mm256_setzero_ps(); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg loadn(const float* p, index_t n, float fill) {
    const __m256i m = lanes(n);
    return _mm256_blendv_ps(set1(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void storen(float* p, reg v, index_t n) { _mm256_maskstore_ps(p, lanes(n), v); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm256_div_ps(a, b); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static float hmax(reg v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hsum(reg v) {  // ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7))
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  /// 2^x as in the AVX-512 kernels; 0 below -126.5.
  static reg exp2(reg x) {
    x = _mm256_min_ps(_mm256_max_ps(x, set1(-127.0f)), set1(127.0f));
    const reg n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const reg f = _mm256_mul_ps(_mm256_sub_ps(x, n), set1(0.693147180559945309f));
    reg p = set1(1.0f / 720);
    p = fma(p, f, set1(1.0f / 120));
    p = fma(p, f, set1(1.0f / 24));
    p = fma(p, f, set1(1.0f / 6));
    p = fma(p, f, set1(0.5f));
    p = fma(p, f, set1(1.0f));
    p = fma(p, f, set1(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  }
};
constexpr int kAttnMR = 4;
constexpr int kAttnNV = 2;

#include "kernels/cpu/attention_tile.inc"

template <class T>
AttentionKernels<T> attention_kernels() {
  return attention_detail::table<T, attention_detail::WideProducts>();
}
template AttentionKernels<float> attention_kernels<float>();
template AttentionKernels<bf16> attention_kernels<bf16>();

}  // namespace trnsparse::kernels::cpu::avx2
