// Internal: running the SpGEMM numeric kernel (kernels/spgemm.hpp) over threads, shared
// by the products (ops/spgemm.cpp) and their gradients (ops/spgemm_gradients.cpp).
#pragma once

#include <climits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "kernels/spgemm.hpp"
#include "plan/spgemm_symbolic.hpp"
#include "runtime/checks.hpp"
#include "runtime/parallel.hpp"
#include "runtime/workspace.hpp"
#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/plan.hpp"

namespace trnsparse::detail {

/// A matrix's stored values: a CSR's entries, a BSR's blocks.
template <Value T>
std::span<const T> stored_values(const CsrMatrix<T>& A) {
  return A.values();
}
template <Value T>
std::span<const T> stored_values(const BsrMatrix<T>& A) {
  return A.blocks();
}
/// The value type of a matrix type.
template <class Matrix>
using value_of = typename decltype(stored_values(std::declval<const Matrix&>()))::value_type;

/// The kernels' pointer for optional per-entry or per-row data: null when there is none.
template <class T>
const T* or_null(std::span<const T> v) {
  return v.empty() ? nullptr : v.data();
}
template <class T>
const T* or_null(const std::vector<T>& v) {
  return or_null(std::span<const T>(v));
}

/// An operand of the kernel: structure `s` read by rows. `repeats` marks the rows that
/// repeat the row before; `runs` gives the rows' runs of consecutive columns
/// (SpgemmPlan::right_runs).
template <class T>
kernels::SpgemmOperand<T> spgemm_operand(const BsrStructure& s, const T* vals, const std::int32_t* idx32 = nullptr,
                                         const double* norms = nullptr, const std::uint8_t* repeats = nullptr,
                                         const std::uint8_t* runs = nullptr) {
  return {.ptr = s.block_row_ptr().data(),
          .idx = s.block_col_indices().data(),
          .idx32 = idx32,
          .perm = nullptr,
          .trans = false,
          .vals = vals,
          .norms = norms,
          .repeats = repeats,
          .runs = runs};
}

/// An operand of the kernel: the structure of `p` read by rows, or, `transposed`,
/// through its transposed view (blocks read transposed; `repeats` then marks the view's
/// rows, and `runs` is not read).
template <class T>
kernels::SpgemmOperand<T> spgemm_operand(const BsrPlan& p, bool transposed, const T* vals,
                                         const std::int32_t* idx32 = nullptr, const double* norms = nullptr,
                                         const std::uint8_t* repeats = nullptr,
                                         const std::uint8_t* runs = nullptr) {
  const BsrStructure& s = p.structure();
  if (!transposed) return spgemm_operand(s, vals, idx32, norms, repeats, runs);
  const BscView& v = p.transposed();
  return {.ptr = v.col_ptr.data(),
          .idx = v.row_idx.data(),
          .idx32 = nullptr,
          .perm = v.perm.data(),
          .trans = s.block_size() > 1,
          .vals = vals,
          .norms = norms,
          .repeats = repeats,
          .runs = nullptr};
}

/// Runs the numeric kernel for C's block rows [0, cost.size() - 1), split over threads
/// by `cost` (block products per row, as a prefix). One writer per row: the same bits
/// for any thread count.
template <class TA, class TC>
void run_spgemm(const kernels::SpgemmProduct<TA, TC>& prob, std::span<const index_t> cost) {
  const auto rows = static_cast<index_t>(cost.size()) - 1;
  if (prob.cols > index_t{INT32_MAX})
    throw OverflowError(concat("spgemm: C has ", prob.cols, " (block) columns; positions within a row are 32-bit"));
  if (rows <= 0) return;
  const auto& k = dispatch::spgemm_kernels<TA, TC>();
  const double b = static_cast<double>(prob.b);
  const double madds = static_cast<double>(cost.back()) * b * b * b;
  const Work family = prob.b == 1 ? Work::spgemm : prob.b <= 8 ? Work::small_blocks : Work::tiles;
  const int parts = parts_for(rows, work_ns(family, madds));
  const std::size_t ws = round_to_line(k.workspace_bytes(prob));
  std::byte* mem = thread_workspace(static_cast<std::size_t>(parts) * ws);
  if (parts == 1) {
    k.prepare(prob, mem);
    k.numeric(prob, mem, 0, rows);
    return;
  }
  const std::vector<index_t> pieces = balanced_split(cost, pieces_for(parts));
  // Each slot's workspace prepared by the thread that takes the slot, before its first
  // piece: a dense accumulator is zeroed where it is used, and on all threads at once.
  std::vector<std::uint8_t> ready(static_cast<std::size_t>(parts), 0);
  parallel_for(parts, static_cast<index_t>(pieces.size()) - 1, [&](int slot, index_t i) {
    std::byte* w = mem + static_cast<std::size_t>(slot) * ws;
    if (!ready[static_cast<std::size_t>(slot)]) {
      k.prepare(prob, w);
      ready[static_cast<std::size_t>(slot)] = 1;
    }
    k.numeric(prob, w, pieces[i], pieces[i + 1]);
  });
}

}  // namespace trnsparse::detail
