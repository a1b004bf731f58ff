// Internal: per-thread scratch memory that is reused across calls. Fresh pages are slow
// on first touch (docs/benchmarks.md, "Hosts and baselines"), so hot paths never
// allocate: each calling thread keeps one grow-only, 64-byte aligned buffer (huge pages
// requested for large ones). Valid until the same thread asks again.
#pragma once

#include <cstddef>

namespace trnsparse::detail {

/// Each thread's buffers: `kernel` for a kernel run's packed operands and scratch
/// (ops/run.hpp), `operands` for what an op prepares before that run and the run reads
/// (screened_spmm's masked blocks), so one does not move the other.
enum class Workspace { kernel, operands };

/// At least `bytes` of 64-byte aligned memory in the calling thread's buffer `slot`.
/// @throw OverflowError when the memory cannot be had.
std::byte* thread_workspace(std::size_t bytes, Workspace slot = Workspace::kernel);

/// `n` rounded up to a multiple of 64 (a cache line).
constexpr std::size_t round_to_line(std::size_t n) noexcept { return (n + 63) / 64 * 64; }

}  // namespace trnsparse::detail
