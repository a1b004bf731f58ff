/// @file solvers.hpp
/// Iterative solvers over a square linear operator: conjugate gradients (one or many
/// right-hand sides, a Jacobi diagonal or any Preconditioner), GMRES(m) and BiCGStab for
/// nonsymmetric systems (right preconditioning), Chebyshev and Richardson iterations,
/// and power iteration. fp32 and fp64. Preconditioners: trnsparse/preconditioners.hpp.
///
///     auto A = trnsparse::poisson3d<double>(32);
///     std::vector<double> b(A.rows(), 1.0);
///     const auto M = trnsparse::jacobi_preconditioner(A);
///     auto res = trnsparse::cg(trnsparse::LinearOperator<double>(A), b, {.tol = 1e-8, .preconditioner = M});
///     if (res.status == trnsparse::SolveStatus::converged) use(res.x);
///
/// Every reduction (dot products, norms) sums fixed chunks of rows in order and then the
/// chunk sums in order, so a solve gives bitwise identical results for any thread count.
/// The vector updates of an iteration and the reductions they need share one pass over
/// memory; for a CSR operator, pᵀAp is summed inside the product's pass (chunk by chunk,
/// while q = Ap is still in cache).
#pragma once

#include <concepts>
#include <exception>
#include <functional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"

namespace trnsparse {

/// Value types the solvers run in.
template <class T>
concept SolverValue = std::same_as<T, float> || std::same_as<T, double>;

template <SolverValue T> class Preconditioner;  // trnsparse/preconditioners.hpp

/// A square n x n operator applied to n x k blocks: `apply(X, Y)` writes Y = A X.
/// Built from a CSR or BSR matrix, from the stored triangle of a symmetric CSR matrix
/// (half the bytes per product), or from any callable. Matrices are viewed, not copied:
/// they must outlive the operator (temporaries are rejected at compile time).
template <SolverValue T>
class LinearOperator {
public:
  /// Writes Y = A X; X and Y are n x k (k >= 1) and do not overlap.
  using Apply = std::function<void(DenseView<const T> X, DenseView<T> Y)>;

  /// A user operator of size n. @throw InvalidArgument for n < 0 or an empty `apply`.
  LinearOperator(index_t n, Apply apply);
  /// @throw InvalidArgument unless A is square.
  explicit LinearOperator(const CsrMatrix<T>& A);
  explicit LinearOperator(const BsrMatrix<T>& A);
  /// The symmetric matrix whose `uplo` triangle (with the diagonal) A stores, applied
  /// with `spmv_symmetric` column by column (which throws IndexError, on the first
  /// product, for an entry outside `uplo`). @throw InvalidArgument unless A is square.
  LinearOperator(const CsrMatrix<T>& A, Triangle uplo);
  explicit LinearOperator(CsrMatrix<T>&&) = delete;
  explicit LinearOperator(BsrMatrix<T>&&) = delete;
  LinearOperator(CsrMatrix<T>&&, Triangle) = delete;

  /// How the rows of a distributed operator are spread over processes (the MPI layer,
  /// trnsparse/mpi.hpp, builds it). The operator then holds this process's rows
  /// [offset, offset + size()) of a global_size-row problem, vectors given to the solvers
  /// are this process's rows, and every reduction of a solver goes through `sum`, which
  /// turns the partial sums of this process into the global sums, in place and
  /// identically on every process. A solver first runs its argument checks through
  /// `agree`, which receives this process's error (or null) and throws on every process
  /// when any process failed, so that no process is left waiting. The solvers call both
  /// collectively, at the same points on every process; a callback's request to stop
  /// (or its exception) stops every process.
  struct Distribution {
    index_t global_size = 0;
    index_t offset = 0;
    std::function<void(std::span<double> partial)> sum;
    std::function<void(const std::exception_ptr& error)> agree;
  };
  /// A distributed operator. @throw InvalidArgument for n < 0, an empty `apply`, `sum`
  /// or `agree`, or rows [offset, offset + n) outside [0, global_size).
  LinearOperator(index_t n, Apply apply, Distribution distribution);

  [[nodiscard]] index_t size() const noexcept { return n_; }
  /// The rows of the whole problem (size() for a single-process operator).
  [[nodiscard]] index_t global_size() const noexcept { return distributed_ ? distribution_.global_size : n_; }
  /// The first global row of this process (0 for a single-process operator).
  [[nodiscard]] index_t offset() const noexcept { return distributed_ ? distribution_.offset : 0; }
  /// Sums partial reductions over the processes in place (nothing for a single process).
  void sum(std::span<double> partial) const {
    if (distributed_) distribution_.sum(partial);
  }
  /// Runs `checks`; for a distributed operator, an error on any process becomes an error
  /// on every process (through Distribution::agree). Used by the solvers.
  void agree(const std::function<void()>& checks) const;
  /// True on every process when `flag` is true on any (collective when distributed).
  [[nodiscard]] bool any(bool flag) const {
    double f = flag ? 1.0 : 0.0;
    sum(std::span<double>(&f, 1));
    return f > 0.0;
  }
  /// Y = A X. @throw DimensionMismatch naming X or Y for wrong shapes.
  void apply(DenseView<const T> X, DenseView<T> Y) const;
  /// The full CSR matrix behind the operator, or nullptr (solvers fuse pᵀAp into its product).
  [[nodiscard]] const CsrMatrix<T>* csr() const noexcept { return csr_; }
  /// The stored triangle behind an operator built from one, or nullptr (likewise).
  [[nodiscard]] const CsrMatrix<T>* triangle() const noexcept { return triangle_; }
  /// Which triangle `triangle()` stores.
  [[nodiscard]] Triangle uplo() const noexcept { return uplo_; }

private:
  index_t n_;
  Apply apply_;
  const CsrMatrix<T>* csr_ = nullptr;
  const CsrMatrix<T>* triangle_ = nullptr;
  Triangle uplo_ = Triangle::upper;
  bool distributed_ = false;
  Distribution distribution_;
};

/// How a solve ended.
enum class SolveStatus {
  converged,       ///< the relative residual reached the tolerance
  max_iterations,  ///< max_iter iterations without converging
  breakdown,       ///< CG: pᵀAp <= 0, rᵀz <= 0 (A or M not SPD); BiCGStab: ρ or ω
                   ///< vanished; any solver: a non-finite value
  stopped,         ///< the callback asked to stop
  completed,       ///< a fixed-step method (Chebyshev, Richardson) ran all its steps
};
std::string_view to_string(SolveStatus status) noexcept;

/// Options of `cg`. `x0`: empty for a zero initial guess, else n (one right-hand side) or
/// n * k values, row-major (k right-hand sides). `preconditioner`: empty for none, else
/// the n entries of a diagonal M⁻¹ (see `jacobi_preconditioner`). `M`: any symmetric
/// positive definite Preconditioner instead (z = M⁻¹ r stored each iteration; several
/// right-hand sides are then solved column by column). `callback(iteration,
/// rel_residual)` runs after every iteration (with several right-hand sides, the largest
/// relative residual of the columns still iterating); returning false stops the solve.
/// Distributed: x0 and the preconditioner are this process's rows (empty on a process
/// without rows), the callback runs on every process, and any process stopping (or
/// throwing) stops all.
template <SolverValue T>
struct CgOptions {
  double tol = 1e-8;  ///< on ||b - A x|| / ||b||
  index_t max_iter = 1000;
  std::span<const T> preconditioner = {};
  std::span<const T> x0 = {};
  std::function<bool(index_t iteration, double rel_residual)> callback = {};
  const Preconditioner<T>* M = nullptr;
};

/// Options of `gmres` and `bicgstab`: as CgOptions, with the preconditioner M applied
/// on the right (A M⁻¹ y = b, x = M⁻¹ y), so the residual they measure and stop on is
/// the true ||b - A x||. `restart`: GMRES's basis size m.
template <SolverValue T>
struct KrylovOptions {
  double tol = 1e-8;  ///< on ||b - A x|| / ||b||
  index_t max_iter = 1000;  ///< products with A
  index_t restart = 30;
  const Preconditioner<T>* M = nullptr;
  std::span<const T> x0 = {};
  std::function<bool(index_t iteration, double rel_residual)> callback = {};
};

/// The outcome of a solve with one right-hand side. On breakdown or stop, x is the last
/// finite iterate and rel_residual its relative residual; never NaN from the breakdown.
template <SolverValue T>
struct SolveResult {
  std::vector<T> x;
  index_t iterations = 0;
  double rel_residual = 0.0;
  SolveStatus status = SolveStatus::max_iterations;
  [[nodiscard]] bool converged() const noexcept { return status == SolveStatus::converged; }
};

/// The outcome of a solve with k right-hand sides: column j of X and its own count,
/// residual and status.
template <SolverValue T>
struct BlockSolveResult {
  Dense<T> X;
  std::vector<index_t> iterations;
  std::vector<double> rel_residual;
  std::vector<SolveStatus> status;
};

/// Preconditioned conjugate gradients for a symmetric positive definite A. Each
/// iteration: one product, one fused pass (x, r, z updates with rᵀr and rᵀz), one pass
/// for p. `b = 0` gives x = 0, converged in 0 iterations.
/// @throw DimensionMismatch for b, x0 or preconditioner of the wrong length;
/// InvalidArgument for tol < 0 (or NaN), max_iter < 0, or a non-finite b or x0.
template <SolverValue T>
SolveResult<T> cg(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b, const CgOptions<T>& options = {});
/// CG on k right-hand sides at once (B: n x k): each column has its own α, β and
/// convergence; one n x k product per iteration instead of k. A column that converged
/// (or broke down) is frozen. Column j gives what `cg` gives for B's column j.
template <SolverValue T>
BlockSolveResult<T> cg(const LinearOperator<T>& A, DenseView<const std::type_identity_t<T>> B, const CgOptions<T>& options = {});

/// Restarted GMRES(m) with right preconditioning, for any nonsingular A. The basis is
/// orthogonalised by delayed CGS2 (classical Gram–Schmidt applied twice, the second pass
/// lagging one iteration): per iteration one sweep over the basis computes all inner
/// products at once (deterministic chunked sums, one reduction) and one sweep updates.
/// Iterations count the basis vectors finished (a solve that converges applies A once
/// more than it counts); the residual is the Arnoldi estimate, and the true residual is
/// computed at each restart and at the end (rel_residual is the true one).
/// @throw as cg, and InvalidArgument for restart < 1 or an M of the wrong size.
template <SolverValue T>
SolveResult<T> gmres(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b,
                     const KrylovOptions<T>& options = {});
/// BiCGStab (van der Vorst 1992) with right preconditioning: two products and two
/// preconditioner applications per iteration (counted as one iteration). Breakdown
/// (ρ = r̂ᵀr or ω vanishing, or a non-finite value) ends with status breakdown and the
/// last finite iterate.
template <SolverValue T>
SolveResult<T> bicgstab(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b,
                        const KrylovOptions<T>& options = {});

/// M⁻¹ = 1 / diag(A), for `CgOptions::preconditioner`.
/// @throw InvalidArgument unless A is square and every diagonal entry is finite and non-zero
/// (naming the first that is not).
template <SolverValue T> std::vector<T> jacobi_preconditioner(const CsrMatrix<T>& A);
template <SolverValue T> std::vector<T> jacobi_preconditioner(const BsrMatrix<T>& A);

/// The Chebyshev recurrence for eigenvalues in [lmin, lmax]: step k updates
/// d_k = a[k] d_{k-1} + c[k] r_k, x += d_k, r -= A d_k (a[0] = 0). With
/// θ = (lmax + lmin) / 2, δ = (lmax - lmin) / 2, σ = θ / δ: c[0] = 1/θ, ρ_0 = 1/σ,
/// ρ_k = 1 / (2σ - ρ_{k-1}), a[k] = ρ_k ρ_{k-1}, c[k] = 2ρ_k / δ (Saad, "Iterative
/// Methods for Sparse Linear Systems", 2nd ed., Alg. 12.1). After K steps the error is
/// p_K(A) e_0 with max |p_K| on [lmin, lmax] equal to 1 / T_K(σ).
struct ChebyshevCoefficients {
  std::vector<double> a;
  std::vector<double> c;
};
/// @throw InvalidArgument unless 0 < lmin < lmax (finite) and steps >= 0.
ChebyshevCoefficients chebyshev_coeffs(double lmin, double lmax, index_t steps);

/// `steps` Chebyshev steps (coefficients computed before the loop; no inner product in
/// it) for SPD A with spectrum in [lmin, lmax]. Status `completed` (or `breakdown` if the
/// result is not finite); rel_residual from the recurred residual.
/// @throw as chebyshev_coeffs; DimensionMismatch for b or x0 of the wrong length.
template <SolverValue T>
SolveResult<T> chebyshev(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b, double lmin, double lmax, index_t steps,
                         std::span<const std::type_identity_t<T>> x0 = {});

/// `steps` Richardson steps x += ω (b - A x): the error is (I - ωA)^steps e_0. No inner
/// product inside the loop. @throw InvalidArgument for a non-finite ω or steps < 0.
template <SolverValue T>
SolveResult<T> richardson(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b, double omega, index_t steps,
                          std::span<const std::type_identity_t<T>> x0 = {});

/// The eigenvalue of largest magnitude of a symmetric A and its unit eigenvector.
template <SolverValue T>
struct EigenResult {
  double eigenvalue = 0.0;
  std::vector<T> eigenvector;
  index_t iterations = 0;
  bool converged = false;
};
/// Power iteration from a fixed pseudo-random start (entry i the same for any process
/// count): v ← Av / ||Av||, λ = vᵀAv, until ||Av - λv|| <= tol |λ| or `max_iter`
/// products. n = 0 gives λ = 0, converged. A distributed operator's `eigenvector` holds
/// this process's rows.
/// @throw InvalidArgument for max_iter < 0 or tol < 0.
template <SolverValue T>
EigenResult<T> power_iteration(const LinearOperator<T>& A, index_t max_iter, double tol);

}  // namespace trnsparse
