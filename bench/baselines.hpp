// Internal to the benchmark: the baselines every trnsparse number is quoted against.
#pragma once

#include <string>

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

/// STREAM triad a = b + s c over three arrays of `n` doubles on `threads`: best GB/s.
double stream_triad_gbps(index_t n, int reps, int threads);

/// Read-only streaming: the sum of two arrays of `n` doubles on `threads`, best GB/s.
/// The ceiling of a kernel that mostly reads (SpMV); below the triad's on hosts whose
/// memory serves mixed reads and writes faster than reads alone.
double stream_read_gbps(index_t n, int reps, int threads);

/// fp32 FMA peak of the active ISA from a register-only loop on `threads`, GFLOP/s.
double fma_peak_gflops(int threads);

}  // namespace trnsparse::bench
