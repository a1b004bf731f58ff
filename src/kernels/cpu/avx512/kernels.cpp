// AVX-512 kernels (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq): 8 x 2
// registers of 16 floats / 8 doubles per microkernel tile, 16 of the 32 zmm registers
// holding accumulators, A broadcast straight from memory.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/tables.hpp"
#include "kernels/cpu/prefetch.hpp"
#include "plan/csr_analysis.hpp"

namespace trnsparse::kernels::cpu::avx512 {

#include "kernels/cpu/avx512/vec.inc"
#include "kernels/cpu/bsr_tile.inc"
#include "kernels/cpu/csr_tile.inc"
#include "kernels/cpu/symmetric_tile.inc"
#include "kernels/cpu/symmetric_table.inc"
#include "kernels/cpu/spgemm_tile.inc"
#include "kernels/cpu/avx512/row_columns.inc"

}  // namespace trnsparse::kernels::cpu::avx512
