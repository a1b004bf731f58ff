// Internal: the transposed pattern of a compressed-row structure, shared by BSR plans
// (block level) and CSR analyses (entry level).
#pragma once

#include <span>

#include "trnsparse/plan.hpp"

namespace trnsparse::detail {

/// The transposed pattern of `rows` compressed rows over `cols` columns by counting
/// sort: column j holds entries perm[col_ptr[j]] .. (positions in row order), lying in
/// rows row_idx[col_ptr[j]] .., ascending. O(entries + rows + cols).
BscView transposed_pattern(index_t rows, index_t cols, std::span<const index_t> ptr, std::span<const index_t> idx);

}  // namespace trnsparse::detail
