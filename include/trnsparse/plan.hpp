/// @file plan.hpp
/// Structure plans: what is worth computing once per sparsity structure and reusing for
/// every product with it. A plan holds the structure, the split of its block rows over
/// threads (balanced by stored blocks, one writer per output tile) and, built on first
/// use, the transposed (BSC) view that products with Aᵀ and backward passes walk.
///
/// Plans are cached in a thread-safe LRU keyed by the structure's fingerprint (and
/// checked for equality, so a hash collision cannot return a wrong plan); every product
/// in ops.hpp goes through it. Hold a plan yourself to skip even the lookup:
///
///     auto p = trnsparse::plan(A);          // std::shared_ptr<const BsrPlan>
///     p->spmm(1.0f, A, B, 0.0f, C);         // C = A B
///     p->spmm_transposed(1.0f, A, C, 0.0f, D);   // D = Aᵀ C, no Aᵀ materialised
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse {

namespace detail {
struct SymmetricChunks;
}  // namespace detail

/// The transposed block pattern: block column j of A holds the stored blocks
/// `perm[col_ptr[j]] .. perm[col_ptr[j+1]-1]` (positions in A's block order), lying in
/// block rows `row_idx[col_ptr[j]] ..`, ascending.
struct BscView {
  std::vector<index_t> col_ptr;
  std::vector<index_t> row_idx;
  std::vector<index_t> perm;
};

class BsrPlan {
public:
  /// Analyses `structure`. O(block_rows) now; the transposed view costs
  /// O(n_blocks + block_cols) on first use. @throw InvalidArgument for a null structure.
  explicit BsrPlan(std::shared_ptr<const BsrStructure> structure);

  [[nodiscard]] const BsrStructure& structure() const noexcept { return *structure_; }
  [[nodiscard]] const std::shared_ptr<const BsrStructure>& structure_ptr() const noexcept { return structure_; }
  /// Whether `s` is this plan's structure or an equal one (thread-safe). Comparing two
  /// structure objects reads every block index, as long as a product from memory takes,
  /// so an equal object is compared once and then known by address while it lives.
  [[nodiscard]] bool same_structure(const std::shared_ptr<const BsrStructure>& s) const;

  /// Boundaries of `parts` contiguous block-row ranges with about equal cost (stored
  /// blocks + 1 per block row): part t owns block rows [s[t], s[t+1]). Cached per `parts`.
  [[nodiscard]] std::span<const index_t> row_split(int parts) const;
  /// The same split of the transposed view's block columns.
  [[nodiscard]] std::span<const index_t> col_split(int parts) const;
  /// The transposed (BSC) view, built once on first use (thread-safe).
  [[nodiscard]] const BscView& transposed() const;

  /// C = alpha * A * B + beta * C for A with this plan's structure (see ops.hpp `spmm`).
  /// @throw InvalidArgument if A's structure differs; as `spmm` otherwise.
  template <Value TA, class TY> requires OutputFor<TA, TY>
  void spmm(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B, acc_t<TA> beta,
            DenseView<TY> C) const;
  /// C = alpha * Aᵀ * B + beta * C (B: A.rows() x k, C: A.cols() x k) through the BSC view.
  template <Value TA, class TY> requires OutputFor<TA, TY>
  void spmm_transposed(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B,
                       acc_t<TA> beta, DenseView<TY> C) const;

  /// y = alpha * S * x + beta * y for the symmetric S of which A, with this plan's
  /// structure, stores the `uplo` block triangle (see ops.hpp `spmv_symmetric`).
  template <Value TA, class TY> requires OutputFor<TA, TY>
  void spmv_symmetric(acc_t<TA> alpha, const BsrMatrix<TA>& A, Triangle uplo,
                      std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta, std::span<TY> y) const;

private:
  std::span<const index_t> cached_split(std::vector<std::pair<int, std::vector<index_t>>>& cache, int parts,
                                        bool columns) const;
  /// The block column indices (with `transposed`: the BSC view's block row indices) in
  /// 32 bits, for the small-block kernels, whose index stream is an eighth of their
  /// traffic at b = 3 with 8-byte indices; null for block sizes those kernels do not
  /// serve or indices that need more bits.
  const std::int32_t* compact_indices(bool transposed) const;
  std::shared_ptr<const BsrStructure> structure_;
  std::vector<std::int32_t> compact_;
  mutable std::once_flag transposed_once_;
  mutable BscView transposed_;
  mutable std::vector<std::int32_t> compact_transposed_;
  /// The chunking of the block triangle `uplo` (symmetric products), built on first use.
  const detail::SymmetricChunks& symmetric_chunks(Triangle uplo) const;
  mutable std::once_flag symmetric_once_[2];
  mutable std::shared_ptr<const detail::SymmetricChunks> symmetric_[2];
  mutable std::mutex equal_mutex_;
  mutable std::vector<std::weak_ptr<const BsrStructure>> equal_;  // other objects found equal, while alive
  mutable std::mutex split_mutex_;
  mutable std::vector<std::pair<int, std::vector<index_t>>> row_splits_;
  mutable std::vector<std::pair<int, std::vector<index_t>>> col_splits_;
};

/// The cached plan for A's structure (built on a miss).
std::shared_ptr<const BsrPlan> plan(const std::shared_ptr<const BsrStructure>& structure);
template <Value T>
std::shared_ptr<const BsrPlan> plan(const BsrMatrix<T>& A) {
  return plan(A.structure_ptr());
}

struct PlanCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::size_t size = 0;
  std::size_t capacity = 0;
  /// Structure objects compared in full with a plan's (BsrPlan::same_structure: once
  /// per object; a cache lookup or a product with an equal structure built separately).
  std::uint64_t comparisons = 0;
};
[[nodiscard]] PlanCacheStats plan_cache_stats();
/// Drops every cached plan (plans held elsewhere stay valid) and zeroes the counters.
void clear_plan_cache();
/// Keeps at most `capacity` plans (least recently used evicted first); default 64.
void set_plan_cache_capacity(std::size_t capacity);

}  // namespace trnsparse
