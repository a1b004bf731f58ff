/// @file progress.hpp
/// Progress of long work (`bench`, `solve`, `hf`) on stderr: one line rewritten in place
/// with what is running, the elapsed time and, when the caller knows how far it is, an
/// estimate of the time left. Only when stderr is a terminal and the output is not
/// JSON, so that pipes, files and machine-readable runs stay exactly as they were.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace trnsparse::cli {

class Progress {
public:
  /// Shown when `enabled` (the caller's "not --json") and stderr is a terminal.
  explicit Progress(bool enabled) : on_(enabled && isatty(fileno(stderr)) == 1) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { clear(); }

  [[nodiscard]] bool on() const noexcept { return on_; }

  /// Rewrites the line: `status`, the elapsed time and, for `fraction` in (0, 1), the
  /// time left at the mean rate so far. At most ten updates a second reach the terminal.
  void update(const std::string& status, double fraction = NAN) {
    if (!on_) return;
    const auto now = Clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::string line = status + ", " + seconds(elapsed) + " elapsed";
    if (fraction > 0 && fraction < 1) line += ", about " + seconds(elapsed * (1 - fraction) / fraction) + " left";
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
  }

  /// Erases the line (before other output, and at the end).
  void clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

  /// How far an iteration whose relative residual went from `first` to `rel` is towards
  /// `tol`, on a log scale (iterative solvers converge about geometrically).
  static double log_fraction(double first, double rel, double tol) {
    if (!(rel > 0) || !(first > tol) || !(tol > 0)) return NAN;
    return std::fmin(1.0, std::fmax(0.0, std::log(first / rel) / std::log(first / tol)));
  }

private:
  using Clock = std::chrono::steady_clock;

  static std::string seconds(double s) {
    char buf[32];
    if (s < 60) std::snprintf(buf, sizeof buf, "%.1f s", s);
    else std::snprintf(buf, sizeof buf, "%d min %02d s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
    return buf;
  }

  bool on_;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
};

}  // namespace trnsparse::cli
