#include "kernels/cpu/symmetric.hpp"

#include <algorithm>
#include <type_traits>

#include "runtime/value.hpp"

namespace trnsparse::kernels::cpu {

template <class TA, class TY>
void symmetric_local(const SymmetricProduct<TA, TY>& p, const detail::SymmetricChunks& s, index_t c,
                     acc_t<TA>* local) noexcept {
  using Acc = acc_t<TA>;
  const index_t r0 = s.bounds[c], r1 = s.bounds[c + 1];
  const index_t wlo = s.win_lo[c];
  Acc* window = p.window + s.win_off[c];
  std::fill(local, local + (r1 - r0), Acc(0));
  std::fill(window, window + (s.win_hi[c] - wlo), Acc(0));
  for (index_t i = r0; i < r1; ++i) {
    const Acc xi = detail::widen(p.x[i]);
    Acc acc = 0;
    for (index_t q = p.ptr[i]; q < p.ptr[i + 1]; ++q) {
      const index_t j = p.idx[q];
      const Acc a = detail::widen(p.values[q]);
      acc += a * detail::widen(p.x[j]);
      if (j == i) continue;
      const bool inside = p.upper ? j < r1 : j >= r0;
      (inside ? local[j - r0] : window[j - wlo]) += a * xi;
    }
    local[i - r0] += acc;
  }
  for (index_t i = r0; i < r1; ++i) {
    const Acc scaled = p.alpha * local[i - r0];
    p.out[i] = p.beta == Acc(0) ? scaled : scaled + p.beta * Acc(detail::widen(p.y[i]));
  }
}

template <class TA, class TY>
void symmetric_combine(const SymmetricProduct<TA, TY>& p, const detail::SymmetricChunks& s, index_t c) noexcept {
  using Acc = acc_t<TA>;
  const index_t r0 = s.bounds[c], r1 = s.bounds[c + 1];
  for (index_t src = 0; src < s.chunks(); ++src) {
    const index_t lo = std::max(r0, s.win_lo[src]), hi = std::min(r1, s.win_hi[src]);
    const Acc* w = p.window + s.win_off[src] - s.win_lo[src];
    for (index_t i = lo; i < hi; ++i) p.out[i] += p.alpha * w[i];
  }
  if constexpr (!std::is_same_v<TY, Acc>)
    for (index_t i = r0; i < r1; ++i) p.y[i] = detail::value_cast<TY>(p.out[i]);
}

#define TRNSPARSE_INSTANTIATE(TA, TY)                                                                      \
  template void symmetric_local<TA, TY>(const SymmetricProduct<TA, TY>&, const detail::SymmetricChunks&, \
                                        index_t, acc_t<TA>*) noexcept;                                     \
  template void symmetric_combine<TA, TY>(const SymmetricProduct<TA, TY>&, const detail::SymmetricChunks&, \
                                          index_t) noexcept;
TRNSPARSE_INSTANTIATE(float, float)
TRNSPARSE_INSTANTIATE(double, double)
TRNSPARSE_INSTANTIATE(bf16, float)
TRNSPARSE_INSTANTIATE(bf16, bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse::kernels::cpu
