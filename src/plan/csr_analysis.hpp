// Internal: what is worth computing once per CSR structure and reusing for every call:
// the column indices in 32 bits, the fixed chunking of the symmetric half-storage
// product, the transposed pattern, and the structure as a block-size-1 BsrStructure
// (the key of SpGEMM plans).
// A CsrMatrix owns one CsrAnalyses (shared by its copies, whose structure is the same);
// each analysis is built on first use, thread-safely.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "trnsparse/plan.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// The chunks of spmv_symmetric over n rows of one stored triangle. Chunk c owns rows
/// [bounds[c], bounds[c+1]); its entries' mirrored contributions to rows outside the
/// chunk land in its window, a dense range [win_lo[c], win_hi[c]) of rows stored at
/// offset win_off[c] of one window buffer. The chunking depends on the structure only,
/// so results are the same for any number of threads. A row i of chunk c reaches rows
/// at most `reach[c]` away from i (upper: i + reach[c]; lower: i - reach[c]). `bad_row`
/// >= 0 marks a structure with an entry (bad_row, bad_col) at position bad_pos outside
/// the triangle.
struct SymmetricChunks {
  std::vector<index_t> bounds;
  std::vector<index_t> win_lo, win_hi, win_off, reach;
  index_t max_span = 0;  // largest chunk's rows and window together
  index_t bad_row = -1, bad_col = -1, bad_pos = -1;

  [[nodiscard]] index_t chunks() const noexcept { return static_cast<index_t>(bounds.size()) - 1; }
  [[nodiscard]] index_t window_total() const noexcept { return win_off.back(); }
};

/// Chunks of about kSymmetricChunkEntries stored entries, at most kMaxSymmetricChunks of
/// them, and windows adding up to at most n / 8 rows (fewer chunks for structures with
/// entries far from the diagonal): each window row is written, read and added once
/// more, traffic on top of the matrix's (Poisson 150³: 16 chunks, windows of n / 10).
/// Down to kMinSymmetricChunks chunks, windows may add up to n rows instead, so that a
/// wide band still runs on several threads.
inline constexpr index_t kSymmetricChunkEntries = index_t{1} << 16;
inline constexpr index_t kMaxSymmetricChunks = 64;
inline constexpr index_t kMinSymmetricChunks = 8;

/// Analyses one triangle of an n x n structure, chunks of about `chunk_entries` stored
/// entries (a BSR block triangle's entries are blocks). O(nnz + n log chunks).
SymmetricChunks symmetric_chunks(index_t n, std::span<const index_t> ptr, std::span<const index_t> idx,
                                 Triangle uplo, index_t chunk_entries = kSymmetricChunkEntries);

/// Column indices narrowed to 32 bits, or empty when the columns do not fit them. The
/// products are memory-bound: reading 4 bytes per entry instead of 8 cuts a double
/// matrix's traffic by a quarter (docs/benchmarks.md, "SpMV and CSR products").
std::vector<std::int32_t> compact_indices(index_t cols, std::span<const index_t> idx);

class CsrAnalyses {
public:
  /// compact_indices(cols, idx), built on the first call: nullptr when they do not fit.
  const std::int32_t* compact(index_t cols, std::span<const index_t> idx);
  const SymmetricChunks& symmetric(index_t n, std::span<const index_t> ptr, std::span<const index_t> idx,
                                   Triangle uplo);
  const BscView& transposed(index_t rows, index_t cols, std::span<const index_t> ptr, std::span<const index_t> idx);

private:
  std::once_flag compact_once_, upper_once_, lower_once_, transposed_once_;
  std::vector<std::int32_t> compact_;
  SymmetricChunks upper_, lower_;
  BscView transposed_;
};

}  // namespace trnsparse::detail
