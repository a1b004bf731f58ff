// Internal: how work is split over threads. Every threaded pass of the library goes
// through here.
//
// A pass is cut into units whose results do not depend on the thread that computes them
// (one writer per output tile or row, reductions in a fixed order), so the bits are the
// same for any thread count. The calling thread always works: it starts on the units at
// once and takes whatever the pool's workers have not claimed, and it waits only for a
// unit a worker is still computing, never for a worker that has not woken up: on a core
// shared with another busy process a worker may be off the CPU for a scheduler quantum,
// and a fork-join runtime whose closing barrier waits for every thread makes any product
// shorter than that cost a quantum (docs/benchmarks.md, "Threads and busy machines").
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "runtime/checks.hpp"
#include "trnsparse/runtime.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// Runs fn(ctx, slot) on the calling thread (slot 0) and on each pool worker with slot
/// 1 .. parts - 1 that is awake before the calling thread's fn returns. A worker that
/// wakes later runs nothing. Returns when every fn that started has returned, then
/// rethrows what fn threw (the caller's, else the first worker's). Runs fn(ctx, 0) alone
/// when parts is 1, when called from inside a team, or when another thread's team holds
/// the pool.
void run_team(int parts, void (*fn)(void*, int), void* ctx);

/// Wakes the pool's sleeping workers that a team of `parts` would use, without opening
/// one: for a caller with serial work (a plan's first steps) before its team, so that a
/// worker asleep after an idle is polling again when the team opens, where waking it
/// then would cost the team the tens of µs a wake takes on a VM (docs/benchmarks.md,
/// "Threads and busy machines"). A worker woken this way polls for as long as after a
/// team, then sleeps again. Does nothing for parts <= 1, inside a team, while another
/// thread's team holds the pool, or while teams run on the caller alone.
void wake_team(int parts);

/// What the pool has done since the process started: teams asked of it (with parts > 1,
/// outside a team, the pool free), those run on the caller alone after a stall, the
/// stalls (a caller that waited for a worker taken off its core), and the sleeping
/// workers wake_team woke.
struct TeamStats {
  std::uint64_t teams = 0, alone = 0, stalls = 0, woken = 0;
};
TeamStats team_stats() noexcept;

/// The team interface for a callable: f(slot).
template <class F>
void run_team(int parts, F&& f) {
  using Fn = std::remove_reference_t<F>;
  run_team(parts, [](void* ctx, int slot) { (*static_cast<Fn*>(ctx))(slot); }, const_cast<void*>(static_cast<const void*>(&f)));
}

/// What a pass's work is counted in, by kernel family, for parts_for's time estimate.
enum class Work {
  csr,           ///< stored entries times columns of the dense operand
  small_blocks,  ///< multiply-adds of blocks of 2 to 8
  tiles,         ///< multiply-adds of larger blocks (packed tiles, SDDMM)
  attention,     ///< stored blocks times b * b * head dim
  stream,        ///< values a streaming pass reads or writes (solver vectors, copies)
  spgemm,        ///< terms L(i, k)·R(k, j) of a sparse × sparse product (a scattered update each)
};

/// The one-thread time, in ns, of `work` units of `family` against a dense operand of
/// `width` columns: a cost per unit that falls with the width towards the family's
/// compute rate. The costs are one core's speeds in cache from the calibration runs of
/// docs/benchmarks.md ("Threads and busy machines"; SpGEMM's in docs/spgemm.md); they
/// only decide how many threads a pass is worth, so an error in one moves that line by
/// as much.
constexpr double work_ns(Work family, double work, index_t width = 1) noexcept {
  const double w = static_cast<double>(width < 1 ? 1 : width);
  switch (family) {
    case Work::csr: return work * (0.1 + 0.4 / w);
    case Work::small_blocks: return work * (0.02 + 0.1 / w);
    case Work::tiles: return work * (0.01 + 0.08 / w);
    case Work::attention: return work * 0.025;
    case Work::stream: return work * 0.15;
    case Work::spgemm: return work * 3.0;
  }
  return work;
}

/// Threads worth using for `units` independent output units (block rows, rows) whose
/// one-thread time is about `ns`: at most one per unit, and one per kGrainNs. Below two
/// grains a pass runs on the calling thread alone: starting a team (more so waking a
/// sleeping worker) costs more than a second thread saves on so little work, and a worker
/// taken off its core by another process can cost a scheduler quantum.
inline int parts_for(index_t units, double ns, int threads) {
  constexpr double kGrainNs = 20'000;
  const double by_time = std::max(1.0, ns / kGrainNs);
  return static_cast<int>(std::max<index_t>(
      1, std::min<index_t>({static_cast<index_t>(threads), units, static_cast<index_t>(std::min(by_time, 1e9))})));
}
inline int parts_for(index_t units, double ns) { return parts_for(units, ns, num_threads()); }

/// Splits rows [0, n) into `parts` ranges of about equal cost, where the cost of rows
/// [0, i) is ptr[i] + i: its stored entries (blocks, or non-zeros), plus one per row for
/// the row's own output work. O(parts log n).
inline std::vector<index_t> balanced_split(std::span<const index_t> ptr, int parts) {
  const auto n = static_cast<index_t>(ptr.size()) - 1;
  const index_t total = ptr[n] + n;
  std::vector<index_t> s(static_cast<std::size_t>(parts) + 1, n);
  s[0] = 0;
  for (int t = 1; t < parts; ++t) {
    const index_t target = total / parts * t + total % parts * t / parts;
    // First row boundary i whose prefix cost reaches the target.
    index_t lo = s[t - 1], hi = n;
    while (lo < hi) {
      const index_t mid = lo + (hi - lo) / 2;
      if (ptr[mid] + mid < target) lo = mid + 1;
      else hi = mid;
    }
    s[t] = lo;
  }
  return s;
}

/// Pieces a pass of `parts` threads is cut into when the cut is free (row ranges of a
/// product): several per thread, so that a thread that arrives late or is slowed down
/// leaves only small pieces behind for the others to take.
inline constexpr int kPiecesPerPart = 4;

/// Pieces for a pass of `parts` threads: one on a single thread, else kPiecesPerPart a part.
constexpr int pieces_for(int parts) noexcept { return parts == 1 ? 1 : parts * kPiecesPerPart; }

/// A piece's share of an operand kept in L2 while another streams through it: half of
/// the L2 of the CPUs the tile kernels are tuned for.
inline constexpr std::size_t kPieceKeptBytes = std::size_t{1} << 20;

/// Pieces for a pass each of whose pieces keeps its share of `kept_bytes` (a linear
/// layer's weight blocks) in L2 and reads all of a streamed operand (the layer's
/// tokens): each piece reads the stream once, so the pass takes the fewest pieces whose
/// shares fit in kPieceKeptBytes, where more pieces would only read the stream more
/// often (docs/sparse_weights.md, "Where the time goes at density 0.1"). A whole number
/// of pieces a part, so that the parts start even: at least two, so that a slowed thread
/// still leaves a piece to the others, at most kPiecesPerPart.
constexpr int pieces_for(int parts, std::size_t kept_bytes) noexcept {
  if (parts == 1) return 1;
  const auto n = static_cast<std::size_t>(parts);
  const std::size_t per_part = (kept_bytes + n * kPieceKeptBytes - 1) / (n * kPieceKeptBytes);
  return parts * static_cast<int>(std::clamp<std::size_t>(per_part, 2, kPiecesPerPart));
}

/// The units [0, units) of a pass, cut into `parts` contiguous ranges: slot t takes the
/// units of range t from its front, then those the other ranges have left from their
/// backs. A thread thus keeps the rows it had in the last pass cut the same way (in its
/// cache), and the units of a thread that is late or slowed down go to the others.
/// Units go to threads in any order, so a unit's result must not depend on the thread
/// that runs it.
class UnitRanges {
public:
  /// Cuts [0, units) into `parts` ranges; outside a team. Units are numbered in 32 bits
  /// (a range is one 64-bit word): OverflowError from 2^32 units.
  void reset(int parts, index_t units) {
    if (units > index_t{0xffffffff})
      throw OverflowError(concat("UnitRanges: ", units, " units, at most 2^32 - 1"));
    if (parts > capacity_) ranges_ = std::make_unique<Range[]>(static_cast<std::size_t>(capacity_ = parts));
    parts_ = parts;
    for (int t = 0; t < parts; ++t) ranges_[t].reset(units * t / parts, units * (t + 1) / parts);
  }

  /// Runs f(u) for the units slot `self` gets: its own range's, then any left in the
  /// others. Over the slots of a team, every unit runs exactly once.
  template <class F>
  void run(int self, F&& f) {
    index_t u = 0;
    if (self < parts_)
      while (ranges_[self].take_front(u)) f(u);
    for (int v = 1; v <= parts_; ++v)
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

/// Runs f(slot, u) for every unit u in [0, units), each once, on a team of up to `parts`
/// threads dealt units by `ranges` (kept by the caller when consecutive passes should
/// keep their rows on the same threads). slot in [0, parts) names the running thread's
/// scratch: no two threads run with the same slot at once.
template <class F>
void parallel_for(int parts, index_t units, UnitRanges& ranges, F&& f) {
  if (parts <= 1 || units <= 1) {
    for (index_t u = 0; u < units; ++u) f(0, u);
    return;
  }
  ranges.reset(parts, units);
  run_team(parts, [&](int slot) { ranges.run(slot, [&](index_t u) { f(slot, u); }); });
}

template <class F>
void parallel_for(int parts, index_t units, F&& f) {
  UnitRanges ranges;
  parallel_for(parts, units, ranges, f);
}

/// Runs f(t) for each part t in [0, parts) exactly once, on up to `parts` threads; what a
/// part computes must not depend on which thread runs it (a part's scratch is its own).
template <class F>
void parallel_parts(int parts, F&& f) {
  parallel_for(parts, parts, [&](int, index_t t) { f(static_cast<int>(t)); });
}

}  // namespace trnsparse::detail
