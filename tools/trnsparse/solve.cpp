/// @file solve.cpp
/// `trnsparse solve [FILE.mtx] [--rhs ones|random|B.mtx] [--tol T] [--maxiter N]
/// [--method cg|gmres|bicgstab] [--precond none|jacobi|bjacobi|ic0|ilu0|amg] [--restart M]
/// [--blocks K] [--block-size B] [--amg-degree K] [--amg-omega W] [--amg-threshold T]
/// [--amg-max-coarse N] [--amg-fp64] [--poisson N] [--problem SPEC] [--json]`: a Krylov solve (float64,
/// CSR) on a Matrix Market matrix or, without a file, on the embedded 3D Poisson problem
/// poisson3d(N) or the problem --problem names (named_problem: elasticity3d:N,
/// convdiff3d:N:PECLET, ...). The preconditioner's setup is timed apart from the solve.
/// When stderr is a terminal (and without --json), a progress line there
/// shows the iteration, the relative residual, the mean convergence rate per iteration,
/// the elapsed time and an estimate of the time left; a summary follows on stdout.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "progress.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/preconditioners.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse::cli {
namespace {

struct SolveCliOptions {
  std::string file;
  std::string rhs = "ones";
  double tol = 1e-8;
  index_t max_iter = 10000;
  std::string method = "cg";
  std::string precond = "jacobi";
  index_t restart = 30;
  index_t block_size = 0;  ///< bjacobi's blocks; 0: 3 for elasticity3d, else 1
  index_t blocks = 1;      ///< ic0, ilu0: independent row blocks
  index_t poisson = 64;
  std::string problem;  ///< NAME:N, overriding --poisson
  // amg's tuning (AmgOptions); unset keeps the library's default.
  std::optional<index_t> amg_degree, amg_max_coarse;
  std::optional<double> amg_omega, amg_threshold;
  bool amg_fp64 = false;
  bool json = false;
};

/// The embedded problem named by --problem (any of named_problem's) or, without it,
/// poisson3d(--poisson); and its name for the output.
std::pair<CsrMatrix<double>, std::string> embedded_problem(const SolveCliOptions& o) {
  if (o.problem.empty()) return {poisson3d<double>(o.poisson), "poisson3d(" + std::to_string(o.poisson) + ")"};
  try {
    return {named_problem<double>(o.problem), o.problem};
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("--problem: ") + e.what());
  }
}

/// The right-hand side: all ones, a fixed pseudo-random vector in [-1, 1), or the single
/// column of a Matrix Market file with n rows.
std::vector<double> right_hand_side(const std::string& rhs, index_t n) {
  if (rhs == "ones") return std::vector<double>(static_cast<std::size_t>(n), 1.0);
  if (rhs == "random") return fixed_random_vector(n);
  const Dense<double> d = to_dense(read_matrix_market(rhs).entries);
  if (d.rows() != n || d.cols() != 1)
    throw InvalidArgument(rhs + ": right-hand side is " + std::to_string(d.rows()) + " x " + std::to_string(d.cols()) +
                          ", expected " + std::to_string(n) + " x 1");
  const std::span<const double> v = d.values();
  return {v.begin(), v.end()};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The edge n of an embedded elasticity3d:n problem, or 0 for any other matrix.
index_t elasticity_edge(const SolveCliOptions& o) {
  if (!o.file.empty() || !o.problem.starts_with("elasticity3d:")) return 0;
  return std::stoll(o.problem.substr(13));  // named_problem has parsed it already
}

/// The preconditioner --precond names, built for A (null for none and for jacobi, which
/// CG takes as its diagonal and GMRES and BiCGStab as a point block Jacobi). AMG on
/// elasticity3d aggregates nodes of 3 unknowns with the rigid-body modes as near-nullspace.
std::unique_ptr<Preconditioner<double>> make_preconditioner(const SolveCliOptions& o, const CsrMatrix<double>& A) {
  if (o.precond == "amg") {
    AmgOptions<double> options{.block_size = o.block_size};
    if (o.amg_degree) options.smoother_degree = *o.amg_degree;
    if (o.amg_max_coarse) options.max_coarse = *o.amg_max_coarse;
    if (o.amg_omega) options.prolongator_omega = *o.amg_omega;
    if (o.amg_threshold) options.strength_threshold = *o.amg_threshold;
    if (o.amg_fp64) options.mixed_precision = false;
    Dense<double> modes;
    if (const index_t n = elasticity_edge(o); n > 0) {
      modes = rigid_body_modes<double>(elasticity3d_coordinates(n));
      options.block_size = 3;
      options.near_nullspace = modes.view();
    }
    return std::make_unique<Amg<double>>(A, options);
  }
  if (o.precond == "ic0") return std::make_unique<IncompleteFactorization<double>>(ic0(A, o.blocks));
  if (o.precond == "ilu0") return std::make_unique<IncompleteFactorization<double>>(ilu0(A, o.blocks));
  const bool blocks = o.precond == "bjacobi" || (o.precond == "jacobi" && o.method != "cg");
  if (!blocks) return nullptr;
  index_t b = o.precond == "jacobi" ? 1 : o.block_size;
  if (b == 0) b = elasticity_edge(o) > 0 ? 3 : 1;
  if (A.rows() % b != 0)
    throw InvalidArgument("--block-size " + std::to_string(b) + " does not divide the matrix's " +
                          std::to_string(A.rows()) + " rows");
  return std::make_unique<BlockJacobi<double>>(A, b);
}

void run_solve(const SolveCliOptions& o) {
  const bool from_file = !o.file.empty();
  const auto loaded = from_file ? std::pair{to_csr(read_matrix_market(o.file).entries), o.file} : embedded_problem(o);
  const CsrMatrix<double>& A = loaded.first;
  const std::string& problem = loaded.second;
  const LinearOperator<double> op(A);
  const std::vector<double> b = right_hand_side(o.rhs, A.rows());

  const auto setup_start = std::chrono::steady_clock::now();
  const std::vector<double> diagonal =
      o.precond == "jacobi" && o.method == "cg" ? jacobi_preconditioner(A) : std::vector<double>{};
  const std::unique_ptr<Preconditioner<double>> M = make_preconditioner(o, A);
  const double setup_seconds = seconds_since(setup_start);

  Progress progress(!o.json);
  std::function<bool(index_t, double)> callback;
  double first = std::nan("");
  if (progress.on())
    callback = [&](index_t it, double rel) {
      if (it == 1) first = rel;
      const double rate = it > 1 ? std::pow(rel / first, 1.0 / static_cast<double>(it - 1)) : std::nan("");
      char status[128];
      std::snprintf(status, sizeof status, "%s: iteration %lld, residual %.3e, rate %.4f", o.method.c_str(),
                    static_cast<long long>(it), rel, rate);
      progress.update(status, Progress::log_fraction(first, rel, o.tol));
      return true;
    };
  const auto start = std::chrono::steady_clock::now();
  const std::span<const double> rhs(b);
  const KrylovOptions<double> krylov{
      .tol = o.tol, .max_iter = o.max_iter, .restart = o.restart, .M = M.get(), .callback = callback};
  const SolveResult<double> res =
      o.method == "gmres"      ? gmres(op, rhs, krylov)
      : o.method == "bicgstab" ? bicgstab(op, rhs, krylov)
                               : cg(op, rhs,
                                    {.tol = o.tol,
                                     .max_iter = o.max_iter,
                                     .preconditioner = diagonal,
                                     .callback = callback,
                                     .M = M.get()});
  const double seconds = seconds_since(start);
  progress.clear();

  if (o.json) {
    JsonObject line;
    line.string("problem", problem)
        .integer("n", A.rows())
        .integer("nnz", A.nnz())
        .string("method", o.method)
        .string("precond", o.precond)
        .boolean("converged", res.converged())
        .string("status", to_string(res.status))
        .integer("iterations", res.iterations)
        .number("rel_residual", res.rel_residual)
        .number("setup_seconds", setup_seconds)
        .number("seconds", seconds);
    print_line(line.str());
    return;
  }
  std::printf("%s: %lld x %lld, %lld non-zeros, preconditioner %s (setup %.3f s)\n", problem.c_str(),
              static_cast<long long>(A.rows()), static_cast<long long>(A.cols()), static_cast<long long>(A.nnz()),
              o.precond.c_str(), setup_seconds);
  std::printf("%s: %s after %lld iterations, relative residual %.3e, %.3f s (%.3f ms per iteration)\n",
              o.method.c_str(), std::string(to_string(res.status)).c_str(), static_cast<long long>(res.iterations),
              res.rel_residual,
              seconds, res.iterations > 0 ? 1e3 * seconds / static_cast<double>(res.iterations) : 0.0);
}

}  // namespace

Subcommand add_solve(CLI::App& app) {
  auto o = std::make_shared<SolveCliOptions>();
  CLI::App* command = app.add_subcommand(
      "solve", "A Krylov solve (CG, GMRES, BiCGStab) on a Matrix Market file or, without one, on the 3D Poisson problem");
  command->add_option("file", o->file, "Matrix Market file of a square matrix (symmetric positive definite for cg)")
      ->check(CLI::ExistingFile);
  command->add_option("--rhs", o->rhs, "Right-hand side: ones, random, or a Matrix Market n x 1 file")
      ->capture_default_str();
  command->add_option("--tol", o->tol, "Tolerance on ||b - Ax|| / ||b||")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command->add_option("--maxiter", o->max_iter, "Maximum number of iterations")
      ->check(CLI::Range(index_t{0}, index_t{1} << 40))
      ->capture_default_str();
  command->add_option("--method", o->method, "Krylov method (gmres and bicgstab for nonsymmetric matrices)")
      ->check(CLI::IsMember({"cg", "gmres", "bicgstab"}))
      ->capture_default_str();
  command->add_option("--precond", o->precond,
                      "Preconditioner: none, jacobi, bjacobi (inverted diagonal blocks), ic0 (incomplete Cholesky), "
                      "ilu0 (incomplete LU), amg (smoothed-aggregation multigrid, for cg)")
      ->check(CLI::IsMember({"none", "jacobi", "bjacobi", "ic0", "ilu0", "amg"}))
      ->capture_default_str();
  command->add_option("--restart", o->restart, "GMRES's basis size")
      ->check(CLI::Range(index_t{1}, index_t{1000}))
      ->capture_default_str();
  command->add_option("--blocks", o->blocks,
                      "ic0, ilu0: factor this many independent row blocks (block Jacobi), solved side by side on "
                      "the threads")
      ->check(CLI::Range(index_t{1}, index_t{1} << 20))
      ->capture_default_str();
  command->add_option("--block-size", o->block_size,
                      "bjacobi's block size, and amg's unknowns per node (default: 3 for elasticity3d, else 1); "
                      "it must divide the rows")
      ->check(CLI::Range(index_t{1}, index_t{64}));
  const AmgOptions<double> amg_default;  // the help's defaults are the library's
  const auto with_default = [](const char* what, auto value) {
    std::ostringstream s;
    s << what << " (default " << value << ")";
    return s.str();
  };
  command->add_option("--amg-degree", o->amg_degree,
                      with_default("amg: Chebyshev steps before and after each coarse correction",
                                   amg_default.smoother_degree))
      ->check(CLI::Range(index_t{1}, index_t{64}));
  command->add_option("--amg-omega", o->amg_omega,
                      with_default("amg: the prolongator's damping, P = (I - omega/lambda_max D^-1 A) P_tentative",
                                   amg_default.prolongator_omega))
      ->check(CLI::Range(1e-6, 10.0));
  command->add_option("--amg-threshold", o->amg_threshold,
                      with_default("amg: strength of connection theta, ||A_ij||^2 > theta^2 ||A_ii|| ||A_jj||",
                                   amg_default.strength_threshold))
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--amg-max-coarse", o->amg_max_coarse,
                      with_default("amg: rows at which coarsening stops; the last level is solved by dense Cholesky",
                                   amg_default.max_coarse))
      ->check(CLI::Range(index_t{1}, index_t{1} << 20));
  command->add_flag("--amg-fp64", o->amg_fp64,
                    "amg: the V-cycle reads its operators' values in float64 (default: fp32 copies of the point levels')");
  command->add_option("--poisson", o->poisson, "Grid points per dimension of the embedded problem (N^3 rows)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--problem", o->problem,
                      "An embedded problem instead: poisson3d:N, elasticity3d:N (3D linear elasticity on N^3 "
                      "hexahedra, 3 unknowns per node), convdiff3d:N[:PECLET] (upwind convection-diffusion, "
                      "nonsymmetric), block_stencil3d:N[:FIELDS] or random_blocks:N:B:DENSITY "
                      "(CG needs a symmetric positive definite one)");
  add_json_flag(*command, o->json);
  return {command, [o] { run_solve(*o); }};
}

}  // namespace trnsparse::cli
