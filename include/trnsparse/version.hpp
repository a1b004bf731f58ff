/// @file version.hpp
/// Library version.
#pragma once

namespace trnsparse {
inline constexpr int version_major = 0;
inline constexpr int version_minor = 1;
inline constexpr int version_patch = 0;
inline constexpr const char* version_string = "0.1.0";
}  // namespace trnsparse
