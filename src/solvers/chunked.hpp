// Internal: deterministic passes over n x m row-major blocks for the solvers.
//
// Rows are cut into chunks of kChunkRows (a constant: the cut never depends on the thread
// count). A pass runs a body on every chunk, in parallel; the body updates its rows and
// adds the terms of up to `m` reductions into its chunk's lane slots, row i of a chunk
// going to lane (i - chunk start) % kLanes. The result of reduction j sums, in order, the
// lanes of chunk 0, then of chunk 1, ... Every partial sum therefore has one fixed
// order, and a pass gives bitwise identical results for 1, 2, 3 ... threads. Lanes let
// the compiler keep kLanes independent sums in flight; all reductions are in fp64.
#pragma once

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <span>
#include <vector>

#include "kernels/cg.hpp"
#include "ops/run.hpp"
#include "runtime/checks.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::solvers {

inline constexpr index_t kChunkRows = 4096;
inline constexpr index_t kLanes = kernels::kCgLanes;  // the CG kernels' lanes

/// Where lane l of reduction j sits among a chunk's m * kLanes slots. A body that walks
/// a row's reductions in its inner loop (block CG's k columns) wants them contiguous
/// (by_lane: l * m + j); one that walks 8 rows of one reduction wants its lanes
/// contiguous (by_reduction: j * kLanes + l). Either way the sums are the same.
enum class LaneLayout { by_reduction, by_lane };

/// The lane slots of `m` reductions over the chunks of n rows, allocated once per solve
/// and reused by every pass.
class ChunkedSums {
public:
  ChunkedSums(index_t n, index_t m, LaneLayout layout = LaneLayout::by_reduction)
      : n_(n), m_(m), layout_(layout), chunks_(detail::ceil_div(n, kChunkRows)),
        lanes_(detail::make_vector<double>(chunks_ * kLanes * std::max<index_t>(m, 1), "solver: reduction lanes")) {}

  /// Runs body(r0, r1, lanes) for every chunk [r0, r1) of rows, lanes[slot(j, l)] being
  /// the zeroed lane l of reduction j, on threads granted for a one-thread time of `ns`
  /// (detail::work_ns).
  template <class Body>
  void run(double ns, Body&& body) {
    const auto chunk = [&](index_t c) {
      double* lanes = lanes_.data() + c * kLanes * m_;
      std::fill(lanes, lanes + kLanes * m_, 0.0);
      body(c * kChunkRows, std::min(n_, (c + 1) * kChunkRows), lanes);
    };
    // Slot t takes the chunks of range t first: every pass of a solve cuts the rows the
    // same way, so a thread keeps working on the rows it has in its cache (a solve that
    // fits in the caches runs faster than with chunks dealt first come, first served;
    // docs/benchmarks.md, "Solvers"), and takes others' chunks when its own are done.
    detail::parallel_for(detail::parts_for(chunks_, ns), chunks_, ranges_,
                         [&](int, index_t c) { chunk(c); });
  }

  /// Totals the reductions of the last run: lanes in order within a chunk, then chunks
  /// in order, then over the processes of a distributed operator (`op.sum`, collective).
  template <class Operator>
  void reduce(const Operator& op) {
    for (index_t j = 0; j < m_; ++j) {
      double total = 0.0;
      for (index_t c = 0; c < chunks_; ++c) {
        double chunk = 0.0;
        for (index_t l = 0; l < kLanes; ++l) chunk += lanes_[c * m_ * kLanes + slot(j, l)];
        total += chunk;
      }
      totals_[j] = total;
    }
    op.sum(totals_);
  }

  /// The slot of lane l of reduction j within a chunk's lanes.
  [[nodiscard]] index_t slot(index_t j, index_t l) const noexcept {
    return layout_ == LaneLayout::by_reduction ? j * kLanes + l : l * m_ + j;
  }

  /// Reduction j as the last `reduce` totalled it.
  [[nodiscard]] double sum(index_t j) const { return totals_[j]; }

private:
  index_t n_;
  index_t m_;
  LaneLayout layout_;
  index_t chunks_;
  std::vector<double> lanes_;
  detail::UnitRanges ranges_;
  std::vector<double> totals_ = std::vector<double>(static_cast<std::size_t>(m_), 0.0);
};

/// Calls row_fn(i, lane) for rows [r0, r1), lane = (i - r0) % kLanes, without a division:
/// full groups of kLanes rows (a loop of constant trip count, which the compiler turns
/// into vector code), then the tail.
template <class RowFn>
inline void for_rows(index_t r0, index_t r1, RowFn&& row_fn) {
  index_t i = r0;
  for (; i + kLanes <= r1; i += kLanes)
    for (index_t l = 0; l < kLanes; ++l) row_fn(i + l, l);
  for (index_t l = 0; i + l < r1; ++l) row_fn(i + l, l);
}

/// Checks that `v` has `want` elements (named `want_name`) or, when `optional`, none,
/// and that they are finite: DimensionMismatch / InvalidArgument naming `who` and `what`.
template <class T>
void check_vector(std::span<const T> v, index_t want, bool optional, const char* who, const char* what,
                  const char* want_name) {
  if (optional && v.empty()) return;
  detail::check_dim(static_cast<index_t>(v.size()), want, who, what, "elements", want_name);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw InvalidArgument(detail::concat(who, ": ", what, "[", i, "] = ", v[i], ", expected a finite value"));
}

/// The callback's answer, agreed on by every process: any process asking to stop (or
/// throwing: rethrown there after the others learned to stop) stops all.
template <class Operator>
bool stop_requested(const Operator& A, const std::function<bool(index_t, double)>& callback, index_t it,
                    double worst) {
  std::exception_ptr error;
  bool stop = false;
  try {
    stop = !callback(it, worst);
  } catch (...) {
    error = std::current_exception();
    stop = true;
  }
  stop = A.any(stop);
  if (error) std::rethrow_exception(error);
  return stop;
}

}  // namespace trnsparse::solvers
