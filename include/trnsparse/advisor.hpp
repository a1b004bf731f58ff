/// @file advisor.hpp
/// What a format would cost a matrix, before converting it.
///
///     double f = trnsparse::estimate_fill(A, 3);   // 1.0: A's 3 x 3 blocks are full
#pragma once

#include <cstdint>

#include "trnsparse/csr.hpp"

namespace trnsparse {

/// The fill ratio of A in BSR with b x b blocks: the elements of the stored blocks over
/// A's entries, n_blocks · b² / nnz (1 when A's blocks are full; 1 for an empty A).
/// Estimated from a sample of block rows, each kept with probability `fraction` (all of
/// them at 1, where the result is exact), as OSKI samples them: time linear in the sampled
/// rows' entries, plus O(block columns) once. The sample is drawn from `seed`, the same on
/// every platform; an empty sample falls back to the first block row with entries.
/// @throw InvalidArgument for b < 1 or a fraction outside (0, 1].
template <Value T>
double estimate_fill(const CsrMatrix<T>& A, index_t block_size, double fraction = 1.0, std::uint64_t seed = 0);

}  // namespace trnsparse
