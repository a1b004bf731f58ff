// bf16 operands with AVX512-BF16 (compiled with the AVX-512 flags plus -mavx512bf16, and
// the AMX flags for the table of Isa::amx, at the end):
// vdpbf16ps multiplies pairs of bf16 along K and accumulates in fp32, twice the fp32
// FMA rate. B is packed as bf16 row pairs: panel element (t, c, h) holds B(2t + h, c),
// so one 32-bit broadcast of A(r, 2t..2t+1) meets 16 columns per register.
// That path needs an even block size (pairs never cross a block); a transposed A (a
// linear layer's dX = dY W) has each block packed into the workspace first as pairs of
// its rows (pack_pairs), so that each pair is one dword. The SDDMM (a linear layer's
// dW) runs as pairs of K (tokens) with both operands packed as pairs. Small blocks
// (b <= 8, odd ones too) against 2 to 8 columns, and against one contiguous column
// (SpMV), run the small pair kernels below, and a linear layer's decode runs with the
// tokens in lanes (token_lanes_compute); other cases run this TU's copy of the widening
// kernels of bsr_tile.inc. Note vdpbf16ps flushes subnormal inputs and outputs to zero,
// so a bf16 product's last bits depend on its path (its width, the CPU's ISA), though
// never on the thread count.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/tables.hpp"
#include "kernels/cpu/prefetch.hpp"
#include "plan/csr_analysis.hpp"

namespace trnsparse::kernels::cpu::avx512bf16 {

#include "kernels/cpu/avx512/vec.inc"
#include "kernels/cpu/bsr_tile.inc"
#include "kernels/cpu/symmetric_tile.inc"

namespace {

constexpr index_t kPairNR = 2 * 16;  // columns per panel: two zmm of 16 fp32 lanes
static_assert(kPairNR == panel_width<bf16>(), "pair panels follow bsr_tile.inc's packed layout (panel_offset)");

template <class TY>
bool use_pairs(const BsrProduct<bf16, TY>& p) {
  return p.width > 1 && p.b % 2 == 0 && !small_kernel(p) && !decode_kernel(p);
}

// Small blocks (b <= 8) against at most 8 columns: a row of C per zmm register, its 16
// lanes the 8 columns times two parities of k pairs, so that one vdpbf16ps does 32 of a
// block's multiply-adds (two pairs of A, one 64-bit broadcast from memory, against four
// rows of B) where the widening kernels do 8 per FMA, with no shuffle per block (see
// small_quads_rows). B is packed per block row (small_quads_pack).
constexpr index_t kSmallPairColumns = 8;

template <class TY>
bool use_small_pairs(const BsrProduct<bf16, TY>& p) {
  return small_kernel(p) && !p.trans_a && p.width > 1 && p.width <= kSmallPairColumns;
}

/// Quads (4 rows: two pairs) per block row of B.
constexpr index_t quads_per_row(index_t b) { return (b + 3) / 4; }

// Decode (1 to 16 tokens) with the tokens in lanes: the 16 dword lanes of a register
// hold T tokens (the width rounded up to a power of two) times S = 16 / T consecutive
// pairs of features of each, lane t S + s of pair group g holding token t's pair
// (X(t, 2(gS + s)), X(t, 2(gS + s) + 1)); zero past the tokens and the features. The same
// S pairs of a W row, broadcast to every token's slots, then meet all T tokens in one
// vdpbf16ps, so that every lane does useful multiply-adds at any power-of-two width,
// and an output's S slots are summed once, after the block row (S = 1: no sums). Each
// group of 8 rows reads its rows of each block once; a DecodeStream keeps the blocks
// coming from memory while the later groups compute.
constexpr index_t kLaneTokens = 16;

/// Pair slots per token in a decode's lanes: 16 lanes hold the width's tokens (rounded
/// up to a power of two) times this many consecutive pairs of features each.
template <class TY>
index_t lane_slots(const BsrProduct<bf16, TY>& p) {
  return kLaneTokens / static_cast<index_t>(std::bit_ceil(static_cast<std::uint64_t>(p.width)));
}

template <class TY>
bool use_token_lanes(const BsrProduct<bf16, TY>& p) {
  return decode_kernel(p) && p.b % (2 * lane_slots(p)) == 0;
}

/// Token panels of kLaneTokens tokens: panel tp holds tokens [16 tp, 16 tp + 16).
template <class TY>
index_t token_panels(const BsrProduct<bf16, TY>& p) {
  return (p.width + kLaneTokens - 1) / kLaneTokens;
}

/// The feature pairs of B's block rows [r0, r1) as token-lane pair rows, panel by panel
/// (panel tp's pair row kp at dword (tp * in_block_rows * b / 2 + kp) * 16): 16 tokens x
/// 16 pairs transposed in registers as dwords, the edges pair by pair.
template <class TY>
void token_lanes_pack(const BsrProduct<bf16, TY>& p, std::uint32_t* packed, index_t r0, index_t r1) {
  const index_t k0 = r0 * p.b / 2, k1 = r1 * p.b / 2;  // pair rows
  const index_t whole = min_index(k1, p.in_rows / 2);  // pair rows wholly inside B
  const index_t tiled = whole > k0 ? (whole - k0) / kLaneTokens * kLaneTokens : 0;
  for (index_t tp = 0; tp < token_panels(p); ++tp) {
    const index_t t0 = tp * kLaneTokens;
    std::uint32_t* panel = packed + tp * p.in_block_rows * p.b / 2 * kLaneTokens;
    transposed_tiles<Vec<float>>(  // dwords as float lanes: only moved
        kLaneTokens, tiled,
        [&](index_t t, index_t kp) {
          return t0 + t < p.width ? _mm512_loadu_ps(reinterpret_cast<const float*>(p.B + (t0 + t) * p.ldb) + k0 + kp)
                                  : _mm512_setzero_ps();
        },
        [&](index_t kp, index_t, __m512 v) {
          _mm512_storeu_ps(reinterpret_cast<float*>(panel + (k0 + kp) * kLaneTokens), v);
        });
    for (index_t kp = k0 + tiled; kp < k1; ++kp)
      for (index_t t = 0; t < kLaneTokens; ++t) {
        const auto word = [&](index_t k) -> std::uint32_t {
          return t0 + t < p.width && k < p.in_rows ? p.B[(t0 + t) * p.ldb + k].bits : 0u;
        };
        panel[kp * kLaneTokens + t] = word(2 * kp) | word(2 * kp + 1) << 16;
      }
  }
}

/// X's feature pairs of block rows [r0, r1) for a decode of T = 16 / S tokens: group g
/// of S pairs is 16 dwords at g * 16, lane t * S + s holding token t's pair g * S + s
/// (each token's S pairs copied as they lie); zero past the tokens and the features.
template <class TY>
void slot_lanes_pack(const BsrProduct<bf16, TY>& p, std::uint32_t* packed, index_t S, index_t r0, index_t r1) {
  const index_t T = kLaneTokens / S, g0 = r0 * p.b / (2 * S), g1 = r1 * p.b / (2 * S);
  for (index_t g = g0; g < g1; ++g)
    for (index_t t = 0; t < T; ++t) {
      std::uint32_t* dst = packed + g * kLaneTokens + t * S;
      const index_t k = 2 * S * g;
      if (t >= p.width) {
        std::fill_n(dst, S, 0u);
      } else if (k + 2 * S <= p.in_rows) {
        std::memcpy(dst, p.B + t * p.ldb + k, 4 * static_cast<std::size_t>(S));
      } else {
        const auto word = [&](index_t j) -> std::uint32_t { return j < p.in_rows ? p.B[t * p.ldb + j].bits : 0u; };
        for (index_t s = 0; s < S; ++s) dst[s] = word(k + 2 * s) | word(k + 2 * s + 1) << 16;
      }
    }
}

/// S pairs of W's row at w in every S-dword group of a register.
template <int S>
[[gnu::always_inline]] inline __m512bh broadcast_pairs(const bf16* w) {
  if constexpr (S == 1) {
    std::uint32_t pair;
    std::memcpy(&pair, w, sizeof pair);
    return (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
  } else if constexpr (S == 2) {
    long long pairs;
    std::memcpy(&pairs, w, sizeof pairs);
    return (__m512bh)_mm512_set1_epi64(pairs);
  } else if constexpr (S == 4) {
    return (__m512bh)_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  } else if constexpr (S == 8) {
    return (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
  } else {
    static_assert(S == 16);
    return (__m512bh)_mm512_loadu_si512(w);
  }
}

/// Output block rows [r0, r1) with the tokens in lanes (S pair slots each), in groups of
/// 8 rows.
template <int S, class TY>
void token_lanes_compute(const BsrProduct<bf16, TY>& p, const std::uint32_t* packed, index_t r0, index_t r1) {
  constexpr int MR = 8;  // decode_kernel: b is a multiple of 8
  constexpr index_t T = kLaneTokens / S;
  const index_t b = p.b, groups = b / (2 * S);
  DecodeStream<bf16> stream(p.block(p.ptr[r0]), p.block(p.ptr[r1]));
  for (index_t bi = r0; bi < r1; ++bi) {
    const index_t rows = min_index(b, p.out_rows - bi * b);
    stream.pace(b * b * index_t{sizeof(bf16)}, (rows + MR - 1) / MR);
    for (index_t g = 0; g < rows; g += MR) {
      __m512 acc[MR];
      for (auto& a : acc) a = _mm512_setzero_ps();
      for (index_t q = p.ptr[bi]; q < p.ptr[bi + 1]; ++q) {
        stream.visit();
        const bf16* blk = p.block(q) + g * b;
        const std::uint32_t* x = packed + p.column(q) * groups * kLaneTokens;
        for (index_t kg = 0; kg < groups; ++kg) {
          const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + kg * kLaneTokens);
          for (int r = 0; r < MR; ++r)
            acc[r] = _mm512_dpbf16_ps(acc[r], broadcast_pairs<S>(blk + r * b + 2 * S * kg), xv);
        }
      }
      alignas(64) float out[MR * kLaneTokens];
      for (int r = 0; r < MR; ++r) _mm512_store_ps(out + r * kLaneTokens, acc[r]);
      // Token t's S slots summed in order into lane t, in place: lane t is written after
      // lanes t S .. t S + S - 1 are read, and later tokens read lanes past t.
      for (int r = 0; r < MR; ++r)
        for (index_t t = 0; t < T; ++t) {
          float v = out[r * kLaneTokens + t * S];
          for (index_t s = 1; s < S; ++s) v += out[r * kLaneTokens + t * S + s];
          out[r * kLaneTokens + t] = v;
        }
      write_out(p, out, kLaneTokens, bi * b + g, min_index(MR, rows - g), 0, p.width);
    }
  }
}

/// token_lanes_compute for the product's slots.
template <class TY>
void token_lanes_rows(const BsrProduct<bf16, TY>& p, const std::uint32_t* packed, index_t r0, index_t r1) {
  switch (lane_slots(p)) {
    case 1: return token_lanes_compute<1>(p, packed, r0, r1);
    case 2: return token_lanes_compute<2>(p, packed, r0, r1);
    case 4: return token_lanes_compute<4>(p, packed, r0, r1);
    case 8: return token_lanes_compute<8>(p, packed, r0, r1);
    default: return token_lanes_compute<16>(p, packed, r0, r1);
  }
}

template <class TY>
std::size_t pairs_packed_bytes(const BsrProduct<bf16, TY>& p) {
  if (use_small_pairs(p)) return static_cast<std::size_t>(p.in_block_rows * quads_per_row(p.b) * 32) * sizeof(bf16);
  if (use_token_lanes(p))
    return static_cast<std::size_t>(p.in_block_rows * p.b / 2 * (kLaneTokens / lane_slots(p))) * sizeof(std::uint32_t);
  if (!use_pairs(p)) return packed_bytes(p);
  return static_cast<std::size_t>(p.in_block_rows * p.b * round_up(p.width, kPairNR)) * sizeof(bf16);
}

template <class TY>
std::size_t pairs_workspace_bytes(const BsrProduct<bf16, TY>& p) {
  if (!use_pairs(p)) return workspace_bytes(p);
  const std::size_t transposed = p.trans_a ? static_cast<std::size_t>(p.b * p.b) * sizeof(bf16) : 0;
  return static_cast<std::size_t>(p.b * chunk_width<bf16>()) * sizeof(float) + transposed;
}

/// B per block row as quads_per_row(b) registers of 32 words: dword lane 2c + h of quad j
/// holds (B(k, c), B(k + 1, c)), k = 4j + 2h (k = 0 for b = 2); zero past B's rows, the
/// block row and the width.
template <class TY>
void small_quads_pack(const BsrProduct<bf16, TY>& p, std::uint16_t* packed, index_t r0, index_t r1) {
  const index_t b = p.b, quads = quads_per_row(b);
  const bool whole = p.width >= kSmallPairColumns;
  const auto columns = static_cast<__mmask8>((1u << min_index(p.width, kSmallPairColumns)) - 1u);
  const auto row = [&](index_t bj, index_t k) {  // row k of block row bj: its first 8 words, or zero
    const index_t i = bj * b + k;
    if (k >= b || i >= p.in_rows) return _mm_setzero_si128();
    const bf16* src = p.B + i * p.ldb;
    return whole ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)) : _mm_maskz_loadu_epi16(columns, src);
  };
  for (index_t bj = r0; bj < r1; ++bj) {
    if (p.packs && !p.packs[bj]) continue;
    std::uint16_t* dst = packed + bj * quads * 32;
    for (index_t j = 0; j < quads; ++j, dst += 32) {
      // b = 2: both parities hold rows 0 and 1 (small_quads_rows: a quad is the whole block).
      const index_t k2 = b == 2 ? 0 : 4 * j + 2;
      const __m128i r0w = row(bj, 4 * j), r1w = row(bj, 4 * j + 1), r2w = row(bj, k2), r3w = row(bj, k2 + 1);
      const __m128i lo01 = _mm_unpacklo_epi16(r0w, r1w), hi01 = _mm_unpackhi_epi16(r0w, r1w);  // (B(k, c), B(k + 1, c))
      const __m128i lo23 = _mm_unpacklo_epi16(r2w, r3w), hi23 = _mm_unpackhi_epi16(r2w, r3w);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi32(lo01, lo23));  // columns 0, 1
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 8), _mm_unpackhi_epi32(lo01, lo23));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), _mm_unpacklo_epi32(hi01, hi23));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 24), _mm_unpackhi_epi32(hi01, hi23));
    }
  }
}

/// pairs_pack for a B given as Bᵀ (a linear layer's tokens x features), panel by panel,
/// block row by block row: a pair slot (features 2i, 2i + 1 of one token) is a dword of
/// the token's row, so tiles of 16 tokens x 16 pairs are dword transposes in registers;
/// the edges go word by word; rows past B's and columns past the width are zero.
template <class TY>
void pairs_pack_transposed(const BsrProduct<bf16, TY>& p, std::uint16_t* packed, index_t r0, index_t r1) {
  using V = Vec<float>;  // dwords as float lanes: only moved, never computed on
  const index_t b = p.b, i1 = min_index(r1 * b, p.in_rows);
  for (index_t jp = 0; jp * kPairNR < p.width; ++jp) {
    const index_t c0 = jp * kPairNR, valid = min_index(kPairNR, p.width - c0), valid_v = valid / V::W * V::W;
    for (index_t bj = r0; bj < r1; ++bj) {
      if (p.packs && !p.packs[bj]) continue;
      std::uint16_t* dst = packed + panel_offset<bf16>(p.in_block_rows, b, p.width, bj, jp);
      const bf16* src = p.B + c0 * p.ldb + bj * b;
      const index_t end = i1 - bj * b > 0 ? min_index(b, i1 - bj * b) : 0, end_v = end / (2 * V::W) * (2 * V::W);
      transposed_tiles<V>(
          valid_v, end_v / 2,
          [&](index_t c, index_t pair) { return _mm512_loadu_ps(reinterpret_cast<const float*>(src + c * p.ldb + 2 * pair)); },
          [&](index_t pair, index_t c, __m512 v) { _mm512_storeu_ps(reinterpret_cast<float*>(dst + pair * 2 * kPairNR + 2 * c), v); });
      for (index_t r = 0; r < b; ++r)
        for (index_t c = r < end_v ? valid_v : 0; c < kPairNR; ++c)
          dst[(r & ~index_t{1}) * kPairNR + 2 * c + (r & 1)] = r < end && c < valid ? src[c * p.ldb + r].bits : 0;
    }
  }
}

template <class TY>
void pairs_pack(const BsrProduct<bf16, TY>& p, void* packed_v, index_t r0, index_t r1) {
  if (use_small_pairs(p)) return small_quads_pack(p, static_cast<std::uint16_t*>(packed_v), r0, r1);
  if (use_token_lanes(p))
    return lane_slots(p) == 1 ? token_lanes_pack(p, static_cast<std::uint32_t*>(packed_v), r0, r1)
                              : slot_lanes_pack(p, static_cast<std::uint32_t*>(packed_v), lane_slots(p), r0, r1);
  if (!use_pairs(p)) return pack(p, packed_v, r0, r1);
  auto* packed = static_cast<std::uint16_t*>(packed_v);
  if (p.b_transposed) return pairs_pack_transposed(p, packed, r0, r1);
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

/// ws(MR, 32) (+)= a(MR, K) * bp(K, 32) over `kpairs` pairs of K: row r's pair kp (two
/// adjacent words) at a + r * ra + kp * ka, bp's pair row kp (32 dwords) at bp + kp * 64.
template <int MR>
void micro_pairs(index_t kpairs, const bf16* a, index_t ra, index_t ka, const std::uint16_t* bp, float* ws,
                 index_t ldw, bool first) {
  __m512 acc[MR][2];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v) acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(ws + r * ldw + 16 * v);
  for (index_t kp = 0; kp < kpairs; ++kp) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + kp * 2 * kPairNR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + kp * 2 * kPairNR + 32);
    for (int r = 0; r < MR; ++r) {
      std::uint32_t pair;
      std::memcpy(&pair, a + r * ra + kp * ka, sizeof pair);
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v) _mm512_storeu_ps(ws + r * ldw + 16 * v, acc[r][v]);
}

/// micro_strips of bsr_tile.inc on pairs: ws(rows, panels * 32) (+)= a(rows, K) * the
/// panels (panel jp at bp + jp * panel_stride words), strips of kMR rows, each strip
/// meeting every panel before the next starts.
template <int... R>
void pair_strips(std::integer_sequence<int, R...>, index_t rows, index_t kpairs, const bf16* a, index_t ra, index_t ka,
                 const std::uint16_t* bp, index_t panels, index_t panel_stride, float* ws, index_t ldw, bool first) {
  using Fn = void (*)(index_t, const bf16*, index_t, index_t, const std::uint16_t*, float*, index_t, bool);
  static constexpr Fn table[] = {&micro_pairs<R + 1>...};
  for (index_t s = 0; s < rows; s += kMR) {
    const Fn micro = table[min_index(kMR, rows - s) - 1];
    for (index_t jp = 0; jp < panels; ++jp)
      micro(kpairs, a + s * ra, ra, ka, bp + jp * panel_stride, ws + s * ldw + jp * kPairNR, ldw, first);
  }
}
constexpr auto kStrips = std::make_integer_sequence<int, kMR>{};

/// Dword j of the result is (even's word 16 Half + j, odd's word 16 Half + j): two rows'
/// words paired.
template <int Half>
[[gnu::always_inline]] inline __m512i interleave_words(__m512i even, __m512i odd) {
  static constexpr std::array<std::uint16_t, 32> kIndex = [] {  // word w from even (w even) or odd (w odd)
    std::array<std::uint16_t, 32> index{};
    for (int w = 0; w < 32; ++w) index[w] = static_cast<std::uint16_t>(16 * Half + w / 2 + (w % 2) * 32);
    return index;
  }();
  return _mm512_permutex2var_epi16(even, _mm512_loadu_si512(kIndex.data()), odd);
}

/// Rows [0, valid) of M (element (r, k) at src[k * ld + r] when transposed, else
/// src[r * ld + k]), K-major in pairs into dst: row r's pair kp, the dword (M(r, 2kp),
/// M(r, 2kp + 1)), at dword kp * n + r; zero from valid and past the width.
void pack_pairs(const bf16* src, index_t ld, bool transposed, index_t valid, index_t n, index_t width,
                std::uint32_t* dst) {
  const index_t kpairs = (width + 1) / 2;
  const auto word = [&](index_t r, index_t k) -> std::uint32_t {
    return k < width ? (transposed ? src[k * ld + r] : src[r * ld + k]).bits : 0u;
  };
  for (index_t kp = 0; kp < kpairs; ++kp) {
    std::uint32_t* d = dst + kp * n;
    const index_t k = 2 * kp;
    index_t r = 0;
    if (transposed && k + 1 < width)  // two rows of M's tokens: their words interleaved
      for (; r + 32 <= valid; r += 32) {
        const __m512i even = _mm512_loadu_si512(src + k * ld + r), odd = _mm512_loadu_si512(src + (k + 1) * ld + r);
        _mm512_storeu_si512(d + r, interleave_words<0>(even, odd));
        _mm512_storeu_si512(d + r + 16, interleave_words<1>(even, odd));
      }
    for (; r < valid; ++r) d[r] = word(r, k) | word(r, k + 1) << 16;
    for (; r < n; ++r) d[r] = 0;
  }
}

/// The 8 words of x from k0 in a register's first 128 bits, the others zero; zero from
/// n on too. Whole: all 8 lie before n.
template <bool Whole>
[[gnu::always_inline]] inline __m512i x_words_at(const bf16* x, index_t k0, index_t n) {
  return _mm512_zextsi128_si512(
      Whole || k0 + 8 <= n
          ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + k0))
          : _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << (n - k0 < 8 ? n - k0 : 8)) - 1u), x + k0));
}

// SpMV (width 1, x contiguous) with small blocks, as pairs too: fp32 lane r S + t of NL
// registers holds the row's sum of A(r, 2t) x(2t) + A(r, 2t + 1) x(2t + 1), one vdpbf16ps
// per register a block where the widening kernel spends four instructions (two widening
// shuffles, a permute of x, an FMA) per 16 products. An even B's pairs are the block's
// dwords in storage order, read as they lie; an odd B's come from one word permute of
// the block, each row's last pair padded with a zero word, in A and in x (a zero pad in
// A alone would meet x's next entry, which may be infinite: inf x 0 is NaN). x's pairs
// are one dword (even B) or word (odd B) permute of its B values.
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
        const __m512i xv = x_words_at<Whole>(x, blocks.column(q) * B, in_rows);
        const bf16* a = blocks.at(q);
        const bool readable = Whole || blocks.whole(q, a);
        // Words [32 v, 32 v + 32) of the block, whole (readable) or masked; in a ymm
        // register when the block fits one (a zmm load at a block's stride splits lines).
        const auto block_words = [&](int v) {
          constexpr unsigned words = B * B;
          if constexpr (words <= 16) {
            return _mm512_zextsi256_si512(readable ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))
                                                   : _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << words) - 1u), a));
          } else {
            const unsigned left = words - 32 * v;
            return readable ? _mm512_loadu_si512(a + 32 * v)
                            : _mm512_maskz_loadu_epi16(left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1, a + 32 * v);
          }
        };
        if constexpr (L::odd) {
          const __m512i pairs = _mm512_permutex2var_epi16(block_words(0), a_words, zero);
          g_acc[0] = _mm512_dpbf16_ps(g_acc[0], (__m512bh)pairs,
                                      (__m512bh)_mm512_permutex2var_epi16(xv, x_words, zero));
        } else {
          for (int v = 0; v < NL; ++v)
            g_acc[v] = _mm512_dpbf16_ps(g_acc[v], (__m512bh)block_words(v),
                                        (__m512bh)_mm512_permutexvar_epi32(x_dwords[v], xv));
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
      write_out(p, &s, 0, bi * B + r, 1, 0, 1);
    }
  }
}

/// C(block rows [r0, r1), the first width <= 8 columns) from quad-packed B
/// (small_quads_pack), with no shuffle per block: row r's register sums, in lane 2c + h,
/// column c over the k pairs of parity h; each of its quads of A (A(r, 4j..4j + 3), two
/// pairs) is one 64-bit broadcast from memory against quad j of B, the words past the
/// row cleared (an AND) so that the next row's entries, which may be infinite, never meet
/// B's zero padding. The two parities add up at the end of the block row. A 2 x 2 block
/// is one quad, its two rows' pairs: one register whose lane 2c + h holds C(h, c).
template <int B, class TY, class I>
void small_quads_rows(const BsrProduct<bf16, TY>& p, const I* idx, const std::uint16_t* packed, index_t r0,
                      index_t r1) {
  constexpr int J = (B + 3) / 4;         // quads per block row
  constexpr int tail = B - 4 * (J - 1);  // words of a row's last quad, 1 to 4
  constexpr int R = B == 2 ? 1 : B;      // accumulator registers: one per row, or the block's one
  constexpr int G = accumulator_groups(J, R * J, R, accumulator_registers<Vec<float>>() * 3 / 2);
  constexpr index_t stride = J * 32;              // packed words per block row of B
  constexpr index_t span = B == 2 ? 4 : (B - 1) * B + 4 * J;  // words a block's quads reach
  const Blocks<B, true, bf16, TY, I> blocks(p, idx, span);
  constexpr bool clear = B != 2 && tail < 4;  // the last quad reaches past the row
  const __m512i keep = _mm512_set1_epi64(clear ? (1LL << (16 * tail)) - 1 : -1LL);
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
  alignas(64) bf16 tail_block[(span + 31) / 32 * 32] = {};  // a block near the array's end, padded
  for (index_t bi = r0; bi < r1; ++bi) {
    __m512 acc[G][R];
    for (int g = 0; g < G; ++g)
      for (int r = 0; r < R; ++r) acc[g][r] = _mm512_setzero_ps();
    const index_t q0 = p.ptr[bi], q1 = p.ptr[bi + 1];
    const auto run = [&](auto whole) {
      constexpr bool Whole = decltype(whole)::value;
      const auto step = [&](__m512(&g_acc)[R], index_t q) __attribute__((always_inline)) {
        const bf16* a = blocks.at(q);
        if (!Whole && !blocks.whole(q, a)) {
          std::memcpy(tail_block, a, B * B * sizeof(bf16));
          a = tail_block;
        }
        const std::uint16_t* bp = packed + blocks.column(q) * stride;
        __m512bh bq[J];
        for (int j = 0; j < J; ++j) bq[j] = (__m512bh)_mm512_loadu_si512(bp + 32 * j);
        unrolled<R>([&](auto rc) __attribute__((always_inline)) {
          constexpr int r = decltype(rc)::value;
          unrolled<J>([&](auto jc) __attribute__((always_inline)) {
            constexpr int j = decltype(jc)::value;
            long long quad;
            std::memcpy(&quad, a + r * B + 4 * j, sizeof quad);
            __m512i av = _mm512_set1_epi64(quad);
            if constexpr (j == J - 1 && clear) av = _mm512_and_si512(av, keep);
            g_acc[r] = _mm512_dpbf16_ps(g_acc[r], (__m512bh)av, bq[j]);
          });
        });
      };
      blocks.deal(acc, q0, q1, step);
    };
    if (blocks.all_whole(q1)) run(std::true_type{});
    else run(std::false_type{});
    const index_t rows = min_index(B, p.out_rows - bi * B);
    alignas(64) float out[16];
    unrolled<B>([&](auto rc) __attribute__((always_inline)) {
      constexpr int r = decltype(rc)::value;
      if (r >= rows) return;
      __m512 sum = acc[0][B == 2 ? 0 : r];
      for (int g = 1; g < G; ++g) sum = _mm512_add_ps(sum, acc[g][B == 2 ? 0 : r]);
      __m256 v;
      if constexpr (B == 2) {  // row r in lanes 2c + r
        v = _mm512_castps512_ps256(_mm512_permutexvar_ps(_mm512_add_epi32(evens, _mm512_set1_epi32(r)), sum));
      } else {
        sum = _mm512_add_ps(sum, _mm512_permute_ps(sum, 0xB1));  // lane 2c: both parities of column c
        v = _mm512_castps512_ps256(_mm512_permutexvar_ps(evens, sum));
      }
      TY* c = p.C + (bi * B + r) * p.ldc;
      // A row of 8 fp32 columns written as a vector, by the scalar loop's operations
      // (alpha * s, plus beta * c, each rounded).
      if constexpr (std::is_same_v<TY, float>) {
        if (p.width == kSmallPairColumns) {
          v = _mm256_mul_ps(_mm256_set1_ps(p.alpha), v);
          if (p.beta != 0.0f) v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(p.beta), _mm256_loadu_ps(c)));
          _mm256_storeu_ps(c, v);
          return;
        }
      }
      _mm256_store_ps(out, v);
      write_out(p, out, 0, bi * B + r, 1, 0, p.width);
    });
  }
}

template <class TY>
void small_pairs_compute(const BsrProduct<bf16, TY>& p, const std::uint16_t* packed, index_t r0, index_t r1) {
  with_small_block(p.b, [&](auto B) {
    small_quads_rows<decltype(B)::value>(p, p.idx32, packed, r0, r1);
  });
}

/// The tiling of compute_panels in bsr_tile.inc, on bf16 pair panels.
template <class TY>
void pairs_compute(const BsrProduct<bf16, TY>& p, const void* packed_v, void* ws_v, index_t r0, index_t r1) {
  if (use_token_lanes(p)) return token_lanes_rows(p, static_cast<const std::uint32_t*>(packed_v), r0, r1);
  if (use_small_pairs(p)) return small_pairs_compute(p, static_cast<const std::uint16_t*>(packed_v), r0, r1);
  if (use_pair_vector(p))
    return with_small_block(p.b, [&](auto B) { pair_vector_rows<decltype(B)::value>(p, p.idx32, r0, r1); });
  if (!use_pairs(p)) return compute(p, packed_v, ws_v, r0, r1);
  const auto* packed = static_cast<const std::uint16_t*>(packed_v);
  auto* ws = static_cast<float*>(ws_v);
  const index_t b = p.b, ncw = chunk_width<bf16>();
  auto* at = reinterpret_cast<std::uint32_t*>(ws + b * ncw);  // a transposed A's block (pairs_workspace_bytes)
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
        if (p.trans_a) {  // A(r, k) = blk(k, r): the block's pairs packed K-major, pair (r, kp) at dword kp b + r
          pack_pairs(blk, b, true, b, b, b, at);
          pair_strips(kStrips, rows, b / 2, reinterpret_cast<const bf16*>(at), 2, 2 * b, bq, panels, b * kPairNR, ws,
                      ncw, q == p.ptr[bi]);
        } else {
          pair_strips(kStrips, rows, b / 2, blk, b, 2, bq, panels, b * kPairNR, ws, ncw, q == p.ptr[bi]);
        }
      }
      write_out(p, ws, ncw, bi * b, rows, c0, nc);
    }
  }
}

// Symmetric SpMV from a block triangle (symmetric_tile.inc's frame, block_triangle_chunk),
// as pairs. A block row's own sums go to lanes r S + t = A(r, 2t) x(2t) + A(r, 2t + 1)
// x(2t + 1) of its blocks' columns' x, as in the pair SpMV, and add up over t at the end
// of the row. A block's mirrors go straight to its column's slot, lane k: S vdpbf16ps
// steps, step s adding A(2s, k) x(2s) + A(2s + 1, k) x(2s + 1) of the block row's x. A
// slot is thus B lanes (of 8), not a lane per entry: the slots that rows reach ahead
// stay in the L1 cache. One word permute of the block gives each set of pairs;
// the diagonal block's own pairs come whole from its stored triangle by a permute of
// their own, so it needs no widened copy. Pads (an odd B's last pair) are zero words in
// both A and x, as in the pair SpMV. Blocks of B <= 4 pack both sets into one register
// (PackedPairLanes below); this layout serves B = 5 to 8.
template <int B, bool Upper>
struct PairSymmetricLanes {
  static constexpr int S = (B + 1) / 2;         // pairs per row (or column) of a block
  static constexpr int NL = (B * S + 15) / 16;  // registers of own lanes
  static constexpr int SK = 8;                  // a slot's lanes: a ymm register
  // A block is one register of words for B² <= 32, else two ([0, 32) and [32, 64)),
  // loaded to its B² words, so word 31 (B <= 5) or 63 (B = 6) lies past them and is
  // zero: the pad of every lane past the block's pairs. B = 8 fills both registers and
  // selects word 63 only in mirror lanes past 8, which its ymm slot drops.
  static constexpr bool one = B * B <= 32;
  static constexpr std::uint16_t kZeroA = one ? 31 : 63;
  // x's B words of a block row are loaded into a register whose words from 8 on are zero.
  static constexpr std::uint16_t kZeroX = 31;
  using Words = std::array<std::uint16_t, 32>;
  struct Table {
    Words own[NL], diagonal[NL], mirror[S];  // words of the block's two registers
    Words x_own[NL], x_mirror[S];            // words of x's register
  };
  static constexpr Table table = [] {
    Table t{};
    for (int w = 0; w < 32; ++w) {
      const int h = w % 2;
      for (int v = 0; v < NL; ++v) {
        const int d = 16 * v + w / 2, r = d / S, k = 2 * (d % S) + h;  // own lane d: A(r, k), x(k)
        const bool own = d < B * S && k < B;
        const int lo = r < k ? r : k, hi = r < k ? k : r;
        t.own[v][w] = static_cast<std::uint16_t>(own ? r * B + k : kZeroA);
        t.diagonal[v][w] = static_cast<std::uint16_t>(own ? (Upper ? lo * B + hi : hi * B + lo) : kZeroA);
        t.x_own[v][w] = static_cast<std::uint16_t>(own ? k : kZeroX);
      }
      for (int s = 0; s < S; ++s) {
        const int k = w / 2, r = 2 * s + h;  // step s, slot lane k: A(r, k), x(r)
        t.mirror[s][w] = static_cast<std::uint16_t>(k < B && r < B ? r * B + k : kZeroA);
        t.x_mirror[s][w] = static_cast<std::uint16_t>(r < B ? r : kZeroX);
      }
    }
    return t;
  }();
};

/// symmetric_blocks_local's work for bf16 blocks (p.b = B <= 8) on vdpbf16ps.
template <int B, bool Upper, class TY, class I>
void pair_symmetric_blocks(const SymmetricProduct<bf16, TY>& p, const I* idx, const detail::SymmetricChunks& s,
                           index_t c, float* buffer) {
  using L = PairSymmetricLanes<B, Upper>;
  constexpr int NL = L::NL, S = L::S, SK = L::SK;
  constexpr index_t BB = B * B;
  const index_t n = p.n;
  const bf16* const values = p.values;
  const bf16* const x = p.x;
  __m512i own_words[NL], diagonal_words[NL], x_own[NL], mirror_words[S], x_mirror[S];
  for (int v = 0; v < NL; ++v) {
    own_words[v] = _mm512_loadu_si512(L::table.own[v].data());
    diagonal_words[v] = _mm512_loadu_si512(L::table.diagonal[v].data());
    x_own[v] = _mm512_loadu_si512(L::table.x_own[v].data());
  }
  for (int t = 0; t < S; ++t) {
    mirror_words[t] = _mm512_loadu_si512(L::table.mirror[t].data());
    x_mirror[t] = _mm512_loadu_si512(L::table.x_mirror[t].data());
  }
  // Block q's words in one register or two, nothing read past its B² words.
  const auto block_words = [&](index_t q, __m512i& lo, __m512i& hi) {
    const bf16* a = values + q * BB;
    constexpr __mmask32 lo_words = BB >= 32 ? ~__mmask32{0} : (__mmask32{1} << (BB % 32)) - 1;
    constexpr __mmask32 hi_words = BB >= 64 ? ~__mmask32{0} : BB > 32 ? (__mmask32{1} << (BB % 32)) - 1 : 0;
    lo = _mm512_maskz_loadu_epi16(lo_words, a);
    hi = L::one ? lo : _mm512_maskz_loadu_epi16(hi_words, a + 32);  // one: hi unread
  };
  // The words of table `words` from the block's register(s).
  const auto permute = [](__m512i words, __m512i lo, __m512i hi) {
    if constexpr (L::one) return _mm512_permutexvar_epi16(words, lo);
    else return _mm512_permutex2var_epi16(lo, words, hi);
  };
  const auto dp = [](__m512 acc, __m512i a, __m512i b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); };
  // A slot's steps, in a ymm register.
  const auto add_to_slot = [](float* slot, const __m512i (&pairs)[S], const __m512i (&xs)[S]) {
    __m256 v = _mm256_load_ps(slot);
    for (int t = 0; t < S; ++t)
      v = _mm256_dpbf16_ps(v, (__m256bh)_mm512_castsi512_si256(pairs[t]), (__m256bh)_mm512_castsi512_si256(xs[t]));
    _mm256_store_ps(slot, v);
  };
  const auto row = [&](index_t i, index_t q0, index_t q1, index_t diag, float* slots, float* own)
                       __attribute__((always_inline)) {
    const __m512i xi = x_words_at<false>(x, i * B, n);
    // Step t's x: x(2t), x(2t + 1) (zero past B) of the block row in every dword.
    __m512i xm[S];
    for (int t = 0; t < S; ++t) xm[t] = _mm512_permutexvar_epi16(x_mirror[t], xi);
    __m512 acc[2][NL];
    for (int v = 0; v < NL; ++v) acc[0][v] = acc[1][v] = _mm512_setzero_ps();
    const auto blocks = [&](auto whole) __attribute__((always_inline)) {
      const auto block = [&](index_t q, __m512(&sum)[NL]) __attribute__((always_inline)) {
        const index_t j = idx[q];
        const __m512i xj = x_words_at<decltype(whole)::value>(x, j * B, n);
        __m512i lo, hi;
        block_words(q, lo, hi);
        for (int v = 0; v < NL; ++v)
          sum[v] = dp(sum[v], permute(own_words[v], lo, hi), _mm512_permutexvar_epi16(x_own[v], xj));
        __m512i pairs[S];
        for (int t = 0; t < S; ++t) pairs[t] = permute(mirror_words[t], lo, hi);
        add_to_slot(slots + j * SK, pairs, xm);
      };
      index_t q = q0;
      for (; q + 1 < q1; q += 2) {
        block(q, acc[0]);
        block(q + 1, acc[1]);
      }
      if (q < q1) block(q, acc[0]);
    };
    // A row's block columns ascend: when the last one's 8 words of x lie within x,
    // every block's do.
    if (q0 < q1 && index_t{idx[q1 - 1]} * B + 8 <= n) blocks(std::true_type{});
    else blocks(std::false_type{});
    if (diag >= 0) {
      __m512i lo, hi;
      block_words(diag, lo, hi);
      for (int v = 0; v < NL; ++v)
        acc[0][v] = dp(acc[0][v], permute(diagonal_words[v], lo, hi), _mm512_permutexvar_epi16(x_own[v], xi));
    }
    alignas(64) float lane[NL * 16];
    for (int v = 0; v < NL; ++v) _mm512_store_ps(lane + 16 * v, _mm512_add_ps(acc[0][v], acc[1][v]));
    for (int r = 0; r < B; ++r) {
      float sum = lane[r * S];
      for (int t = 1; t < S; ++t) sum += lane[r * S + t];
      own[r] = sum;
    }
  };
  block_triangle_chunk<B, Upper, SK, 1>(p, idx, s, c, buffer, row);
}

// Blocks of B <= 4 (B S <= 8 pairs a side) run one word permute and two vdpbf16ps a block:
// one register holds the block's mirror pairs in dword lanes [0, 8) (lane s B + k: A(2s,
// k), A(2s + 1, k), as PairSymmetricLanes's mirror steps side by side) and its own pairs
// in lanes [8, 16) (lane 8 + r S + t: A(r, 2t), A(r, 2t + 1)). Its x is the block row's
// mirror x in the low lanes (one permute per row) and, masked into the high lanes, x_j's
// S dwords broadcast from memory: lane 8 + r S + t meets dword t because S divides 8. The
// own lanes accumulate over the row in a zmm; the low half adds into the block column's
// slot, a ymm whose lanes s B + k the frame sums over s (R = S). An odd B's pad word is
// zero in A (a word past the block) and in x (left out of the mask: x's next entry may be
// infinite).
template <int B, bool Upper>
struct PackedPairLanes {
  static constexpr int S = (B + 1) / 2;
  static_assert(B * S <= 8, "a block's own and mirror pairs share one register");
  static constexpr std::uint16_t kZeroA = 31;  // a word past the block's B² <= 16
  static constexpr std::uint16_t kZeroX = 31;  // x's register holds words [0, 8) only
  using Words = std::array<std::uint16_t, 32>;
  struct Table {
    Words both, diagonal, x_mirror, x_diagonal;
    std::uint32_t own_x;  // the own lanes' x words, pads left out
  };
  static constexpr Table table = [] {
    Table t{};
    for (int w = 0; w < 32; ++w) {
      const int lane = w / 2, h = w % 2;
      if (lane < 8) {  // mirror lane s B + k: A(2s + h, k) and x(2s + h)
        const int s = lane / B, k = lane % B, r = 2 * s + h;
        const bool in = s < S && r < B;
        t.both[w] = static_cast<std::uint16_t>(in ? r * B + k : kZeroA);
        t.diagonal[w] = kZeroA;
        t.x_mirror[w] = static_cast<std::uint16_t>(in ? r : kZeroX);
        t.x_diagonal[w] = kZeroX;
      } else {  // own lane 8 + r S + t: A(r, 2t + h) and x(2t + h)
        const int d = lane - 8, r = d / S, k = 2 * (d % S) + h;
        const bool own = d < B * S && k < B;
        const int lo = r < k ? r : k, hi = r < k ? k : r;
        t.both[w] = static_cast<std::uint16_t>(own ? r * B + k : kZeroA);
        t.diagonal[w] = static_cast<std::uint16_t>(own ? (Upper ? lo * B + hi : hi * B + lo) : kZeroA);
        t.x_mirror[w] = kZeroX;
        t.x_diagonal[w] = static_cast<std::uint16_t>(own ? k : kZeroX);
        if (own) t.own_x |= std::uint32_t{1} << w;
      }
    }
    return t;
  }();
};

/// symmetric_blocks_local's work for bf16 blocks (p.b = B <= 4) in PackedPairLanes.
template <int B, bool Upper, class TY, class I>
void packed_pair_symmetric_blocks(const SymmetricProduct<bf16, TY>& p, const I* idx, const detail::SymmetricChunks& s,
                                  index_t c, float* buffer) {
  using L = PackedPairLanes<B, Upper>;
  constexpr int S = L::S;
  constexpr index_t BB = B * B;
  constexpr auto block_mask = static_cast<__mmask32>((1u << BB) - 1u);
  const index_t n = p.n;
  const bf16* const values = p.values;
  const bf16* const x = p.x;
  const __m512i both = _mm512_loadu_si512(L::table.both.data());
  const __m512i diagonal = _mm512_loadu_si512(L::table.diagonal.data());
  const __m512i x_mirror = _mm512_loadu_si512(L::table.x_mirror.data());
  const __m512i x_diagonal = _mm512_loadu_si512(L::table.x_diagonal.data());
  const auto own_x = static_cast<__mmask32>(L::table.own_x);
  const auto dp = [](__m512 acc, __m512i a, __m512i b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); };
  const auto row = [&](index_t i, index_t q0, index_t q1, index_t diag, float* slots, float* own)
                       __attribute__((always_inline)) {
    const __m512i xi = x_words_at<false>(x, i * B, n);
    const __m512i xm = _mm512_permutexvar_epi16(x_mirror, xi);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    const auto blocks = [&](auto whole) __attribute__((always_inline)) {
      const auto block = [&](index_t q, __m512& sum) __attribute__((always_inline)) {
        const index_t j = idx[q];
        // x_j's S dwords in every S-dword group: a broadcast load when its 2S words lie
        // within x, else its words masked at n and broadcast.
        __m512i xj;
        if constexpr (decltype(whole)::value) {
          if constexpr (S == 1) {
            std::int32_t words;
            std::memcpy(&words, x + j * B, sizeof words);
            xj = _mm512_set1_epi32(words);
          } else {
            std::int64_t words;
            std::memcpy(&words, x + j * B, sizeof words);
            xj = _mm512_set1_epi64(words);
          }
        } else {
          const __m128i words = _mm512_castsi512_si128(x_words_at<false>(x, j * B, n));
          xj = S == 1 ? _mm512_broadcastd_epi32(words) : _mm512_broadcastq_epi64(words);
        }
        const __m512i pairs = _mm512_permutexvar_epi16(both, _mm512_maskz_loadu_epi16(block_mask, values + q * BB));
        const __m512i xs = _mm512_mask_mov_epi16(xm, own_x, xj);
        sum = dp(sum, pairs, xs);
        float* slot = slots + j * 8;
        _mm256_store_ps(slot, _mm256_dpbf16_ps(_mm256_load_ps(slot), (__m256bh)_mm512_castsi512_si256(pairs),
                                               (__m256bh)_mm512_castsi512_si256(xs)));
      };
      index_t q = q0;
      for (; q + 1 < q1; q += 2) {
        block(q, acc[0]);
        block(q + 1, acc[1]);
      }
      if (q < q1) block(q, acc[0]);
    };
    // A row's block columns ascend: when the last one's 2S words of x lie within x,
    // every block's do.
    if (q0 < q1 && index_t{idx[q1 - 1]} * B + 2 * S <= n) blocks(std::true_type{});
    else blocks(std::false_type{});
    if (diag >= 0)
      acc[0] = dp(acc[0], _mm512_permutexvar_epi16(diagonal, _mm512_maskz_loadu_epi16(block_mask, values + diag * BB)),
                  _mm512_permutexvar_epi16(x_diagonal, xi));
    alignas(64) float lane[16];
    _mm512_store_ps(lane, _mm512_add_ps(acc[0], acc[1]));
    for (int r = 0; r < B; ++r) {
      float sum = lane[8 + r * S];
      for (int t = 1; t < S; ++t) sum += lane[8 + r * S + t];
      own[r] = sum;
    }
  };
  block_triangle_chunk<B, Upper, 8, S>(p, idx, s, c, buffer, row);
}

template <class TY>
void pair_symmetric_local(const SymmetricProduct<bf16, TY>& p, const detail::SymmetricChunks& s, index_t c,
                          float* buffer, double* dot) {
  symmetric_local_by(p, s, c, buffer, dot, [&](auto B, auto upper, const auto* idx) {
    constexpr int b = decltype(B)::value;
    if constexpr (b * ((b + 1) / 2) <= 8) packed_pair_symmetric_blocks<b, decltype(upper)::value>(p, idx, s, c, buffer);
    else pair_symmetric_blocks<b, decltype(upper)::value>(p, idx, s, c, buffer);
  });
}

// ---- SDDMM as pairs of K ------------------------------------------------------------
// The blocks of alpha X Yᵀ with K (the width: a linear layer's tokens) in pairs. Both
// operands are packed K-major as pairs (pack_pairs). Yᵀ is packed per block column
// in panels of 32 columns (n = 32, the panels of bsr_tile.inc's SDDMM); X per block row
// into the workspace (n = b), read by the strips one dword broadcast per row and pair.

index_t sddmm_pairs(const BsrSampled<bf16>& p) { return (p.width + 1) / 2; }

std::size_t sddmm_pairs_packed_bytes(const BsrSampled<bf16>& p) {
  return static_cast<std::size_t>(p.block_cols * sddmm_panels(p) * sddmm_pairs(p) * kPairNR) * sizeof(std::uint32_t);
}

std::size_t sddmm_pairs_workspace_bytes(const BsrSampled<bf16>& p) {
  return static_cast<std::size_t>(p.b * sddmm_panels(p) * kPairNR) * sizeof(float) +
         static_cast<std::size_t>(sddmm_pairs(p) * p.b) * sizeof(std::uint32_t);
}

void sddmm_pairs_pack(const BsrSampled<bf16>& p, void* packed_v, index_t c0, index_t c1) {
  const index_t panels = sddmm_panels(p), kpairs = sddmm_pairs(p);
  auto* packed = static_cast<std::uint32_t*>(packed_v);
  for (index_t bj = c0; bj < c1; ++bj)
    for (index_t jp = 0; jp < panels; ++jp) {
      const index_t first = bj * p.b + jp * kPairNR;  // Y's row in the panel's column 0
      const index_t valid = std::max(index_t{0}, min_index(min_index(kPairNR, p.b - jp * kPairNR), p.cols - first));
      pack_pairs(p.Y + (p.y_transposed ? first : first * p.ldy), p.ldy, p.y_transposed, valid, kPairNR, p.width,
                 packed + (bj * panels + jp) * kpairs * kPairNR);
    }
}

void sddmm_pairs_compute(const BsrSampled<bf16>& p, const void* packed_v, void* ws_v, index_t r0, index_t r1) {
  const auto* packed = static_cast<const std::uint32_t*>(packed_v);
  const index_t b = p.b, panels = sddmm_panels(p), kpairs = sddmm_pairs(p), ldw = panels * kPairNR;
  auto* ws = static_cast<float*>(ws_v);
  auto* x = reinterpret_cast<std::uint32_t*>(ws + b * ldw);  // this block row's X in pairs
  for (index_t bi = r0; bi < r1; ++bi) {
    if (p.ptr[bi] == p.ptr[bi + 1]) continue;
    const index_t rows = min_index(b, p.rows - bi * b);
    pack_pairs(p.X + (p.x_transposed ? bi * b : bi * b * p.ldx), p.ldx, p.x_transposed, rows, b, p.width, x);
    for (index_t q = p.ptr[bi]; q < p.ptr[bi + 1]; ++q) {
      const auto* yq = reinterpret_cast<const std::uint16_t*>(packed + p.idx[q] * panels * kpairs * kPairNR);
      pair_strips(kStrips, rows, kpairs, reinterpret_cast<const bf16*>(x), 2, 2 * b, yq, panels, 2 * kpairs * kPairNR,
                  ws, ldw, true);
      sddmm_write(p, q, ws, ldw, rows, min_index(b, p.cols - p.idx[q] * b));
    }
  }
}

// ---- AMX ------------------------------------------------------------------------------
// A linear layer's forward and input gradient on AMX tiles (Isa::amx): Yᵀ = W Xᵀ, or
// dXᵀ = Wᵀ dYᵀ, in tiles of 16 output rows x 16 tokens. W's blocks are A operands as they
// lie (16 rows of K = 32 features, or 16 for b = 16, a row of the block per tile row);
// for the gradient the pack phase writes every stored block transposed first (its share
// of the blocks: the pack ranges split B's block rows, and the same fractions of the
// blocks go with them). X (or dY) is packed as token-lane pair rows (token_lanes_pack),
// which is TDPBF16PS's B layout: pair row kp of a panel holds the 16 tokens' (X(t, 2kp),
// X(t, 2kp + 1)). Each group of two 16-row groups by two 16-token panels keeps its four
// C tiles over the block row's stored blocks (each output one fixed sum: the same bits on
// any thread count), then write_out adds the bias and writes Y. Rows past the layer's (a
// block's zero padding) are computed and not written; tokens and features past the last
// meet packed zeros. TDPBF16PS, like vdpbf16ps, flushes subnormal inputs and outputs to
// zero. The weight gradient's SDDMM follows (amx_sddmm_*).

/// Whether the AMX kernel runs this product: a linear layer's forward or input gradient
/// (B and C token by token) with blocks of a multiple of 16 rows, stored in one array
/// when transposed.
template <class TY>
bool use_amx(const BsrProduct<bf16, TY>& p) {
  return p.b_transposed && p.c_transposed && p.b % 16 == 0 && !(p.trans_a && p.block_at);
}

/// bf16 words of the packed B (token-lane pair rows, all panels); the transposed blocks
/// of a transposed A follow them.
template <class TY>
index_t amx_panel_words(const BsrProduct<bf16, TY>& p) {
  return token_panels(p) * p.in_block_rows * p.b * kLaneTokens;
}

/// LDTILECFG's operand (palette 1): tiles 0-3 are C (16 rows x 16 fp32), 4-5 A (16 rows
/// of W x K bf16), 6-7 B (K / 2 pair rows x 16 tokens).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};

  explicit TileConfig(index_t K) {
    for (int t = 0; t < 8; ++t) {
      rows[t] = static_cast<std::uint8_t>(t >= 6 ? K / 2 : 16);
      colsb[t] = static_cast<std::uint16_t>(t == 4 || t == 5 ? 2 * K : 64);
    }
  }
};

/// The 2 x 2 group of C tiles both AMX kernels keep: C(i, j) (tile 2i + j) += A(i) B(j),
/// A(i) in tile 4 + i, B(j) in tile 6 + j. The second A (B) takes part only with two_a
/// (two_b): a last group of 16 rows, a last panel of 16 tokens or columns.
struct TileGroup {
  bool two_a, two_b;

  static void zero() {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  /// One K step, the A tiles at a0, a1 (lda bytes a row) and the B tiles at b0, b1.
  void step(const void* a0, const void* a1, long lda, const void* b0, const void* b1, long ldb) const {
    _tile_loadd(4, a0, lda);
    _tile_loadd(6, b0, ldb);
    _tile_dpbf16ps(0, 4, 6);
    if (two_b) {
      _tile_loadd(7, b1, ldb);
      _tile_dpbf16ps(1, 4, 7);
    }
    if (two_a) {
      _tile_loadd(5, a1, lda);
      _tile_dpbf16ps(2, 5, 6);
      if (two_b) _tile_dpbf16ps(3, 5, 7);
    }
  }
  /// Loads the tiles that take part from c, laid out as store writes them.
  void load(const float* c, index_t ldc) const {
    const auto bytes = static_cast<long>(ldc * sizeof(float));
    _tile_loadd(0, c, bytes);
    if (two_b) _tile_loadd(1, c + 16, bytes);
    if (two_a) _tile_loadd(2, c + 16 * ldc, bytes);
    if (two_a && two_b) _tile_loadd(3, c + 16 * ldc + 16, bytes);
  }
  /// The tiles that take part, C(i, j) at c + (16 i) ldc + 16 j (ldc floats a row).
  void store(float* c, index_t ldc) const {
    const auto bytes = static_cast<long>(ldc * sizeof(float));
    _tile_stored(0, c, bytes);
    if (two_b) _tile_stored(1, c + 16, bytes);
    if (two_a) _tile_stored(2, c + 16 * ldc, bytes);
    if (two_a && two_b) _tile_stored(3, c + 16 * ldc + 16, bytes);
  }
};

/// The token-major product's group of one A tile (16 tokens) against four B tiles: the C
/// tiles 0-3 hold 16 tokens x 64 outputs, so that each A tile is loaded once for 64 of a
/// block row's outputs. The fourth B reuses tile 5, which the first product has read.
struct WideGroup {
  /// One K step, the A tile at a (lda bytes a row), the B tiles at b, b + 16, b + 32 and
  /// b + 48 (ldb bytes a row).
  static void step(const void* a, long lda, const std::uint32_t* b, long ldb) {
    _tile_loadd(4, a, lda);
    _tile_loadd(5, b, ldb);
    _tile_dpbf16ps(0, 4, 5);
    _tile_loadd(6, b + 16, ldb);
    _tile_dpbf16ps(1, 4, 6);
    _tile_loadd(7, b + 32, ldb);
    _tile_dpbf16ps(2, 4, 7);
    _tile_loadd(5, b + 48, ldb);
    _tile_dpbf16ps(3, 4, 5);
  }
  /// C's 16 tokens x 64 outputs at c (ldc floats a row).
  static void store(float* c, index_t ldc) {
    const auto bytes = static_cast<long>(ldc * sizeof(float));
    _tile_stored(0, c, bytes);
    _tile_stored(1, c + 16, bytes);
    _tile_stored(2, c + 32, bytes);
    _tile_stored(3, c + 48, bytes);
  }
};

/// Half of a core's L2 on the CPUs with AMX (2 MiB): what the AMX products keep there.
inline constexpr index_t kAmxChunkBytes = index_t{1} << 20;

/// Features a K step of TDPBF16PS takes: 32, or 16 for blocks of 16.
template <class TY>
index_t amx_k(const BsrProduct<bf16, TY>& p) {
  return p.b % 32 == 0 ? 32 : 16;
}

/// Calls f(bi, rows, g, tp, first) for each tile group of block rows [r0, r1): outputs
/// [g, g + outputs) of block row bi (rows: the block row's outputs) against token panels
/// tp and tp + 1 (first: the first pair of its chunk). The token panels come in chunks, the
/// outer loop, each chunk read by every block row of the range. When the range's blocks
/// fit in half of L2 they stay there, and the packed tokens go through a pair of panels
/// (pair_bytes) at a time; else the blocks stream from L3 once per chunk, and chunks of
/// kAmxChunkBytes amortise that.
template <class TY, class F>
[[gnu::always_inline]] inline void for_tile_groups(const BsrProduct<bf16, TY>& p, index_t r0, index_t r1, index_t pair_bytes,
                                                   index_t outputs, F&& f) {
  const index_t panels = token_panels(p);
  const index_t range_bytes = (p.ptr[r1] - p.ptr[r0]) * p.b * p.b * index_t{sizeof(bf16)};
  const index_t chunk = range_bytes <= kAmxChunkBytes ? 2 : std::max<index_t>(1, kAmxChunkBytes / pair_bytes) * 2;
  for (index_t t0 = 0; t0 < panels; t0 += chunk)
    for (index_t bi = r0; bi < r1; ++bi) {
      const index_t rows = min_index(p.b, p.out_rows - bi * p.b);
      for (index_t g = 0; g < rows; g += outputs)
        for (index_t tp = t0; tp < min_index(panels, t0 + chunk); tp += 2) f(bi, rows, g, tp, tp == t0);
    }
}

template <class TY>
void amx_compute(const BsrProduct<bf16, TY>& p, const std::uint32_t* packed, index_t r0, index_t r1) {
  const index_t b = p.b, K = amx_k(p);
  const index_t panels = token_panels(p), panel_dwords = p.in_block_rows * b / 2 * kLaneTokens;
  const index_t last = p.ptr[r1];
  const bf16* transposed = reinterpret_cast<const bf16*>(packed + amx_panel_words(p) / 2);
  const auto block = [&](index_t q) {
    return p.trans_a ? transposed + p.slot(q) * b * b : p.block(q);
  };
  const auto lda = static_cast<long>(b * sizeof(bf16)), ldx = static_cast<long>(kLaneTokens * sizeof(float));
  constexpr index_t ldo = 2 * kLaneTokens;  // out: 32 rows x 32 tokens
  alignas(64) float out[2 * 16 * ldo];
  const TileConfig config(K);
  _tile_loadconfig(&config);
  const index_t pair_bytes = 2 * panel_dwords * index_t{sizeof(std::uint32_t)};
  for_tile_groups(p, r0, r1, pair_bytes, 32, [&](index_t bi, index_t rows, index_t g, index_t tp, bool first) [[gnu::always_inline]] {
    const TileGroup group{.two_a = g + 16 < rows, .two_b = tp + 1 < panels};  // row groups x token panels
    TileGroup::zero();
    for (index_t q = p.ptr[bi]; q < p.ptr[bi + 1]; ++q) {
      if (g == 0 && first && !p.trans_a) decode_prefetch(p, q, last);
      const bf16* w = block(q) + g * b;
      const std::uint32_t* x = packed + tp * panel_dwords + p.column(q) * b / 2 * kLaneTokens;
      for (index_t k = 0; k < b; k += K) {
        const std::uint32_t* xk = x + k / 2 * kLaneTokens;
        group.step(w + k, w + 16 * b + k, lda, xk, xk + panel_dwords, ldx);
      }
    }
    group.store(out, ldo);  // write_out reads only the rows and tokens these hold
    write_out(p, out, ldo, bi * b + g, min_index(32, rows - g), tp * kLaneTokens,
              min_index(ldo, p.width - tp * kLaneTokens));
  });
  _tile_release();
}

/// a[r * lda + kp] = (x(2kp, r), x(2kp + 1, r)), x's element (t, r) at x[t * ldx + r],
/// for kp in [0, kp_n) and r in [0, r_n), both multiples of 16: M transposed as pairs
/// of its rows, the A layout of TDPBF16PS. Two rows of 16 words interleaved make 16
/// pair dwords, and 16 x 16 dword tiles are transposed in registers.
void transpose_pairs(const bf16* x, index_t ldx, index_t kp_n, index_t r_n, std::uint32_t* a, index_t lda) {
  transposed_tiles<Vec<float>>(kp_n, r_n, [&](index_t kp, index_t r) {
    const __m512i even = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2 * kp * ldx + r)));
    const __m512i odd = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + (2 * kp + 1) * ldx + r)));
    return _mm512_castsi512_ps(interleave_words<0>(even, odd));
  }, [&](index_t r, index_t kp, __m512 v) { _mm512_storeu_ps(reinterpret_cast<float*>(a + r * lda + kp), v); });
}

/// Whether the product runs token-major (amx_rows_*): C tiles of 16 tokens x 16 outputs,
/// X's (dY's) token rows as the A tiles and W's blocks repacked as B tiles, so that C's
/// rows are Y's (dX's) rows and go out without a transpose. Decoding (at most
/// kDecodeTokens tokens) streams W once as it lies, so it keeps the feature-major
/// kernel, as do weights given block by block.
template <class TY>
bool use_amx_rows(const BsrProduct<bf16, TY>& p) {
  return use_amx(p) && !p.block_at && p.width > kDecodeTokens;
}

/// K steps a tile group may average for its A tiles to load straight from X (dY).
inline constexpr index_t kDirectSteps = 16;

/// Tokens whose A tiles load straight from X (dY), rows ldb apart, rather than from the
/// packed tiles: those of the whole pairs of 16-token panels, when
/// - each A tile is loaded once or twice a block row: b = 32 (2 x 2 tiles of 32 tokens x
///   32 outputs), b = 64 or 128 (WideGroup, one or two groups of 16 tokens x 64 outputs).
///   The 2 x 2 groups at b >= 64 load the same tiles two to four times: the packed ones
///   come from L1, X's rows (a power of two apart, 16 lines of one L1 set) do not. With
///   b = 16 a K step is half a line of each row;
/// - a group averages at most kDirectSteps K steps (a sparse layer): the pack is one
///   pass over X whatever the density, while direct loads cost more than packed ones
///   each, so they pay below this density and not above (docs/sparse_weights.md, "Where
///   the time goes at density 0.1");
/// - B's rows fill its block rows, so that no K step reaches past a token's features.
/// The rest are packed.
template <class TY>
index_t amx_rows_direct_tokens(const BsrProduct<bf16, TY>& p) {
  const index_t b = p.b, block_rows = (p.out_rows + b - 1) / b;
  const bool direct = (b == 32 || b == 64 || b == 128) && p.in_rows == p.in_block_rows * b &&
                      p.stored / (b * b) <= kDirectSteps * block_rows;
  return direct ? p.width / (2 * kLaneTokens) * (2 * kLaneTokens) : 0;
}

/// bf16 words of the packed tokens: each panel of 16 tokens past amx_rows_direct_tokens
/// as tiles of 16 tokens x K features (all of B's block rows), each tile contiguous, as
/// a tile load reads it; W's repacked blocks follow them.
template <class TY>
index_t amx_rows_words(const BsrProduct<bf16, TY>& p) {
  return (token_panels(p) - amx_rows_direct_tokens(p) / kLaneTokens) * kLaneTokens * p.in_block_rows * p.b;
}

/// Packs features [r0 b, r1 b) of every token past amx_rows_direct_tokens (zero past the
/// tokens and features) into the tiles of amx_rows_words, and the same fraction of W's
/// blocks as B tiles, dword (kp, o) of a block holding the pair of K indices 2kp, 2kp + 1
/// for output o: the forward's (W(o, 2kp), W(o, 2kp + 1)), a dword transpose of the
/// block; the input gradient's (W(2kp, o), W(2kp + 1, o)), two rows of the block
/// interleaved.
template <class TY>
void amx_rows_pack(const BsrProduct<bf16, TY>& p, bf16* packed, index_t r0, index_t r1) {
  const index_t b = p.b, bb = b * b, K = amx_k(p), blocks = p.stored / bb;
  const index_t steps = p.in_block_rows * b / K;  // K steps of a token row
  const index_t direct = amx_rows_direct_tokens(p);
  for (index_t t = direct; t < token_panels(p) * kLaneTokens; ++t)
    for (index_t s = r0 * b / K; s < r1 * b / K; ++s) {
      bf16* dst = packed + (((t - direct) / kLaneTokens * steps + s) * kLaneTokens + t % kLaneTokens) * K;
      const index_t valid = t < p.width ? std::clamp<index_t>(p.in_rows - s * K, 0, K) : 0;
      std::copy_n(p.B + t * p.ldb + s * K, valid, dst);
      std::fill(dst + valid, dst + K, bf16{});
    }
  auto* wt = reinterpret_cast<std::uint32_t*>(packed + amx_rows_words(p));
  for (index_t s = r0 * blocks / p.in_block_rows; s < r1 * blocks / p.in_block_rows; ++s) {
    const auto* w = reinterpret_cast<const std::uint32_t*>(p.blocks + s * bb);  // W's pairs, b / 2 a row
    std::uint32_t* out = wt + s * bb / 2;
    if (p.trans_a) {
      for (index_t kp = 0; kp < b / 2; ++kp)
        for (index_t o = 0; o < b; o += 16) {  // b is a multiple of 16 (use_amx)
          const bf16* row = p.blocks + s * bb + 2 * kp * b + o;
          const __m512i even = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
          const __m512i odd = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b)));
          _mm512_storeu_si512(out + kp * b + o, interleave_words<0>(even, odd));
        }
      continue;
    }
    if (b % 32 == 0) {
      transposed_tiles<Vec<float>>(  // dwords as float lanes: only moved
          b, b / 2,
          [&](index_t o, index_t kp) { return _mm512_loadu_ps(reinterpret_cast<const float*>(w + o * b / 2 + kp)); },
          [&](index_t kp, index_t o, __m512 v) { _mm512_storeu_ps(reinterpret_cast<float*>(out + kp * b + o), v); });
      continue;
    }
    for (index_t o = 0; o < b; ++o)
      for (index_t kp = 0; kp < b / 2; ++kp) out[kp * b + o] = w[o * b / 2 + kp];
  }
}

/// Y's rows [t0, t0 + nt), outputs [o0, o0 + no), from c (tokens x outputs, ldc floats a
/// row): alpha c (+ bias) (+ beta Y), a vector of 16 outputs at a time.
template <class TY>
void amx_rows_write(const BsrProduct<bf16, TY>& p, const float* c, index_t ldc, index_t t0, index_t nt, index_t o0,
                    index_t no) {
  using V = Vec<float>;
  const V::reg alpha = V::set1(p.alpha), beta = V::set1(p.beta);
  const index_t no_v = no / V::W * V::W;
  for (index_t t = 0; t < nt; ++t) {
    TY* y = p.C + (t0 + t) * p.ldc + o0;
    const float* ct = c + t * ldc;
    for (index_t o = 0; o < no_v; o += V::W) {
      V::reg v = V::add(V::mul(alpha, V::load(ct + o)), p.bias ? V::load(p.bias + o0 + o) : V::zero());
      if (p.beta != 0.0f) v = V::add(v, V::mul(beta, load_as<V>(y + o)));
      store_as<V>(y + o, v);
    }
    for (index_t o = no_v; o < no; ++o) {
      const float v = p.alpha * ct[o] + (p.bias ? p.bias[o0 + o] : 0.0f);
      y[o] = narrow_to<TY>(p.beta == 0.0f ? v : v + p.beta * widen(y[o]));
    }
  }
}

/// A tile group's C, stored, waiting to be written to Y (dX) by amx_rows_write: rows
/// [done, tokens) are left. 32 tokens x 32 outputs (TileGroup), or 16 x 64 (WideGroup).
struct PendingRows {
  static constexpr index_t kFloats = 1024;
  alignas(64) float c[kFloats];
  index_t ld = 0, t0 = 0, tokens = 0, o0 = 0, outputs = 0, done = 0;

  /// Writes the next `n` rows (fewer at the end).
  template <class TY>
  void write(const BsrProduct<bf16, TY>& p, index_t n) {
    n = min_index(n, tokens - done);
    if (n > 0) amx_rows_write(p, c + done * ld, ld, t0 + done, n, o0, outputs);
    done += n;
  }
  /// Takes a group's C of `tokens_n` tokens from t0 and outputs from o0, stored at c with
  /// ld floats a row.
  void start(index_t ld_, index_t t0_, index_t tokens_n, index_t o0_, index_t outputs_n) {
    ld = ld_;
    t0 = t0_;
    tokens = tokens_n;
    o0 = o0_;
    outputs = outputs_n;
    done = 0;
  }
};

/// The token-major product: per block row of W (of Wᵀ for dX) and group of 32 of its
/// outputs, tiles of 32 tokens x 32 outputs summed over the row's stored blocks (each
/// output one fixed sum: the same bits on any thread count); at b = 64 and 128 with X's
/// tiles in place, tiles of 16 tokens x 64 outputs (WideGroup). A group's C is written
/// out during the next group's K steps, a few rows after each: a sparse row has few steps
/// a group, and writing C between groups leaves the tile unit idle for about as long as a
/// quarter of its work (docs/sparse_weights.md, "Where the time goes at density 0.1").
template <class TY>
void amx_rows_compute(const BsrProduct<bf16, TY>& p, const bf16* packed, index_t r0, index_t r1) {
  const index_t b = p.b, K = amx_k(p), panels = token_panels(p);
  const index_t panel_words = p.in_block_rows * b * kLaneTokens;  // a panel's K steps, 16 x K each
  const auto* wt = reinterpret_cast<const std::uint32_t*>(packed + amx_rows_words(p));
  const index_t direct = amx_rows_direct_tokens(p);
  const bool wide = b % 64 == 0 && direct > 0;
  const auto ldb = static_cast<long>(b * sizeof(std::uint32_t));
  PendingRows pending[2];
  int next = 0;  // the buffer the group being computed stores into
  // The A tiles of token panel tp: X's rows as they lie, or the packed tiles (K features
  // a row, a K step every 16 rows); block column j's K step k at x0 + j * x_block + k * x_k,
  // the next panel's x_next further.
  struct ATiles {
    const bf16* x0;
    index_t x_block, x_k, x_next;
    long lda;
  };
  const auto a_tiles = [&](index_t tp) {
    const bool from_x = tp * kLaneTokens < direct;
    return ATiles{from_x ? p.B + tp * kLaneTokens * p.ldb : packed + (tp - direct / kLaneTokens) * panel_words,
                  from_x ? b : b * kLaneTokens, from_x ? 1 : kLaneTokens,
                  from_x ? kLaneTokens * p.ldb : panel_words,
                  static_cast<long>((from_x ? p.ldb : K) * index_t{sizeof(bf16)})};
  };
  const TileConfig config(K);
  _tile_loadconfig(&config);
  const index_t pair_bytes = 2 * panel_words * index_t{sizeof(bf16)};
  // One group's K steps over block row bi's stored blocks, the last group's rows written
  // a few after each (spread over this group's steps; after an empty block row, which has
  // none, the write after the loop takes them all). The caller then stores the group's C
  // as the next pending rows.
  const auto group_steps = [&](index_t bi, auto&& step) [[gnu::always_inline]] {
    PendingRows& last = pending[1 - next];
    const index_t steps = (p.ptr[bi + 1] - p.ptr[bi]) * (b / K);
    const index_t per_step = (last.tokens + steps - 1) / std::max<index_t>(steps, 1);
    for (index_t q = p.ptr[bi]; q < p.ptr[bi + 1]; ++q)
      for (index_t k = 0; k < b; k += K) {
        step(q, k);
        last.write(p, per_step);
      }
    last.write(p, last.tokens);
  };
  for_tile_groups(p, r0, r1, pair_bytes, wide ? 64 : 32, [&](index_t bi, index_t rows, index_t g, index_t tp, bool) [[gnu::always_inline]] {
    if (wide) {
      for (index_t t = tp; t < min_index(tp + 2, panels); ++t) {
        const ATiles x = a_tiles(t);
        TileGroup::zero();
        group_steps(bi, [&](index_t q, index_t k) [[gnu::always_inline]] {
          WideGroup::step(x.x0 + p.column(q) * x.x_block + k * x.x_k, x.lda, wt + p.slot(q) * b * b / 2 + g + k / 2 * b,
                          ldb);
        });
        PendingRows& now = pending[next];
        WideGroup::store(now.c, 64);  // amx_rows_write reads only the tokens and outputs these hold
        now.start(64, t * kLaneTokens, min_index(kLaneTokens, p.width - t * kLaneTokens), bi * b + g,
                  min_index(64, rows - g));
        next = 1 - next;
      }
      return;
    }
    const TileGroup group{.two_a = tp + 1 < panels, .two_b = g + 16 < rows};  // token panels x output groups
    const ATiles x = a_tiles(tp);
    TileGroup::zero();
    group_steps(bi, [&](index_t q, index_t k) [[gnu::always_inline]] {
      const bf16* xk = x.x0 + p.column(q) * x.x_block + k * x.x_k;
      const std::uint32_t* w = wt + p.slot(q) * b * b / 2 + g + k / 2 * b;
      group.step(xk, xk + x.x_next, x.lda, w, w + 16, ldb);
    });
    PendingRows& now = pending[next];
    group.store(now.c, 32);  // amx_rows_write reads only the tokens and outputs these hold
    now.start(32, tp * kLaneTokens, min_index(2 * kLaneTokens, p.width - tp * kLaneTokens), bi * b + g,
              min_index(32, rows - g));
    next = 1 - next;
  });
  pending[1 - next].write(p, pending[1 - next].tokens);
  _tile_release();
}

template <class TY>
std::size_t amx_packed_bytes(const BsrProduct<bf16, TY>& p) {
  if (!use_amx(p)) return pairs_packed_bytes(p);
  if (use_amx_rows(p)) return static_cast<std::size_t>(amx_rows_words(p) + p.stored) * sizeof(bf16);
  return static_cast<std::size_t>(amx_panel_words(p) + (p.trans_a ? p.stored : 0)) * sizeof(bf16);
}

template <class TY>
std::size_t amx_workspace_bytes(const BsrProduct<bf16, TY>& p) {
  return use_amx(p) ? 0 : pairs_workspace_bytes(p);
}

template <class TY>
void amx_pack(const BsrProduct<bf16, TY>& p, void* packed, index_t r0, index_t r1) {
  if (!use_amx(p)) return pairs_pack(p, packed, r0, r1);
  if (use_amx_rows(p)) return amx_rows_pack(p, static_cast<bf16*>(packed), r0, r1);
  token_lanes_pack(p, static_cast<std::uint32_t*>(packed), r0, r1);
  if (!p.trans_a) return;
  const index_t b = p.b, bb = b * b, blocks = p.stored / bb;
  bf16* out = static_cast<bf16*>(packed) + amx_panel_words(p);
  for (index_t s = r0 * blocks / p.in_block_rows; s < r1 * blocks / p.in_block_rows; ++s) {
    if (b % 32 == 0) {  // whole tiles of 16 row pairs: row c of the transposed block is b / 2 pairs
      transpose_pairs(p.blocks + s * bb, b, b / 2, b, reinterpret_cast<std::uint32_t*>(out + s * bb), b / 2);
      continue;
    }
    for (index_t r = 0; r < b; ++r)
      for (index_t c = 0; c < b; ++c) out[s * bb + c * b + r] = p.blocks[s * bb + r * b + c];
  }
}

template <class TY>
void amx_bsr_compute(const BsrProduct<bf16, TY>& p, const void* packed, void* ws, index_t r0, index_t r1) {
  if (use_amx_rows(p)) return amx_rows_compute(p, static_cast<const bf16*>(packed), r0, r1);
  if (use_amx(p)) return amx_compute(p, static_cast<const std::uint32_t*>(packed), r0, r1);
  pairs_compute(p, packed, ws, r0, r1);
}

// A linear layer's weight gradient dW = dYᵀ X on AMX tiles: per stored block, C tiles of
// 16 rows (dY's features) x 16 columns (X's) over K = 32 tokens a step. The A operand is
// a block row's dY transposed, token pairs in dwords (row r: (dY(2kp, r),
// dY(2kp + 1, r)) over kp), made in the workspace; the B operand is X's token pairs per
// block column (pack_pairs, as the vdpbf16ps SDDMM packs them, n = b features a pair
// row), both zero past the tokens up to whole steps. A block's B is its block column's
// pairs for all the tokens (128 KiB at b = 32, 2048 tokens), which block after block
// come from L3. So the blocks go in bands of block rows and chunks of tokens: a band's
// dY for one chunk stays in L2 while its blocks go column by column, each block column's
// chunk of pairs read once for all of the band's blocks in it, and each block's fp32
// sums stay in the workspace between chunks (docs/sparse_weights.md, "Where the time
// goes at density 0.1"). Each element is one fixed sum over the tokens in order: the
// same bits on any thread count and any banding.

/// Whether the AMX kernel runs this SDDMM: a linear layer's dW (both operands token by
/// token) with blocks of a multiple of 16.
bool use_amx_sddmm(const BsrSampled<bf16>& p) { return p.x_transposed && p.y_transposed && p.b % 16 == 0; }

/// Token pairs per operand row, rounded up to whole 32-token steps.
index_t amx_sddmm_pairs(const BsrSampled<bf16>& p) { return round_up((p.width + 1) / 2, index_t{16}); }

/// Token pairs of a chunk (1024 tokens).
index_t amx_sddmm_chunk_pairs(const BsrSampled<bf16>& p) { return std::min<index_t>(amx_sddmm_pairs(p), 512); }

/// Block rows a band may hold: their dY for a chunk in 1 MiB, at most kSddmmBandRows.
inline constexpr index_t kSddmmBandRows = 16;
index_t amx_sddmm_band_rows(const BsrSampled<bf16>& p) {
  const index_t row_bytes = p.b * amx_sddmm_chunk_pairs(p) * index_t{sizeof(std::uint32_t)};
  return std::clamp<index_t>((index_t{1} << 20) / row_bytes, 1, kSddmmBandRows);
}

/// Blocks whose sums the workspace holds: 1 MiB of them, or a whole block row's when it
/// has more.
index_t amx_sddmm_band_blocks(const BsrSampled<bf16>& p) {
  index_t widest = 0;
  for (index_t bi = 0; bi * p.b < p.rows; ++bi) widest = std::max(widest, p.ptr[bi + 1] - p.ptr[bi]);
  return std::max(widest, (index_t{1} << 20) / (p.b * p.b * index_t{sizeof(float)}));
}

/// Dwords of the transposed dY a band holds: its rows' chunks, or one row's whole (a
/// band of one block row takes all the tokens at once: with no block column to share,
/// chunks would only store and reload its sums).
index_t amx_sddmm_a_dwords(const BsrSampled<bf16>& p) {
  return p.b * std::max(amx_sddmm_band_rows(p) * amx_sddmm_chunk_pairs(p), amx_sddmm_pairs(p));
}

std::size_t amx_sddmm_packed_bytes(const BsrSampled<bf16>& p) {
  if (!use_amx_sddmm(p)) return sddmm_pairs_packed_bytes(p);
  return static_cast<std::size_t>(p.block_cols * amx_sddmm_pairs(p) * p.b) * sizeof(std::uint32_t);
}

std::size_t amx_sddmm_workspace_bytes(const BsrSampled<bf16>& p) {
  if (!use_amx_sddmm(p)) return sddmm_pairs_workspace_bytes(p);
  return static_cast<std::size_t>(amx_sddmm_band_blocks(p) * p.b * p.b) * sizeof(float) +
         static_cast<std::size_t>(amx_sddmm_a_dwords(p)) * sizeof(std::uint32_t);
}

void amx_sddmm_pack(const BsrSampled<bf16>& p, void* packed_v, index_t c0, index_t c1) {
  if (!use_amx_sddmm(p)) return sddmm_pairs_pack(p, packed_v, c0, c1);
  const index_t kp_pad = amx_sddmm_pairs(p), kpairs = (p.width + 1) / 2;
  for (index_t bj = c0; bj < c1; ++bj) {
    std::uint32_t* dst = static_cast<std::uint32_t*>(packed_v) + bj * kp_pad * p.b;
    pack_pairs(p.Y + bj * p.b, p.ldy, true, min_index(p.b, p.cols - bj * p.b), p.b, p.width, dst);
    std::fill(dst + kpairs * p.b, dst + kp_pad * p.b, 0u);
  }
}

/// Rows [0, b) of dY's block row bi for the token pairs [kp0, kp0 + kp_n), transposed:
/// dword kp of row r (lda dwords a row) is (dY(2 (kp0 + kp), r), dY(2 (kp0 + kp) + 1, r)),
/// zero past the tokens and the rows. The whole tiles go through transpose_pairs; the
/// edges go word by word.
void amx_sddmm_rows(const BsrSampled<bf16>& p, index_t bi, index_t kp0, index_t kp_n, std::uint32_t* a, index_t lda) {
  const bf16* x = p.X + 2 * kp0 * p.ldx + bi * p.b;
  const index_t rows = min_index(p.b, p.rows - bi * p.b), tokens = std::clamp<index_t>(p.width - 2 * kp0, 0, 2 * kp_n);
  const index_t kp_tiled = tokens / 32 * 16, r_tiled = rows / 16 * 16;
  transpose_pairs(x, p.ldx, kp_tiled, r_tiled, a, lda);
  const auto word = [&](index_t r, index_t t) -> std::uint32_t {
    return r < rows && t < tokens ? x[t * p.ldx + r].bits : 0u;
  };
  for (index_t r = 0; r < p.b; ++r)
    for (index_t kp = r < r_tiled ? kp_tiled : 0; kp < kp_n; ++kp)
      a[r * lda + kp] = word(r, 2 * kp) | word(r, 2 * kp + 1) << 16;
}

/// Block rows [r0, r1) in bands (at most amx_sddmm_band_rows rows, and blocks whose sums
/// fit the workspace), token chunk by token chunk, each band's blocks by block column.
void amx_sddmm_compute(const BsrSampled<bf16>& p, const void* packed_v, void* ws_v, index_t r0, index_t r1) {
  if (!use_amx_sddmm(p)) return sddmm_pairs_compute(p, packed_v, ws_v, r0, r1);
  const auto* packed = static_cast<const std::uint32_t*>(packed_v);
  const index_t b = p.b, bb = b * b, kp_pad = amx_sddmm_pairs(p);
  const index_t band_rows = amx_sddmm_band_rows(p), band_blocks = amx_sddmm_band_blocks(p);
  auto* sums = static_cast<float*>(ws_v);
  auto* a = reinterpret_cast<std::uint32_t*>(sums + band_blocks * bb);
  const auto ldb = static_cast<long>(b * sizeof(std::uint32_t));
  const TileConfig config(32);
  _tile_loadconfig(&config);
  for (index_t band0 = r0; band0 < r1;) {
    index_t band1 = band0 + 1;
    while (band1 < r1 && band1 - band0 < band_rows && p.ptr[band1 + 1] - p.ptr[band0] <= band_blocks) ++band1;
    const index_t q0 = p.ptr[band0];
    const index_t chunk = band1 - band0 > 1 ? amx_sddmm_chunk_pairs(p) : kp_pad;
    const auto lda = static_cast<long>(chunk * sizeof(std::uint32_t));
    for (index_t kp0 = 0; kp0 < kp_pad; kp0 += chunk) {
      const index_t kp_n = min_index(chunk, kp_pad - kp0);
      for (index_t bi = band0; bi < band1; ++bi)
        if (p.ptr[bi] < p.ptr[bi + 1]) amx_sddmm_rows(p, bi, kp0, kp_n, a + (bi - band0) * b * chunk, chunk);
      // The band's blocks by block column: each row's next block, the lowest column first.
      index_t next[kSddmmBandRows];
      for (index_t bi = band0; bi < band1; ++bi) next[bi - band0] = p.ptr[bi];
      for (;;) {
        index_t bi = -1;
        for (index_t r = band0; r < band1; ++r)
          if (next[r - band0] < p.ptr[r + 1] && (bi < 0 || p.idx[next[r - band0]] < p.idx[next[bi - band0]])) bi = r;
        if (bi < 0) break;
        const index_t q = next[bi - band0]++;
        const std::uint32_t* y = packed + (p.idx[q] * kp_pad + kp0) * b;
        const std::uint32_t* ar = a + (bi - band0) * b * chunk;
        float* c = sums + (q - q0) * bb;
        for (index_t og = 0; og < b; og += 32)
          for (index_t ig = 0; ig < b; ig += 32) {
            const TileGroup group{.two_a = og + 16 < b, .two_b = ig + 16 < b};  // row groups x column groups
            if (kp0 == 0) {
              TileGroup::zero();
            } else {
              group.load(c + og * b + ig, b);
            }
            for (index_t kp = 0; kp < kp_n; kp += 16) {
              const std::uint32_t* ak = ar + og * chunk + kp;
              const std::uint32_t* yk = y + kp * b + ig;
              group.step(ak, ak + 16 * chunk, lda, yk, yk + 16, ldb);
            }
            group.store(c + og * b + ig, b);
          }
      }
    }
    for (index_t bi = band0; bi < band1; ++bi)
      for (index_t q = p.ptr[bi]; q < p.ptr[bi + 1]; ++q)
        sddmm_write(p, q, sums + (q - q0) * bb, b, min_index(b, p.rows - bi * b), min_index(b, p.cols - p.idx[q] * b));
    band0 = band1;
  }
  _tile_release();
}

}  // namespace

template <class TY>
BsrKernels<bf16, TY> bsr_kernels_bf16() {
  return {&pairs_packed_bytes<TY>, &pairs_workspace_bytes<TY>, &pairs_pack<TY>, &pairs_compute<TY>};
}
template BsrKernels<bf16, float> bsr_kernels_bf16<float>();
template BsrKernels<bf16, bf16> bsr_kernels_bf16<bf16>();

template <class TY>
BsrKernels<bf16, TY> bsr_kernels_amx() {
  return {&amx_packed_bytes<TY>, &amx_workspace_bytes<TY>, &amx_pack<TY>, &amx_bsr_compute<TY>};
}
template BsrKernels<bf16, float> bsr_kernels_amx<float>();
template BsrKernels<bf16, bf16> bsr_kernels_amx<bf16>();

SddmmKernels<bf16> sddmm_kernels_bf16() {
  return {&sddmm_pairs_packed_bytes, &sddmm_pairs_workspace_bytes, &sddmm_pairs_pack, &sddmm_pairs_compute,
          &column_sums<bf16>};
}

SddmmKernels<bf16> sddmm_kernels_amx() {
  return {&amx_sddmm_packed_bytes, &amx_sddmm_workspace_bytes, &amx_sddmm_pack, &amx_sddmm_compute,
          &column_sums<bf16>};
}

template <class TY>
SymmetricKernels<bf16, TY> symmetric_kernels_bf16() {
  return {&pair_symmetric_local<TY>, &symmetric_combine<bf16, TY>};
}
template SymmetricKernels<bf16, float> symmetric_kernels_bf16<float>();
template SymmetricKernels<bf16, bf16> symmetric_kernels_bf16<bf16>();

}  // namespace trnsparse::kernels::cpu::avx512bf16
