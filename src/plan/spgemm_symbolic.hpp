// Internal: the index work of SpGEMM shared by plans and gradients: operands as
// compressed rows, the multiply-adds per output row, and the symbolic phase.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/spgemm.hpp"
#include "trnsparse/bsr.hpp"
#include "trnsparse/spgemm.hpp"

namespace trnsparse::detail {

/// An operand's structure as compressed rows: its own rows, or its transposed view's.
struct RowsView {
  index_t rows;
  const index_t* ptr;
  const index_t* idx;
};

/// The left (L) and right (R) operands of `form` on structures a and b, as rows.
struct FormViews {
  RowsView L, R;
  index_t rows, cols;                  // logical shape of C
  index_t block_rows, block_cols;      // C's block grid
};
FormViews form_views(const BsrPlan& a, const BsrPlan& b, SpgemmForm form);

/// Block products of each row of C = L·R as a prefix: cost[i] for rows [0, i) (the
/// split of the rows over threads). O(stored entries of L).
std::vector<index_t> spgemm_cost(const RowsView& L, const RowsView& R);

/// What a plan holds for the numeric phase, found without one when C has at most
/// kernels::kNarrowColumns columns (block size 1): each row of C is the OR of R's rows as
/// words of bits.
struct NarrowStructure {
  std::shared_ptr<const BsrStructure> c;
  std::vector<index_t> cost;                             // as spgemm_cost
  // As SpgemmPlan's, but kept with runs even when no row repeats; all empty without runs.
  std::vector<std::uint8_t> l_repeats, r_repeats, runs;
};
/// C = L·R with `cols` (<= kernels::kNarrowColumns) columns, on the threads.
NarrowStructure narrow_structure(const RowsView& L, const RowsView& R, index_t cols);

/// "A is 4 x 5 (block size 2), B is 6 x 3 (block size 2)": both operands, for messages.
std::string describe_operands(const BsrStructure& a, const BsrStructure& b);

/// The operands described for an error message, built only when one is thrown: a
/// product of a few hundred entries takes about as long as formatting its shapes.
using DescribeOperands = std::function<std::string()>;

/// Checks the operands' shapes for `form` (inner dimensions, block sizes, C's columns
/// within 32 bits). @throw DimensionMismatch, InvalidArgument, OverflowError naming both
/// operands (`operands()`).
void check_spgemm_operands(const char* who, const BsrStructure& a, const BsrStructure& b, SpgemmForm form,
                           const DescribeOperands& operands);

/// The cached plan of `form` for structures a and b (built on a miss).
std::shared_ptr<const SpgemmPlan> cached_spgemm_plan(const std::shared_ptr<const BsrStructure>& a,
                                                     const std::shared_ptr<const BsrStructure>& b, SpgemmForm form);

}  // namespace trnsparse::detail
