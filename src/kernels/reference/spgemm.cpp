#include "kernels/reference/spgemm.hpp"

#include <algorithm>

#include "runtime/value.hpp"

namespace trnsparse::kernels::reference {

namespace {

/// Element (r, c) of stored entry q of an operand (its block read transposed when the
/// operand says so).
template <class TA>
acc_t<TA> element(const SpgemmOperand<TA>& op, index_t b, index_t q, index_t r, index_t c) noexcept {
  const TA* blk = op.vals + op.slot(q) * b * b;
  return detail::widen(op.trans ? blk[c * b + r] : blk[r * b + c]);
}

}  // namespace

template <Value TA, class TC>
void spgemm_numeric(const SpgemmProduct<TA, TC>& p, index_t rows, TC* work) noexcept {
  const index_t b = p.b, bb = b * b;
  const bool filtered = p.L.norms && p.R.norms;
  for (index_t i = 0; i < rows; ++i) {
    std::fill(work, work + p.cols * bb, TC(0));
    for (index_t q = p.L.ptr[i]; q < p.L.ptr[i + 1]; ++q) {
      const index_t k = p.L.column(q);
      for (index_t s = p.R.ptr[k]; s < p.R.ptr[k + 1]; ++s) {
        if (filtered && p.L.norms[p.L.slot(q)] * p.R.norms[p.R.slot(s)] <= p.skip) continue;
        TC* acc = work + p.R.column(s) * bb;
        for (index_t r = 0; r < b; ++r)
          for (index_t c = 0; c < b; ++c)
            for (index_t t = 0; t < b; ++t) acc[r * b + c] += element(p.L, b, q, r, t) * element(p.R, b, s, t, c);
      }
    }
    for (index_t e = p.c_ptr[i]; e < p.c_ptr[i + 1]; ++e)
      std::copy_n(work + p.c_idx[e] * bb, bb, p.c_vals + e * bb);
  }
}

index_t spgemm_row_columns(const index_t* l_idx, index_t q0, index_t q1, const index_t* r_ptr, const index_t* r_idx,
                           index_t* out) noexcept {
  index_t* end = out;
  for (index_t q = q0; q < q1; ++q) end = std::copy(r_idx + r_ptr[l_idx[q]], r_idx + r_ptr[l_idx[q] + 1], end);
  std::sort(out, end);
  return std::unique(out, end) - out;
}

template void spgemm_numeric(const SpgemmProduct<float, float>&, index_t, float*) noexcept;
template void spgemm_numeric(const SpgemmProduct<double, double>&, index_t, double*) noexcept;
template void spgemm_numeric(const SpgemmProduct<bf16, float>&, index_t, float*) noexcept;

}  // namespace trnsparse::kernels::reference
