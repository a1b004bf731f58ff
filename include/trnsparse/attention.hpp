/// @file attention.hpp
/// Block-sparse attention on the CPU: `O = softmax(mod(Q Kᵀ · scale) + mask) V` and its
/// gradients, computing only the (query block, key block) tiles the mask stores.
///
/// An `AttentionMask` is a `BsrStructure` without values (stored block (I, J): queries of
/// block I may attend to keys of block J) plus, per stored block, its kind: *full* (every
/// element allowed, no per-element work) or *partial* (carries a b x b element mask,
/// row-major, query-major). A mask holds one such pattern per (batch, head) slice, or one
/// shared by every batch element or head (a count of 1 broadcasts). Sequences that are
/// not multiples of the block are padded inside; padded keys never receive weight.
/// Builders cost O(stored blocks) (plus b² per partial block), never O(seq²).
///
///     auto m = trnsparse::mask::unite(trnsparse::mask::causal(4096, 128),
///                                     trnsparse::mask::global_tokens(4096, 128, 1, 1));
///     trnsparse::Dense<float> O(4096, 64);
///     std::vector<float> lse(4096);
///     trnsparse::attention_forward(m, Q.view(), K.view(), V.view(), O.view(), lse);
///
/// Batched operands are `HeadsView`s of (batch, heads, seq, dim) with any non-negative
/// strides (the last dimension contiguous), so a (batch, seq, heads, dim) projection is
/// read in place. K and V may have fewer heads than Q (grouped-query attention): query
/// head h reads key/value head h / (heads(Q) / heads(K)), by addressing, not by copying.
/// `ScoreMod` applies ALiBi biases and tanh soft-capping to every score inside the
/// kernels, with their derivatives in the backward.
///
/// Kernels walk the stored blocks of each block row with an online softmax (fp32 scores,
/// statistics and accumulation, also for bf16 operands; fp64 for double operands),
/// threads own (batch, head, block row) ranges balanced by stored blocks; the backward
/// computes dQ row-first and dK, dV column-first over the plan's transposed view (a key
/// head's column summing over the query heads of its group), one writer per output tile:
/// results are bitwise identical for any thread count. Double operands run the portable
/// reference kernel on every instruction set (for verification, e.g. gradient checks in
/// float64, not for speed).
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

/// Which (query, key) pairs attention may use, on a block grid, per (batch, head) slice.
///
/// A mask has `batch() x heads()` slices (slice s = z * heads() + h), each a pattern over
/// queries() x keys(); a batch() or heads() of 1 is shared by every batch element or head
/// of the operands. `structure()` stacks the slices block-diagonally: slice s's block
/// (I, J) is stored at (s * block_rows() + I, s * block_cols() + J). A single-slice mask's
/// structure is its pattern.
class AttentionMask {
public:
  /// Every stored block of `structure` is full (one slice).
  /// @throw InvalidArgument for a null structure.
  explicit AttentionMask(std::shared_ptr<const BsrStructure> structure);
  /// Element masks for every stored block (one slice): `element_masks` holds
  /// n_blocks * b * b bytes, block k's mask at offset k * b * b, row-major; non-zero
  /// allows the pair. Entries outside the logical shape are ignored. A block whose logical
  /// entries are all allowed becomes full. O(n_blocks * b²).
  /// @throw InvalidArgument for a null structure; DimensionMismatch for a wrong length.
  AttentionMask(std::shared_ptr<const BsrStructure> structure, std::span<const std::uint8_t> element_masks);

  /// A mask of `batch x heads` slices from its classified blocks: `block_row_ptr`
  /// (batch * heads * block_rows + 1 entries, over the slices' block rows in slice order),
  /// `block_col_idx` (the block column within its slice, in [0, block_cols), ascending in
  /// each block row), `partial_index` (per stored block: -1 full, else p in
  /// [0, n_partial)) and `element_masks` (n_partial * b * b bytes, partial block p's at
  /// p * b * b; non-zero allows; entries outside the logical shape are ignored).
  /// @throw InvalidArgument, DimensionMismatch or IndexError naming the first bad entry.
  static AttentionMask from_blocks(index_t batch, index_t heads, index_t queries, index_t keys, index_t block,
                                   std::vector<index_t> block_row_ptr, std::vector<index_t> block_col_idx,
                                   std::vector<index_t> partial_index, std::vector<std::uint8_t> element_masks);

  [[nodiscard]] const BsrStructure& structure() const noexcept { return *structure_; }
  [[nodiscard]] const std::shared_ptr<const BsrStructure>& structure_ptr() const noexcept { return structure_; }
  /// Slices: batch() x heads(), each 1 when shared.
  [[nodiscard]] index_t batch() const noexcept { return batch_; }
  [[nodiscard]] index_t heads() const noexcept { return heads_; }
  [[nodiscard]] index_t slices() const noexcept { return batch_ * heads_; }
  /// The slice batch element z and head h read: a shared count of 1 maps every index to 0.
  [[nodiscard]] index_t slice(index_t z, index_t h) const noexcept {
    return (batch_ > 1 ? z : 0) * heads_ + (heads_ > 1 ? h : 0);
  }
  /// Query length and key length of every slice.
  [[nodiscard]] index_t queries() const noexcept { return queries_; }
  [[nodiscard]] index_t keys() const noexcept { return keys_; }
  [[nodiscard]] index_t block_size() const noexcept { return structure_->block_size(); }
  /// Block rows and block columns of one slice.
  [[nodiscard]] index_t block_rows() const noexcept { return (queries_ + block_size() - 1) / block_size(); }
  [[nodiscard]] index_t block_cols() const noexcept { return (keys_ + block_size() - 1) / block_size(); }
  /// Stored blocks of all slices.
  [[nodiscard]] index_t n_blocks() const noexcept { return structure_->n_blocks(); }
  /// Stored blocks that carry an element mask.
  [[nodiscard]] index_t n_partial() const noexcept;
  /// True when stored block k (structure order) allows all its logical elements.
  [[nodiscard]] bool is_full(index_t k) const noexcept { return partial_index_[static_cast<std::size_t>(k)] < 0; }
  /// The b x b element mask of stored block k (empty for a full block); entries outside
  /// the logical shape are 0.
  [[nodiscard]] std::span<const std::uint8_t> element_mask(index_t k) const noexcept;
  /// Whether query i may attend to key j in slice 0. O(log blocks in the block row).
  [[nodiscard]] bool allows(index_t i, index_t j) const noexcept { return allows(0, 0, i, j); }
  /// Whether query i may attend to key j for batch element z and head h (an index past a
  /// shared count of 1 reads slice 0 of that dimension).
  [[nodiscard]] bool allows(index_t z, index_t h, index_t i, index_t j) const noexcept;

  /// Per stored block: -1 when full, else the position of its mask among the partial
  /// blocks (masks at `partial_masks()[p * b * b]`). For kernels.
  [[nodiscard]] std::span<const index_t> partial_index() const noexcept { return partial_index_; }
  [[nodiscard]] std::span<const std::uint8_t> partial_masks() const noexcept { return masks_; }

private:
  friend class detail::AttentionMaskBuilder;
  /// Takes already classified arrays (the builders' path, no per-element work).
  AttentionMask(std::shared_ptr<const BsrStructure> structure, index_t batch, index_t heads, index_t queries,
                index_t keys, std::vector<index_t> partial_index, std::vector<std::uint8_t> masks) noexcept;

  std::shared_ptr<const BsrStructure> structure_;
  index_t batch_ = 1, heads_ = 1, queries_ = 0, keys_ = 0;
  std::vector<index_t> partial_index_;
  std::vector<std::uint8_t> masks_;
};

/// Mask builders. Every one costs O(stored blocks + block rows), plus b² per partial
/// block; lengths >= 0, `block` >= 1 (InvalidArgument otherwise, naming the argument).
/// Each builds one slice, which broadcasts over batch and heads.
namespace mask {
/// Block (i, j) stored when |i - j| <= window; all full.
AttentionMask local_window(index_t seq, index_t block, index_t window);
/// `queries` queries against `keys` keys aligned bottom-right (the last query sits at the
/// last key, as FlashAttention >= 2.1 aligns them): query i stands at position
/// p = i + keys - queries, and key j is allowed when |j / block - floor(p / block)| <=
/// window. With queries == keys, the square builder's blocks, all full.
AttentionMask local_window(index_t queries, index_t keys, index_t block, index_t window);
/// Block (i, j) stored when (i - j) mod stride == 0 (stride >= 1); all full.
AttentionMask dilated(index_t seq, index_t block, index_t stride);
/// The first n_global block rows and block columns full, the local window elsewhere.
AttentionMask global_tokens(index_t seq, index_t block, index_t window, index_t n_global);
/// Key j allowed for query i when j <= i: the lower block triangle, diagonal blocks partial.
AttentionMask causal(index_t seq, index_t block);
/// Bottom-right aligned: key j allowed for query i when j <= i + keys - queries (a few
/// queries decoding against a longer key cache see every earlier key).
AttentionMask causal(index_t queries, index_t keys, index_t block);
/// Packed variable-length sequences of the given lengths (>= 0, summing to the sequence):
/// a token attends only within its own document, and with `causal` only to keys at or
/// before it. Blocks that straddle documents (or the diagonal, when causal) are partial.
AttentionMask document(std::span<const index_t> lengths, index_t block, bool causal = false);
/// From a row-major boolean block grid of ceil(queries/block) x ceil(keys/block) entries
/// (non-zero: stored, full). O(grid).
/// @throw DimensionMismatch for a wrong grid length.
AttentionMask from_block_mask(index_t queries, index_t keys, index_t block, std::span<const std::uint8_t> grid);
/// Pairs allowed by a or b / by a and b. Same lengths and block size required
/// (DimensionMismatch otherwise); slice counts must match or be 1 (broadcast). O(stored
/// blocks of the result's slices, plus b² per partial block).
AttentionMask unite(const AttentionMask& a, const AttentionMask& b);
AttentionMask intersect(const AttentionMask& a, const AttentionMask& b);
/// One mask of `batch x heads` slices from single-slice masks of one shape and block
/// size, `masks[z * heads + h]` for batch element z and head h.
/// @throw InvalidArgument for a multi-slice input; DimensionMismatch for a wrong count,
///        shape or block size.
AttentionMask stack(std::span<const AttentionMask> masks, index_t batch, index_t heads);
}  // namespace mask

/// A (batch, heads, seq, dim) tensor, the last dimension contiguous: element (z, h, i, c)
/// at `data[z * batch_stride + h * head_stride + i * seq_stride + c]`. Strides are
/// elements, >= 0 (0 repeats an input along that dimension; outputs must not overlap).
template <class T>
struct HeadsView {
  T* data = nullptr;
  index_t batch = 1;
  index_t heads = 1;
  index_t seq = 0;
  index_t dim = 0;
  index_t batch_stride = 0;
  index_t head_stride = 0;
  index_t seq_stride = 0;

  HeadsView() = default;
  /// Contiguous row-major.
  HeadsView(T* data_, index_t batch_, index_t heads_, index_t seq_, index_t dim_) noexcept
      : HeadsView(data_, batch_, heads_, seq_, dim_, heads_ * seq_ * dim_, seq_ * dim_, dim_) {}
  HeadsView(T* data_, index_t batch_, index_t heads_, index_t seq_, index_t dim_, index_t batch_stride_,
            index_t head_stride_, index_t seq_stride_) noexcept
      : data(data_), batch(batch_), heads(heads_), seq(seq_), dim(dim_), batch_stride(batch_stride_),
        head_stride(head_stride_), seq_stride(seq_stride_) {}
  /// A view of constant elements.
  operator HeadsView<const T>() const noexcept {  // NOLINT
    return {data, batch, heads, seq, dim, batch_stride, head_stride, seq_stride};
  }
};

/// Score modifiers applied inside the kernels to each scaled score s = q · k · scale of
/// query i and key j (plain indices within the slice), in this order:
///   ALiBi: s += alibi_slopes[h] · (j - i), one slope per query head h (empty: none);
///   soft-capping: s = softcap · tanh(s / softcap) (0: none), as Gemma 2 caps its logits.
/// ALiBi shifts every score of a row by the same amount when queries and keys are offset
/// (decoding at position i + keys - queries), so outputs do not depend on that alignment.
struct ScoreMod {
  std::span<const double> alibi_slopes;
  double softcap = 0;
};

/// Element types of attention operands: fp32, bf16 (fp32 scores, statistics and
/// accumulation; bf16 outputs rounded once at the end), or double (fp64 throughout, on the
/// portable kernel). Row statistics (lse) and the scale have type `acc_t<T>`: float for
/// fp32 and bf16, double for double.
template <class T>
concept AttentionValue = std::same_as<T, float> || std::same_as<T, bf16> || std::same_as<T, double>;

/// Largest supported head dimension.
inline constexpr index_t max_attention_head_dim = 512;

/// O = softmax(mod(Q Kᵀ · scale) + mask) V for one head: Q, O (queries x d), K, V
/// (keys x d), 1 <= d <= 512. `scale` 0 means 1 / sqrt(d). When `lse` is not empty
/// (queries entries) it receives each row's log-sum-exp of its modified allowed scores
/// (acc_t<T>), the statistic `attention_backward` needs. A query row with no allowed key
/// gets O = 0 and lse = 0. The mask must have one slice.
/// @throw DimensionMismatch for wrong shapes, InvalidArgument for d outside [1, 512],
///        a non-finite or negative scale, a bad ScoreMod, or an output overlapping an input.
template <AttentionValue T>
void attention_forward(const AttentionMask& mask, DenseView<const std::type_identity_t<T>> Q,
                       DenseView<const std::type_identity_t<T>> K, DenseView<const std::type_identity_t<T>> V,
                       DenseView<T> O, std::span<acc_t<T>> lse = {}, acc_t<T> scale = 0, const ScoreMod& mod = {});
/// The same for every (batch, head) of Q, O (batch, heads, queries, d) and K, V (batch,
/// kv_heads, keys, d), kv_heads dividing heads (query head h reads key/value head
/// h / (heads / kv_heads)). The mask's batch() and heads() are 1 or the operands' counts.
/// lse (if not empty) has batch * heads * queries entries, (z, h, i) at
/// (z * heads + h) * queries + i.
template <AttentionValue T>
void attention_forward(const AttentionMask& mask, HeadsView<const std::type_identity_t<T>> Q,
                       HeadsView<const std::type_identity_t<T>> K, HeadsView<const std::type_identity_t<T>> V,
                       HeadsView<T> O, std::span<acc_t<T>> lse = {}, acc_t<T> scale = 0, const ScoreMod& mod = {});

/// Gradients of the forward from dO, the forward's O and lse (same mask, inputs, scale
/// and ScoreMod): dQ (shaped as Q), dK, dV (shaped as K), with D = rowsum(dO ∘ O).
/// @throw as `attention_forward`; every output must be disjoint from every input.
template <AttentionValue T>
void attention_backward(const AttentionMask& mask, DenseView<const std::type_identity_t<T>> Q,
                        DenseView<const std::type_identity_t<T>> K, DenseView<const std::type_identity_t<T>> V,
                        DenseView<const std::type_identity_t<T>> O, DenseView<const std::type_identity_t<T>> dO,
                        std::span<const acc_t<T>> lse, DenseView<T> dQ, DenseView<T> dK, DenseView<T> dV,
                        acc_t<T> scale = 0, const ScoreMod& mod = {});
template <AttentionValue T>
void attention_backward(const AttentionMask& mask, HeadsView<const std::type_identity_t<T>> Q,
                        HeadsView<const std::type_identity_t<T>> K, HeadsView<const std::type_identity_t<T>> V,
                        HeadsView<const std::type_identity_t<T>> O, HeadsView<const std::type_identity_t<T>> dO,
                        std::span<const acc_t<T>> lse, HeadsView<T> dQ, HeadsView<T> dK, HeadsView<T> dV,
                        acc_t<T> scale = 0, const ScoreMod& mod = {});

}  // namespace trnsparse
