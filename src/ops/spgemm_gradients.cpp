// Gradients of the sparse × sparse product: sampled products on the operands' patterns.
//   dA(i, k) = Σ_j dC(i, j)·B(k, j)   (dC·Bᵀ: dC by rows, B through its transposed view)
//   dB(k, j) = Σ_i A(i, k)·dC(i, j)   (Aᵀ·dC: A through its transposed view, dC by rows)
// For blocks, the transposed operand's blocks are read transposed. Terms landing outside
// the sampled pattern are skipped by the kernel (SpgemmProduct::sampled).
#include "ops/spgemm.hpp"
#include "plan/csr_analysis.hpp"
#include "trnsparse/spgemm.hpp"

namespace trnsparse {

namespace {

using detail::concat;

/// out (on `target`'s pattern) = the sampled product of L and R, rows split by cost.
template <class T>
void sampled(const BsrStructure& target, const kernels::SpgemmOperand<T>& L, const kernels::SpgemmOperand<T>& R,
             const detail::RowsView& lv, const detail::RowsView& rv, T* out) {
  const std::vector<index_t> cost = detail::spgemm_cost(lv, rv);
  const kernels::SpgemmProduct<T, T> prob{.b = target.block_size(),
                                          .cols = target.block_cols(),
                                          .products = cost.back(),
                                          .L = L,
                                          .R = R,
                                          .c_ptr = target.block_row_ptr().data(),
                                          .c_idx = target.block_col_indices().data(),
                                          .c_vals = out,
                                          .sampled = true,
                                          .skip = 0.0};
  detail::run_spgemm(prob, cost);
}

template <class Matrix, class T>
void backward(const Matrix& A, const Matrix& B, const Matrix& dC, std::span<T> dA, std::span<T> dB) {
  const char* who = "multiply_backward";
  const auto& sa = A.structure_ptr();
  const auto& sb = B.structure_ptr();
  const auto& sc = dC.structure_ptr();
  const auto operands = [&] {
    return concat(detail::describe_operands(*sa, *sb), ", dC is ", sc->rows(), " x ", sc->cols(), " (block size ",
                  sc->block_size(), ")");
  };
  detail::check_spgemm_operands(who, *sa, *sb, SpgemmForm::a_b, operands);
  if (sc->block_size() != sa->block_size()) throw InvalidArgument(concat(who, ": block sizes differ: ", operands()));
  if (sc->rows() != sa->rows() || sc->cols() != sb->cols())
    throw DimensionMismatch(concat(who, ": dC must be A.rows() x B.cols(): ", operands()));
  const index_t bb = sa->block_size() * sa->block_size();
  if (!dA.empty())
    detail::check_dim(static_cast<index_t>(dA.size()), sa->n_blocks() * bb, who, "dA", "values", "A's stored values");
  if (!dB.empty())
    detail::check_dim(static_cast<index_t>(dB.size()), sb->n_blocks() * bb, who, "dB", "values", "B's stored values");
  for (const std::span<T> out : {dA, dB})
    for (const std::span<const T> in :
         {detail::stored_values(A), detail::stored_values(B), detail::stored_values(dC)})
      detail::check_no_alias(in.data(), in.size_bytes(), out.data(), out.size_bytes(), who, "an operand", "a gradient");
  if (!dA.empty() && !dB.empty())
    detail::check_no_alias(dA.data(), dA.size_bytes(), dB.data(), dB.size_bytes(), who, "dA", "dB");

  const auto pa = plan(sa), pb = plan(sb), pc = plan(sc);
  const detail::RowsView c_rows{sc->block_rows(), sc->block_row_ptr().data(), sc->block_col_indices().data()};
  if (!dA.empty()) {
    const BscView& bt = pb->transposed();
    sampled(*sa, detail::spgemm_operand(*pc, false, detail::stored_values(dC).data()),
            detail::spgemm_operand(*pb, true, detail::stored_values(B).data()), c_rows,
            detail::RowsView{sb->block_cols(), bt.col_ptr.data(), bt.row_idx.data()}, dA.data());
  }
  if (!dB.empty()) {
    const BscView& at = pa->transposed();
    sampled(*sb, detail::spgemm_operand(*pa, true, detail::stored_values(A).data()),
            detail::spgemm_operand(*pc, false, detail::stored_values(dC).data()),
            detail::RowsView{sa->block_cols(), at.col_ptr.data(), at.row_idx.data()}, c_rows, dB.data());
  }
}

}  // namespace

template <Value T> requires(!std::same_as<T, bf16>)
void multiply_backward(const CsrMatrix<T>& A, const CsrMatrix<T>& B, const CsrMatrix<T>& dC, std::span<T> dA,
                       std::span<T> dB) {
  backward(A, B, dC, dA, dB);
}
template <Value T> requires(!std::same_as<T, bf16>)
void multiply_backward(const BsrMatrix<T>& A, const BsrMatrix<T>& B, const BsrMatrix<T>& dC, std::span<T> dA,
                       std::span<T> dB) {
  backward(A, B, dC, dA, dB);
}

template void multiply_backward(const CsrMatrix<float>&, const CsrMatrix<float>&, const CsrMatrix<float>&,
                                std::span<float>, std::span<float>);
template void multiply_backward(const CsrMatrix<double>&, const CsrMatrix<double>&, const CsrMatrix<double>&,
                                std::span<double>, std::span<double>);
template void multiply_backward(const BsrMatrix<float>&, const BsrMatrix<float>&, const BsrMatrix<float>&,
                                std::span<float>, std::span<float>);
template void multiply_backward(const BsrMatrix<double>&, const BsrMatrix<double>&, const BsrMatrix<double>&,
                                std::span<double>, std::span<double>);

}  // namespace trnsparse
