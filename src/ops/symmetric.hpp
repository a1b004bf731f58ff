// Internal: the half-storage product's checks and run, shared by CSR triangles (b = 1)
// and BSR block triangles (ops/products.cpp, ops/bsr_product.cpp).
#pragma once

#include <type_traits>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "ops/run.hpp"
#include "plan/csr_analysis.hpp"
#include "runtime/checks.hpp"
#include "runtime/workspace.hpp"
#include "trnsparse/error.hpp"

namespace trnsparse::detail {

/// Throws IndexError naming A's first entry outside the triangle `uplo` that the
/// analysis `s` found: "an entry at (i, j), col_idx[p]" for CSR, "a block at block
/// (i, j), block_col_idx[p]" with `block` for BSR.
inline void check_triangle(const SymmetricChunks& s, Triangle uplo, bool block) {
  if (s.bad_row < 0) return;
  throw IndexError(concat("spmv_symmetric: A has ", block ? "a block at block (" : "an entry at (", s.bad_row, ", ",
                          s.bad_col, "), ", block ? "block_col_idx[" : "col_idx[", s.bad_pos, "], outside the ",
                          uplo == Triangle::upper ? "upper" : "lower", block ? " block triangle" : " triangle",
                          " it claims to store"));
}

/// Runs SymmetricKernels' two phases over the chunks of `s` for `prod`, whose `out` and
/// `window` this sets from the calling thread's workspace; `work` (stored values) sizes
/// the thread count. With `dot` not null (CSR only), also x_i * y_i summed per chunk into
/// the chunk's kCgLanes lanes of `dot` (chunks * lanes values).
template <class TA, class TY>
void run_symmetric(kernels::SymmetricProduct<TA, TY> prod, const SymmetricChunks& s, double work,
                   std::vector<double>* dot) {
  using Acc = acc_t<TA>;
  constexpr bool direct = std::is_same_v<TY, Acc>;  // accumulate in y itself
  const index_t chunks = s.chunks();
  constexpr index_t lanes = kernels::kCgLanes;
  if (dot) dot->assign(static_cast<std::size_t>(chunks * lanes), 0.0);
  const int parts = parts_for(chunks, work_ns(prod.b == 1 ? Work::csr : Work::small_blocks, work));
  const auto bytes = [](index_t elements) { return round_to_line(sizeof(Acc) * static_cast<std::size_t>(elements)); };
  const std::size_t window_bytes = bytes(s.window_total() * prod.b), out_bytes = direct ? 0 : bytes(prod.n);
  const std::size_t local_bytes = bytes(s.max_span * kernels::symmetric_row_lanes(prod.b));
  std::byte* mem = thread_workspace(window_bytes + out_bytes + static_cast<std::size_t>(parts) * local_bytes);
  prod.window = reinterpret_cast<Acc*>(mem);
  prod.out = direct ? reinterpret_cast<Acc*>(prod.y) : reinterpret_cast<Acc*>(mem + window_bytes);
  std::byte* locals = mem + window_bytes + out_bytes;
  const auto& kernel = dispatch::symmetric_kernels<TA, TY>();
  // Chunks go to threads in any order: each chunk's result is the same wherever it runs.
  parallel_phases(
      parts, chunks,
      [&](int t, index_t c) {
        kernel.local(prod, s, c, reinterpret_cast<Acc*>(locals + t * local_bytes),
                     dot ? dot->data() + c * lanes : nullptr);
      },
      [&](int, index_t c) { kernel.combine(prod, s, c, dot ? dot->data() + c * lanes : nullptr); });
}

}  // namespace trnsparse::detail
