// The `solve` section: Jacobi-preconditioned conjugate gradients (fp64) on the 3D Poisson
// problem, once with the full CSR matrix and once with its stored upper triangle (the
// half-storage symmetric product), next to (same run, same matrix, right-hand side and
// tolerance) Eigen's ConjugateGradient with a diagonal preconditioner on OpenMP, and to
// the memory-traffic bound: the bytes an iteration must move over the STREAM triad
// bandwidth measured in this run, and to PETSc's KSPCG through the trnsparse-mpi-bench
// helper when it is built (`make bench-deps`; null otherwise). Every solver runs in
// kRounds interleaved rounds and keeps its fastest. Then block CG on k = 16 right-hand
// sides against 16 single solves.
#include "solve.hpp"

#include <Eigen/IterativeLinearSolvers>
#include <Eigen/SparseCore>
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "attention.hpp"
#include "baselines.hpp"
#include "common.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

constexpr double kTol = 1e-8;       // on ||b - A x|| / ||b||, for trnsparse and Eigen alike
constexpr index_t kMaxIter = 2000;  // Poisson 150³ with Jacobi converges in a few hundred
constexpr index_t kRhs = 16;        // right-hand sides of the multi-RHS row
constexpr int kRounds = 3;          // interleaved runs of every solver (solve_section)
/// Grid edge of the multi-RHS row (at most --poisson): 16 single solves on 150³ take minutes.
constexpr index_t kMultiRhsEdge = 64;

/// ||b - A x|| / ||b||, recomputed from x (not CG's recurred residual).
double true_residual(const CsrMatrix<double>& A, std::span<const double> b, std::span<const double> x) {
  std::vector<double> r(b.begin(), b.end());
  spmv(-1.0, A, x, 1.0, std::span(r));
  double rr = 0, bb = 0;
  for (std::size_t i = 0; i < r.size(); ++i) rr += r[i] * r[i], bb += b[i] * b[i];
  return std::sqrt(rr / bb);
}

/// Bytes one Jacobi-preconditioned CG iteration on k right-hand sides must move through
/// memory, for the stored matrix `S` (the full matrix or one triangle) with n rows; for
/// k = 1:
///   product q = A p      the stored matrix once (values, column indices as read:
///                        index_bytes, row pointers);
///                        p read once (a 7-point stencil's neighbours come from cache)
///                        and q written once: 2n values
///   pᵀq                  summed while q is still in cache: nothing more
///   update               reads x, p, r, q, M⁻¹; writes x, r (with rᵀr, rᵀz): 7n
///   direction            p = M⁻¹ r + β p reads r, M⁻¹, p; writes p: 4n
/// 13n vector values in all, each store counted once (as the STREAM triad counts its
/// stores). For k columns every term but M⁻¹ is k times larger: (11k + 2) n values. Not
/// counted, since the storage does not require them: the symmetric product's per-chunk
/// accumulation windows (pᵀq is fused into both products).
double cg_iteration_bytes(const CsrMatrix<double>& S, index_t k = 1) {
  const double n = static_cast<double>(S.rows());
  return static_cast<double>(S.nnz()) * (sizeof(double) + index_bytes(S)) + (n + 1) * sizeof(index_t) +
         (11.0 * static_cast<double>(k) + 2.0) * n * sizeof(double);
}

struct Run {
  index_t iterations = 0;
  std::string status;
  double iter_ms = NAN, total_ms = NAN, rel_residual = NAN;
};

/// One trnsparse solve: total = preconditioner + cg (the structure's one-time analyses,
/// 32-bit indices and symmetric chunks, are built in the first round's solve only); per
/// iteration = the steady state, from the end of iteration 1 (timed in the callback) to
/// the end of the solve.
Run trnsparse_cg(const CsrMatrix<double>& A, const CsrMatrix<double>& stored, const LinearOperator<double>& op,
                 std::span<const double> b) {
  const Clock::time_point t0 = Clock::now();
  Clock::time_point first = t0;
  const std::vector<double> M = jacobi_preconditioner(stored);
  const CgOptions<double> options{.tol = kTol,
                                  .max_iter = kMaxIter,
                                  .preconditioner = M,
                                  .callback = [&first](index_t it, double) {
                                    if (it == 1) first = Clock::now();
                                    return true;
                                  }};
  const SolveResult<double> res = cg(op, b, options);
  const Clock::time_point t1 = Clock::now();
  Run run{res.iterations, std::string(to_string(res.status))};
  run.total_ms = ms_between(t0, t1);
  run.iter_ms = res.iterations > 1 ? ms_between(first, t1) / static_cast<double>(res.iterations - 1)
                                   : run.total_ms / static_cast<double>(std::max<index_t>(res.iterations, 1));
  run.rel_residual = true_residual(A, b, res.x);
  return run;
}

/// Eigen's ConjugateGradient on a copy of A as SparseMatrix<double, RowMajor> (int
/// indices): total = compute (the preconditioner) + solve; per iteration = solve /
/// iterations (which includes the initial residual, one product in several hundred).
/// Iterations are counted as trnsparse counts them, one per product: Eigen's
/// `iterations()` leaves out the last one when it converges (it breaks out of its loop
/// before counting it; b is not 0 here, so that loop always runs).
Run eigen_cg(const CsrMatrix<double>& A, std::span<const double> b, int threads) {
  using Matrix = Eigen::SparseMatrix<double, Eigen::RowMajor>;
  if (A.nnz() > INT_MAX) throw InvalidArgument("bench: the Eigen baseline needs nnz <= INT_MAX (--poisson too large)");
  Matrix E(A.rows(), A.cols());
  E.resizeNonZeros(A.nnz());
  const auto narrow = [](index_t v) { return static_cast<int>(v); };
  std::ranges::transform(A.row_ptr(), E.outerIndexPtr(), narrow);
  std::ranges::transform(A.col_indices(), E.innerIndexPtr(), narrow);
  std::ranges::copy(A.values(), E.valuePtr());
  Eigen::setNbThreads(threads);
  Eigen::ConjugateGradient<Matrix, Eigen::Lower | Eigen::Upper, Eigen::DiagonalPreconditioner<double>> solver;
  solver.setTolerance(kTol);
  solver.setMaxIterations(kMaxIter);
  const Eigen::Map<const Eigen::VectorXd> rhs(b.data(), static_cast<Eigen::Index>(b.size()));
  const Clock::time_point t0 = Clock::now();
  solver.compute(E);
  const Clock::time_point t1 = Clock::now();
  const Eigen::VectorXd x = solver.solve(rhs);
  const Clock::time_point t2 = Clock::now();
  const bool converged = solver.info() == Eigen::Success;
  Run run{static_cast<index_t>(solver.iterations()) + (converged ? 1 : 0),
          converged ? "converged" : (solver.info() == Eigen::NoConvergence ? "max_iterations" : "breakdown")};
  run.total_ms = ms_between(t0, t2);
  run.iter_ms = ms_between(t1, t2) / static_cast<double>(std::max<index_t>(run.iterations, 1));
  run.rel_residual = true_residual(A, b, std::span<const double>(x.data(), b.size()));
  return run;
}

/// PETSc's KSPCG + PCJACOBI on the same problem (b = ones, tolerance kTol): the helper
/// binary trnsparse-mpi-bench, built next to this one when PETSc is installed (`make
/// bench-deps`), under mpirun with one process per thread (PETSc runs one thread per
/// process). Its petsc_iter_ms and petsc_iterations, or an empty row when the helper or
/// mpirun is missing or fails.
Row petsc_child(const Options& o, int threads) {
  if (o.self.empty()) return {};
  const std::filesystem::path helper = std::filesystem::path(o.self).parent_path() / "trnsparse-mpi-bench";
  if (!std::filesystem::exists(helper)) return {};
  const std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np " +
                          std::to_string(threads) + " '" + helper.string() + "' --poisson " +
                          std::to_string(o.poisson_n) + " --reps 1 --tol " + num(kTol) + " 2>/dev/null";
  return child_row(cmd, {"petsc_iter_ms", "petsc_iterations"});
}

/// The faster of two runs of the same solve (a fresh run: `best` is empty).
Run faster(const Run& best, const Run& run) { return std::isnan(best.iter_ms) || run.iter_ms < best.iter_ms ? run : best; }

void storage_row(const Row& head, const std::string& problem, const char* storage, const CsrMatrix<double>& A,
                 const CsrMatrix<double>& stored, const Run& t, const Run& eigen, const Row& petsc, double stream,
                 const Emit& emit) {
  const double petsc_ms = field(petsc, "petsc_iter_ms");  // NaN when missing; fmin skips NaN
  const double bytes = cg_iteration_bytes(stored);
  const double bound_ms = bytes / stream / 1e6;
  Row row = head;
  row.insert(row.end(), {{"problem", str(problem)},
                         {"storage", str(storage)},
                         {"n", num(A.rows())},
                         {"nnz", num(stored.nnz())},
                         {"tol", num(kTol)},
                         {"iterations", num(t.iterations)},
                         {"status", str(t.status)},
                         {"rel_residual", num(t.rel_residual)},
                         {"trnsparse_iter_ms", num(t.iter_ms)},
                         {"trnsparse_total_ms", num(t.total_ms)},
                         {"eigen_iter_ms", num(eigen.iter_ms)},
                         {"eigen_total_ms", num(eigen.total_ms)},
                         {"eigen_iterations", num(eigen.iterations)},
                         {"eigen_status", str(eigen.status)},
                         {"eigen_rel_residual", num(eigen.rel_residual)},
                         {"petsc_iter_ms", num(petsc_ms)},
                         {"petsc_iterations", num(field(petsc, "petsc_iterations"))},
                         {"bytes_per_iter", num(bytes)},
                         {"stream_gbps", num(stream)},
                         {"bound_iter_ms", num(bound_ms)},
                         {"iter_vs_bound", num(t.iter_ms / bound_ms)},
                         {"speedup_vs_eigen", num(eigen.iter_ms / t.iter_ms)},
                         {"speedup_vs_best", num(std::fmin(eigen.iter_ms, petsc_ms) / t.iter_ms)}});
  emit(row);
}

/// Block CG on kRhs random right-hand sides against kRhs single solves of the same
/// columns (full CSR, Jacobi), each timed once. `bound_speedup_vs_single` is what the
/// memory traffic allows: kRhs single iterations' bytes over one block iteration's (the
/// matrix is read once for all columns; the vectors are not shared).
void multi_rhs_row(const Options& o, const Row& head, const Emit& emit) {
  const index_t edge = std::min(o.poisson_n, kMultiRhsEdge);
  const CsrMatrix<double> A = poisson3d<double>(edge);
  const index_t n = A.rows();
  const LinearOperator<double> op(A);
  const std::vector<double> M = jacobi_preconditioner(A);
  const CgOptions<double> options{.tol = kTol, .max_iter = kMaxIter, .preconditioner = M};
  Rng rng{7};
  Dense<double> B(n, kRhs);
  for (double& v : B.values()) v = rng.symmetric();
  std::vector<std::vector<double>> columns(static_cast<std::size_t>(kRhs),
                                           std::vector<double>(static_cast<std::size_t>(n)));
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < kRhs; ++j) columns[static_cast<std::size_t>(j)][static_cast<std::size_t>(i)] = B(i, j);

  Clock::time_point t0 = Clock::now();
  const BlockSolveResult<double> block = cg(op, B.view(), options);
  const double multi_ms = ms_between(t0, Clock::now());
  std::vector<SolveResult<double>> single;
  t0 = Clock::now();
  for (const std::vector<double>& b : columns) single.push_back(cg(op, std::span<const double>(b), options));
  const double single_ms = ms_between(t0, Clock::now());

  index_t iterations = 0, single_iterations = 0, converged = 0;
  double worst = 0, max_diff = 0;
  std::vector<double> x(static_cast<std::size_t>(n));
  for (index_t j = 0; j < kRhs; ++j) {
    const SolveResult<double>& s = single[static_cast<std::size_t>(j)];
    for (index_t i = 0; i < n; ++i) {
      x[static_cast<std::size_t>(i)] = block.X(i, j);
      max_diff = std::max(max_diff, std::fabs(block.X(i, j) - s.x[static_cast<std::size_t>(i)]));
    }
    worst = std::max(worst, true_residual(A, columns[static_cast<std::size_t>(j)], x));
    iterations = std::max(iterations, block.iterations[static_cast<std::size_t>(j)]);
    single_iterations = std::max(single_iterations, s.iterations);
    converged += block.status[static_cast<std::size_t>(j)] == SolveStatus::converged ? 1 : 0;
  }
  Row row = head;
  row.insert(row.end(), {{"problem", str("poisson3d_" + std::to_string(edge))},
                         {"storage", str("full")},
                         {"n", num(n)},
                         {"nnz", num(A.nnz())},
                         {"tol", num(kTol)},
                         {"k", num(kRhs)},
                         {"iterations", num(iterations)},
                         {"single_iterations", num(single_iterations)},
                         {"converged_columns", num(converged)},
                         {"rel_residual", num(worst)},
                         {"max_abs_diff_vs_single", num(max_diff)},
                         {"multi_rhs_ms", num(multi_ms)},
                         {"single_solves_ms", num(single_ms)},
                         {"speedup_vs_single", num(single_ms / multi_ms)},
                         {"bound_speedup_vs_single",
                          num(static_cast<double>(kRhs) * cg_iteration_bytes(A) / cg_iteration_bytes(A, kRhs))}});
  emit(row);
}

}  // namespace

void solve_section(const Options& o, const Row& head_in, const Emit& emit) {
  Row head = head_in;
  for (auto& [key, value] : head)
    if (key == "dtype") value = str("fp64");  // the section always solves in fp64
  const int threads = head_threads(head);
  const CsrMatrix<double> A = poisson3d<double>(o.poisson_n);
  const CsrMatrix<double> U = triangle(A, Triangle::upper);
  const LinearOperator<double> full(A), upper(U, Triangle::upper);
  const std::vector<double> b(static_cast<std::size_t>(A.rows()), 1.0);
  const std::string problem = "poisson3d_" + std::to_string(o.poisson_n);
  // This host's memory bandwidth drifts by tens of percent within a minute: every solver
  // (and STREAM) runs once per round, rounds interleave them, and each keeps its best.
  Stream yardstick(index_t{1} << 25, threads);
  double stream = 0;
  Run eigen, ours_full, ours_upper;
  double petsc_ms = NAN;
  Row petsc;
  for (int round = 0; round < kRounds; ++round) {
    for (int r = 0; r <= o.reps; ++r) stream = std::fmax(stream, yardstick.triad_gbps());
    eigen = faster(eigen, eigen_cg(A, b, threads));
    const Row p = petsc_child(o, threads);
    if (const double ms = field(p, "petsc_iter_ms"); std::isnan(petsc_ms) || ms < petsc_ms) petsc = p, petsc_ms = ms;
    ours_full = faster(ours_full, trnsparse_cg(A, A, full, b));
    ours_upper = faster(ours_upper, trnsparse_cg(A, U, upper, b));
  }
  storage_row(head, problem, "full", A, A, ours_full, eigen, petsc, stream, emit);
  storage_row(head, problem, "upper", A, U, ours_upper, eigen, petsc, stream, emit);
  multi_rhs_row(o, head, emit);
}

}  // namespace trnsparse::bench
