/// @file linear.hpp
/// A linear layer whose weight is block-sparse: W is out_features x in_features (BSR),
/// and the dense operands are token by token (tokens x features, row-major, any leading
/// dimension), as torch.nn.Linear holds them. No operand is transposed in memory: the
/// kernels read X, dY and write Y, dX in place. Results are bitwise identical for any
/// thread count; each element is accumulated in acc_t<TA> (fp32 for bf16) and rounded
/// once. Every function throws DimensionMismatch naming the operand whose shape is wrong
/// and InvalidArgument when an output overlaps an input.
///
/// The weight is seen in place (`BlockSparseWeight`: a shared structure and the address
/// of its blocks), so a model's parameter buffer is read and its gradient written without
/// a copy; a BsrMatrix gives one with `weight_of(A)`.
///
///     const auto W = trnsparse::weight_of(A);                              // A: BsrMatrix<float>
///     trnsparse::linear_forward(W, X, std::span<const float>(bias), Y);   // Y = X Wᵀ + bias
///     trnsparse::linear_backward_input(W, dY, dX);                        // dX = dY W
///     trnsparse::linear_backward_weight(dY, X, dW);    // dW = dYᵀ X on W's stored blocks
///     trnsparse::linear_backward_bias(dY, std::span<float>(db));          // db = Σ_t dY(t, :)
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>

#include "trnsparse/bsr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse {

/// A block-sparse weight in the caller's memory: `structure` (out x in, block size b) and
/// its n_blocks * b * b values at `blocks`, row-major per block in the structure's order,
/// padding (entries of edge blocks outside the logical shape) zero. T may be const.
template <class T>
struct BlockSparseWeight {
  std::shared_ptr<const BsrStructure> structure;
  T* blocks = nullptr;

  [[nodiscard]] index_t rows() const { return structure->rows(); }
  [[nodiscard]] index_t cols() const { return structure->cols(); }
  [[nodiscard]] std::size_t size() const {
    return static_cast<std::size_t>(structure->n_blocks() * structure->block_size() * structure->block_size());
  }
};

/// A's structure and blocks, in place, read-only (a gradient to write into is
/// `{A.structure_ptr(), A.blocks().data()}`).
template <Value T>
BlockSparseWeight<const T> weight_of(const BsrMatrix<T>& A) {
  return {A.structure_ptr(), A.blocks().data()};
}

/// Y = X Wᵀ + bias.  X: tokens x W.cols(), Y: tokens x W.rows(); bias: W.rows() values,
/// or empty for none. O(stored blocks * b^2 * tokens).
template <Value TA, class TY> requires OutputFor<TA, TY>
void linear_forward(const BlockSparseWeight<const TA>& W, DenseView<const std::type_identity_t<TA>> X,
                    std::span<const acc_t<TA>> bias, DenseView<TY> Y);

/// dX = dY W.  dY: tokens x W.rows(), dX: tokens x W.cols(). Through the plan's BSC view.
template <Value TA, class TY> requires OutputFor<TA, TY>
void linear_backward_input(const BlockSparseWeight<const TA>& W, DenseView<const std::type_identity_t<TA>> dY,
                           DenseView<TY> dX);

/// dW's stored blocks = dYᵀ X sampled on dW's structure (the weight's), padding kept
/// as it was (the kernels write the logical part only). dY: tokens x dW.rows(),
/// X: tokens x dW.cols().
template <Value T>
void linear_backward_weight(DenseView<const std::type_identity_t<T>> dY, DenseView<const std::type_identity_t<T>> X,
                            const BlockSparseWeight<T>& dW);

/// db[o] = Σ_t dY(t, o), tokens in order.  db: dY.cols values. O(tokens * dY.cols).
template <Value T>
void linear_backward_bias(DenseView<const std::type_identity_t<T>> dY, std::span<acc_t<T>> db);

}  // namespace trnsparse
