// The advice (advisor.hpp), a pure function of the matrix and the calibration, and the
// measurements that check it.
#include <algorithm>
#include <functional>
#include <vector>

#include "advisor/model.hpp"
#include "runtime/checks.hpp"
#include "runtime/timing.hpp"
#include "trnsparse/advisor.hpp"

namespace trnsparse {

using namespace detail::advisor;

template <Value T>
Advice advise(const CsrMatrix<T>& A, Workload workload, const Calibration& calibration) {
  const index_t width = workload.width;
  if (width < 1) throw InvalidArgument(detail::concat("advise: width = ", width, " must be >= 1"));
  const std::string_view dtype = dtype_name<T>();
  if (!calibration.covers(dtype, width))
    throw InvalidArgument(detail::concat("advise: the calibration has no speeds for ", std::string(dtype), " at width ",
                                         width, " (measure them with load_calibration or Calibration::measure)"));
  const double nnz = static_cast<double>(A.nnz());
  // The calibration timed each format with the threads its in-cache matrices get; a
  // smaller product may get fewer (parts_for) and runs slower by that ratio (in cache,
  // where compute sets the pace). More threads than that are not credited: a large
  // product's time is mostly the bandwidth, measured with every thread.
  const int calibrated = calibration_threads(calibration.machine());
  const auto predict = [&](index_t b, double stored) {
    const Calibration::Speed& s = *calibration.find(dtype, width, b);
    const index_t block_rows = detail::ceil_div(A.rows(), b);
    const double threads = std::max(
        1.0, static_cast<double>(product_parts(b, calibration_entries(width), index_t{1} << 30, width, calibrated)) /
                 static_cast<double>(product_parts(b, stored, block_rows, width, calibrated)));
    return (s.ns_per_call +
            (stored * s.per_entry(stored * bytes_per_entry<T>(b)) + static_cast<double>(block_rows) * s.ns_per_row) *
                threads) *
           1e-6;
  };
  Advice advice;
  advice.candidates.push_back({Format::csr, 1, 1.0, predict(1, nnz)});
  for (const index_t b : Calibration::block_sizes) {
    if (b == 1 || (b > A.rows() && b > A.cols())) continue;
    // About 4096 block rows sampled, all of them for smaller matrices.
    const double fraction = std::min(1.0, 4096.0 / static_cast<double>(std::max<index_t>(1, detail::ceil_div(A.rows(), b))));
    const double fill = estimate_fill(A, b, fraction, 0);
    const double stored = fill * nnz;
    if (stored > 16.0 * std::max(nnz, 1.0) || stored > 0x1p31) continue;
    advice.candidates.push_back({Format::bsr, b, fill, predict(b, stored)});
  }
  const Candidate* best = &advice.candidates.front();
  for (const Candidate& c : advice.candidates)
    if (c.predicted_ms < best->predicted_ms) best = &c;
  advice.format = best->format;
  advice.block_size = best->block_size;
  advice.predicted_speedup_vs_csr = best->predicted_ms > 0.0 ? advice.candidates.front().predicted_ms / best->predicted_ms : 1.0;
  return advice;
}

template <Value T>
Advice choose_format(const CsrMatrix<T>& A, Workload workload) {
  if (workload.width < 1) throw InvalidArgument(detail::concat("choose_format: width = ", workload.width, " must be >= 1"));
  return advise(A, workload, load_calibration(dtype_name<T>(), workload.width));
}

template <Value T>
BsrMatrix<T> to_bsr(const CsrMatrix<T>& A, BlockSize, Workload workload) {
  const Advice advice = choose_format(A, workload);
  const Candidate* best = nullptr;
  for (const Candidate& c : advice.candidates)
    if (c.format == Format::bsr && (!best || c.predicted_ms < best->predicted_ms)) best = &c;
  return to_bsr(A, best ? best->block_size : index_t{2});
}


template <Value T>
double measure_product_ms(const CsrMatrix<T>& A, Format format, index_t block_size, Workload workload, int reps) {
  if (workload.width < 1)
    throw InvalidArgument(detail::concat("measure_product_ms: width = ", workload.width, " must be >= 1"));
  if (reps < 1) throw InvalidArgument(detail::concat("measure_product_ms: reps = ", reps, " must be >= 1"));
  detail::check_block_size(block_size, "measure_product_ms");
  Product<T> product(A, format, block_size, workload.width);
  return detail::measure(std::ref(product), {.reps = reps}).median_ms;
}

template <Value T>
std::vector<Measured> measure_candidates(const CsrMatrix<T>& A, std::span<const Candidate> candidates,
                                         Workload workload, int reps) {
  if (workload.width < 1)
    throw InvalidArgument(detail::concat("measure_candidates: width = ", workload.width, " must be >= 1"));
  if (reps < 1) throw InvalidArgument(detail::concat("measure_candidates: reps = ", reps, " must be >= 1"));
  Product<T> csr(A, Format::csr, 1, workload.width);
  const detail::TimingOptions o{.reps = reps};
  struct Pair {
    detail::Timing self, csr;
  };
  std::vector<Pair> pairs(candidates.size());
  std::vector<double> csr_ms;
  double csr_spread = 0.0;
  bool csr_stable = true;
  const auto add_csr = [&](const detail::Timing& t) {
    csr_ms.push_back(t.median_ms);
    csr_spread = std::max(csr_spread, t.spread);
    csr_stable = csr_stable && t.stable;
  };
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].format == Format::csr) continue;
    Product<T> product(A, Format::bsr, candidates[i].block_size, workload.width);
    const detail::LoadProbe probe;
    auto [self, base] = detail::measure_pair(std::ref(product), std::ref(csr), o);
    // Other processes busy meanwhile: the pair may have run at a speed it will not keep.
    if (probe.other_cores() > detail::kQuietOtherCores) self.stable = base.stable = false;
    pairs[i] = {self, base};
    add_csr(base);
  }
  if (csr_ms.empty()) add_csr(detail::measure(std::ref(csr), o));  // CSR alone among the candidates
  const double csr_median = detail::summarise(csr_ms, o).median_ms;
  std::vector<Measured> out(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].format == Format::csr) {
      out[i] = {csr_median, csr_spread, csr_stable};
      continue;
    }
    const Pair& p = pairs[i];
    out[i] = {csr_median * p.self.median_ms / p.csr.median_ms, std::max(p.self.spread, p.csr.spread),
              p.self.stable && p.csr.stable};
  }
  return out;
}

#define TRNSPARSE_INSTANTIATE(T)                                                                        \
  template Advice advise<T>(const CsrMatrix<T>&, Workload, const Calibration&);                        \
  template Advice choose_format<T>(const CsrMatrix<T>&, Workload);                                     \
  template BsrMatrix<T> to_bsr<T>(const CsrMatrix<T>&, BlockSize, Workload);                            \
  template double measure_product_ms<T>(const CsrMatrix<T>&, Format, index_t, Workload, int);          \
  template std::vector<Measured> measure_candidates<T>(const CsrMatrix<T>&, std::span<const Candidate>, Workload, int);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
TRNSPARSE_INSTANTIATE(bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
