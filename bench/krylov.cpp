// The `krylov` section: time to solution (preconditioner setup + solve, to a relative
// residual of 1e-8, b = ones) of our Krylov methods and preconditioners against PETSc's
// on the same problems in the same run (docs/solvers.md).
//
// Ours (Jacobi, block Jacobi, IC(0) and AMG for CG; ILU(0) and block Jacobi for GMRES and
// BiCGStab) run in this process on the library's threads; PETSc's run in trnsparse-mpi-bench
// --ksp under mpirun with one process per thread (PETSc runs one thread per process),
// with its best preconditioners for the problem: GAMG (with the rigid-body modes for
// elasticity), hypre BoomerAMG and block Jacobi with ICC for symmetric positive definite
// problems, block Jacobi with ILU for nonsymmetric ones. Each configuration is timed
// `rounds` times (setup and solve apart, every round building its preconditioner anew);
// rows carry the medians and the spread of the totals. A last row per problem gives our
// best total over PETSc's best.
#include "krylov.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/preconditioners.hpp"
#include "trnsparse/runtime.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse::bench {

namespace {

constexpr double kTol = 1e-8;

struct Config {
  const char* method;
  const char* precond;
};

/// Our configurations for a symmetric positive definite problem and for a nonsymmetric one.
/// "bjacobi-ic0" / "bjacobi-ilu0": the factorisation in one independent block per thread,
/// as PETSc's block Jacobi has one per process.
const std::vector<Config> kOursSpd{{"cg", "jacobi"}, {"cg", "bjacobi"}, {"cg", "ic0"}, {"cg", "bjacobi-ic0"},
                                   {"cg", "amg"}};
const std::vector<Config> kOursNonsymmetric{{"gmres", "ilu0"},          {"gmres", "bjacobi-ilu0"},
                                            {"bicgstab", "ilu0"},       {"bicgstab", "bjacobi-ilu0"},
                                            {"gmres", "bjacobi"}};
/// PETSc's (its --ksp and --pc names).
const std::vector<Config> kPetscSpd{{"cg", "gamg"}, {"cg", "hypre"}, {"cg", "bjacobi-icc"}};
const std::vector<Config> kPetscNonsymmetric{{"gmres", "bjacobi-ilu"}, {"bcgs", "bjacobi-ilu"}};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// One round of our configuration: a fresh preconditioner, then the solve.
struct Outcome {
  double setup = 0.0, solve = 0.0, rel_residual = NAN;
  index_t iterations = 0;
  SolveStatus status = SolveStatus::max_iterations;
};

Outcome run_ours(const Config& c, const CsrMatrix<double>& A, index_t node_block, const Dense<double>& modes,
                 std::span<const double> b) {
  Outcome out;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Preconditioner<double>> M;
  std::vector<double> diagonal;
  const std::string p = c.precond;
  if (p == "jacobi") diagonal = jacobi_preconditioner(A);
  else if (p == "bjacobi") M = std::make_unique<BlockJacobi<double>>(A, node_block);
  else if (p == "ic0") M = std::make_unique<IncompleteFactorization<double>>(ic0(A));
  else if (p == "ilu0") M = std::make_unique<IncompleteFactorization<double>>(ilu0(A));
  else if (p == "bjacobi-ic0") M = std::make_unique<IncompleteFactorization<double>>(ic0(A, num_threads()));
  else if (p == "bjacobi-ilu0") M = std::make_unique<IncompleteFactorization<double>>(ilu0(A, num_threads()));
  else if (p == "amg") {
    AmgOptions<double> options{.block_size = node_block};
    if (modes.rows() > 0) options.near_nullspace = modes.view();
    M = std::make_unique<Amg<double>>(A, options);
  }
  out.setup = seconds_since(t0);
  const LinearOperator<double> op(A);
  const auto t1 = std::chrono::steady_clock::now();
  const std::string m = c.method;
  const KrylovOptions<double> k{.tol = kTol, .max_iter = 100000, .restart = 30, .M = M.get()};
  const SolveResult<double> res =
      m == "gmres"      ? gmres(op, b, k)
      : m == "bicgstab" ? bicgstab(op, b, k)
                        : cg(op, b, {.tol = kTol, .max_iter = 100000, .preconditioner = diagonal, .M = M.get()});
  out.solve = seconds_since(t1);
  out.rel_residual = res.rel_residual;
  out.iterations = res.iterations;
  out.status = res.status;
  return out;
}

/// PETSc's row for a configuration (empty when the helper or mpirun is missing or fails).
Row run_petsc(const Options& o, const Config& c, const std::string& problem, int ranks, int rounds) {
  if (o.self.empty()) return {};
  const std::filesystem::path helper = std::filesystem::path(o.self).parent_path() / "trnsparse-mpi-bench";
  if (!std::filesystem::exists(helper)) return {};
  std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np ";
  cmd += std::to_string(ranks) + " '" + helper.string() + "' --ksp " + c.method + " --pc " + c.precond +
         " --problem '" + problem + "' --rtol " + num(kTol) + " --reps " + std::to_string(rounds) + " 2>/dev/null";
  return child_row(cmd, {"iterations", "converged", "rel_residual", "setup_seconds", "seconds", "total_seconds"});
}

}  // namespace

void krylov_section(const Options& o, const Row& head_in, const Emit& emit) {
  Row head = head_in;  // the solves run in fp64 whatever --dtype says
  for (auto& [key, value] : head)
    if (key == "dtype") value = str("fp64");
  const std::vector<std::string> problems =
      o.problems.empty() ? std::vector<std::string>{"poisson3d:48", "elasticity3d:16", "convdiff3d:48:1"} : o.problems;
  const int threads = num_threads();
  for (const std::string& problem : problems) {
    const CsrMatrix<double> A = named_problem<double>(problem);
    const bool spd = problem.rfind("convdiff3d", 0) != 0 && problem.rfind("block_stencil3d", 0) != 0;
    const bool elasticity = problem.rfind("elasticity3d:", 0) == 0;
    const index_t node_block = elasticity ? 3 : 1;
    // AMG's near-nullspace for elasticity: the rigid-body modes of the mesh's nodes.
    const Dense<double> modes =
        elasticity ? rigid_body_modes<double>(elasticity3d_coordinates(std::stoll(problem.substr(13)))) : Dense<double>();
    const std::vector<double> b(static_cast<std::size_t>(A.rows()), 1.0);
    const int rounds = A.rows() < 1'000'000 ? std::max(1, std::min(o.reps, 3)) : 1;
    double ours_best = INFINITY, petsc_best = INFINITY;
    std::string ours_name, petsc_name;
    for (const Config& c : spd ? kOursSpd : kOursNonsymmetric) {
      std::vector<Outcome> runs;
      for (int r = 0; r < rounds; ++r) runs.push_back(run_ours(c, A, node_block, modes, b));
      std::vector<double> totals, setups, solves;
      for (const Outcome& x : runs) {
        totals.push_back(x.setup + x.solve);
        setups.push_back(x.setup);
        solves.push_back(x.solve);
      }
      const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const double total = median(totals);
      const auto [lo, hi] = std::minmax_element(totals.begin(), totals.end());
      const Outcome& last = runs.back();
      Row row = head;
      row.insert(row.end(), {{"problem", str(problem)},
                             {"n", num(A.rows())},
                             {"nnz", num(A.nnz())},
                             {"solver", str("trnsparse")},
                             {"threads", num(threads)},
                             {"method", str(c.method)},
                             {"precond", str(c.precond)},
                             {"iterations", num(last.iterations)},
                             {"converged", last.status == SolveStatus::converged ? "true" : "false"},
                             {"rel_residual", num(last.rel_residual)},
                             {"setup_seconds", num(median(setups))},
                             {"seconds", num(median(solves))},
                             {"total_seconds", num(total)},
                             {"total_spread", num(total > 0 ? (*hi - *lo) / total : 0.0)},
                             {"rounds", num(rounds)}});
      emit(row);
      if (last.status == SolveStatus::converged && total < ours_best) {
        ours_best = total;
        ours_name = std::string(c.method) + "+" + c.precond;
      }
    }
    for (const Config& c : spd ? kPetscSpd : kPetscNonsymmetric) {
      const Row petsc = run_petsc(o, c, problem, threads, rounds);
      Row row = head;
      row.insert(row.end(), {{"problem", str(problem)},
                             {"n", num(A.rows())},
                             {"nnz", num(A.nnz())},
                             {"solver", str("petsc")},
                             {"ranks", num(threads)},
                             {"method", str(c.method)},
                             {"precond", str(c.precond)}});
      if (petsc.empty()) row.emplace_back("error", str("trnsparse-mpi-bench or mpirun missing, or the solve failed"));
      row.insert(row.end(), petsc.begin(), petsc.end());
      emit(row);
      const double total = field(petsc, "total_seconds");
      if (field(petsc, "rel_residual") <= kTol * 1.01 && total < petsc_best) {
        petsc_best = total;
        petsc_name = std::string(c.method) + "+" + c.precond;
      }
    }
    Row summary = head;
    summary.insert(summary.end(), {{"problem", str(problem)},
                                   {"summary", "true"},
                                   {"ours_best", str(ours_name)},
                                   {"ours_total_seconds", num(ours_best)},
                                   {"petsc_best", str(petsc_name)},
                                   {"petsc_total_seconds", num(petsc_best)},
                                   {"ours_over_petsc", num(ours_best / petsc_best)}});
    emit(summary);
  }
}

}  // namespace trnsparse::bench
