// Internal: the released blocks runtime/blocks.cpp keeps for storage.hpp's acquire_block.
#pragma once

#include <cstddef>

namespace trnsparse::detail {

/// Bytes of released blocks kept now (0 under AddressSanitizer, which keeps none).
std::size_t kept_block_bytes() noexcept;

/// Keeps at most `bytes` of released blocks from now on (at most 1 GiB), unmapping the
/// oldest beyond it; the limit starts at `TRNSPARSE_KEPT_MB` MiB, 256 by default.
/// @throw InvalidArgument for a malformed `TRNSPARSE_KEPT_MB` (on first use).
void set_kept_block_limit(std::size_t bytes);

}  // namespace trnsparse::detail
