// Internal to the benchmark: the baselines every trnsparse number is quoted against.
#pragma once

#include <string>
#include <vector>

#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse::bench {

/// OpenBLAS's kernel name (openblas_get_corename) in this process.
std::string openblas_core();

/// Median ms of C = A * B with cblas_sgemm / cblas_dgemm (row-major) on `threads`.
double gemm_ms(DenseView<const float> A, DenseView<const float> B, DenseView<float> C, int reps, int threads);
double gemm_ms(DenseView<const double> A, DenseView<const double> B, DenseView<double> C, int reps, int threads);

/// Median ms of C = A * B with Eigen::SparseMatrix<T, RowMajor> (OpenMP, `threads`)
/// times a row-major dense matrix, A mapped without a copy.
double eigen_spmm_ms(const CsrMatrix<float>& A, DenseView<const float> B, DenseView<float> C, int reps, int threads);
double eigen_spmm_ms(const CsrMatrix<double>& A, DenseView<const double> B, DenseView<double> C, int reps,
                     int threads);

/// STREAM-style yardsticks over arrays of `n` doubles on `threads`, allocated and
/// first-touched once, so that each run can sit between the runs of the kernel it is
/// compared with: this host's bandwidth drifts by tens of percent within a minute, and
/// a yardstick timed minutes before the kernel measures another machine.
class Stream {
 public:
  Stream(index_t n, int threads);
  /// One run of the triad a = b + s c, in GB/s (24 bytes per element, as STREAM counts).
  double triad_gbps();
  /// One run of a read-only sum of b and c, in GB/s (16 bytes per element): the ceiling
  /// of a kernel that mostly reads (SpMV); below the triad's on hosts whose memory
  /// serves mixed reads and writes faster than reads alone.
  double read_gbps();

 private:
  index_t n_;
  int threads_;
  std::vector<double> a_, b_, c_;
};

/// fp32 FMA peak of the active ISA from a register-only loop on `threads`, GFLOP/s.
double fma_peak_gflops(int threads);

}  // namespace trnsparse::bench
