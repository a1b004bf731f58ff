// BSR products through a plan: validate, pick the ISA's kernels, split the output block
// rows over threads by the plan, pack B once, compute (ops/run.hpp).
#include "dispatch/dispatch.hpp"
#include "runtime/checks.hpp"
#include "ops/run.hpp"
#include "ops/symmetric.hpp"
#include "trnsparse/plan.hpp"

namespace trnsparse {

namespace {

template <class TA>
void check_structure(const BsrPlan& plan, const BsrMatrix<TA>& A, const char* who) {
  if (!plan.same_structure(A.structure_ptr()))
    throw InvalidArgument(detail::concat(who, ": A's structure is not the plan's"));
}

}  // namespace

template <Value TA, class TY> requires OutputFor<TA, TY>
void BsrPlan::spmm(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B,
                   acc_t<TA> beta, DenseView<TY> C) const {
  check_structure(*this, A, "spmm");
  detail::check_spmm("spmm", A.rows(), A.cols(), B, C);
  detail::check_no_alias(A.blocks().data(), A.blocks().size_bytes(), C.data, detail::span_bytes(C), "spmm", "A", "C");
  const BsrStructure& s = *structure_;
  if (C.rows == 0 || C.cols == 0) return;
  const auto prod = detail::bsr_product<TA, TY>(s, nullptr, compact_indices(false), A.blocks().data(),
                                                static_cast<index_t>(A.blocks().size()), B.cols, alpha, beta,
                                                B.data, B.ld, C.data, C.ld);
  const int parts = detail::parts_for(s.block_rows(), detail::block_ns(s, B.cols));
  detail::run_bsr_product(dispatch::bsr_kernels<TA, TY>(), prod, s.block_cols(), row_split(parts),
                          row_split(detail::pieces_for(parts)));
}

template <Value TA, class TY> requires OutputFor<TA, TY>
void BsrPlan::spmm_transposed(acc_t<TA> alpha, const BsrMatrix<TA>& A, DenseView<const std::type_identity_t<TA>> B,
                              acc_t<TA> beta, DenseView<TY> C) const {
  check_structure(*this, A, "spmm_transposed");
  detail::check_spmm("spmm_transposed", A.cols(), A.rows(), B, C, "A.cols()", "A.rows()");
  detail::check_no_alias(A.blocks().data(), A.blocks().size_bytes(), C.data, detail::span_bytes(C), "spmm_transposed",
                         "A", "C");
  const BsrStructure& s = *structure_;
  if (C.rows == 0 || C.cols == 0) return;
  const BscView& t = transposed();
  const auto prod = detail::bsr_product<TA, TY>(s, &t, compact_indices(true), A.blocks().data(),
                                                static_cast<index_t>(A.blocks().size()), B.cols, alpha, beta,
                                                B.data, B.ld, C.data, C.ld);
  const int parts = detail::parts_for(s.block_cols(), detail::block_ns(s, B.cols));
  detail::run_bsr_product(dispatch::bsr_kernels<TA, TY>(), prod, s.block_rows(), col_split(parts),
                          col_split(detail::pieces_for(parts)));
}

/// The chunked symmetric kernels for kSmallBlockSizes, chunks in parallel; other block
/// sizes in one call on one thread (dispatch::symmetric_whole).
template <Value TA, class TY> requires OutputFor<TA, TY>
void BsrPlan::spmv_symmetric(acc_t<TA> alpha, const BsrMatrix<TA>& A, Triangle uplo,
                             std::span<const std::type_identity_t<TA>> x, acc_t<TA> beta, std::span<TY> y) const {
  check_structure(*this, A, "spmv_symmetric");
  if (A.rows() != A.cols())
    throw InvalidArgument(detail::concat("spmv_symmetric: A is ", A.rows(), " x ", A.cols(), ", expected square"));
  detail::check_spmv("spmv_symmetric", A.rows(), A.cols(), x, y);
  detail::check_no_alias(A.blocks().data(), A.blocks().size_bytes(), y.data(), y.size_bytes(), "spmv_symmetric", "A",
                         "y");
  const BsrStructure& st = *structure_;
  const bool upper = uplo == Triangle::upper;
  const detail::SymmetricChunks& s = symmetric_chunks(uplo);
  detail::check_triangle(s, uplo, true);
  const index_t n = A.rows(), b = st.block_size();
  if (n == 0) return;
  const kernels::SymmetricProduct<TA, TY> prod{.ptr = st.block_row_ptr().data(),
                                               .idx = st.block_col_indices().data(),
                                               .idx32 = compact_indices(false),
                                               .values = A.blocks().data(),
                                               .upper = upper,
                                               .alpha = alpha,
                                               .beta = beta,
                                               .x = x.data(),
                                               .y = y.data(),
                                               .out = nullptr,
                                               .window = nullptr,
                                               .b = b,
                                               .n = n};
  if (!kernels::small_block_size(b)) {
    auto* work = reinterpret_cast<acc_t<TA>*>(detail::thread_workspace(sizeof(acc_t<TA>) * static_cast<std::size_t>(n)));
    dispatch::symmetric_whole<TA, TY>()(prod, work);
    return;
  }
  detail::run_symmetric(prod, s, static_cast<double>(A.blocks().size()), nullptr);
}

#define TRNSPARSE_INSTANTIATE(TA, TY)                                                                            \
  template void BsrPlan::spmv_symmetric<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, Triangle, std::span<const TA>, \
                                                acc_t<TA>, std::span<TY>) const;                                \
  template void BsrPlan::spmm<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, DenseView<const TA>, acc_t<TA>,         \
                                      DenseView<TY>) const;                                                    \
  template void BsrPlan::spmm_transposed<TA, TY>(acc_t<TA>, const BsrMatrix<TA>&, DenseView<const TA>, acc_t<TA>, \
                                                 DenseView<TY>) const;
TRNSPARSE_INSTANTIATE(float, float)
TRNSPARSE_INSTANTIATE(double, double)
TRNSPARSE_INSTANTIATE(bf16, float)
TRNSPARSE_INSTANTIATE(bf16, bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
