// A software prefetch the compiler keeps. The kernels' prefetches are their only request
// for the operands ahead of the hardware prefetchers (A's values and indices streaming
// from memory), and GCC 12, Debian 12's compiler, drops __builtin_prefetch from some
// inlined loops in its RTL back end: every instance of the small-block SpMM's pass had
// no prefetch instruction left in the object (the same GCC 12 behaviour as
// intel/ScalableVectorSearch#361). An asm statement is never dropped, so every kernel
// prefetches through this one.
#pragma once

namespace trnsparse::kernels::cpu {

/// prefetcht0 of the cache line holding p (p need not be dereferenceable: a prefetch
/// never faults). The address goes in as a register, not a memory operand: an asm that
/// reads memory through a char pointer may read anything as far as GCC knows, so it
/// would store the caller's accumulators back to the stack before every prefetch.
[[gnu::always_inline]] inline void prefetch_line(const void* p) { asm volatile("prefetcht0 (%0)" : : "r"(p)); }

}  // namespace trnsparse::kernels::cpu
