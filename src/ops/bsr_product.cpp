// BSR products through a plan: validate, pick the ISA's kernels, split the output block
// rows over threads by the plan, pack B once, compute (ops/run.hpp).
#include <algorithm>
#include <type_traits>

#include "dispatch/dispatch.hpp"
#include "kernels/reference/products.hpp"
#include "plan/csr_analysis.hpp"
#include "runtime/checks.hpp"
#include "runtime/workspace.hpp"
#include "ops/run.hpp"
#include "trnsparse/plan.hpp"

namespace trnsparse {

namespace {

namespace cpu = kernels::cpu;

template <class TA>
void check_structure(const BsrPlan& plan, const BsrMatrix<TA>& A, const char* who) {
  if (A.structure_ptr() != plan.structure_ptr() && !(A.structure() == plan.structure()))
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
  const cpu::BsrProduct<TA, TY> prod{s.block_size(), s.rows(), s.cols(), s.block_cols(), B.cols,
                                     s.block_row_ptr().data(), s.block_col_indices().data(), compact_indices(false),
                                     nullptr, false,
                                     A.blocks().data(), static_cast<index_t>(A.blocks().size()), nullptr, nullptr, alpha,
                                     beta, B.data, B.ld, C.data, C.ld};
  detail::run_bsr_product(dispatch::bsr_kernels<TA, TY>(), prod, s.block_cols(), row_split(detail::parts_for(s.block_rows(), detail::block_work(s, B.cols))));
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
  const cpu::BsrProduct<TA, TY> prod{s.block_size(), s.cols(), s.rows(), s.block_rows(), B.cols,
                                     t.col_ptr.data(), t.row_idx.data(), compact_indices(true), t.perm.data(), true,
                                     A.blocks().data(), static_cast<index_t>(A.blocks().size()), nullptr, nullptr, alpha,
                                     beta, B.data, B.ld, C.data, C.ld};
  detail::run_bsr_product(dispatch::bsr_kernels<TA, TY>(), prod, s.block_rows(), col_split(detail::parts_for(s.block_cols(), detail::block_work(s, B.cols))));
}

/// The symmetric kernels (symmetric_tile.inc) for kSmallBlockSizes, chunks in parallel;
/// other block sizes the reference kernel, on one thread.
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
  if (s.bad_row >= 0)
    throw IndexError(detail::concat("spmv_symmetric: A has a block at block (", s.bad_row, ", ", s.bad_col,
                                    "), block_col_idx[", s.bad_pos, "], outside the ", upper ? "upper" : "lower",
                                    " block triangle it claims to store"));
  const index_t n = A.rows(), b = st.block_size();
  if (n == 0) return;
  using Acc = acc_t<TA>;
  if (std::ranges::find(cpu::kSmallBlockSizes, b) == std::end(cpu::kSmallBlockSizes)) {
    const kernels::reference::BsrArrays arrays{n, n, b, st.block_rows(), st.block_row_ptr().data(),
                                               st.block_col_indices().data()};
    Acc* work = reinterpret_cast<Acc*>(detail::thread_workspace(sizeof(Acc) * static_cast<std::size_t>(n)));
    kernels::reference::bsr_spmv_symmetric(arrays, A.blocks().data(), upper, alpha, x.data(), beta, y.data(), work);
    return;
  }
  constexpr bool direct = std::is_same_v<TY, Acc>;  // accumulate in y itself
  const index_t chunks = s.chunks();
  const int parts = detail::parts_for(chunks, static_cast<double>(A.blocks().size()));
  const std::size_t window_bytes =
      detail::round_to_line(sizeof(Acc) * static_cast<std::size_t>(s.window_total()) * static_cast<std::size_t>(b));
  const std::size_t out_bytes = direct ? 0 : detail::round_to_line(sizeof(Acc) * static_cast<std::size_t>(n));
  const std::size_t local_bytes = detail::round_to_line(sizeof(Acc) * static_cast<std::size_t>(s.max_span) *
                                                        static_cast<std::size_t>(cpu::symmetric_row_lanes(b)));
  std::byte* mem = detail::thread_workspace(window_bytes + out_bytes + static_cast<std::size_t>(parts) * local_bytes);
  Acc* out = direct ? reinterpret_cast<Acc*>(y.data()) : reinterpret_cast<Acc*>(mem + window_bytes);
  const cpu::SymmetricProduct<TA, TY> prod{st.block_row_ptr().data(), st.block_col_indices().data(),
                                           compact_indices(false),    A.blocks().data(),
                                           upper,                     alpha,
                                           beta,                      x.data(),
                                           y.data(),                  out,
                                           reinterpret_cast<Acc*>(mem), b,
                                           n};
  std::byte* locals = mem + window_bytes + out_bytes;
  const auto& kernel = dispatch::symmetric_kernels<TA, TY>();
  // Chunks go to threads in any order: each chunk's result is the same wherever it runs.
  detail::parallel_phases(
      parts, chunks,
      [&](int t, index_t c) { kernel.local(prod, s, c, reinterpret_cast<Acc*>(locals + t * local_bytes), nullptr); },
      [&](int, index_t c) { kernel.combine(prod, s, c, nullptr); });
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
