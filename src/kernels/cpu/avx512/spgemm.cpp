// SpGEMM numeric kernels compiled with the AVX-512 flags of the other avx512 kernels (spgemm_tile.inc).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::avx512 {

#include "kernels/cpu/spgemm_tile.inc"

}  // namespace trnsparse::kernels::cpu::avx512
