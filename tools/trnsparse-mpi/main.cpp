/// @file main.cpp
/// `trnsparse-mpi`: distributed solves from the command line, run under mpirun.
///
///     mpirun -np 2 build/bin/trnsparse-mpi solve --poisson 100 --json
///     mpirun -np 4 build/bin/trnsparse-mpi solve tests/data/1138_bus.mtx --block-size 4
///     mpirun -np 2 build/bin/trnsparse-mpi solve --problem convdiff3d:40 --method gmres --precond ilu0
///
/// `solve [FILE.mtx | --poisson N | --problem SPEC]`: a Krylov solve (float64; `--method
/// cg|gmres|bicgstab`) on a Matrix Market matrix, which every process reads its slice of,
/// on the 3D Poisson problem poisson3d(N), which every process generates its own rows of,
/// or on a named problem (trnsparse::named_problem), which every process generates whole
/// and keeps its rows of. `--block-size 1` (the default) stores CSR, larger sizes BSR.
/// `--precond` jacobi is the diagonal (a point block Jacobi for gmres and bicgstab);
/// bjacobi, ic0 and ilu0 are each process's own, built from its diagonal part (block
/// Jacobi over the processes, as PETSc's PCBJACOBI). Process 0 prints; `--json` prints
/// one line with method, precond, ranks, threads, n, stored (non-zeros, or blocks for
/// BSR), converged, iterations, rel_residual (the solver's), true_rel_residual
/// (||b - A x|| / ||b|| recomputed), seconds and setup_seconds.
/// Exit status as the trnsparse tool's: 0, 1 for bad input (every process agrees), 2 internal.

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "cli.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/mpi.hpp"
#include "trnsparse/preconditioners.hpp"
#include "trnsparse/runtime.hpp"
#include "trnsparse/version.hpp"

namespace trnsparse::cli {
namespace {

struct MpiSolveOptions {
  std::string file;
  std::string problem;  // a named problem; empty: --poisson
  index_t poisson = 64;
  index_t block_size = 1;
  std::string rhs = "ones";
  double tol = 1e-8;
  index_t max_iter = 10000;
  std::string method = "cg";
  std::string precond = "jacobi";
  index_t restart = 30;
  bool json = false;
};

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

/// The first and last rows of this process when `rows` rows are dealt out in block rows
/// of b, as evenly as the block size allows.
std::pair<index_t, index_t> my_rows(index_t rows, index_t b) {
  const index_t block_rows = (rows + b - 1) / b, p = world_rank(), P = world_size();
  return {std::min(rows, block_rows * p / P * b), std::min(rows, block_rows * (p + 1) / P * b)};
}

template <class Local>
mpi::DistMatrix<Local> distributed(const CsrMatrix<double>& rows, index_t b) {
  if constexpr (std::is_same_v<Local, CsrMatrix<double>>) return mpi::DistMatrix<Local>(MPI_COMM_WORLD, rows);
  else return mpi::DistMatrix<Local>(MPI_COMM_WORLD, to_bsr(rows, b));
}

/// This process's rows of poisson3d(n) (each row of the stencil stores the same work).
template <class Local>
mpi::DistMatrix<Local> poisson_rows(index_t n, index_t b) {
  const auto [first, last] = my_rows(n * n * n, b);
  return distributed<Local>(poisson3d_rows<double>(n, first, last), b);
}

/// This process's rows of the named problem `spec`, generated whole on every process.
template <class Local>
mpi::DistMatrix<Local> problem_rows(const std::string& spec, index_t b) {
  const CsrMatrix<double> A = named_problem<double>(spec);
  const auto [first, last] = my_rows(A.rows(), b);
  const auto ptr = A.row_ptr(), idx = A.col_indices();
  const auto vals = A.values();
  std::vector<index_t> p(static_cast<std::size_t>(last - first + 1));
  for (index_t i = first; i <= last; ++i) p[i - first] = ptr[i] - ptr[first];
  return distributed<Local>(CsrMatrix<double>(last - first, A.cols(), std::move(p),
                                              {idx.begin() + ptr[first], idx.begin() + ptr[last]},
                                              {vals.begin() + ptr[first], vals.begin() + ptr[last]}),
                            b);
}

/// The preconditioner --precond names for GMRES, BiCGStab and CG beyond the diagonal:
/// this process's own, from its diagonal part (null for none, and for jacobi under cg,
/// which takes the diagonal as a vector).
template <class Local>
std::unique_ptr<Preconditioner<double>> local_preconditioner(const MpiSolveOptions& o, const mpi::DistMatrix<Local>& A) {
  const Local& D = A.diagonal_part();
  if (o.precond == "ic0") return std::make_unique<IncompleteFactorization<double>>(ic0(D));
  if (o.precond == "ilu0") return std::make_unique<IncompleteFactorization<double>>(ilu0(D));
  if (o.precond == "bjacobi" || (o.precond == "jacobi" && o.method != "cg")) {
    if constexpr (std::is_same_v<Local, CsrMatrix<double>>) return std::make_unique<BlockJacobi<double>>(D, index_t{1});
    else if (o.precond == "bjacobi") return std::make_unique<BlockJacobi<double>>(D);
    else return std::make_unique<BlockJacobi<double>>(to_csr(D), index_t{1});
  }
  return nullptr;
}

template <class Local>
void solve(const MpiSolveOptions& o) {
  const auto setup_start = std::chrono::steady_clock::now();
  const bool from_file = !o.file.empty();
  const mpi::DistMatrix<Local> A =
      from_file            ? mpi::DistMatrix<Local>::read_matrix_market(MPI_COMM_WORLD, o.file, o.block_size)
      : o.problem.empty() ? poisson_rows<Local>(o.poisson, o.block_size)
                           : problem_rows<Local>(o.problem, o.block_size);
  const std::string problem = from_file           ? o.file
                              : o.problem.empty() ? "poisson3d(" + std::to_string(o.poisson) + ")"
                                                  : o.problem;
  const std::vector<double> b = o.rhs == "random" ? fixed_random_vector(A.local_rows(), A.row_offset())
                                                  : std::vector<double>(static_cast<std::size_t>(A.local_rows()), 1.0);
  const std::vector<double> diagonal =
      o.precond == "jacobi" && o.method == "cg" ? mpi::jacobi_preconditioner(A) : std::vector<double>{};
  const std::unique_ptr<Preconditioner<double>> M = local_preconditioner(o, A);
  MPI_Barrier(MPI_COMM_WORLD);
  const double setup = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();

  const auto start = std::chrono::steady_clock::now();
  const std::span<const double> rhs(b);
  const KrylovOptions<double> krylov{.tol = o.tol, .max_iter = o.max_iter, .restart = o.restart, .M = M.get()};
  const SolveResult<double> res =
      o.method == "gmres"      ? mpi::gmres(A, rhs, krylov)
      : o.method == "bicgstab" ? mpi::bicgstab(A, rhs, krylov)
                               : mpi::cg(A, rhs, {.tol = o.tol, .max_iter = o.max_iter, .preconditioner = diagonal, .M = M.get()});
  MPI_Barrier(MPI_COMM_WORLD);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The true residual, recomputed with one more distributed product.
  std::vector<double> r = b;
  A.spmv(-1.0, res.x, 1.0, r);
  double sums[2] = {0.0, 0.0};
  for (std::size_t i = 0; i < r.size(); ++i) {
    sums[0] += r[i] * r[i];
    sums[1] += b[i] * b[i];
  }
  MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double true_rel = sums[1] > 0.0 ? std::sqrt(sums[0] / sums[1]) : std::sqrt(sums[0]);
  if (world_rank() != 0) return;
  if (o.json) {
    JsonObject line;
    line.string("problem", problem)
        .integer("ranks", world_size())
        .integer("threads", num_threads())
        .integer("n", A.rows())
        .integer("stored", A.global_stored())
        .integer("block_size", o.block_size)
        .string("method", o.method)
        .string("precond", o.precond)
        .boolean("converged", res.converged())
        .string("status", to_string(res.status))
        .integer("iterations", res.iterations)
        .number("rel_residual", res.rel_residual)
        .number("true_rel_residual", true_rel)
        .number("seconds", seconds)
        .number("ms_per_iteration", res.iterations > 0 ? 1e3 * seconds / static_cast<double>(res.iterations) : 0.0)
        .number("setup_seconds", setup);
    print_line(line.str());
    return;
  }
  std::printf("%s: %lld rows, %lld stored %s on %d processes x %d threads, preconditioner %s\n", problem.c_str(),
              static_cast<long long>(A.rows()), static_cast<long long>(A.global_stored()),
              o.block_size == 1 ? "non-zeros (CSR)" : "blocks (BSR)", world_size(), num_threads(), o.precond.c_str());
  std::printf("%s: %s after %lld iterations, relative residual %.3e (recomputed %.3e), %.3f s (%.3f ms per iteration)\n",
              o.method.c_str(), std::string(to_string(res.status)).c_str(), static_cast<long long>(res.iterations), res.rel_residual,
              true_rel, seconds, res.iterations > 0 ? 1e3 * seconds / static_cast<double>(res.iterations) : 0.0);
}

int run(int argc, char** argv) {
  CLI::App app{"Distributed trnsparse solves (run under mpirun).", "trnsparse-mpi"};
  app.set_version_flag("--version", std::string("trnsparse-mpi ") + trnsparse::version_string);
  app.require_subcommand(1);
  auto o = std::make_shared<MpiSolveOptions>();
  CLI::App* cmd =
      app.add_subcommand("solve", "A Krylov solve on a Matrix Market file, the 3D Poisson problem or a named problem");
  // Not CLI::ExistingFile: a file missing on one node must be an error on every process
  // (read_matrix_market agrees on it), not one process leaving.
  cmd->add_option("file", o->file, "Matrix Market file (symmetric positive definite for cg)");
  cmd->add_option("--problem", o->problem,
                  "A named problem (poisson3d:N, elasticity3d:N, convdiff3d:N[:PECLET], ...), generated on every "
                  "process");
  cmd->add_option("--poisson", o->poisson, "Grid points per dimension of the Poisson problem (N^3 rows)")
      ->check(CLI::Range(1, 2048))
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "1 stores CSR, larger sizes BSR")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--rhs", o->rhs, "Right-hand side")->check(CLI::IsMember({"ones", "random"}))->capture_default_str();
  cmd->add_option("--tol", o->tol, "Tolerance on ||b - Ax|| / ||b||")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--maxiter", o->max_iter, "Maximum number of iterations")
      ->check(CLI::Range(index_t{0}, index_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--method", o->method, "Krylov method")
      ->check(CLI::IsMember({"cg", "gmres", "bicgstab"}))
      ->capture_default_str();
  cmd->add_option("--precond", o->precond, "Preconditioner (bjacobi, ic0, ilu0: each process's own)")
      ->check(CLI::IsMember({"none", "jacobi", "bjacobi", "ic0", "ilu0"}))
      ->capture_default_str();
  cmd->add_option("--restart", o->restart, "GMRES restart length")
      ->check(CLI::Range(index_t{1}, index_t{1} << 20))
      ->capture_default_str();
  add_json_flag(*cmd, o->json);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every process parses the same command line; only process 0 speaks.
    std::ostringstream quiet;
    const int status = world_rank() == 0 ? app.exit(e) : app.exit(e, quiet, quiet);
    return status == 0 ? exit_ok : exit_bad_input;
  }
  if (!o->file.empty() && !o->problem.empty())
    throw InvalidArgument("solve: give a Matrix Market file or --problem, not both");
  if (o->block_size == 1) solve<CsrMatrix<double>>(*o);
  else solve<BsrMatrix<double>>(*o);
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) throw IoError("cannot write to standard output");
  return exit_ok;
}

/// Process 0 reports; errors of the library are agreed on by every process (all throw).
int report(const char* kind, const char* what, int status) {
  if (world_rank() == 0) std::fprintf(stderr, "trnsparse-mpi: %s%s\n", kind, what);
  return status;
}

}  // namespace
}  // namespace trnsparse::cli

int main(int argc, char** argv) {
  using namespace trnsparse::cli;
  int provided = 0;  // MPI is called from the main thread only; OpenMP threads run the kernels
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int status = exit_ok;
  try {
    status = run(argc, argv);
  } catch (...) {
    const Failure f = failure_of(std::current_exception());
    status = report(f.kind, f.what.c_str(), f.status);
  }
  MPI_Finalize();
  return status;
}
