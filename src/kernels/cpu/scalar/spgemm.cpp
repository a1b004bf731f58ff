// SpGEMM numeric kernels compiled with the x86-64 baseline (spgemm_tile.inc).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::scalar {

#include "kernels/cpu/spgemm_tile.inc"

}  // namespace trnsparse::kernels::cpu::scalar
