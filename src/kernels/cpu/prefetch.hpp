// A software prefetch the compiler keeps. The kernels' prefetches are their only request
// for the operands ahead of the hardware prefetchers (A's values and indices streaming
// from memory), and GCC 12, Debian 12's compiler, drops __builtin_prefetch from some
// inlined loops in its RTL back end: every instance of the small-block SpMM's pass had
// no prefetch instruction left in the object (the same GCC 12 behaviour as
// intel/ScalableVectorSearch#361). An asm statement is never dropped, so every kernel
// prefetches through this one.
#pragma once

#include <cstdint>

#include "trnsparse/types.hpp"

namespace trnsparse::kernels::cpu {

/// prefetcht0 of the cache line holding p (p need not be dereferenceable: a prefetch
/// never faults). The address goes in as a register, not a memory operand: an asm that
/// reads memory through a char pointer may read anything as far as GCC knows, so it
/// would store the caller's accumulators back to the stack before every prefetch.
[[gnu::always_inline]] inline void prefetch_line(const void* p) { asm volatile("prefetcht0 (%0)" : : "r"(p)); }

/// prefetcht1 of the cache line holding p: into L2, not L1. For a stream asked for far
/// ahead of its reads (DecodeStream): a request into L1 holds one of the core's few L1
/// fill buffers until its line comes from memory, which caps the stream below what the
/// core's requests into L2 reach (docs/sparse_weights.md, "Decode").
[[gnu::always_inline]] inline void prefetch_line_l2(const void* p) { asm volatile("prefetcht1 (%0)" : : "r"(p)); }

/// prefetch_line of every cache line of [from, to), `ahead` bytes further on: one request
/// a line for a stretch read next, however many elements the line holds.
template <class T>
[[gnu::always_inline]] inline void prefetch_range(const T* from, const T* to, index_t ahead) {
  const char* p = reinterpret_cast<const char*>(from) + ahead;
  const char* const end = reinterpret_cast<const char*>(to) + ahead;
  p -= reinterpret_cast<std::uintptr_t>(p) % 64;
  for (; p < end; p += 64) prefetch_line(p);
}

}  // namespace trnsparse::kernels::cpu
