/// @file preconditioners.hpp
/// Preconditioners, each built once from a matrix and applied many times: block Jacobi,
/// the incomplete factorisations IC(0) and ILU(0), and smoothed-aggregation algebraic
/// multigrid; and `sptrsv`, the sparse triangular solve the factorisations apply.
///
///     auto A = trnsparse::poisson3d<double>(64);
///     trnsparse::Amg<double> M(A);                         // setup, threaded
///     auto res = trnsparse::cg(trnsparse::LinearOperator<double>(A), b, {.tol = 1e-8, .M = &M});
///     A_new = ...;  M.update(A_new);                       // same structure, new values
///
/// `apply` gives bitwise identical results for any thread count: the triangular solves
/// run level by level (rows of a level are independent; each row sums its entries in
/// stored order), and every other pass writes each output row from one thread.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse {

/// z = M⁻¹ r for a preconditioner M of a square matrix A. The solvers call `apply` once
/// per iteration (cg: z = M⁻¹ r; gmres and bicgstab precondition on the right).
template <SolverValue T>
class Preconditioner {
public:
  using value_type = T;
  virtual ~Preconditioner() = default;
  /// A's rows.
  [[nodiscard]] virtual index_t size() const noexcept = 0;
  /// z = M⁻¹ r. @throw DimensionMismatch naming r or z unless both have size() elements.
  virtual void apply(std::span<const T> r, std::span<T> z) const = 0;
  /// Rebuilds M for new values of A on the structure it was built from (a time step, a
  /// Newton iteration) without redoing the structural work.
  /// @throw InvalidArgument unless A has that structure (and format); then as the
  /// constructor does for the values (a zero pivot, a singular block).
  virtual void update(const CsrMatrix<T>& A) = 0;
  virtual void update(const BsrMatrix<T>& A) = 0;
  /// "bjacobi", "ic0", "ilu0" or "amg".
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
};

/// Whether a triangular solve divides by the stored diagonal or takes it as 1.
enum class Diagonal { non_unit, unit };

/// Solves T x = b for the triangle `uplo` of a square matrix A (entries on the other side
/// of the diagonal are ignored; for BSR, element by element, so a diagonal block
/// contributes its own triangle). The schedule is built once: ranges of rows that depend
/// on no row outside themselves (a block-diagonal T) are swept side by side on the
/// threads; otherwise rows are grouped into levels whose rows depend only on earlier
/// levels, and wide levels run on all threads. Views A: A must outlive it and keep its
/// structure (values may change).
template <SolverValue T>
class TriangularSolver {
public:
  /// @throw InvalidArgument unless A is square.
  TriangularSolver(const CsrMatrix<T>& A, Triangle uplo, Diagonal diag);
  TriangularSolver(const BsrMatrix<T>& A, Triangle uplo, Diagonal diag);
  TriangularSolver(CsrMatrix<T>&&, Triangle, Diagonal) = delete;
  TriangularSolver(BsrMatrix<T>&&, Triangle, Diagonal) = delete;
  TriangularSolver(TriangularSolver&&) noexcept;
  TriangularSolver& operator=(TriangularSolver&&) noexcept;
  ~TriangularSolver();

  /// x = T⁻¹ b (x may alias b). @throw DimensionMismatch naming b or x;
  /// InvalidArgument naming the first row (block row for BSR) with a zero or missing
  /// diagonal entry in a non_unit solve (x then holds non-finite values).
  void solve(std::span<const T> b, std::span<T> x) const;
  /// The number of levels (the length of the critical path through the rows).
  [[nodiscard]] index_t levels() const noexcept;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One triangular solve without keeping the schedule (TriangularSolver builds it once).
template <SolverValue T>
void sptrsv(const CsrMatrix<T>& A, Triangle uplo, Diagonal diag, std::span<const std::type_identity_t<T>> b,
            std::span<T> x);
template <SolverValue T>
void sptrsv(const BsrMatrix<T>& A, Triangle uplo, Diagonal diag, std::span<const std::type_identity_t<T>> b,
            std::span<T> x);

/// Block Jacobi: M = the block diagonal of A, inverted block by block (LU with partial
/// pivoting, in fp64). From BSR, the diagonal blocks of A's block size (3 x 3 for
/// elasticity3d); from CSR, `block_size` consecutive rows (1: point Jacobi).
template <SolverValue T>
class BlockJacobi final : public Preconditioner<T> {
public:
  /// @throw InvalidArgument unless A is square (and, for CSR, block_size >= 1 divides
  /// its rows), naming the first singular or non-finite diagonal block.
  explicit BlockJacobi(const BsrMatrix<T>& A);
  explicit BlockJacobi(const CsrMatrix<T>& A, index_t block_size = 1);

  [[nodiscard]] index_t size() const noexcept override { return n_; }
  void apply(std::span<const T> r, std::span<T> z) const override;
  void update(const CsrMatrix<T>& A) override;
  void update(const BsrMatrix<T>& A) override;
  [[nodiscard]] std::string_view name() const noexcept override { return "bjacobi"; }
  [[nodiscard]] index_t block_size() const noexcept { return b_; }

private:
  index_t n_ = 0;
  index_t b_ = 1;
  std::vector<T> inverses_;  // n / b blocks of b x b, row-major
};

/// Incomplete factorisations with zero fill: the factors keep A's pattern (for BSR,
/// every entry of its stored blocks). ILU(0): A ≈ L U, L unit lower; IC(0): A ≈ L Lᵀ for
/// symmetric positive definite A (given in full; only the lower triangle is read).
/// Factorisation in fp64 arithmetic row by row; `apply` is two triangular solves.
///
/// `blocks` > 1 cuts the rows into that many contiguous ranges of about equal size (whole
/// block rows for BSR) and drops the entries that couple two ranges: block Jacobi with
/// IC(0)/ILU(0) in each block (PETSc's PCBJACOBI with one block per process), whose
/// blocks factor and solve side by side on the threads. A weaker preconditioner than
/// blocks = 1 (a few more iterations) whose solves run on all cores; the cut depends only
/// on `blocks`, so the result is the same bits for any thread count.
template <SolverValue T>
class IncompleteFactorization final : public Preconditioner<T> {
public:
  enum class Kind { ilu0, ic0 };
  /// @throw InvalidArgument unless A is square, has every diagonal entry, is finite and
  /// blocks >= 1; naming the row of a zero (ILU) or non-positive (IC) pivot.
  IncompleteFactorization(const CsrMatrix<T>& A, Kind kind, index_t blocks = 1);
  IncompleteFactorization(const BsrMatrix<T>& A, Kind kind, index_t blocks = 1);
  IncompleteFactorization(IncompleteFactorization&&) noexcept;
  ~IncompleteFactorization() override;

  [[nodiscard]] index_t size() const noexcept override;
  void apply(std::span<const T> r, std::span<T> z) const override;
  void update(const CsrMatrix<T>& A) override;
  void update(const BsrMatrix<T>& A) override;
  [[nodiscard]] std::string_view name() const noexcept override;
  /// The factors, each with its diagonal stored: lower() is L (unit diagonal for
  /// ILU(0)), upper() is U (ILU(0)) or Lᵀ (IC(0)).
  [[nodiscard]] const CsrMatrix<T>& lower() const noexcept;
  [[nodiscard]] const CsrMatrix<T>& upper() const noexcept;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
template <SolverValue T> IncompleteFactorization<T> ilu0(const CsrMatrix<T>& A, index_t blocks = 1) {
  return {A, IncompleteFactorization<T>::Kind::ilu0, blocks};
}
template <SolverValue T> IncompleteFactorization<T> ilu0(const BsrMatrix<T>& A, index_t blocks = 1) {
  return {A, IncompleteFactorization<T>::Kind::ilu0, blocks};
}
template <SolverValue T> IncompleteFactorization<T> ic0(const CsrMatrix<T>& A, index_t blocks = 1) {
  return {A, IncompleteFactorization<T>::Kind::ic0, blocks};
}
template <SolverValue T> IncompleteFactorization<T> ic0(const BsrMatrix<T>& A, index_t blocks = 1) {
  return {A, IncompleteFactorization<T>::Kind::ic0, blocks};
}

/// Options of smoothed-aggregation AMG.
template <SolverValue T>
struct AmgOptions {
  /// Unknowns per node: aggregation runs on nodes (b x b blocks). 0: A's block size for
  /// BSR, 1 for CSR.
  index_t block_size = 0;
  /// The near-nullspace (rows x k, k >= 1): the modes the coarse levels must represent.
  /// Empty: one constant per unknown of a node (k = block_size). For elasticity, the six
  /// rigid-body modes (`rigid_body_modes`).
  DenseView<const T> near_nullspace = {};
  /// Nodes i, j are strongly connected when ||A_ij||² > θ² ||A_ii|| ||A_jj|| (Frobenius
  /// norms of the node blocks). Aggregates grow over strong connections: over distance 1
  /// (a node and its neighbours; 3 x 3 x 3 nodes on elasticity's 27-point coupling) or,
  /// where nodes have fewer than 10 strong neighbours on average (the 7-point stencil),
  /// also over the nodes two paths of length 2 reach (19-node balls, 26 nodes with the
  /// leftovers that join them, instead of 7-node crosses: a coarse level of 4 % of the
  /// rows instead of 13 %, at about 15 % more CG iterations).
  double strength_threshold = 0.0;
  /// Stop coarsening at this many rows; the last level is solved by dense Cholesky.
  /// (A last level above it, when max_levels stops coarsening or aggregates no longer
  /// reduce the rows, is smoothed instead, with twice the degree.)
  index_t max_coarse = 1000;
  index_t max_levels = 12;
  /// Chebyshev smoothing: `smoother_degree` steps before and after the coarse correction
  /// on each level, over [λmax / 10, 1.1 λmax] of D⁻¹A (D the point diagonal, as PETSc
  /// GAMG; λmax by Lanczos, at most 10 products, fewer when Gershgorin's bound is
  /// within 10 %).
  index_t smoother_degree = 2;
  /// Prolongator smoothing P = (I - ω/λmax D⁻¹A) P_tentative. The classical 4/3 takes
  /// one or two more CG iterations on the generated Poisson and elasticity problems
  /// (docs/solvers.md, "AMG parameters").
  double prolongator_omega = 1.6;
  /// For double: the V-cycle's products with its point (CSR, block size 1) operators
  /// read fp32 copies of their values and accumulate in double, as AmgX's "dDFI" mode;
  /// those products move about a quarter fewer bytes. The cycle applies the rounded
  /// operator everywhere on a level, so M⁻¹ stays symmetric; CG's own products, P, R,
  /// the setup and the last level's factor stay double. A level whose values leave
  /// fp32's normal range keeps double. Costs 4 bytes per stored value; ignored for float
  /// (docs/solvers.md, "AMG parameters").
  bool mixed_precision = true;
};

/// Smoothed-aggregation algebraic multigrid (Vaněk, Mandel, Brezina 1996): one V-cycle
/// per `apply`, a preconditioner for CG on symmetric positive definite A.
template <SolverValue T>
class Amg final : public Preconditioner<T> {
public:
  /// What one level holds.
  struct Level {
    index_t rows;
    index_t nnz;  // stored entries (block entries times b² for BSR)
    index_t block_size;
  };
  /// Setup, threaded. Every level is stored in blocks of g = gcd(b, k) (b unknowns per
  /// node, k near-nullspace vectors): CSR for g = 1, else BSR. A itself is viewed when
  /// it is stored that way (CSR with g = 1; BSR with block size g): it must then outlive
  /// M, or M's next update, and keep its values unless update() follows; otherwise A
  /// is copied into g x g blocks. The near-nullspace is copied. @throw InvalidArgument unless A is square, has a positive diagonal and is
  /// finite; DimensionMismatch naming options.near_nullspace unless it has A's rows;
  /// InvalidArgument for bad options.
  explicit Amg(const CsrMatrix<T>& A, const AmgOptions<T>& options = {});
  explicit Amg(const BsrMatrix<T>& A, const AmgOptions<T>& options = {});
  Amg(CsrMatrix<T>&&, const AmgOptions<T>& = {}) = delete;
  Amg(BsrMatrix<T>&&, const AmgOptions<T>& = {}) = delete;
  Amg(Amg&&) noexcept;
  ~Amg() override;

  [[nodiscard]] index_t size() const noexcept override;
  void apply(std::span<const T> r, std::span<T> z) const override;
  /// Recomputes the smoothing, the smoothed prolongators and the coarse operators (and
  /// the last level's factor) on the same aggregates and tentative prolongators; views
  /// the new A as the constructor does. @throw InvalidArgument unless A has the
  /// structure (and format) M was built from; then as the constructor for the values.
  void update(const CsrMatrix<T>& A) override;
  void update(const BsrMatrix<T>& A) override;
  void update(CsrMatrix<T>&&) = delete;
  void update(BsrMatrix<T>&&) = delete;
  [[nodiscard]] std::string_view name() const noexcept override { return "amg"; }
  [[nodiscard]] std::span<const Level> levels() const noexcept;
  /// Wall time of the last setup (construction or update), in seconds.
  [[nodiscard]] double setup_seconds() const noexcept;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The six rigid-body modes (three translations, three rotations about the centroid)
/// at nodes with coordinates `coords` (nodes x 3), for 3 unknowns (x, y, z) per node:
/// a 3 nodes x 6 near-nullspace for AmgOptions.
template <SolverValue T> Dense<T> rigid_body_modes(DenseView<const double> coords);

}  // namespace trnsparse
