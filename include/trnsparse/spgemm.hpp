/// @file spgemm.hpp
/// Sparse × sparse products (SpGEMM): CSR × CSR → CSR and BSR × BSR → BSR with equal
/// block sizes, for float, double and bf16 (bf16 operands give fp32 results).
///
/// Two phases, as in every fast SpGEMM: the symbolic phase finds C's structure from the
/// operands' structures alone; the numeric phase sums C's values. A `SpgemmPlan` holds
/// the symbolic result and is cached per pair of structures, so a product repeated with
/// new values runs the numeric phase alone:
///
///     auto C = trnsparse::multiply(A, B);                     // plan built and cached
///     A.values()[0] = 2.0;                                     // same structures
///     trnsparse::spgemm_plan(A, B)->numeric(A, B, C.values()); // C's values, in place
///
/// Rows of C are split over threads by their multiply-adds. Each row is summed by one
/// thread in a fixed order (A's row in storage order, then each of B's rows it meets in
/// storage order; inside a block product, over the inner index ascending), so results
/// are bitwise identical for any thread count.
///
/// `drop_tolerance` > 0 leaves out entries (CSR) or blocks (BSR, by Frobenius norm) of C
/// at or below it (NaN is kept), and, for BSR, every block product whose bound
/// ‖A_ik‖·‖B_kj‖ is at or below it (DBCSR's filtered multiply: the skipped products may
/// add up to more than the tolerance). With 0, the default, C has the plan's structure,
/// exact zeros included, so that the numeric phase can be rerun on it.
///
/// Errors name both operands' shapes and block sizes: DimensionMismatch for inner
/// dimensions that differ; InvalidArgument for unequal block sizes or a negative (or NaN)
/// tolerance; OverflowError for a C whose entries or values would not fit index_t.
/// Nothing is returned half-built.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/plan.hpp"

namespace trnsparse {

/// The product a plan computes from its operands (A, B): A·B, Aᵀ·B or A·Bᵀ. The
/// transposed forms read the operand through its transposed view (BsrPlan::transposed):
/// Aᵀ and Bᵀ are never formed.
enum class SpgemmForm { a_b, at_b, a_bt };

/// The symbolic phase of one product form of two structures: C's structure, and the
/// multiply-adds of each row of C (how rows are split over threads). Immutable and
/// thread-safe; the numeric phase reads the operands' values only.
class SpgemmPlan {
public:
  /// The symbolic phase for structures `a` and `b` (a CSR matrix's structure is the
  /// block-size-1 BsrStructure of its pattern). O(multiply-adds / b³ + rows) on the
  /// library's threads. @throw as the products (see the file comment).
  SpgemmPlan(std::shared_ptr<const BsrStructure> a, std::shared_ptr<const BsrStructure> b, SpgemmForm form);

  [[nodiscard]] SpgemmForm form() const noexcept { return form_; }
  /// C's structure (block size 1 for CSR). Every BSR result of the plan shares it.
  [[nodiscard]] const std::shared_ptr<const BsrStructure>& structure() const noexcept { return c_; }
  /// Stored entries (CSR) or blocks (BSR) of C before any drop_tolerance.
  [[nodiscard]] index_t stored() const noexcept { return c_->n_blocks(); }
  /// Scalar multiply-adds of the numeric phase (block products times b³).
  [[nodiscard]] double multiply_adds() const noexcept;
  /// Whether the plan's operands have the structures of A and B.
  template <Value T>
  [[nodiscard]] bool applies_to(const CsrMatrix<T>& A, const CsrMatrix<T>& B) const;
  template <Value T>
  [[nodiscard]] bool applies_to(const BsrMatrix<T>& A, const BsrMatrix<T>& B) const;

  /// The product of this plan's form for A and B with the plan's structures.
  /// @throw InvalidArgument if a structure differs; as the products otherwise.
  template <Value T>
  CsrMatrix<acc_t<T>> multiply(const CsrMatrix<T>& A, const CsrMatrix<T>& B, double drop_tolerance = 0.0) const;
  template <Value T>
  BsrMatrix<acc_t<T>> multiply(const BsrMatrix<T>& A, const BsrMatrix<T>& B, double drop_tolerance = 0.0) const;

  /// The numeric phase alone: C's values (stored() entries, or stored() · b² values of
  /// row-major blocks, in the order of structure()) written into `values`.
  /// @throw InvalidArgument if a structure differs; DimensionMismatch for a wrong length;
  /// InvalidArgument if `values` overlaps an operand's values.
  template <Value T>
  void numeric(const CsrMatrix<T>& A, const CsrMatrix<T>& B, std::span<acc_t<T>> values) const;
  template <Value T>
  void numeric(const BsrMatrix<T>& A, const BsrMatrix<T>& B, std::span<acc_t<T>> values) const;

  /// Internal: the operands' plans (their structures, the transposed views).
  [[nodiscard]] const BsrPlan& left() const noexcept { return *a_; }
  [[nodiscard]] const BsrPlan& right() const noexcept { return *b_; }
  /// Internal: multiply-adds of C's rows [0, i), i in [0, block rows of C].
  [[nodiscard]] std::span<const index_t> cost() const noexcept { return cost_; }
  /// Internal: 1 for each row of the left (right) operand, as the form reads it, that has
  /// the same columns as the row before; empty when no row does.
  [[nodiscard]] std::span<const std::uint8_t> left_repeats() const noexcept { return left_repeats_; }
  [[nodiscard]] std::span<const std::uint8_t> right_repeats() const noexcept { return right_repeats_; }
  /// Internal: the lengths of the right operand's runs of consecutive columns, 16 bytes
  /// a row (kernels/spgemm.hpp, SpgemmOperand::runs), for CSR plans whose right operand
  /// is read by rows and has long runs; else empty.
  [[nodiscard]] std::span<const std::uint8_t> right_runs() const noexcept { return right_runs_; }

private:
  std::shared_ptr<const BsrPlan> a_, b_;
  SpgemmForm form_;
  std::shared_ptr<const BsrStructure> c_;
  std::vector<index_t> cost_;
  std::vector<std::uint8_t> left_repeats_, right_repeats_;
  std::vector<std::uint8_t> right_runs_;
};

/// The cached plan for (A, B) in `form` (built on a miss). Plans are kept in a
/// thread-safe LRU keyed by the operands' structure plans (plan.hpp), so equal
/// structures built separately find the same plan.
template <Value T>
std::shared_ptr<const SpgemmPlan> spgemm_plan(const CsrMatrix<T>& A, const CsrMatrix<T>& B,
                                              SpgemmForm form = SpgemmForm::a_b);
template <Value T>
std::shared_ptr<const SpgemmPlan> spgemm_plan(const BsrMatrix<T>& A, const BsrMatrix<T>& B,
                                              SpgemmForm form = SpgemmForm::a_b);

/// C = A·B. @throw see the file comment.
template <Value T>
CsrMatrix<acc_t<T>> multiply(const CsrMatrix<T>& A, const CsrMatrix<T>& B, double drop_tolerance = 0.0);
template <Value T>
BsrMatrix<acc_t<T>> multiply(const BsrMatrix<T>& A, const BsrMatrix<T>& B, double drop_tolerance = 0.0);

/// C = A·Bᵀ (A Aᵀ is multiply_transposed(A, A)) through B's transposed view.
template <Value T>
CsrMatrix<acc_t<T>> multiply_transposed(const CsrMatrix<T>& A, const CsrMatrix<T>& B, double drop_tolerance = 0.0);
template <Value T>
BsrMatrix<acc_t<T>> multiply_transposed(const BsrMatrix<T>& A, const BsrMatrix<T>& B, double drop_tolerance = 0.0);

/// The Galerkin triple product Pᵀ·A·P (the coarse operator of multigrid): A·P, then
/// Pᵀ·(A·P) through P's transposed view, so Pᵀ is never formed. `drop_tolerance`
/// applies to the final product. A bf16 P is widened to fp32 for the second product.
template <Value T>
CsrMatrix<acc_t<T>> galerkin(const CsrMatrix<T>& P, const CsrMatrix<T>& A, double drop_tolerance = 0.0);
template <Value T>
BsrMatrix<acc_t<T>> galerkin(const BsrMatrix<T>& P, const BsrMatrix<T>& A, double drop_tolerance = 0.0);

/// The gradients of C = A·B with respect to the stored values: dA = dC·Bᵀ on A's
/// pattern and dB = Aᵀ·dC on B's pattern, for C's gradient dC on any pattern (C's, or a
/// filtered product's, whose left-out entries carry no gradient). Each is a sampled
/// product of the same cost as C's numeric phase, summed per output row in a fixed
/// order. An empty `dA` or `dB` is not computed. float and double.
/// @throw DimensionMismatch for shapes or lengths that do not fit; InvalidArgument for
/// unequal block sizes or outputs overlapping inputs.
template <Value T> requires(!std::same_as<T, bf16>)
void multiply_backward(const CsrMatrix<T>& A, const CsrMatrix<T>& B, const CsrMatrix<T>& dC, std::span<T> dA,
                       std::span<T> dB);
template <Value T> requires(!std::same_as<T, bf16>)
void multiply_backward(const BsrMatrix<T>& A, const BsrMatrix<T>& B, const BsrMatrix<T>& dC, std::span<T> dA,
                       std::span<T> dB);

struct SpgemmCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::size_t size = 0;
  std::size_t capacity = 0;
};
[[nodiscard]] SpgemmCacheStats spgemm_plan_cache_stats();
/// Drops every cached SpGEMM plan (plans held elsewhere stay valid), zeroes the counters.
void clear_spgemm_plan_cache();
/// Keeps at most `capacity` plans (least recently used evicted first); default 16. A
/// plan holds C's structure: as much memory as C's indices.
void set_spgemm_plan_cache_capacity(std::size_t capacity);

}  // namespace trnsparse
