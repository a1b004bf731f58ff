// A linear layer with a block-sparse weight: validate, then run the BSR tile kernels
// with the layer's token-by-token operands read and written in place
// (BsrProduct::b_transposed / c_transposed, BsrSampled::x_transposed / y_transposed):
//   Y  = X Wᵀ + bias   as Yᵀ  = W Xᵀ       (output block rows of W over threads)
//   dX = dY W          as dXᵀ = Wᵀ dYᵀ     (block columns of W, through the BSC view)
//   dW = dYᵀ X         sampled on W's blocks (block rows of W)
// One writer per output tile in each, so the results do not depend on the thread count.
#include <algorithm>

#include "dispatch/dispatch.hpp"
#include "ops/run.hpp"
#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
#include "runtime/parallel.hpp"
#include "trnsparse/linear.hpp"
#include "trnsparse/plan.hpp"

namespace trnsparse {

namespace {

/// Columns per unit of the bias gradient: whole cache lines of every value type.
constexpr index_t kBiasColumns = 256;

/// Tokens up to which a forward reads each stored block once for all of them (the
/// kernels' decode): the call is then a stream over W, whose pages set its pace
/// (detail::collapse_streamed).
constexpr index_t kStreamingTokens = 16;

/// The bytes of W's stored blocks: what the forward and dX keep in L2, a piece's share
/// each, while the tokens stream through.
template <class T>
std::size_t weight_bytes(const BlockSparseWeight<T>& W) {
  return W.size() * sizeof(T);
}

/// A weight names a structure, and blocks unless it stores none.
template <class T>
void check_weight(const BlockSparseWeight<T>& W, const char* who, const char* name) {
  if (!W.structure) throw InvalidArgument(detail::concat(who, ": ", name, " has no structure"));
  if (!W.blocks && W.size() > 0) throw InvalidArgument(detail::concat(who, ": ", name, "'s blocks are null"));
}

}  // namespace

template <Value TA, class TY> requires OutputFor<TA, TY>
void linear_forward(const BlockSparseWeight<const TA>& W, DenseView<const std::type_identity_t<TA>> X,
                    std::span<const acc_t<TA>> bias, DenseView<TY> Y) {
  const char* who = "linear_forward";
  check_weight(W, who, "W");
  detail::check_dim(X.cols, W.cols(), who, "X", "columns", "W.cols()");
  detail::check_dim(Y.rows, X.rows, who, "Y", "rows", "X.rows");
  detail::check_dim(Y.cols, W.rows(), who, "Y", "columns", "W.rows()");
  if (!bias.empty()) detail::check_dim(static_cast<index_t>(bias.size()), W.rows(), who, "bias", "values", "W.rows()");
  detail::check_no_alias(X.data, detail::span_bytes(X), Y.data, detail::span_bytes(Y), who, "X", "Y");
  detail::check_no_alias(W.blocks, weight_bytes(W), Y.data, detail::span_bytes(Y), who, "W", "Y");
  if (Y.rows == 0 || Y.cols == 0) return;
  if (X.rows <= kStreamingTokens) detail::collapse_streamed(W.blocks, weight_bytes(W));
  const auto p = plan(W.structure);
  const BsrStructure& s = *W.structure;
  auto prod = detail::bsr_product<TA, TY>(s, nullptr, nullptr, W.blocks, static_cast<index_t>(W.size()), X.rows,
                                          acc_t<TA>(1), acc_t<TA>(0), X.data, X.ld, Y.data, Y.ld);
  prod.b_transposed = prod.c_transposed = true;
  prod.bias = bias.empty() ? nullptr : bias.data();
  const int parts = detail::parts_for(s.block_rows(), detail::block_ns(s, X.rows));
  detail::run_bsr_product(dispatch::bsr_kernels<TA, TY>(), prod, s.block_cols(), p->row_split(parts),
                          p->row_split(detail::pieces_for(parts, weight_bytes(W))));
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void linear_backward_input(const BlockSparseWeight<const TA>& W, DenseView<const std::type_identity_t<TA>> dY,
                           DenseView<TY> dX) {
  const char* who = "linear_backward_input";
  check_weight(W, who, "W");
  detail::check_dim(dY.cols, W.rows(), who, "dY", "columns", "W.rows()");
  detail::check_dim(dX.rows, dY.rows, who, "dX", "rows", "dY.rows");
  detail::check_dim(dX.cols, W.cols(), who, "dX", "columns", "W.cols()");
  detail::check_no_alias(dY.data, detail::span_bytes(dY), dX.data, detail::span_bytes(dX), who, "dY", "dX");
  detail::check_no_alias(W.blocks, weight_bytes(W), dX.data, detail::span_bytes(dX), who, "W", "dX");
  if (dX.rows == 0 || dX.cols == 0) return;
  const auto p = plan(W.structure);
  const BsrStructure& s = *W.structure;
  const BscView& t = p->transposed();
  auto prod = detail::bsr_product<TA, TY>(s, &t, nullptr, W.blocks, static_cast<index_t>(W.size()), dY.rows,
                                          acc_t<TA>(1), acc_t<TA>(0), dY.data, dY.ld, dX.data, dX.ld);
  prod.b_transposed = prod.c_transposed = true;
  const int parts = detail::parts_for(s.block_cols(), detail::block_ns(s, dY.rows));
  detail::run_bsr_product(dispatch::bsr_kernels<TA, TY>(), prod, s.block_rows(), p->col_split(parts),
                          p->col_split(detail::pieces_for(parts, weight_bytes(W))));
}

template <Value T>
void linear_backward_weight(DenseView<const std::type_identity_t<T>> dY, DenseView<const std::type_identity_t<T>> X,
                            const BlockSparseWeight<T>& dW) {
  const char* who = "linear_backward_weight";
  check_weight(dW, who, "dW");
  detail::check_dim(dY.cols, dW.rows(), who, "dY", "columns", "dW.rows()");
  detail::check_dim(X.cols, dW.cols(), who, "X", "columns", "dW.cols()");
  detail::check_dim(X.rows, dY.rows, who, "X", "rows", "dY.rows");
  const std::span<T> out(dW.blocks, dW.size());
  detail::check_no_alias(dY.data, detail::span_bytes(dY), out.data(), out.size_bytes(), who, "dY", "dW");
  detail::check_no_alias(X.data, detail::span_bytes(X), out.data(), out.size_bytes(), who, "X", "dW");
  if (out.empty()) return;
  if (X.rows == 0) {  // a sum over no tokens
    std::fill(out.begin(), out.end(), T(0.0f));
    return;
  }
  const auto p = plan(dW.structure);
  const BsrStructure& s = *dW.structure;
  const kernels::BsrSampled<T> prob{.b = s.block_size(),
                                    .rows = s.rows(),
                                    .cols = s.cols(),
                                    .block_cols = s.block_cols(),
                                    .width = X.rows,
                                    .ptr = s.block_row_ptr().data(),
                                    .idx = s.block_col_indices().data(),
                                    .alpha = acc_t<T>(1),
                                    .beta = acc_t<T>(0),
                                    .X = dY.data,
                                    .ldx = dY.ld,
                                    .Y = X.data,
                                    .ldy = X.ld,
                                    .blocks = out.data(),
                                    .x_transposed = true,
                                    .y_transposed = true};
  const int parts = detail::parts_for(s.block_rows(), detail::block_ns(s, X.rows));
  detail::run_packed(dispatch::sddmm_kernels<T>(), prob, s.block_cols(), parts, p->row_split(detail::pieces_for(parts)));
}

template <Value T>
void linear_backward_bias(DenseView<const std::type_identity_t<T>> dY, std::span<acc_t<T>> db) {
  detail::check_dim(static_cast<index_t>(db.size()), dY.cols, "linear_backward_bias", "db", "values", "dY.cols");
  if (db.empty()) return;
  const index_t units = detail::ceil_div(dY.cols, kBiasColumns);
  const double values = static_cast<double>(dY.rows) * static_cast<double>(dY.cols);
  const int parts = detail::parts_for(units, detail::work_ns(detail::Work::stream, values, 1));
  const kernels::ColumnSums<T> sums = dispatch::column_sums<T>();
  detail::parallel_for(parts, units, [&](int, index_t u) {
    sums(dY.data, dY.rows, dY.ld, db.data(), u * kBiasColumns, std::min(dY.cols, (u + 1) * kBiasColumns));
  });
}

#define TRNSPARSE_INSTANTIATE(TA, TY)                                                                             \
  template void linear_forward<TA, TY>(const BlockSparseWeight<const TA>&, DenseView<const TA>,                  \
                                       std::span<const acc_t<TA>>, DenseView<TY>);                               \
  template void linear_backward_input<TA, TY>(const BlockSparseWeight<const TA>&, DenseView<const TA>,           \
                                              DenseView<TY>);
TRNSPARSE_INSTANTIATE(float, float)
TRNSPARSE_INSTANTIATE(double, double)
TRNSPARSE_INSTANTIATE(bf16, float)
TRNSPARSE_INSTANTIATE(bf16, bf16)
#undef TRNSPARSE_INSTANTIATE

#define TRNSPARSE_INSTANTIATE(T)                                                                                  \
  template void linear_backward_weight<T>(DenseView<const T>, DenseView<const T>, const BlockSparseWeight<T>&);  \
  template void linear_backward_bias<T>(DenseView<const T>, std::span<acc_t<T>>);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
TRNSPARSE_INSTANTIATE(bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
