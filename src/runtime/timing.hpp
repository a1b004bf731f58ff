// Internal side of trnsparse/timing.hpp (the one way products are timed, by the
// benchmarks, the demo and the advisor's calibration): the summary of measured times and
// the probe of other processes' load.
#pragma once

#include <vector>

#include "trnsparse/timing.hpp"

namespace trnsparse::detail {

using trnsparse::measure;
using trnsparse::measure_pair;
using trnsparse::Timing;
using trnsparse::TimingOptions;

/// The median, spread and minimum of measured times (o.max_spread decides `stable`; no
/// team counts are known).
Timing summarise(std::vector<double> times_ms, const TimingOptions& o, int attempts = 1);

/// How much of the machine other processes use while this one measures: CPU time of
/// every process (/proc/stat) less this process's own (/proc/self/stat), over the wall
/// time since construction, in cores. NaN where /proc cannot be read.
class LoadProbe {
public:
  LoadProbe();
  /// Cores' worth of CPU time other processes used since construction.
  [[nodiscard]] double other_cores() const;

private:
  struct Sample {
    double machine_s = 0.0, self_s = 0.0, wall_s = 0.0;
    bool valid = false;
  };
  static Sample sample();
  Sample start_;
};

/// Cores' worth of CPU other processes may use while a measurement is still called
/// quiet: a quarter of a core.
inline constexpr double kQuietOtherCores = 0.25;

}  // namespace trnsparse::detail
