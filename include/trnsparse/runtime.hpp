/// @file runtime.hpp
/// The machine trnsparse runs on: which instruction set its kernels use and how many
/// threads they split work over. Both are chosen once at start-up and may be changed:
///
///   - `TRNSPARSE_ISA=scalar|avx2|avx512|avx512_bf16|amx` forces an instruction set (for
///     A/B runs, or the same bits as a CPU without AVX512-BF16 or AMX);
///     forcing one the CPU lacks is an error (`NotSupported`), never a silent fallback.
///   - `TRNSPARSE_NUM_THREADS=N` sets the thread count (default: `OMP_NUM_THREADS`, else
///     the CPUs the process may run on).
///
///     trnsparse::set_num_threads(2);
///     if (trnsparse::isa_supported(trnsparse::Isa::avx512)) trnsparse::set_isa(trnsparse::Isa::avx512);
///
/// Results never depend on the thread count: each output tile has one writer and every
/// reduction runs in a fixed order. They may differ in the last bits between ISAs.
#pragma once

#include <string_view>

namespace trnsparse {

/// Instruction sets with kernels of their own. `avx512_bf16` is `avx512` with AVX512-BF16
/// dot products (vdpbf16ps) for bf16 operands, where `avx512` widens bf16 to fp32; the
/// two run the same kernels for fp32 and fp64. `amx` is `avx512_bf16` with AMX tiles
/// (TDPBF16PS) for a bf16 linear layer's three products (linear.hpp: Y = X Wᵀ, dX = dY W
/// and dW = dYᵀ X, blocks of a multiple of 16); everything else runs avx512_bf16's kernels.
enum class Isa { scalar, avx2, avx512, avx512_bf16, amx };
/// Every Isa value, in order.
inline constexpr Isa all_isas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16, Isa::amx};

struct CpuFeatures {
  bool avx2_fma = false;     ///< AVX2 and FMA3
  bool avx512 = false;       ///< AVX-512 F, BW, VL and DQ
  bool avx512_bf16 = false;  ///< AVX512-BF16 (vdpbf16ps)
  bool amx = false;          ///< AMX-TILE and AMX-BF16, with the OS's leave to use tile data (Linux >= 5.16)
};

/// What this CPU (and OS) supports, detected once.
const CpuFeatures& cpu_features() noexcept;
/// True when `isa`'s kernels can run here.
bool isa_supported(Isa isa) noexcept;
/// The best ISA this CPU supports: what kernels use unless `TRNSPARSE_ISA` or set_isa says
/// otherwise.
Isa best_isa() noexcept;
/// The instruction set kernels use now: `TRNSPARSE_ISA` if set, else the best supported.
/// @throw NotSupported (on first use) when `TRNSPARSE_ISA` names an unsupported or unknown ISA.
Isa active_isa();
/// Uses `isa` from now on. @throw NotSupported if the CPU lacks it.
void set_isa(Isa isa);
std::string_view to_string(Isa isa) noexcept;
/// The Isa whose to_string is `name`. @throw InvalidArgument naming every ISA otherwise.
Isa isa_named(std::string_view name);

/// Threads kernels use: `TRNSPARSE_NUM_THREADS` if set, else `OMP_NUM_THREADS`'s first
/// number, else the CPUs this process may run on (its affinity mask).
/// @throw InvalidArgument (on first use) for a malformed `TRNSPARSE_NUM_THREADS`.
int num_threads();
/// Uses `n` threads from now on. @throw InvalidArgument unless 1 <= n <= 4096.
void set_num_threads(int n);

}  // namespace trnsparse
