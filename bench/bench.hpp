// The benchmark behind `trnsparse bench`: trnsparse kernels next to their baselines
// (OpenBLAS dense GEMM, Eigen sparse, our reference kernels, a STREAM triad and a
// register FMA loop), on the same data in the same run, one JSON line per measurement.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "trnsparse/types.hpp"

namespace trnsparse::bench {

struct Options {
  std::string section = "bsr";  ///< bsr | csr | spmv | attn | solve | screen | load | spgemm | krylov
  std::vector<index_t> sizes{4096, 8192};
  std::vector<index_t> widths{1, 128, 512};
  std::vector<index_t> head_dims{64, 128};  ///< attn: head dimensions
  std::vector<double> densities{0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0};
  std::string dtype = "fp32";  ///< fp32 | fp64 | bf16
  index_t block_size = 128;
  int reps = 5;
  int threads = 0;           ///< 0: the library default
  index_t poisson_n = 150;   ///< spmv, solve: the Poisson grid edge
  std::vector<std::filesystem::path> matrices;  ///< spmv, bsr: Matrix Market files
  std::vector<std::string> problems;  ///< bsr, spgemm, krylov: named_problem specs (bsr with matrices: the problem mode)
  double reference_gflop_limit = 4.0;  ///< skip the scalar reference above this much work
  std::string self;          ///< path of this executable, for the OpenBLAS child run
};

/// A measurement row: ordered (key, JSON value text) pairs.
using Row = std::vector<std::pair<std::string, std::string>>;
using Emit = std::function<void(const Row&)>;

/// A row's value as a number (NaN for null, a missing key or a value that is no number).
double field(const Row& row, const std::string& key);

/// Runs `options.section`, calling `emit` once per row.
/// @throw InvalidArgument for an unknown section or dtype.
void run(const Options& options, const Emit& emit);

/// The child run of the dense baseline: cblas GEMM of an n x n by n x width random
/// matrix, `reps` times, in a process whose environment the parent chose. Emits one
/// row: dense_ms, rel_err (against float64 on sampled rows), corename.
void run_dense_child(index_t n, index_t width, std::string_view dtype, int reps, int threads, const Emit& emit);

}  // namespace trnsparse::bench
