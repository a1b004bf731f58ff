// Internal: running a packed two-phase kernel (pack, then compute) over threads.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "runtime/checks.hpp"
#include "runtime/workspace.hpp"
#include "trnsparse/bsr.hpp"
#include "trnsparse/runtime.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// Threads worth using for `units` independent output units (block rows, rows) holding
/// `work` multiply-adds in all: at most one per unit, and one per `kGrain` of work, since
/// waking a thread team costs about as much as that many multiply-adds.
inline int parts_for(index_t units, double work) {
  constexpr double kGrain = 1 << 16;
  const double by_work = std::max(1.0, work / kGrain);
  return static_cast<int>(std::max<index_t>(
      1, std::min<index_t>({static_cast<index_t>(num_threads()), units, static_cast<index_t>(std::min(by_work, 1e9))})));
}

/// Multiply-adds of a product of the stored blocks of `s` with `width` columns.
inline double block_work(const BsrStructure& s, index_t width) {
  return static_cast<double>(s.n_blocks()) * static_cast<double>(s.block_size() * s.block_size()) *
         static_cast<double>(width);
}

/// Runs f(t) for t in [0, parts) on up to `parts` OpenMP threads. The runtime may grant
/// fewer threads than asked, so threads stride over the parts: each part runs exactly
/// once, and what it computes does not depend on which thread runs it.
template <class F>
void parallel_parts(int parts, F&& f) {
  if (parts == 1) {
    f(0);
    return;
  }
#pragma omp parallel num_threads(parts)
  for (int t = omp_get_thread_num(); t < parts; t += omp_get_num_threads()) f(t);
}

/// The units [0, units) of a parallel loop, cut into `parts` contiguous ranges: inside a
/// parallel region, thread t takes the units of range t from its front, then those the
/// other ranges have left from their backs. A thread thus keeps the rows it had in the
/// last loop cut the same way (in its cache), and a thread slowed down on a shared
/// machine does less, where a static split would make the loop wait for it. Units go to
/// threads in any order, so a unit's result must not depend on the thread that runs it.
class UnitRanges {
public:
  /// Cuts [0, units) into `parts` ranges; outside a parallel region. Units are numbered
  /// in 32 bits (a range is one 64-bit word): OverflowError from 2^32 units.
  void reset(int parts, index_t units) {
    if (units > index_t{0xffffffff})
      throw OverflowError(concat("UnitRanges: ", units, " units, at most 2^32 - 1"));
    if (parts > capacity_) ranges_ = std::make_unique<Range[]>(static_cast<std::size_t>(capacity_ = parts));
    parts_ = parts;
    for (int t = 0; t < parts; ++t) ranges_[t].reset(units * t / parts, units * (t + 1) / parts);
  }

  /// Runs f(u) for every unit, each once over the threads of the calling region (which
  /// may have fewer threads than parts).
  template <class F>
  void run(F&& f) {
    const int self = omp_get_thread_num(), team = omp_get_num_threads();
    index_t u = 0;
    for (int t = self; t < parts_; t += team)
      while (ranges_[t].take_front(u)) f(u);
    for (int v = 1; v < parts_; ++v)
      while (ranges_[(self + v) % parts_].take_back(u)) f(u);
  }

private:
  /// Units [front, back) not taken yet, in one atomic word (unit numbers fit in 32
  /// bits): the owner takes the front, other threads the back, and a compare-exchange
  /// lets exactly one of them have the last unit. One per cache line.
  class alignas(64) Range {
  public:
    void reset(index_t front, index_t back) { word_.store(pack(front, back), std::memory_order_relaxed); }
    bool take_front(index_t& u) { return take(u, true); }
    bool take_back(index_t& u) { return take(u, false); }

  private:
    static std::uint64_t pack(index_t front, index_t back) {
      return static_cast<std::uint64_t>(front) << 32 | static_cast<std::uint64_t>(back);
    }
    bool take(index_t& u, bool front_end) {
      std::uint64_t word = word_.load(std::memory_order_relaxed);
      for (;;) {
        const auto front = static_cast<index_t>(word >> 32), back = static_cast<index_t>(word & 0xffffffffu);
        if (front >= back) return false;
        if (word_.compare_exchange_weak(word, front_end ? pack(front + 1, back) : pack(front, back - 1),
                                        std::memory_order_relaxed)) {
          u = front_end ? front : back - 1;
          return true;
        }
      }
    }
    std::atomic<std::uint64_t> word_{0};
  };

  std::unique_ptr<Range[]> ranges_;
  int capacity_ = 0, parts_ = 0;
};

/// Runs first(t, u) for every unit u in [0, units), then, once all are done, second(t, u)
/// for every unit, on up to `parts` threads; t in [0, parts) names the running thread's
/// scratch. Units go to threads as UnitRanges deal them, the same way in both phases,
/// so a unit's result must not depend on the thread that runs it (its scratch is
/// private and reset by the unit).
template <class F, class G>
void parallel_phases(int parts, index_t units, F&& first, G&& second) {
  if (parts == 1) {
    for (index_t u = 0; u < units; ++u) first(0, u);
    for (index_t u = 0; u < units; ++u) second(0, u);
    return;
  }
  UnitRanges first_ranges, second_ranges;
  first_ranges.reset(parts, units);
  second_ranges.reset(parts, units);
#pragma omp parallel num_threads(parts)
  {
    const int t = omp_get_thread_num();
    first_ranges.run([&](index_t u) { first(t, u); });
#pragma omp barrier
    second_ranges.run([&](index_t u) { second(t, u); });
  }
}

/// Runs a kernel table with the BsrKernels shape (packed_bytes, workspace_bytes, pack,
/// compute): part t packs an even share of the `pack_units` operand units, then, after
/// a barrier, computes output units [split[t], split[t+1]) with its own workspace.
/// One writer per output unit: results do not depend on the number of parts.
template <class Kernels, class Problem>
void run_packed(const Kernels& k, const Problem& prob, index_t pack_units, std::span<const index_t> split) {
  const int parts = static_cast<int>(split.size()) - 1;
  const std::size_t packed_bytes = round_to_line(k.packed_bytes(prob));
  const std::size_t ws_bytes = round_to_line(k.workspace_bytes(prob));
  std::byte* mem = thread_workspace(packed_bytes + static_cast<std::size_t>(parts) * ws_bytes);
  auto pack_share = [&](int t) { k.pack(prob, mem, pack_units * t / parts, pack_units * (t + 1) / parts); };
  auto compute_share = [&](int t) { k.compute(prob, mem, mem + packed_bytes + t * ws_bytes, split[t], split[t + 1]); };
  if (parts == 1) {
    pack_share(0);
    compute_share(0);
    return;
  }
#pragma omp parallel num_threads(parts)
  {
    const int tid = omp_get_thread_num(), team = omp_get_num_threads();
    for (int t = tid; t < parts; t += team) pack_share(t);
#pragma omp barrier
    for (int t = tid; t < parts; t += team) compute_share(t);
  }
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

/// A BSR product (BsrKernels, BsrProduct) on the parts of a row split, as run_packed; or,
/// when a few heavy block rows leave that split uneven and B is wide, by column groups:
/// part t computes every block row on its own columns of B and C (packing just those
/// columns itself, so no barrier), reading all of A. Each output element is summed by
/// the same blocks in the same order either way: the results are the same bits.
template <class Kernels, class Problem>
void run_bsr_product(const Kernels& k, const Problem& prob, index_t pack_units, std::span<const index_t> split) {
  const int parts = static_cast<int>(split.size()) - 1;
  const SplitBalance balance = split_balance(prob, split);
  // Columns re-read A once per group: worth it only for a clearly better balance.
  if (parts == 1 || !(balance.columns > 1.05 * balance.rows)) return run_packed(k, prob, pack_units, split);
  const index_t units = prob.width / kColumnGrain;
  auto group = [&](int t) {
    const index_t c0 = units * t / parts * kColumnGrain;
    const index_t c1 = t + 1 == parts ? prob.width : units * (t + 1) / parts * kColumnGrain;
    Problem sub = prob;
    sub.width = c1 - c0;
    sub.B += c0;
    sub.C += c0;
    const std::size_t packed_bytes = round_to_line(k.packed_bytes(sub));
    std::byte* mem = thread_workspace(packed_bytes + round_to_line(k.workspace_bytes(sub)));
    k.pack(sub, mem, 0, pack_units);
    k.compute(sub, mem, mem + packed_bytes, split.front(), split.back());
  };
#pragma omp parallel num_threads(parts)
  for (int t = omp_get_thread_num(); t < parts; t += omp_get_num_threads()) group(t);
}

}  // namespace trnsparse::detail
