// SpGEMM numeric kernels compiled with -mavx2 -mfma (spgemm_tile.inc).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::avx2 {

#include "kernels/cpu/spgemm_tile.inc"

}  // namespace trnsparse::kernels::cpu::avx2
