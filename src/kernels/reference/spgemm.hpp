// Reference (scalar) SpGEMM kernel: the executable specification of kernels/spgemm.hpp.
// One dense accumulator row of C per output row, summed in the contract's order, then
// read out at C's stored positions: obviously right, O(cols · b²) work per row. A row's
// columns (the symbolic phase's kernel): all of them, sorted, duplicates dropped.
#pragma once

#include "kernels/spgemm.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::kernels::reference {

/// C's values for rows [0, rows) of `p` (kernels/spgemm.hpp). `work` holds
/// p.cols · b² values of TC.
template <Value TA, class TC>
void spgemm_numeric(const SpgemmProduct<TA, TC>& p, index_t rows, TC* work) noexcept;

/// The distinct columns of R's rows l_idx[q], q in [q0, q1), written to out in ascending
/// order (out has room for all of them); returns their number. The specification of
/// SpgemmRowColumns::columns.
index_t spgemm_row_columns(const index_t* l_idx, index_t q0, index_t q1, const index_t* r_ptr, const index_t* r_idx,
                           index_t* out) noexcept;

}  // namespace trnsparse::kernels::reference
