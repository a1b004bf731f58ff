// bf16 operands with AVX512-BF16 (compiled with the AVX-512 flags plus -mavx512bf16):
// vdpbf16ps multiplies pairs of bf16 along K and accumulates in fp32, twice the fp32
// FMA rate. B is packed as bf16 row pairs: panel element (t, c, h) holds B(2t + h, c),
// so one 32-bit broadcast of A(r, 2t..2t+1) meets 16 columns per register.
// Needs an even block size (pairs never cross a block) and a non-transposed A (pairs
// of A adjacent in memory); other cases, and SpMV, run this TU's copy of the widening
// kernels of bsr_tile.inc. Note vdpbf16ps flushes subnormal inputs and outputs to zero.
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/kernels.hpp"

namespace trnsparse::kernels::cpu::avx512bf16 {

#include "kernels/cpu/avx512/vec.inc"
#include "kernels/cpu/bsr_tile.inc"

namespace {

constexpr index_t kPairNR = 2 * 16;  // columns per panel: two zmm of 16 fp32 lanes
static_assert(kPairNR == panel_width<bf16>(), "pair panels follow bsr_tile.inc's packed layout (panel_offset)");

template <class TY>
bool use_pairs(const BsrProduct<bf16, TY>& p) {
  return p.width > 1 && p.b % 2 == 0 && !p.trans_a && !small_kernel(p);
}

template <class TY>
std::size_t pairs_packed_bytes(const BsrProduct<bf16, TY>& p) {
  if (!use_pairs(p)) return packed_bytes(p);
  return static_cast<std::size_t>(p.in_block_rows * p.b * round_up(p.width, kPairNR)) * sizeof(bf16);
}

template <class TY>
std::size_t pairs_workspace_bytes(const BsrProduct<bf16, TY>& p) {
  if (!use_pairs(p)) return workspace_bytes(p);
  return static_cast<std::size_t>(p.b * chunk_width<bf16>()) * sizeof(float);
}

template <class TY>
void pairs_pack(const BsrProduct<bf16, TY>& p, void* packed_v, index_t r0, index_t r1) {
  if (!use_pairs(p)) return pack(p, packed_v, r0, r1);
  auto* packed = static_cast<std::uint16_t*>(packed_v);
  for (index_t i = r0 * p.b; i < r1 * p.b; ++i) {  // row by row: B read in order, as pack()
    if (p.packs && !p.packs[i / p.b]) continue;
    const bf16* src = p.B + i * p.ldb;
    for (index_t jp = 0; jp * kPairNR < p.width; ++jp) {
      const index_t c0 = jp * kPairNR, valid = i < p.in_rows ? min_index(kPairNR, p.width - c0) : 0;
      std::uint16_t* dst = packed + panel_offset<bf16>(p.in_block_rows, p.b, p.width, i / p.b, jp) +
                           (i % p.b & ~index_t{1}) * kPairNR + (i & 1);
      for (index_t c = 0; c < valid; ++c) dst[2 * c] = src[c0 + c].bits;
      for (index_t c = valid; c < kPairNR; ++c) dst[2 * c] = 0;
    }
  }
}

/// ws(MR, 32) (+)= a(MR, b) * bp(b, 32), K in pairs.
template <int MR>
void micro_pairs(index_t b, const bf16* a, const std::uint16_t* bp, float* ws, index_t ldw, bool first) {
  __m512 acc[MR][2];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v) acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(ws + r * ldw + 16 * v);
  for (index_t k = 0; k < b; k += 2) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + k * kPairNR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + k * kPairNR + 32);
    for (int r = 0; r < MR; ++r) {
      std::uint32_t pair;
      std::memcpy(&pair, a + r * b + k, sizeof pair);
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v) _mm512_storeu_ps(ws + r * ldw + 16 * v, acc[r][v]);
}

template <int... R>
void micro_pairs_rows(std::integer_sequence<int, R...>, int rows, index_t b, const bf16* a, const std::uint16_t* bp,
                      float* ws, index_t ldw, bool first) {
  using Fn = void (*)(index_t, const bf16*, const std::uint16_t*, float*, index_t, bool);
  static constexpr Fn table[] = {&micro_pairs<R + 1>...};
  table[rows - 1](b, a, bp, ws, ldw, first);
}

/// The tiling of compute_panels in bsr_tile.inc, on bf16 pair panels.
template <class TY>
void pairs_compute(const BsrProduct<bf16, TY>& p, const void* packed_v, void* ws_v, index_t r0, index_t r1) {
  if (!use_pairs(p)) return compute(p, packed_v, ws_v, r0, r1);
  const auto* packed = static_cast<const std::uint16_t*>(packed_v);
  auto* ws = static_cast<float*>(ws_v);
  const index_t b = p.b, ncw = chunk_width<bf16>();
  const auto strips = std::make_integer_sequence<int, kMR>{};
  for (index_t bi = r0; bi < r1; ++bi) {
    const index_t rows = min_index(b, p.out_rows - bi * b);
    for (index_t c0 = 0; c0 < p.width; c0 += ncw) {
      const index_t nc = min_index(ncw, p.width - c0);
      const index_t panels = (nc + kPairNR - 1) / kPairNR;
      if (p.ptr[bi] == p.ptr[bi + 1])
        for (index_t i = 0; i < rows * ncw; ++i) ws[i] = 0.0f;
      for (index_t q = p.ptr[bi]; q < p.ptr[bi + 1]; ++q) {
        const bf16* blk = p.block(q);
        const std::uint16_t* bq = packed + panel_offset<bf16>(p.in_block_rows, b, p.width, p.idx[q], c0 / kPairNR);
        const bool first = q == p.ptr[bi];
        for (index_t s = 0; s < rows; s += kMR) {
          const int mr = static_cast<int>(min_index(kMR, rows - s));
          for (index_t jp = 0; jp < panels; ++jp) {
            const std::uint16_t* bpanel = bq + jp * b * kPairNR;
            float* w = ws + s * ncw + jp * kPairNR;
            if (mr == kMR) micro_pairs<kMR>(b, blk + s * b, bpanel, w, ncw, first);
            else micro_pairs_rows(strips, mr, b, blk + s * b, bpanel, w, ncw, first);
          }
        }
      }
      write_out(p, ws, ncw, bi * b, rows, c0, nc);
    }
  }
}

}  // namespace

template <class TY>
BsrKernels<bf16, TY> bsr_kernels_bf16() {
  return {&pairs_packed_bytes<TY>, &pairs_workspace_bytes<TY>, &pairs_pack<TY>, &pairs_compute<TY>};
}
template BsrKernels<bf16, float> bsr_kernels_bf16<float>();
template BsrKernels<bf16, bf16> bsr_kernels_bf16<bf16>();

}  // namespace trnsparse::kernels::cpu::avx512bf16
