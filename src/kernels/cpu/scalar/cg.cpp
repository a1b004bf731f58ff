// CG's vector passes and GMRES's basis sweeps (cg_tile.inc) compiled for the x86-64 baseline and -ffp-contract=off (see
// cg_tile.inc: every ISA rounds as the baseline does).
#include <type_traits>

#include "kernels/cpu/tables.hpp"

namespace trnsparse::kernels::cpu::scalar {

#include "kernels/cpu/cg_tile.inc"

}  // namespace trnsparse::kernels::cpu::scalar
