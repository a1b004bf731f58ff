/// @file timing.hpp
/// The one way trnsparse times products: its benchmarks, its demo and the format
/// advisor's calibration use these, and so can yours.
/// - Warm-up runs until the threads are awake and the times settle: sleeping workers wake
///   slowly on virtual machines, and the first runs also touch fresh pages.
/// - A median of the timed runs, with its spread (the interquartile range over the
///   median), since one slow run on a shared host says nothing about the product.
/// - Two things compared are timed in alternating chunks, so that both see the same
///   drift of the host's load, and their ratio is what is quoted.
/// - A measurement whose spread stays above the limit, or during which the thread pool met
///   a worker taken off its core (and so ran products alone for a while), is retried and
///   then flagged (`stable` false), never reported as if it were clean.
///
///     const trnsparse::Timing t = trnsparse::measure([&] { trnsparse::spmm(1.0, A, X, 0.0, Y); });
///     // t.median_ms, t.spread, t.stable
#pragma once

#include <functional>
#include <utility>

namespace trnsparse {

struct TimingOptions {
  int reps = 11;             ///< timed runs (per side, when paired)
  int chunk = 5;             ///< paired: runs per alternating chunk
  double max_spread = 0.10;  ///< interquartile range / median above which a measurement is retried
  int retries = 2;           ///< measurements taken again when the spread is too wide
  double warmup_ms = 20.0;   ///< warm-up runs last at least this long ...
  int max_warmup = 200;      ///< ... and stop after this many runs, settled or not
};

/// One measurement: times in milliseconds.
struct Timing {
  double median_ms = 0.0;
  double min_ms = 0.0;
  double spread = 0.0;  ///< (third quartile - first quartile) / median
  int runs = 0;         ///< timed runs behind the median (of the last attempt)
  int attempts = 0;     ///< measurements taken (1 + retries used)
  /// Teams of the thread pool that met a worker taken off its core, or ran on the caller
  /// alone after one, during the timed runs: another process wanted the cores.
  unsigned long stalled_teams = 0;
  bool stable = false;  ///< spread <= max_spread and no stalled team
};

/// Times f: warm-up, then o.reps timed runs; retried while the spread is too wide.
Timing measure(const std::function<void()>& f, const TimingOptions& o = {});

/// Times f and g in alternating chunks of o.chunk runs (g's first), each side warmed up
/// at the start and each chunk after one untimed run; retried while either spread is
/// too wide.
std::pair<Timing, Timing> measure_pair(const std::function<void()>& f, const std::function<void()>& g,
                                       const TimingOptions& o = {});

}  // namespace trnsparse
