#include "runtime/timing.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/parallel.hpp"

namespace trnsparse::detail {

namespace {

double run_ms(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Runs f until the warm-up has lasted o.warmup_ms and the last run is within 25% of the
/// fastest so far (the workers are awake, the pages touched), or until o.max_warmup runs
/// or 50 warm-up periods have passed.
void warm_up(const std::function<void()>& f, const TimingOptions& o) {
  double elapsed = 0.0, fastest = 0.0;
  for (int r = 0; r < std::max(o.max_warmup, 1); ++r) {
    const double t = run_ms(f);
    elapsed += t;
    fastest = r == 0 ? t : std::min(fastest, t);
    if ((elapsed >= o.warmup_ms && t <= 1.25 * fastest) || elapsed >= 50.0 * o.warmup_ms) return;
  }
}

/// The pool's stalled and alone teams since construction.
class StallCount {
public:
  StallCount() : start_(count()) {}
  /// `t` with the teams that stalled or ran alone meanwhile; not stable if there were any.
  Timing mark(Timing t) const {
    t.stalled_teams = static_cast<unsigned long>(count() - start_);
    t.stable = t.stable && t.stalled_teams == 0;
    return t;
  }

private:
  static std::uint64_t count() {
    const TeamStats s = team_stats();
    return s.stalls + s.alone;
  }
  std::uint64_t start_;
};

}  // namespace

Timing summarise(std::vector<double> t, const TimingOptions& o, int attempts) {
  std::ranges::sort(t);
  const std::size_t n = t.size();
  Timing s;
  s.runs = static_cast<int>(n);
  s.attempts = attempts;
  s.min_ms = t.front();
  s.median_ms = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  s.spread = s.median_ms > 0.0 ? (t[(3 * n) / 4] - t[n / 4]) / s.median_ms : 0.0;
  s.stable = s.spread <= o.max_spread;
  return s;
}

}  // namespace trnsparse::detail

namespace trnsparse {

Timing measure(const std::function<void()>& f, const TimingOptions& o) {
  using namespace detail;
  const int reps = std::max(o.reps, 1);
  Timing s;
  for (int attempt = 1; attempt <= 1 + std::max(o.retries, 0); ++attempt) {
    warm_up(f, o);
    const StallCount stalls;
    std::vector<double> t(static_cast<std::size_t>(reps));
    for (double& v : t) v = run_ms(f);
    s = stalls.mark(summarise(std::move(t), o, attempt));
    if (s.stable) break;
  }
  return s;
}

std::pair<Timing, Timing> measure_pair(const std::function<void()>& f, const std::function<void()>& g,
                                       const TimingOptions& o) {
  using namespace detail;
  const int reps = std::max(o.reps, 1), chunk = std::max(o.chunk, 1);
  std::pair<Timing, Timing> s;
  for (int attempt = 1; attempt <= 1 + std::max(o.retries, 0); ++attempt) {
    warm_up(g, o);
    warm_up(f, o);
    const StallCount stalls;
    std::vector<double> tf, tg;
    for (int done = 0; done < reps; done += chunk) {
      const int n = std::min(chunk, reps - done);
      // Each chunk starts with an untimed run: it brings the side's operands back into
      // the caches, as repeated products of one matrix keep them there.
      g();
      for (int r = 0; r < n; ++r) tg.push_back(run_ms(g));
      f();
      for (int r = 0; r < n; ++r) tf.push_back(run_ms(f));
    }
    s = {stalls.mark(summarise(std::move(tf), o, attempt)), stalls.mark(summarise(std::move(tg), o, attempt))};
    if (s.first.stable && s.second.stable) break;
  }
  return s;
}

}  // namespace trnsparse

namespace trnsparse::detail {

LoadProbe::LoadProbe() : start_(sample()) {}

LoadProbe::Sample LoadProbe::sample() {
  Sample s;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::ifstream stat("/proc/stat");
  std::string cpu;
  // user nice system idle iowait irq softirq steal: busy is all but idle, iowait and
  // steal (the hypervisor's, not another process's).
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (!(stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") return s;
  std::ifstream self("/proc/self/stat");
  std::string line;
  if (!std::getline(self, line)) return s;
  // Fields after the command name (which may hold spaces), from field 3 on: utime and
  // stime are fields 14 and 15.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::strtod(field.c_str(), nullptr);
    if (i == 15) stime = std::strtod(field.c_str(), nullptr);
  }
  s.machine_s = (user + nice + system + irq + softirq) / tick;
  s.self_s = (utime + stime) / tick;
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  s.valid = true;
  return s;
}

double LoadProbe::other_cores() const {
  const Sample now = sample();
  if (!start_.valid || !now.valid || now.wall_s <= start_.wall_s) return std::numeric_limits<double>::quiet_NaN();
  const double others = (now.machine_s - start_.machine_s) - (now.self_s - start_.self_s);
  return std::max(0.0, others) / (now.wall_s - start_.wall_s);
}

}  // namespace trnsparse::detail
