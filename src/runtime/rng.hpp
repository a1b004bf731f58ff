// Internal: SplitMix64 (Steele, Lea, Flood 2014), a tiny generator whose output is the
// same on every platform, unlike the distributions of <random>. Generators and the
// benchmark draw from it so a seed means the same matrix everywhere.
#pragma once

#include <cstdint>

namespace trnsparse::detail {

struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Skips n draws in O(1) (the state advances by a constant per draw).
  void skip(std::uint64_t n) noexcept { state += n * 0x9e3779b97f4a7c15ull; }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [-1, 1).
  double symmetric() noexcept { return 2.0 * uniform() - 1.0; }
};

}  // namespace trnsparse::detail
