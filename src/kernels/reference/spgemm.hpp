// Reference (scalar) SpGEMM kernel: the executable specification of kernels/spgemm.hpp.
// One dense accumulator row of C per output row, summed in the contract's order, then
// read out at C's stored positions: obviously right, O(cols · b²) work per row.
#pragma once

#include "kernels/spgemm.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::kernels::reference {

/// C's values for rows [0, rows) of `p` (kernels/spgemm.hpp). `work` holds
/// p.cols · b² values of TC.
template <Value TA, class TC>
void spgemm_numeric(const SpgemmProduct<TA, TC>& p, index_t rows, TC* work) noexcept;

}  // namespace trnsparse::kernels::reference
