/// @file bench.cpp
/// `trnsparse bench --section bsr|csr|spmv|attn|solve|screen|load|spgemm|krylov [--size N,..] [--widths K,..] [--head-dims D,..]
/// [--densities D,..] [--dtype fp32|fp64|bf16] [--block-size B] [--reps R]
/// [--threads T] [--poisson N] [--matrix FILE]... [--problem SPEC,..] [--json]`: trnsparse next to its
/// baselines (OpenBLAS, Eigen, the reference kernels, STREAM, the FMA peak) on the same
/// data in the same run. Rows are printed as they are measured.

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cli.hpp"
#include "progress.hpp"

namespace trnsparse::cli {

std::string self_path() {
  std::array<char, 4096> path{};
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  return n > 0 ? std::string(path.data(), static_cast<std::size_t>(n)) : std::string();
}

// Idle OpenMP workers (the Eigen baseline's) spin by default, and so do OpenBLAS's
// threads (its pthreads build spins about 2^28 cycles after every call): on a machine
// with few cores, the spinning team of one library steals the cores of the next one
// timed, so the benchmark re-executes itself with both told to wait passively.
void ensure_passive_wait_policy(const std::string& self) {
  const bool omp = std::getenv("OMP_WAIT_POLICY") != nullptr, blas = std::getenv("OPENBLAS_THREAD_TIMEOUT") != nullptr;
  if ((omp && blas) || self.empty()) return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (std::size_t at = 0; at < all.size();) {
    const std::size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end - at));
    at = end == std::string::npos ? all.size() : end + 1;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (!omp) setenv("OMP_WAIT_POLICY", "passive", 1);
  if (!blas) setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
  std::fflush(stdout);
  execv(self.c_str(), argv.data());  // returns only on failure: then measure as we are
}

namespace {

/// A row as JSON (one object) or as `key=value` pairs for people.
void print_row(const bench::Row& row, bool json) {
  std::string line;
  for (const auto& [key, value] : row) {
    if (json) line += (line.empty() ? "{" : ",") + std::string("\"") + key + "\":" + value;
    else line += (line.empty() ? "" : "  ") + key + "=" + value;
  }
  print_line(json ? line + "}" : line);
  std::fflush(stdout);
}

}  // namespace

Subcommand add_bench(CLI::App& app) {
  auto options = std::make_shared<bench::Options>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("bench", "Benchmark trnsparse against OpenBLAS, Eigen and its reference kernels");
  cmd->add_option("--section", options->section,
                  "bsr (block-sparse SpMM), csr (CSR SpMM), spmv, attn (block-sparse attention), solve (CG) "
                  "screen (screened SpMM), load (small products with a busy process beside them, default threads "
                  "against one), spgemm (A² of each --problem and --matrix against Eigen and PETSc MatMatMult) or "
                  "krylov (time to solution with preconditioners against PETSc's KSPs, per --problem)")
      ->check(CLI::IsMember({"bsr", "csr", "spmv", "attn", "solve", "screen", "load", "spgemm", "krylov", "dense-child"}));
  cmd->add_option("--size", options->sizes, "Matrix sizes n (n x n)")->delimiter(',');
  cmd->add_option("--widths", options->widths, "Columns of the dense operand")->delimiter(',');
  cmd->add_option("--head-dims", options->head_dims, "attn: head dimensions")->delimiter(',');
  cmd->add_option("--densities", options->densities, "Block densities (bsr) or element densities (csr)")
      ->delimiter(',');
  cmd->add_option("--dtype", options->dtype, "fp32, fp64 or bf16")->check(CLI::IsMember({"fp32", "fp64", "bf16"}));
  cmd->add_option("--block-size", options->block_size, "BSR block size")->check(CLI::PositiveNumber);
  cmd->add_option("--reps", options->reps, "Timed repetitions (the median is reported)")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", options->threads, "Threads (default: TRNSPARSE_NUM_THREADS or all)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--poisson", options->poisson_n, "spmv, solve, load: edge of the 3D Poisson grid")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--matrix", options->matrices,
                  "spmv: Matrix Market files to add; bsr: run the problem mode on them; spgemm: square them")
      ->check(CLI::ExistingFile);
  cmd->add_option("--problem", options->problems,
                  "bsr: the problem mode on named matrices (elasticity3d:N, block_stencil3d:N[:F], poisson3d:N, "
                  "random_blocks:N:B:DENSITY): every format the advisor weighs, timed, next to Eigen CSR and "
                  "PETSc BAIJ; spgemm: square them")
      ->delimiter(',');
  add_json_flag(*cmd, *json);
  return {cmd, [options, json] {
            const bench::Emit emit = [json](const bench::Row& row) { print_row(row, *json); };
            if (options->section == "dense-child") {
              bench::run_dense_child(options->sizes.front(), options->widths.front(), options->dtype, options->reps,
                                     options->threads > 0 ? options->threads : 1, emit);
              return;
            }
            options->self = self_path();
            // The problem mode times sub-millisecond products against Eigen (the same
            // OpenMP runtime) and PETSc (another process): no OpenBLAS threads spin beside
            // them, and waking passive threads would cost as much as a product.
            const bool problem_mode =
                options->section == "bsr" && !(options->problems.empty() && options->matrices.empty());
            if (!problem_mode) ensure_passive_wait_policy(options->self);
            Progress progress(!*json);
            int rows = 0;
            progress.update("bench " + options->section + ": running");
            bench::run(*options, [&](const bench::Row& row) {
              progress.clear();
              emit(row);
              progress.update("bench " + options->section + ": " + std::to_string(++rows) + " rows");
            });
          }};
}

}  // namespace trnsparse::cli
