// bf16 operands with AVX512-BF16 (compiled with the AVX-512 flags plus -mavx512bf16):
// vdpbf16ps multiplies pairs of bf16 along K and accumulates in fp32, twice the fp32
// FMA rate. B is packed as bf16 row pairs: panel element (t, c, h) holds B(2t + h, c),
// so one 32-bit broadcast of A(r, 2t..2t+1) meets 16 columns per register.
// That path needs an even block size (pairs never cross a block) and a non-transposed A
// (pairs of A adjacent in memory). Small blocks (b <= 8, odd ones too) against 2 to 8
// columns run the small pair kernel below; other cases, and SpMV, run this TU's copy of
// the widening kernels of bsr_tile.inc. Note vdpbf16ps flushes subnormal inputs and
// outputs to zero, so a bf16 product's last bits depend on its path (its width, the
// CPU's ISA), though never on the thread count.
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/kernels.hpp"
#include "kernels/cpu/prefetch.hpp"

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

// Small blocks (b <= 8) against at most 8 columns: two rows of C per zmm register (lanes
// 0-7 row 2s, lanes 8-15 row 2s + 1), and the block's entries paired along k, so that one
// vdpbf16ps does 32 of a block's multiply-adds where the widening kernels do 8 per FMA.
// B is packed per block row as small_pair_rows(b) pair rows (b rows padded to an even
// count, each pair row kSmallPairColumns columns of (B(2t, c), B(2t + 1, c)), zero past
// B's rows, the block's rows and the width); A's pairs come from the block in registers
// by one permute each (SmallPairLanes).
constexpr index_t kSmallPairColumns = 8;

template <class TY>
bool use_small_pairs(const BsrProduct<bf16, TY>& p) {
  return small_kernel(p) && !p.trans_a && p.width > 1 && p.width <= kSmallPairColumns;
}

/// Pair rows per block row of B.
constexpr index_t small_pair_rows(index_t b) { return (b + 1) / 2; }

template <class TY>
std::size_t pairs_packed_bytes(const BsrProduct<bf16, TY>& p) {
  if (use_small_pairs(p))
    return static_cast<std::size_t>(p.in_block_rows * small_pair_rows(p.b) * 2 * kSmallPairColumns) * sizeof(bf16);
  if (!use_pairs(p)) return packed_bytes(p);
  return static_cast<std::size_t>(p.in_block_rows * p.b * round_up(p.width, kPairNR)) * sizeof(bf16);
}

template <class TY>
std::size_t pairs_workspace_bytes(const BsrProduct<bf16, TY>& p) {
  if (!use_pairs(p)) return workspace_bytes(p);
  return static_cast<std::size_t>(p.b * chunk_width<bf16>()) * sizeof(float);
}

template <class TY>
void small_pairs_pack(const BsrProduct<bf16, TY>& p, std::uint16_t* packed, index_t r0, index_t r1) {
  const index_t b = p.b, pairs = small_pair_rows(b);
  const bool whole = p.width >= kSmallPairColumns;
  const auto columns = static_cast<__mmask8>((1u << min_index(p.width, kSmallPairColumns)) - 1u);
  // Row k of block row bj: its first 8 words, zero past B's rows, the block row and the width.
  const auto row = [&](index_t bj, index_t k) {
    const index_t i = bj * b + k;
    if (k >= b || i >= p.in_rows) return _mm_setzero_si128();
    const bf16* src = p.B + i * p.ldb;
    return whole ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)) : _mm_maskz_loadu_epi16(columns, src);
  };
  for (index_t bj = r0; bj < r1; ++bj) {
    if (p.packs && !p.packs[bj]) continue;
    std::uint16_t* dst = packed + bj * pairs * 2 * kSmallPairColumns;
    for (index_t t = 0; t < pairs; ++t, dst += 2 * kSmallPairColumns) {  // rows 2t and 2t + 1, interleaved
      const __m128i even = row(bj, 2 * t), odd = row(bj, 2 * t + 1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi16(even, odd));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + kSmallPairColumns), _mm_unpackhi_epi16(even, odd));
    }
  }
}

template <class TY>
void pairs_pack(const BsrProduct<bf16, TY>& p, void* packed_v, index_t r0, index_t r1) {
  if (use_small_pairs(p)) return small_pairs_pack(p, static_cast<std::uint16_t*>(packed_v), r0, r1);
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

/// How a B x B block's pairs are made: for row pair s and k pair t, fp32 lane d of the
/// result holds the bf16 pair (A(r, 2t), A(r, 2t + 1)), r = 2s + d / 8, as one dword
/// permute of two registers (`index`, from vpermt2d's two sources). A row's pairs
/// start at word r B + 2t: for an even B always at a dword of the block (the sources:
/// its words 0-31 and 32-63); for an odd B every other row's start at an odd word, so the
/// second source is the block read one word on. An odd B's last pair has no entry
/// 2t + 1: `pad` clears that word (it holds the next row's first entry), so that an
/// infinite A(r + 1, 0) cannot meet the zero in B's padding. Lanes of rows past B are
/// never stored.
template <int B>
struct SmallPairLanes {
  static constexpr int S = (B + 1) / 2;
  static constexpr bool odd = B % 2 == 1;
  /// Words a block is read as: whole ymm or zmm registers, as few as hold it (a zmm
  /// load at a block's stride crosses a cache line on almost every block).
  static constexpr int words = B * B <= 16 ? 16 : B * B <= 32 ? 32 : 64;
  static_assert(!odd || words <= 32, "an odd block pairs by word permutes of one register");
  /// Even B: pair (s, kp)'s dword lane d is dword dwords[s][kp][d] of (lo, hi), the
  /// block's words 0-31 and 32-63 (both its words 0-15 when it has no more): pairs of an
  /// even row length never straddle rows. Rows past B read garbage that no output sums.
  /// Odd B: word lane w is word words[s][kp][w] of the block in one register, or 32, the
  /// first word of a zero register: an odd row's last pair is padded with a zero, and
  /// not with the next row's entry, so that an infinite entry never meets B's zero
  /// padding (inf x 0 is NaN).
  struct Table {
    std::array<std::uint32_t, 16> dwords[S][S];
    std::array<std::uint16_t, 32> words[S][S];
  };
  static constexpr Table table = [] {
    Table t{};
    for (int s = 0; s < S; ++s)
      for (int kp = 0; kp < S; ++kp)
        for (int d = 0; d < 16; ++d) {
          const int r = 2 * s + d / 8, o = r * B + 2 * kp;
          if (!odd && r < B) t.dwords[s][kp][d] = static_cast<std::uint32_t>(o / 2);
          for (int h = 0; h < 2; ++h)
            t.words[s][kp][2 * d + h] = static_cast<std::uint16_t>(r < B && 2 * kp + h < B ? o + h : 32);
        }
    return t;
  }();
  static constexpr index_t span = words;
};

/// C(block rows [r0, r1), the first width <= 8 columns) from pair-packed B (see
/// use_small_pairs); the row's blocks dealt to G accumulator groups as in small_pass.
template <int B, class TY, class I>
void small_pairs_rows(const BsrProduct<bf16, TY>& p, const I* idx, const std::uint16_t* packed, index_t r0,
                      index_t r1) {
  using T = SmallPairLanes<B>;
  constexpr int S = T::S;
  constexpr int G = accumulator_groups(S, S * S, S, accumulator_registers<Vec<float>>() * 3 / 2);
  constexpr index_t stride = S * 2 * kSmallPairColumns;  // packed words per block row of B
  const Blocks<B, true, bf16, TY, I> blocks(p, idx, T::span);
  for (index_t bi = r0; bi < r1; ++bi) {
    __m512 acc[G][S];
    for (int g = 0; g < G; ++g)
      for (int s = 0; s < S; ++s) acc[g][s] = _mm512_setzero_ps();
    const index_t q0 = p.ptr[bi], q1 = p.ptr[bi + 1];
    const auto run = [&](auto whole) {
      constexpr bool Whole = decltype(whole)::value;
      const auto step = [&](__m512(&g_acc)[S], index_t q) __attribute__((always_inline)) {
        const bf16* a = blocks.at(q);
        const bool readable = Whole || blocks.whole(q, a);
        // n words from p: whole (readable) or masked, in a ymm or zmm register.
        const auto words = [&](const bf16* from, unsigned n) {
          if constexpr (T::words == 16)
            return _mm512_zextsi256_si512(readable ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from))
                                                   : _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1u), from));
          else
            return readable ? _mm512_loadu_si512(from)
                            : _mm512_maskz_loadu_epi16(n >= 32 ? ~__mmask32{0} : (__mmask32{1} << n) - 1, from);
        };
        constexpr unsigned n = B * B;
        __m512i lo, hi;
        if constexpr (T::odd || T::words <= 32) {
          lo = hi = words(a, n);
        } else {
          lo = _mm512_loadu_si512(a);  // n > 32: the first 32 words are the block's
          hi = words(a + 32, n - 32);
        }
        const std::uint16_t* bp = packed + blocks.column(q) * stride;
        __m512bh bt[S];
        for (int t = 0; t < S; ++t)
          bt[t] = (__m512bh)_mm512_broadcast_i64x4(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + t * 2 * kSmallPairColumns)));
        for (int s = 0; s < S; ++s)
          for (int t = 0; t < S; ++t) {
            const __m512i pair =
                T::odd ? _mm512_permutex2var_epi16(lo, _mm512_loadu_si512(T::table.words[s][t].data()), _mm512_setzero_si512())
                       : _mm512_permutex2var_epi32(lo, _mm512_loadu_si512(T::table.dwords[s][t].data()), hi);
            g_acc[s] = _mm512_dpbf16_ps(g_acc[s], (__m512bh)pair, bt[t]);
          }
      };
      blocks.deal(acc, q0, q1, step);
    };
    if (blocks.all_whole(q1)) run(std::true_type{});
    else run(std::false_type{});
    const index_t rows = min_index(B, p.out_rows - bi * B);
    alignas(64) float out[16];
    for (int s = 0; s < S; ++s) {
      __m512 sum = acc[0][s];
      for (int g = 1; g < G; ++g) sum = _mm512_add_ps(sum, acc[g][s]);
      // Rows of 8 fp32 columns written as vectors, by the scalar loop's operations (alpha
      // * s, plus beta * c, each rounded).
      if constexpr (std::is_same_v<TY, float>) {
        if (p.width == kSmallPairColumns) {
          sum = _mm512_mul_ps(_mm512_set1_ps(p.alpha), sum);
          for (index_t h = 0; h < 2 && 2 * s + h < rows; ++h) {
            float* c = p.C + (bi * B + 2 * s + h) * p.ldc;
            __m256 v = h == 0 ? _mm512_castps512_ps256(sum) : _mm512_extractf32x8_ps(sum, 1);
            if (p.beta != 0.0f) v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(p.beta), _mm256_loadu_ps(c)));
            _mm256_storeu_ps(c, v);
          }
          continue;
        }
      }
      _mm512_store_ps(out, sum);
      for (index_t h = 0; h < 2 && 2 * s + h < rows; ++h) {
        TY* c = p.C + (bi * B + 2 * s + h) * p.ldc;
        const float* o = out + 8 * h;
        if (p.beta == 0.0f)
          for (index_t j = 0; j < p.width; ++j) c[j] = narrow_to<TY>(p.alpha * o[j]);
        else
          for (index_t j = 0; j < p.width; ++j) c[j] = narrow_to<TY>(p.alpha * o[j] + p.beta * widen(c[j]));
      }
    }
  }
}

// SpMV (width 1, x contiguous) with small blocks, as pairs too: fp32 lane r S + t of NL
// registers holds the row's sum of A(r, 2t) x(2t) + A(r, 2t + 1) x(2t + 1), one vdpbf16ps
// per register a block where the widening kernel spends four instructions (two widening
// shuffles, a permute of x, an FMA) per 16 products. An even B's pairs are the block's
// dwords in storage order, read as they lie; an odd B's come from one word permute of
// the block, each row's last pair padded with a zero word, in A and in x (see
// SmallPairLanes: a zero pad in A alone would meet x's next entry, which may be
// infinite). x's pairs are one dword (even B) or word (odd B) permute of its B values.
template <int B>
struct PairVectorLanes {
  static constexpr int S = (B + 1) / 2;
  static constexpr int NL = (B * S + 15) / 16;  // registers of fp32 lanes
  static constexpr bool odd = B % 2 == 1;
  static_assert(!odd || NL == 1, "an odd block's pairs fill one register");
  struct Table {
    std::array<std::uint32_t, 16> x_dwords[NL];  // even B: lane d of register v meets x's dword (16 v + d) % S
    std::array<std::uint16_t, 32> x_words;       // odd B: word 2d + h of x's pairs, 32 (zero) past B
    std::array<std::uint16_t, 32> a_words;       // odd B: word 2d + h of A's pairs, 32 (zero) past the row
  };
  static constexpr Table table = [] {
    Table t{};
    for (int v = 0; v < NL; ++v)
      for (int d = 0; d < 16; ++d) t.x_dwords[v][d] = static_cast<std::uint32_t>((16 * v + d) % S);
    for (int d = 0; d < 16; ++d)
      for (int h = 0; h < 2; ++h) {
        const int r = d / S, k = 2 * (d % S) + h;
        const bool entry = d < B * S && k < B;
        t.x_words[2 * d + h] = static_cast<std::uint16_t>(entry ? k : 32);
        t.a_words[2 * d + h] = static_cast<std::uint16_t>(entry ? r * B + k : 32);
      }
    return t;
  }();
};

/// Whether the pair SpMV runs the product.
template <class TY>
bool use_pair_vector(const BsrProduct<bf16, TY>& p) {
  return small_kernel(p) && !p.trans_a && p.width == 1 && p.ldb == 1;
}

/// y(block rows [r0, r1)) = alpha * A x + beta * y (use_pair_vector); the row's blocks
/// dealt to G accumulator groups (Blocks::deal).
template <int B, class TY, class I>
void pair_vector_rows(const BsrProduct<bf16, TY>& p, const I* idx, index_t r0, index_t r1) {
  using L = PairVectorLanes<B>;
  constexpr int S = L::S, NL = L::NL;
  constexpr int G = accumulator_groups(1, NL, NL, accumulator_registers<Vec<float>>());
  const Blocks<B, true, bf16, TY, I> blocks(p, idx, NL * 32);
  const bf16* const x = p.B;
  const index_t in_rows = p.in_rows;
  // Block columns up to whole_x read x's 8 words from their first unmasked (B <= 8).
  const index_t whole_x = in_rows >= 8 ? (in_rows - 8) / B : -1;
  const __m512i zero = _mm512_setzero_si512();
  __m512i x_dwords[NL], x_words, a_words;
  for (int v = 0; v < NL; ++v) x_dwords[v] = _mm512_loadu_si512(L::table.x_dwords[v].data());
  x_words = _mm512_loadu_si512(L::table.x_words.data());
  a_words = _mm512_loadu_si512(L::table.a_words.data());
  for (index_t bi = r0; bi < r1; ++bi) {
    __m512 acc[G][NL];
    for (int g = 0; g < G; ++g)
      for (int v = 0; v < NL; ++v) acc[g][v] = _mm512_setzero_ps();
    const index_t q0 = p.ptr[bi], q1 = p.ptr[bi + 1];
    const auto run = [&](auto whole) {
      constexpr bool Whole = decltype(whole)::value;
      const auto step = [&](__m512(&g_acc)[NL], index_t q) __attribute__((always_inline)) {
        const index_t k0 = blocks.column(q) * B;
        const __m512i xv = _mm512_castsi128_si512(
            Whole || k0 + 8 <= in_rows
                ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + k0))
                : _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << (in_rows - k0 < 8 ? in_rows - k0 : 8)) - 1u), x + k0));
        const bf16* a = blocks.at(q);
        const bool readable = Whole || blocks.whole(q, a);
        if constexpr (L::odd) {
          __m512i block;  // in a ymm register when it fits (a zmm load at a block's stride splits lines)
          if constexpr (B * B <= 16)
            block = _mm512_castsi256_si512(readable ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))
                                                    : _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << (B * B)) - 1u), a));
          else
            block = readable ? _mm512_loadu_si512(a) : _mm512_maskz_loadu_epi16((__mmask32{1} << (B * B)) - 1, a);
          const __m512i pairs = _mm512_permutex2var_epi16(block, a_words, zero);
          g_acc[0] = _mm512_dpbf16_ps(g_acc[0], (__m512bh)pairs,
                                      (__m512bh)_mm512_permutex2var_epi16(xv, x_words, zero));
        } else {
          for (int v = 0; v < NL; ++v) {
            constexpr unsigned words = B * B;
            const unsigned left = words - 32 * v;
            const __m512i pairs =
                readable ? _mm512_loadu_si512(a + 32 * v)
                         : _mm512_maskz_loadu_epi16(left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1, a + 32 * v);
            g_acc[v] = _mm512_dpbf16_ps(g_acc[v], (__m512bh)pairs,
                                        (__m512bh)_mm512_permutexvar_epi32(x_dwords[v], xv));
          }
        }
      };
      blocks.deal(acc, q0, q1, step);
    };
    if (q1 > q0 && blocks.column(q1 - 1) <= whole_x && blocks.all_whole(q1)) run(std::true_type{});
    else run(std::false_type{});
    alignas(64) float lane[NL * 16];
    for (int v = 0; v < NL; ++v) {
      __m512 sum = acc[0][v];
      for (int g = 1; g < G; ++g) sum = _mm512_add_ps(sum, acc[g][v]);
      _mm512_store_ps(lane + 16 * v, sum);
    }
    const index_t rows = min_index(B, p.out_rows - bi * B);
    for (index_t r = 0; r < rows; ++r) {
      float s = lane[r * S];
      for (int t = 1; t < S; ++t) s += lane[r * S + t];
      TY* y = p.C + (bi * B + r) * p.ldc;
      *y = narrow_to<TY>(p.beta == 0.0f ? p.alpha * s : p.alpha * s + p.beta * widen(*y));
    }
  }
}

template <class TY>
void small_pairs_compute(const BsrProduct<bf16, TY>& p, const std::uint16_t* packed, index_t r0, index_t r1) {
  with_small_block(p.b, [&](auto B) {
    small_pairs_rows<decltype(B)::value>(p, p.idx32, packed, r0, r1);
  });
}

/// The tiling of compute_panels in bsr_tile.inc, on bf16 pair panels.
template <class TY>
void pairs_compute(const BsrProduct<bf16, TY>& p, const void* packed_v, void* ws_v, index_t r0, index_t r1) {
  if (use_small_pairs(p)) return small_pairs_compute(p, static_cast<const std::uint16_t*>(packed_v), r0, r1);
  if (use_pair_vector(p))
    return with_small_block(p.b, [&](auto B) { pair_vector_rows<decltype(B)::value>(p, p.idx32, r0, r1); });
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
