// Internal: running a packed two-phase kernel (pack, then compute) over threads
// (runtime/parallel.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "kernels/products.hpp"
#include "runtime/checks.hpp"
#include "runtime/parallel.hpp"
#include "runtime/workspace.hpp"
#include "trnsparse/bsr.hpp"
#include "trnsparse/plan.hpp"
#include "trnsparse/runtime.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// The one-thread time (work_ns) of a product of the stored blocks of `s` with `width`
/// columns: small-block kernels up to 8, packed tiles above.
inline double block_ns(const BsrStructure& s, index_t width) {
  const double madds = static_cast<double>(s.n_blocks()) * static_cast<double>(s.block_size() * s.block_size()) *
                       static_cast<double>(width);
  return work_ns(s.block_size() <= 8 ? Work::small_blocks : Work::tiles, madds, width);
}

/// Runs first(t, u) for every unit u in [0, units), then, once all are done, second(t, u)
/// for every unit, on up to `parts` threads; t in [0, parts) names the running thread's
/// scratch. Units go to threads as UnitRanges deal them, so a unit's result must not
/// depend on the thread that runs it (its scratch is private and reset by the unit).
/// The product C = alpha op(A) B + beta C of A's stored blocks (structure s, `stored`
/// elements at `blocks`): A itself (t null) or Aᵀ through its transposed view t, B and C
/// plain row-major with `width` columns. The caller sets what else it needs (a linear
/// layer's layouts and bias).
template <class TA, class TY>
kernels::BsrProduct<TA, TY> bsr_product(const BsrStructure& s, const BscView* t, const std::int32_t* idx32,
                                         const TA* blocks, index_t stored, index_t width, acc_t<TA> alpha,
                                         acc_t<TA> beta, const TA* B, index_t ldb, TY* C, index_t ldc) {
  return {.b = s.block_size(),
          .out_rows = t ? s.cols() : s.rows(),
          .in_rows = t ? s.rows() : s.cols(),
          .in_block_rows = t ? s.block_rows() : s.block_cols(),
          .width = width,
          .ptr = t ? t->col_ptr.data() : s.block_row_ptr().data(),
          .idx = t ? t->row_idx.data() : s.block_col_indices().data(),
          .idx32 = idx32,
          .perm = t ? t->perm.data() : nullptr,
          .trans_a = t != nullptr,
          .blocks = blocks,
          .stored = stored,
          .block_at = nullptr,
          .packs = nullptr,
          .alpha = alpha,
          .beta = beta,
          .B = B,
          .ldb = ldb,
          .C = C,
          .ldc = ldc};
}

template <class F, class G>
void parallel_phases(int parts, index_t units, F&& first, G&& second) {
  UnitRanges ranges;
  parallel_for(parts, units, ranges, first);
  parallel_for(parts, units, ranges, second);
}

/// Runs a kernel table with the BsrKernels shape (packed_bytes, workspace_bytes, pack,
/// compute) on up to `parts` threads: the `pack_units` operand units are packed in
/// `parts` shares, then the output units of each range [pieces[i], pieces[i+1]) are
/// computed in a slot's own workspace. One writer per output unit: results depend
/// neither on the number of parts nor on the pieces.
template <class Kernels, class Problem>
void run_packed(const Kernels& k, const Problem& prob, index_t pack_units, int parts,
                std::span<const index_t> pieces) {
  const std::size_t packed_bytes = round_to_line(k.packed_bytes(prob));
  const std::size_t ws_bytes = round_to_line(k.workspace_bytes(prob));
  std::byte* mem = thread_workspace(packed_bytes + static_cast<std::size_t>(parts) * ws_bytes);
  const auto n_pieces = static_cast<index_t>(pieces.size()) - 1;
  if (parts == 1) {
    k.pack(prob, mem, 0, pack_units);
    k.compute(prob, mem, mem + packed_bytes, pieces.front(), pieces.back());
    return;
  }
  // Kernels that read B in place (the small-block ones) pack nothing: no team for it.
  // A small pack (a decode's few tokens) runs on the caller alone: as a team of its own
  // it would wait for a sleeping worker to wake, and that wait, far above the pack's
  // own share, would read as a stall and send the product itself to one thread.
  const double pack_words = static_cast<double>(packed_bytes) / sizeof(float);  // what a streaming pass counts
  const int pack_parts = parts_for(pack_units, work_ns(Work::stream, pack_words), parts);
  // A pack on the caller alone comes first: the compute team's workers wake meanwhile.
  if (packed_bytes > 0 && pack_parts == 1) wake_team(parts);
  if (packed_bytes > 0)
    parallel_parts(pack_parts,
                   [&](int t) { k.pack(prob, mem, pack_units * t / pack_parts, pack_units * (t + 1) / pack_parts); });
  parallel_for(parts, n_pieces, [&](int slot, index_t i) {
    k.compute(prob, mem, mem + packed_bytes + static_cast<std::size_t>(slot) * ws_bytes, pieces[i], pieces[i + 1]);
  });
}

/// Columns of B per unit of a column split: a multiple of every ISA's panel width, so no
/// group ends in a partial panel that a row split would not have.
inline constexpr index_t kColumnGrain = 64;

/// How evenly `parts` threads share a BSR product's stored blocks (prob.ptr) when split
/// by output block rows (`split`), and when split by column groups of kColumnGrain:
/// work / (parts * the largest share), 1 for a perfect split.
struct SplitBalance {
  double rows = 1.0, columns = 0.0;
};
template <class Problem>
SplitBalance split_balance(const Problem& prob, std::span<const index_t> split) {
  const int parts = static_cast<int>(split.size()) - 1;
  SplitBalance e;
  index_t largest = 0;
  for (int t = 0; t < parts; ++t) largest = std::max(largest, prob.ptr[split[t + 1]] - prob.ptr[split[t]]);
  if (largest > 0)
    e.rows = static_cast<double>(prob.ptr[split.back()] - prob.ptr[split.front()]) /
             (static_cast<double>(parts) * static_cast<double>(largest));
  const index_t units = prob.width / kColumnGrain;
  if (units >= parts)
    e.columns = static_cast<double>(units) / (static_cast<double>(parts) * static_cast<double>(ceil_div(units, parts)));
  return e;
}

/// A BSR product (BsrKernels, BsrProduct) on up to `parts` threads, as run_packed over
/// `pieces` (a split of the output block rows into several ranges per part), where
/// `split` (the same split into `parts` ranges) says how evenly whole parts would share
/// the stored blocks; or, when a few heavy block rows leave that split uneven and B is
/// wide, by column groups: group t computes every block row on its own columns of B and
/// C (packing just those columns itself), reading all of A. Each output element is summed
/// by the same blocks in the same order either way: the results are the same bits.
template <class Kernels, class Problem>
void run_bsr_product(const Kernels& k, const Problem& prob, index_t pack_units, std::span<const index_t> split,
                     std::span<const index_t> pieces) {
  const int parts = static_cast<int>(split.size()) - 1;
  const SplitBalance balance = split_balance(prob, split);
  // Columns re-read A once per group: worth it only for a clearly better balance.
  if (parts == 1 || !(balance.columns > 1.05 * balance.rows)) return run_packed(k, prob, pack_units, parts, pieces);
  const index_t units = prob.width / kColumnGrain;
  parallel_parts(parts, [&](int t) {
    const index_t c0 = units * t / parts * kColumnGrain;
    const index_t c1 = t + 1 == parts ? prob.width : units * (t + 1) / parts * kColumnGrain;
    Problem sub = prob;
    sub.width = c1 - c0;
    sub.B += prob.b_transposed ? c0 * prob.ldb : c0;
    sub.C += prob.c_transposed ? c0 * prob.ldc : c0;
    const std::size_t packed_bytes = round_to_line(k.packed_bytes(sub));
    std::byte* mem = thread_workspace(packed_bytes + round_to_line(k.workspace_bytes(sub)));
    k.pack(sub, mem, 0, pack_units);
    k.compute(sub, mem, mem + packed_bytes, split.front(), split.back());
  });
}

}  // namespace trnsparse::detail
