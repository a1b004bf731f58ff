// Internal to the benchmark: timing, JSON values, deterministic random data.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bench.hpp"
#include "runtime/rng.hpp"

namespace trnsparse::bench {

/// Median wall time of `reps` runs of f (after one untimed warm-up run), in ms.
template <class F>
double median_ms(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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

/// The library's portable generator: the same numbers on every platform.
using Rng = detail::SplitMix64;

}  // namespace trnsparse::bench
