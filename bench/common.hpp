// Internal to the benchmark: timing, JSON values, deterministic random data.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <climits>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "bench.hpp"
#include "runtime/rng.hpp"
#include "runtime/timing.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse::bench {

/// The timings behind the row being measured: every median below adds its spread here,
/// and `run` (sections.cpp) puts the widest into the row it emits as `spread`, with
/// `unstable` when a measurement stayed above the harness's limit after its retries
/// (and a warning on stderr), then clears it for the next row.
struct RowTimings {
  double spread = 0.0;
  unsigned long stalled_teams = 0;
  bool unstable = false;
  void add(const detail::Timing& t) {
    stalled_teams += t.stalled_teams;
    spread = std::max(spread, t.spread);
    unstable = unstable || !t.stable;
  }
};
RowTimings& row_timings();

/// Wall time of one run of f, in ms (for runs interleaved with other measurements;
/// summarised by detail::summarise).
template <class F>
double elapsed_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Median wall time of `reps` runs of f (runtime/timing.hpp: warmed up, retried while
/// the spread is too wide), in ms.
template <class F>
double median_ms(int reps, F&& f) {
  const detail::Timing t = detail::measure(std::function<void()>(std::ref(f)), {.reps = reps});
  row_timings().add(t);
  return t.median_ms;
}

/// Medians of `reps` runs each of f and g (in ms), timed in alternating chunks of `chunk`
/// runs (runtime/timing.hpp). On a shared host whose load drifts over seconds, two
/// medians taken one after the other can differ by a quarter from the drift alone;
/// alternating, both see the same share of it, and their ratio is what a row quotes.
template <class F, class G>
std::pair<double, double> paired_median_ms(int reps, int chunk, F&& f, G&& g) {
  const detail::TimingOptions o{.reps = reps, .chunk = chunk};
  const auto [tf, tg] = detail::measure_pair(std::function<void()>(std::ref(f)), std::function<void()>(std::ref(g)), o);
  row_timings().add(tf);
  row_timings().add(tg);
  return {tf.median_ms, tg.median_ms};
}

/// A JSON number (null when not finite).
inline std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  std::array<char, 32> text{};
  return {text.data(), std::to_chars(text.data(), text.data() + text.size(), v).ptr};
}
inline std::string num(index_t v) { return std::to_string(v); }
inline std::string num(int v) { return std::to_string(v); }
/// A JSON string (the benchmark's strings need no escaping beyond quotes).
inline std::string str(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

/// Runs the shell command `cmd` and returns `keys` from the JSON object it prints (the
/// raw JSON values), or an empty row if it fails or lacks a key.
Row child_row(const std::string& cmd, std::initializer_list<const char*> keys);

/// The dense GEMM (n x n times n x width, fp32 unless o.dtype is fp64) in a child process
/// with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, so that OpenBLAS picks its own
/// kernel for this CPU: dense_ms, rel_err, corename, or empty if the child failed.
Row dense_child(const Options& o, index_t n, index_t width, int threads);

/// The library's portable generator: the same numbers on every platform.
using Rng = detail::SplitMix64;

/// A rows x cols matrix of values uniform in [-1, 1) (through float, so that every value
/// type gets the same numbers): the same for the same arguments.
template <class T>
Dense<T> random_dense(index_t rows, index_t cols, std::uint64_t seed) {
  Rng rng{seed};
  Dense<T> D(rows, cols);
  for (T& v : D.values()) v = T(static_cast<float>(rng.symmetric()));
  return D;
}

/// Bytes per column index a float or double CSR product reads: the library keeps a
/// 32-bit copy of the indices of a matrix whose columns fit them, and reads that.
template <class T>
double index_bytes(const CsrMatrix<T>& A) {
  return A.cols() <= INT32_MAX ? sizeof(std::int32_t) : sizeof(index_t);
}

}  // namespace trnsparse::bench
