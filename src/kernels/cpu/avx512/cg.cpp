// CG's vector passes and GMRES's basis sweeps (cg_tile.inc) compiled with the AVX-512 flags and -ffp-contract=off (see
// cg_tile.inc: every ISA rounds as the baseline does).
#include <type_traits>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::avx512 {

#include "kernels/cpu/cg_tile.inc"

}  // namespace trnsparse::kernels::cpu::avx512
