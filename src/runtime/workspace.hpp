// Internal: per-thread scratch memory that is reused across calls. Fresh pages cost
// ~11 µs each on first touch on these machines, so hot paths never allocate: each
// calling thread keeps one grow-only, 64-byte aligned buffer (huge pages requested for
// large ones). Valid until the same thread asks again.
#pragma once

#include <cstddef>

namespace trnsparse::detail {

/// At least `bytes` of 64-byte aligned memory, owned by the calling thread.
/// @throw OverflowError when the memory cannot be had.
std::byte* thread_workspace(std::size_t bytes);

/// `n` rounded up to a multiple of 64 (a cache line).
constexpr std::size_t round_to_line(std::size_t n) noexcept { return (n + 63) / 64 * 64; }

}  // namespace trnsparse::detail
