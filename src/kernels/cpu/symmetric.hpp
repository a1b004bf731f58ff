// Symmetric SpMV from one stored triangle, y = alpha * S * x + beta * y, in two phases
// over a fixed chunking of the rows (plan/csr_analysis.hpp):
//   1. local:   chunk c sums its rows' entries and the mirrors that land in its own rows
//               in a private buffer, writes out[i] = alpha * sum + beta * y[i] for its
//               rows, and adds the mirrors that land elsewhere to its window;
//   2. combine: chunk c adds, in ascending chunk order, alpha times every window that
//               covers its rows, then rounds to y if out is a separate buffer.
// Every element has one writer per phase and a fixed summation order, so the result
// does not depend on how chunks are spread over threads. Plain scalar code: the mirrored
// scatter does not vectorise, and the product is memory-bound.
#pragma once

#include "plan/csr_analysis.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::kernels::cpu {

template <class TA, class TY>
struct SymmetricProduct {
  const index_t* ptr;
  const index_t* idx;
  const TA* values;
  bool upper;
  acc_t<TA> alpha;
  acc_t<TA> beta;
  const TA* x;
  TY* y;
  acc_t<TA>* out;     // y itself when TY is acc_t<TA>, else an n-element buffer
  acc_t<TA>* window;  // detail::SymmetricChunks::window_total() elements
};

/// Phase 1 for chunk c; `local` holds max_rows elements.
template <class TA, class TY>
void symmetric_local(const SymmetricProduct<TA, TY>& p, const detail::SymmetricChunks& s, index_t c,
                     acc_t<TA>* local) noexcept;

/// Phase 2 for chunk c.
template <class TA, class TY>
void symmetric_combine(const SymmetricProduct<TA, TY>& p, const detail::SymmetricChunks& s, index_t c) noexcept;

}  // namespace trnsparse::kernels::cpu
