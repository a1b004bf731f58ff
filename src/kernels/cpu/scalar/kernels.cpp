// Portable kernels: the tiling of bsr_tile.inc with one-lane "vectors", compiled for the
// x86-64 baseline. TRNSPARSE_ISA=scalar selects them.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/tables.hpp"
#include "kernels/cpu/prefetch.hpp"
#include "plan/csr_analysis.hpp"

namespace trnsparse::kernels::cpu::scalar {

template <class Acc>
struct Vec {
  using reg = Acc;
  static constexpr int W = 1;
  static reg zero() { return Acc(0); }
  static reg load(const Acc* p) { return *p; }
  static void store(Acc* p, reg v) { *p = v; }
  static reg loadn(const Acc* p, index_t n) { return n > 0 ? *p : Acc(0); }
  static void storen(Acc* p, reg v, index_t n) {
    if (n > 0) *p = v;
  }
  static reg set1(Acc x) { return x; }
  static constexpr int Q = 1;
  static reg quad(const Acc* p) { return *p; }
  template <int I>
  static reg splat(reg v) { return v; }
  static reg fma(reg a, reg b, reg c) { return a * b + c; }
  static reg add(reg a, reg b) { return a + b; }
  static reg mul(reg a, reg b) { return a * b; }
  /// One lane of fma, rounded as fma rounds (here: no fused multiply-add).
  static Acc fma1(Acc a, Acc b, Acc c) { return a * b + c; }
  static Acc hsum(reg v) { return v; }
  static void transpose(reg (&)[W]) {}
};
template <class Acc>
using Narrow = Vec<Acc>;
constexpr int kVectorRegisters = 16;
constexpr int kMR = 4;
constexpr int kNV = 4;

#include "kernels/cpu/bsr_tile.inc"
#include "kernels/cpu/csr_tile.inc"
#include "kernels/cpu/symmetric_tile.inc"
#include "kernels/cpu/symmetric_table.inc"
#include "kernels/cpu/spgemm_tile.inc"

}  // namespace trnsparse::kernels::cpu::scalar
