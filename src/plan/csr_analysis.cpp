#include "plan/csr_analysis.hpp"

#include <algorithm>
#include <limits>

#include "plan/pattern.hpp"
#include "runtime/parallel.hpp"
#include "ops/run.hpp"
#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"

namespace trnsparse::detail {

SymmetricChunks symmetric_chunks(index_t n, std::span<const index_t> ptr, std::span<const index_t> idx,
                                 Triangle uplo, index_t chunk_entries) {
  const bool upper = uplo == Triangle::upper;
  SymmetricChunks s;
  // Rows are sorted, so a row's first (upper) or last (lower) entry decides whether it
  // stays in its triangle, and the other end is how far its mirrored entries reach.
  std::vector<index_t> reach = make_vector<index_t>(n, "spmv_symmetric: analysis");
  for (index_t i = 0; i < n; ++i) {
    reach[i] = i;
    if (ptr[i] == ptr[i + 1]) continue;
    const index_t near = upper ? ptr[i] : ptr[i + 1] - 1, far = upper ? ptr[i + 1] - 1 : ptr[i];
    if (s.bad_row < 0 && (upper ? idx[near] < i : idx[near] > i)) {
      // The first entry outside the triangle in storage order (lower: the first > i).
      const index_t p = upper ? near : std::upper_bound(idx.begin() + ptr[i], idx.begin() + ptr[i + 1], i) - idx.begin();
      s.bad_row = i;
      s.bad_col = idx[p];
      s.bad_pos = p;
    }
    reach[i] = idx[far];
  }
  if (s.bad_row >= 0) return s;

  const index_t nnz = ptr[n];
  index_t m = std::clamp<index_t>(nnz / chunk_entries, 1, kMaxSymmetricChunks);
  for (;; m = std::max<index_t>(1, m / 2)) {
    const auto bounds = balanced_split(ptr, static_cast<int>(m));
    s.bounds.assign(bounds.begin(), bounds.end());
    s.win_lo.assign(static_cast<std::size_t>(m), 0);
    s.win_hi.assign(static_cast<std::size_t>(m), 0);
    s.win_off.assign(static_cast<std::size_t>(m) + 1, 0);
    s.reach.assign(static_cast<std::size_t>(m), 0);
    s.max_span = 0;
    for (index_t c = 0; c < m; ++c) {
      const index_t r0 = s.bounds[c], r1 = s.bounds[c + 1];
      for (index_t i = r0; i < r1; ++i) s.reach[c] = std::max(s.reach[c], upper ? reach[i] - i : i - reach[i]);
      if (upper) {
        index_t hi = r1;
        for (index_t i = r0; i < r1; ++i) hi = std::max(hi, reach[i] + 1);
        s.win_lo[c] = r1;
        s.win_hi[c] = hi;
      } else {
        index_t lo = r0;
        for (index_t i = r0; i < r1; ++i) lo = std::min(lo, reach[i]);
        s.win_lo[c] = lo;
        s.win_hi[c] = r0;
      }
      s.win_off[c + 1] = s.win_off[c] + (s.win_hi[c] - s.win_lo[c]);
      s.max_span = std::max(s.max_span, (r1 - r0) + (s.win_hi[c] - s.win_lo[c]));
    }
    // Windows within n / 8 rows; or, to keep kMinSymmetricChunks chunks for threads,
    // within n rows (a wide band: each chunk's window is as long as the band).
    if (m == 1 || s.window_total() <= n / 8 || (m <= kMinSymmetricChunks && s.window_total() <= n)) return s;
  }
}

std::vector<std::int32_t> compact_indices(index_t cols, std::span<const index_t> idx) {
  if (cols > std::numeric_limits<std::int32_t>::max() || idx.empty()) return {};
  // Huge pages: 4 bytes an entry faulted in 4 KiB at a time cost more than the copy.
  std::vector<std::int32_t> out = make_vector<std::int32_t>(static_cast<index_t>(idx.size()), "csr: 32-bit column indices");
  const index_t nnz = static_cast<index_t>(idx.size());
  const int parts = parts_for(nnz, work_ns(Work::stream, static_cast<double>(nnz)));
  parallel_parts(parts, [&](int t) {
    for (index_t q = nnz * t / parts; q < nnz * (t + 1) / parts; ++q) out[q] = static_cast<std::int32_t>(idx[q]);
  });
  return out;
}

const std::int32_t* CsrAnalyses::compact(index_t cols, std::span<const index_t> idx) {
  std::call_once(compact_once_, [&] { compact_ = compact_indices(cols, idx); });
  return compact_.empty() ? nullptr : compact_.data();
}

const SymmetricChunks& CsrAnalyses::symmetric(index_t n, std::span<const index_t> ptr, std::span<const index_t> idx,
                                              Triangle uplo) {
  const bool upper = uplo == Triangle::upper;
  SymmetricChunks& s = upper ? upper_ : lower_;
  std::call_once(upper ? upper_once_ : lower_once_, [&] { s = symmetric_chunks(n, ptr, idx, uplo); });
  return s;
}

const BscView& CsrAnalyses::transposed(index_t rows, index_t cols, std::span<const index_t> ptr,
                                       std::span<const index_t> idx) {
  std::call_once(transposed_once_, [&] { transposed_ = transposed_pattern(rows, cols, ptr, idx); });
  return transposed_;
}

}  // namespace trnsparse::detail
