// Portable attention kernels: the tiling of attention_tile.inc with one-lane "vectors"
// (std::exp2), compiled for the x86-64 baseline. TRNSPARSE_ISA=scalar selects them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::scalar {

struct AVec {
  using reg = float;
  static constexpr int W = 1;
  static reg zero() { return 0.0f; }
  static reg load(const float* p) { return *p; }
  static reg loadn(const float*, index_t, float fill) { return fill; }  // n < W: no lane
  static void store(float* p, reg v) { *p = v; }
  static void storen(float*, reg, index_t) {}
  static reg set1(float x) { return x; }
  static reg add(reg a, reg b) { return a + b; }
  static reg sub(reg a, reg b) { return a - b; }
  static reg mul(reg a, reg b) { return a * b; }
  static reg div(reg a, reg b) { return a / b; }
  static reg fma(reg a, reg b, reg c) { return a * b + c; }
  static reg max(reg a, reg b) { return a > b ? a : b; }
  static float hmax(reg v) { return v; }
  static float hsum(reg v) { return v; }
  static reg exp2(reg x) { return x < -126.5f ? 0.0f : std::exp2(std::min(x, 127.0f)); }
};
constexpr int kAttnMR = 4;
constexpr int kAttnNV = 4;

#include "kernels/cpu/attention_tile.inc"

template <class T>
AttentionKernels<T> attention_kernels() {
  return attention_detail::table<T, attention_detail::WideProducts>();
}
template AttentionKernels<float> attention_kernels<float>();
template AttentionKernels<bf16> attention_kernels<bf16>();

}  // namespace trnsparse::kernels::cpu::scalar
