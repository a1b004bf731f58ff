// Internal: integer settings read from the environment (TRNSPARSE_NUM_THREADS,
// TRNSPARSE_KEPT_MB).
#pragma once

namespace trnsparse::detail {

/// `text`, the value of the environment variable `name`, as an integer in [lo, hi].
/// @throw InvalidArgument `name=text: expected an integer in [lo, hi]` otherwise.
long env_integer(const char* name, const char* text, long lo, long hi);

}  // namespace trnsparse::detail
