#include "baselines.hpp"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <Eigen/SparseCore>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common.hpp"
#include "runtime/huge_pages.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse::bench {

std::string openblas_core() { return openblas_get_corename(); }

namespace {

template <class T, class Gemm>
double gemm_impl(Gemm gemm, DenseView<const T> A, DenseView<const T> B, DenseView<T> C, int reps, int threads) {
  openblas_set_num_threads(threads);
  return median_ms(reps, [&] {
    gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(A.rows), static_cast<int>(B.cols),
         static_cast<int>(A.cols), T(1), A.data, static_cast<int>(A.ld), B.data, static_cast<int>(B.ld), T(0), C.data,
         static_cast<int>(C.ld));
  });
}

template <class T>
double eigen_impl(const CsrMatrix<T>& A, DenseView<const T> B, DenseView<T> C, int reps, int threads) {
  using Sparse = Eigen::SparseMatrix<T, Eigen::RowMajor, std::int64_t>;
  using Dense = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  const Eigen::Map<const Sparse> a(A.rows(), A.cols(), A.nnz(), A.row_ptr().data(), A.col_indices().data(),
                                   A.values().data());
  const Eigen::Map<const Dense, 0, Stride> b(B.data, B.rows, B.cols, Stride(B.ld));
  Eigen::Map<Dense, 0, Stride> c(C.data, C.rows, C.cols, Stride(C.ld));
  Eigen::setNbThreads(threads);
  return median_ms(reps, [&] { c.noalias() = a * b; });
}

}  // namespace

double gemm_ms(DenseView<const float> A, DenseView<const float> B, DenseView<float> C, int reps, int threads) {
  return gemm_impl<float>(cblas_sgemm, A, B, C, reps, threads);
}
double gemm_ms(DenseView<const double> A, DenseView<const double> B, DenseView<double> C, int reps, int threads) {
  return gemm_impl<double>(cblas_dgemm, A, B, C, reps, threads);
}
double eigen_spmm_ms(const CsrMatrix<float>& A, DenseView<const float> B, DenseView<float> C, int reps, int threads) {
  return eigen_impl(A, B, C, reps, threads);
}
double eigen_spmm_ms(const CsrMatrix<double>& A, DenseView<const double> B, DenseView<double> C, int reps,
                     int threads) {
  return eigen_impl(A, B, C, reps, threads);
}

// On huge pages, as the library's own large arrays are: the yardstick is the fastest read.
Stream::Stream(index_t n, int threads)
    : n_((n + 7) / 8 * 8),
      threads_(threads),
      a_(detail::make_vector<double>(n_, "stream")),
      b_(detail::make_vector<double>(n_, "stream")),
      c_(detail::make_vector<double>(n_, "stream")) {
  double *a = a_.data(), *b = b_.data(), *c = c_.data();
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (index_t i = 0; i < n_; ++i) a[i] = 0.0, b[i] = 1.0, c[i] = 2.0;  // first touch by the owning thread
}

double Stream::triad_gbps() {
  double* a = a_.data();
  const double *b = b_.data(), *c = c_.data();
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (index_t i = 0; i < n_; ++i) a[i] = b[i] + 3.0 * c[i];
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 3.0 * 8.0 * static_cast<double>(n_) / s / 1e9;
}

double Stream::read_gbps() {
  const double *b = b_.data(), *c = c_.data();
  double total = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads_) reduction(+ : total)
  {
    double lanes[8] = {};  // independent sums: the loads, not an add chain, set the pace
#pragma omp for schedule(static)
    for (index_t i = 0; i < n_; i += 8)
      for (int l = 0; l < 8; ++l) lanes[l] += b[i + l] + c[i + l];
    for (const double v : lanes) total += v;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (total != 3.0 * static_cast<double>(n_)) return 0.0;  // not expected: the loop did not run as written
  return 2.0 * 8.0 * static_cast<double>(n_) / s / 1e9;
}

namespace {

// kChains independent accumulators hide the FMA latency; nothing touches memory. Each
// chain starts from its own value and every chain reaches the result: chains that start
// equal are one chain to the compiler (GCC folded twelve into one: the loop ran one
// latency-bound chain, counted twelve times, 3x the true peak). One function per ISA,
// each compiled for its target: GFLOP/s of one thread.
constexpr int kChains = 12;
constexpr long kIters = 10'000'000;

#define TRNSPARSE_PEAK_LOOP(name, attr, Reg, set1, fma, lanes)                                      \
  attr double name() {                                                \
    Reg acc[kChains];                                                                             \
    const Reg x = set1(1.0f), y = set1(0.999999f);                                                \
    for (int c = 0; c < kChains; ++c) acc[c] = set1(1.0f + 0.001f * static_cast<float>(c));         \
    const auto t0 = std::chrono::steady_clock::now();                                             \
    for (long i = 0; i < kIters; ++i)                                                             \
      for (Reg & a : acc) a = fma(a, y, x);                                                       \
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); \
    float sum = 0.0f;                                                                             \
    for (const Reg& a : acc) {                                                                    \
      float lane[sizeof(Reg) / sizeof(float)];                                                    \
      std::memcpy(lane, &a, sizeof lane);                                                         \
      sum += lane[0];                                                                             \
    }                                                                                             \
    return sum == 0.0f ? 0.0 : 2.0 * (lanes) * kChains * static_cast<double>(kIters) / s / 1e9;   \
  }
inline float set1_scalar(float v) { return v; }
inline float fma_scalar(float a, float b, float c) { return a * b + c; }
TRNSPARSE_PEAK_LOOP(peak_avx512, __attribute__((target("avx512f"))), __m512, _mm512_set1_ps, _mm512_fmadd_ps, 16)
TRNSPARSE_PEAK_LOOP(peak_avx2, __attribute__((target("avx2,fma"))), __m256, _mm256_set1_ps, _mm256_fmadd_ps, 8)
TRNSPARSE_PEAK_LOOP(peak_scalar, , float, set1_scalar, fma_scalar, 1)
#undef TRNSPARSE_PEAK_LOOP

}  // namespace

double fma_peak_gflops(int threads) {
  // Every thread runs the loop kPeakReps times, the threads starting each rep together
  // (so they overlap, as a product's threads do); the sum of each thread's best rep.
  constexpr int kPeakReps = 5;
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    double best = 0;
    for (int r = 0; r < kPeakReps; ++r) {
#pragma omp barrier
      switch (active_isa()) {
        case Isa::avx512:
        case Isa::avx512_bf16:
        case Isa::amx: best = std::max(best, peak_avx512()); break;
        case Isa::avx2: best = std::max(best, peak_avx2()); break;
        case Isa::scalar: best = std::max(best, peak_scalar()); break;
      }
    }
    total += best;
  }
  return total;
}

}  // namespace trnsparse::bench
