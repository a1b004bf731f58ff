// The `screen` section: the fused screened product C = (A ∘ M) B (screening.hpp) on an
// n x n matrix stored as BSR with every block present, bounds decaying exponentially
// along the index, at thresholds keeping 100%, 50% and 10% of the entries; next to (same
// run, same data) the unfused path a user would otherwise write (bounds, mask, masked
// dense matrix, CSR, CSR SpMM: all of it timed) and OpenBLAS GEMM on the masked dense
// matrix (in this process). Errors against float64 on sampled rows, with the mask
// recomputed here from the bounds.
#include "screen.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "attention.hpp"
#include "baselines.hpp"
#include "common.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/screening.hpp"

namespace trnsparse::bench {

namespace {

/// diag_i = e^(-kDecay i / n): bounds q_i = √diag_i over ten orders of magnitude, pair
/// products q_i q_j over twenty.
constexpr double kDecay = 20.0;
constexpr double kKeep[] = {1.0, 0.5, 0.1};  // fractions of the entries the thresholds keep

/// Pairs (i, j) with q_i q_j > s (the kernel's rule); `sorted` is q in descending order.
double kept_pairs(const std::vector<double>& q, const std::vector<double>& sorted, double s) {
  double count = 0;
  for (const double qi : q)
    count += static_cast<double>(std::ranges::partition_point(sorted, [&](double qj) { return qi * qj > s; }) -
                                 sorted.begin());
  return count;
}

/// The largest threshold t (to bisection precision) whose mask q_i q_j > √t keeps at
/// least `fraction` of the n² entries: ties among the products may keep a little more.
double threshold_keeping(const std::vector<double>& q, double fraction) {
  std::vector<double> sorted = q;
  std::ranges::sort(sorted, std::greater<>());
  const double target = fraction * static_cast<double>(q.size()) * static_cast<double>(q.size());
  double lo = 0.0, hi = std::pow(sorted.front(), 4);  // √hi is the largest product: nothing kept
  for (int step = 0; step < 200; ++step) {
    const double mid = 0.5 * (lo + hi);
    if (kept_pairs(q, sorted, std::sqrt(mid)) >= target) lo = mid;
    else hi = mid;
  }
  return lo;
}

/// max over up to 32 sampled rows of |C - (A ∘ M) B| / (|A ∘ M| |B|), in float64, with
/// M_ik = [q_i q_k > s].
template <class T>
double masked_rel_err(const Dense<T>& A, const std::vector<double>& q, double s, const Dense<T>& B, const Dense<T>& C) {
  double worst = 0;
  const index_t n = A.rows(), step = std::max<index_t>(1, n / 32);
  for (index_t i = 0; i < n; i += step)
    for (index_t j = 0; j < B.cols(); ++j) {
      double ref = 0, mag = 0;
      for (index_t k = 0; k < A.cols(); ++k)
        if (q[static_cast<std::size_t>(i)] * q[static_cast<std::size_t>(k)] > s) {
          const double p = static_cast<double>(A(i, k)) * static_cast<double>(B(k, j));
          ref += p;
          mag += std::fabs(p);
        }
      const double err = std::fabs(static_cast<double>(C(i, j)) - ref);
      worst = std::max(worst, mag > 0 ? err / mag : err);
    }
  return worst;
}

template <class T>
void screen_rows(const Options& o, const Row& head, const Emit& emit) {
  const int threads = head_threads(head);
  const index_t b = o.block_size;
  for (const index_t n : o.sizes) {
    const Dense<T> A_dense = random_dense<T>(n, n, 21);
    const BsrMatrix<T> A = to_bsr(A_dense.view(), b);
    std::vector<T> diag(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(i) / static_cast<double>(n);
      diag[static_cast<std::size_t>(i)] = static_cast<T>(std::exp(-kDecay * x));
    }
    const std::span<const T> diag_view(diag);
    const std::vector<double> q = schwarz_bounds(diag_view);  // as the kernel computes them
    std::vector<double> sorted = q, tile_max;
    std::ranges::sort(sorted, std::greater<>());
    for (index_t i0 = 0; i0 < n; i0 += b)
      tile_max.push_back(*std::max_element(q.begin() + i0, q.begin() + std::min(n, i0 + b)));
    for (const index_t width : o.widths) {
      const Dense<T> B = random_dense<T>(n, width, 22);
      for (const double keep : kKeep) {
        const double threshold = threshold_keeping(q, keep), s = std::sqrt(threshold);
        const double kept = kept_pairs(q, sorted, s) / (static_cast<double>(n) * static_cast<double>(n));
        double kept_tiles = 0;
        for (const double hi_r : tile_max)
          for (const double hi_c : tile_max) kept_tiles += hi_r * hi_c > s ? 1 : 0;
        kept_tiles /= static_cast<double>(tile_max.size() * tile_max.size());

        Dense<T> C(n, width);  // allocated once, as an SCF loop would (the dense baseline's C is too)
        const double fused_ms =
            median_ms(o.reps, [&] { screened_spmm<T>(A, diag_view, diag_view, B.view(), threshold, C.view()); });
        Dense<T> C_unfused(n, width);
        const double unfused_ms = median_ms(o.reps, [&] {
          const CsrMatrix<double> mask = screen_quartets(schwarz_bounds(diag_view), s);
          Dense<T> masked(n, n);
          for (index_t i = 0; i < n; ++i)
            for (index_t p = mask.row_ptr()[i]; p < mask.row_ptr()[i + 1]; ++p)
              masked(i, mask.col_indices()[p]) = A_dense(i, mask.col_indices()[p]);
          spmm(T(1), to_csr(std::as_const(masked).view()), B.view(), T(0), C_unfused.view());
        });
        Dense<T> masked(n, n), C_dense(n, width);
        for (index_t i = 0; i < n; ++i)
          for (index_t k = 0; k < n; ++k)
            if (q[static_cast<std::size_t>(i)] * q[static_cast<std::size_t>(k)] > s) masked(i, k) = A_dense(i, k);
        const double dense_ms = gemm_ms(masked.view(), B.view(), C_dense.view(), o.reps, threads);

        Row row = head;
        row.insert(row.end(), {{"n", num(n)},
                               {"width", num(width)},
                               {"block_size", num(b)},
                               {"decay", num(kDecay)},
                               {"threshold", num(threshold)},
                               {"kept_fraction", num(kept)},
                               {"kept_tile_fraction", num(kept_tiles)},
                               {"fused_ms", num(fused_ms)},
                               {"unfused_ms", num(unfused_ms)},
                               {"dense_ms", num(dense_ms)},
                               {"dense_core", str(openblas_core())},
                               {"rel_err", num(masked_rel_err(A_dense, q, s, B, C))},
                               {"unfused_rel_err", num(masked_rel_err(A_dense, q, s, B, C_unfused))},
                               {"dense_rel_err", num(masked_rel_err(A_dense, q, s, B, C_dense))},
                               {"speedup_vs_unfused", num(unfused_ms / fused_ms)},
                               {"speedup_vs_dense", num(dense_ms / fused_ms)},
                               {"target_speedup_vs_dense", num(0.8 / kept_tiles)}});
        emit(row);
      }
    }
  }
}

}  // namespace

void screen_section(const Options& o, const Row& head, const Emit& emit) {
  if (o.dtype == "fp32") return screen_rows<float>(o, head, emit);
  if (o.dtype == "fp64") return screen_rows<double>(o, head, emit);
  throw InvalidArgument("bench: --dtype " + o.dtype + " is not available for section screen (fp32 or fp64)");
}

}  // namespace trnsparse::bench
