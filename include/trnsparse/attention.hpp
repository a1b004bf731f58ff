/// @file attention.hpp
/// Block-sparse attention on the CPU: `O = softmax(Q Kᵀ · scale + mask) V` and its
/// gradients, computing only the (query block, key block) tiles the mask stores.
///
/// An `AttentionMask` is a `BsrStructure` without values (stored block (I, J): queries of
/// block I may attend to keys of block J) plus, per stored block, its kind: *full* (every
/// element allowed, no per-element work) or *partial* (carries a b x b element mask,
/// row-major, query-major). Sequences that are not multiples of the block are padded
/// inside; padded keys never receive weight. Builders cost O(stored blocks) (plus b² per
/// partial block), never O(seq²).
///
///     auto m = trnsparse::mask::unite(trnsparse::mask::causal(4096, 128),
///                                     trnsparse::mask::global_tokens(4096, 128, 1, 1));
///     trnsparse::Dense<float> O(4096, 64);
///     std::vector<float> lse(4096);
///     trnsparse::attention_forward(m, Q.view(), K.view(), V.view(), O.view(), lse);
///
/// Kernels walk the stored blocks of each block row with an online softmax (fp32 scores,
/// statistics and accumulation, also for bf16 operands; fp64 for double operands),
/// threads own (batch, head, block row) ranges balanced by stored blocks; the backward
/// computes dQ row-first and dK, dV column-first over the plan's transposed view, one
/// writer per output tile: results are bitwise identical for any thread count. Double
/// operands run the portable reference kernel on every instruction set (for verification,
/// e.g. gradient checks in float64, not for speed).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/dense.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse {

namespace detail {
class AttentionMaskBuilder;
}

/// Which (query, key) pairs attention may use, on a block grid.
class AttentionMask {
public:
  /// Every stored block of `structure` is full.
  /// @throw InvalidArgument for a null structure.
  explicit AttentionMask(std::shared_ptr<const BsrStructure> structure);
  /// Element masks for every stored block: `element_masks` holds n_blocks * b * b bytes,
  /// block k's mask at offset k * b * b, row-major; non-zero allows the pair. Entries
  /// outside the logical shape are ignored. A block whose logical entries are all
  /// allowed becomes full. O(n_blocks * b²).
  /// @throw InvalidArgument for a null structure; DimensionMismatch for a wrong length.
  AttentionMask(std::shared_ptr<const BsrStructure> structure, std::span<const std::uint8_t> element_masks);

  [[nodiscard]] const BsrStructure& structure() const noexcept { return *structure_; }
  [[nodiscard]] const std::shared_ptr<const BsrStructure>& structure_ptr() const noexcept { return structure_; }
  /// Query length (structure rows) and key length (structure columns).
  [[nodiscard]] index_t queries() const noexcept { return structure_->rows(); }
  [[nodiscard]] index_t keys() const noexcept { return structure_->cols(); }
  [[nodiscard]] index_t block_size() const noexcept { return structure_->block_size(); }
  [[nodiscard]] index_t n_blocks() const noexcept { return structure_->n_blocks(); }
  /// Stored blocks that carry an element mask.
  [[nodiscard]] index_t n_partial() const noexcept;
  /// True when stored block k (structure order) allows all its logical elements.
  [[nodiscard]] bool is_full(index_t k) const noexcept { return partial_index_[static_cast<std::size_t>(k)] < 0; }
  /// The b x b element mask of stored block k (empty for a full block); entries outside
  /// the logical shape are 0.
  [[nodiscard]] std::span<const std::uint8_t> element_mask(index_t k) const noexcept;
  /// Whether query i may attend to key j. O(log blocks in the block row).
  [[nodiscard]] bool allows(index_t i, index_t j) const noexcept;

  /// Per stored block: -1 when full, else the position of its mask among the partial
  /// blocks (masks at `partial_masks()[p * b * b]`). For kernels.
  [[nodiscard]] std::span<const index_t> partial_index() const noexcept { return partial_index_; }
  [[nodiscard]] std::span<const std::uint8_t> partial_masks() const noexcept { return masks_; }

private:
  friend class detail::AttentionMaskBuilder;
  /// Takes already classified arrays (the builders' path, no per-element work).
  AttentionMask(std::shared_ptr<const BsrStructure> structure, std::vector<index_t> partial_index,
                std::vector<std::uint8_t> masks) noexcept;

  std::shared_ptr<const BsrStructure> structure_;
  std::vector<index_t> partial_index_;
  std::vector<std::uint8_t> masks_;
};

/// Mask builders. Every one costs O(stored blocks + block rows), plus b² per partial
/// block; `seq` >= 0, `block` >= 1 (InvalidArgument otherwise, naming the argument).
namespace mask {
/// Block (i, j) stored when |i - j| <= window; all full.
AttentionMask local_window(index_t seq, index_t block, index_t window);
/// Block (i, j) stored when (i - j) mod stride == 0 (stride >= 1); all full.
AttentionMask dilated(index_t seq, index_t block, index_t stride);
/// The first n_global block rows and block columns full, the local window elsewhere.
AttentionMask global_tokens(index_t seq, index_t block, index_t window, index_t n_global);
/// Key j allowed for query i when j <= i: the lower block triangle, diagonal blocks partial.
AttentionMask causal(index_t seq, index_t block);
/// Packed variable-length sequences of the given lengths (>= 0, summing to the sequence):
/// a token attends only within its own document, and with `causal` only to keys at or
/// before it. Blocks that straddle documents (or the diagonal, when causal) are partial.
AttentionMask document(std::span<const index_t> lengths, index_t block, bool causal = false);
/// From a row-major boolean block grid of ceil(queries/block) x ceil(keys/block) entries
/// (non-zero: stored, full). O(grid).
/// @throw DimensionMismatch for a wrong grid length.
AttentionMask from_block_mask(index_t queries, index_t keys, index_t block, std::span<const std::uint8_t> grid);
/// Pairs allowed by a or b / by a and b. Same shape and block size required
/// (DimensionMismatch otherwise). O(stored blocks of a and b, plus b² per partial block).
AttentionMask unite(const AttentionMask& a, const AttentionMask& b);
AttentionMask intersect(const AttentionMask& a, const AttentionMask& b);
}  // namespace mask

/// A contiguous row-major (batch, heads, seq, dim) tensor: element (z, h, i, c) at
/// `data[((z * heads + h) * seq + i) * dim + c]`.
template <class T>
struct HeadsView {
  T* data = nullptr;
  index_t batch = 1;
  index_t heads = 1;
  index_t seq = 0;
  index_t dim = 0;
  /// A view of constant elements.
  operator HeadsView<const T>() const noexcept { return {data, batch, heads, seq, dim}; }  // NOLINT
};

/// Element types of attention operands: fp32, bf16 (fp32 scores, statistics and
/// accumulation; bf16 outputs rounded once at the end), or double (fp64 throughout, on the
/// portable kernel). Row statistics (lse) and the scale have type `acc_t<T>`: float for
/// fp32 and bf16, double for double.
template <class T>
concept AttentionValue = std::same_as<T, float> || std::same_as<T, bf16> || std::same_as<T, double>;

/// Largest supported head dimension.
inline constexpr index_t max_attention_head_dim = 512;

/// O = softmax(Q Kᵀ · scale + mask) V for one head: Q, O (queries x d), K, V (keys x d),
/// 1 <= d <= 512. `scale` 0 means 1 / sqrt(d). When `lse` is not empty (queries entries)
/// it receives each row's log-sum-exp of its scaled allowed scores (acc_t<T>), the statistic
/// `attention_backward` needs. A query row with no allowed key gets O = 0 and lse = 0.
/// @throw DimensionMismatch for wrong shapes, InvalidArgument for d outside [1, 512],
///        a non-finite or negative scale, or an output overlapping an input.
template <AttentionValue T>
void attention_forward(const AttentionMask& mask, DenseView<const std::type_identity_t<T>> Q,
                       DenseView<const std::type_identity_t<T>> K, DenseView<const std::type_identity_t<T>> V,
                       DenseView<T> O, std::span<acc_t<T>> lse = {}, acc_t<T> scale = 0);
/// The same for every (batch, head) of (batch, heads, seq, d) tensors; lse (if not empty)
/// has batch * heads * queries entries.
template <AttentionValue T>
void attention_forward(const AttentionMask& mask, HeadsView<const std::type_identity_t<T>> Q,
                       HeadsView<const std::type_identity_t<T>> K, HeadsView<const std::type_identity_t<T>> V,
                       HeadsView<T> O, std::span<acc_t<T>> lse = {}, acc_t<T> scale = 0);

/// Gradients of the forward from dO, the forward's O and lse (same mask, inputs and
/// scale): dQ (queries x d), dK, dV (keys x d), with D = rowsum(dO ∘ O).
/// @throw as `attention_forward`; every output must be disjoint from every input.
template <AttentionValue T>
void attention_backward(const AttentionMask& mask, DenseView<const std::type_identity_t<T>> Q,
                        DenseView<const std::type_identity_t<T>> K, DenseView<const std::type_identity_t<T>> V,
                        DenseView<const std::type_identity_t<T>> O, DenseView<const std::type_identity_t<T>> dO,
                        std::span<const acc_t<T>> lse, DenseView<T> dQ, DenseView<T> dK, DenseView<T> dV,
                        acc_t<T> scale = 0);
template <AttentionValue T>
void attention_backward(const AttentionMask& mask, HeadsView<const std::type_identity_t<T>> Q,
                        HeadsView<const std::type_identity_t<T>> K, HeadsView<const std::type_identity_t<T>> V,
                        HeadsView<const std::type_identity_t<T>> O, HeadsView<const std::type_identity_t<T>> dO,
                        std::span<const acc_t<T>> lse, HeadsView<T> dQ, HeadsView<T> dK, HeadsView<T> dV,
                        acc_t<T> scale = 0);

}  // namespace trnsparse
