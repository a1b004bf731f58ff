/// @file mpi.hpp
/// Distributed trnsparse on MPI (the `trnsparse::mpi` target, built when MPI is found).
/// A `DistMatrix` is a square CSR or BSR matrix sharded by block rows over the processes
/// of a communicator; vectors and dense panels are sharded like its rows (process p holds
/// rows [row_offset(), row_offset() + local_rows())). Products exchange only the rows of
/// the operand that a process's stored blocks reference (its halo), non-blocking and
/// overlapped with the product of the process's own diagonal part.
///
///     int provided;   // MPI from the main thread only; OpenMP threads run the kernels
///     MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
///     int rank;
///     MPI_Comm_rank(MPI_COMM_WORLD, &rank);
///     std::optional<trnsparse::CsrMatrix<double>> A;
///     if (rank == 0) A = trnsparse::poisson3d<double>(64);        // the global matrix on rank 0
///     auto D = trnsparse::mpi::DistCsrMatrix<double>::scatter(MPI_COMM_WORLD, A ? &*A : nullptr);
///     std::vector<double> b(D.local_rows(), 1.0);                   // this process's rows of b
///     auto res = trnsparse::mpi::cg(D, b, {.tol = 1e-8, .preconditioner = trnsparse::mpi::jacobi_preconditioner(D)});
///     // destroy D before MPI_Finalize()
///
/// The constructors, products and solvers (not `Partition` or the accessors) are
/// collective over the matrix's communicator: all processes call them, in the same order,
/// from one thread per process (MPI_THREAD_FUNNELED is enough; two threads must not use
/// matrices sharing a communicator at once). Argument errors found on any process (wrong
/// local sizes, mismatched shapes across processes, a NaN in b, a message beyond MPI's
/// int count) are agreed on before any data moves: every process throws, naming the
/// process at fault, and none is left waiting. The first failing process rethrows its own
/// exception; the others throw the library's error class of the same kind
/// (InvalidArgument, DimensionMismatch, ParseError, ...; std::runtime_error for others).
/// Reductions gather the per-process partial sums (MPI_Allgather, not MPI_Allreduce) and
/// add them in process order, so a result is the same on every process and from run to
/// run. A moved-from DistMatrix may only be destroyed or assigned to.
#pragma once

#include <mpi.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse::mpi {

/// Contiguous ranges of block rows, one per process: process p owns block rows
/// [first(p), first(p + 1)).
class Partition {
public:
  /// `bounds` has parts + 1 entries, starts at 0 and never decreases.
  /// @throw InvalidArgument naming the first bad entry.
  explicit Partition(std::vector<index_t> bounds);
  /// Cuts `block_row_ptr` (block rows + 1 prefix counts of stored blocks or non-zeros)
  /// into `parts` ranges holding about equal stored counts (by rows when nothing is stored).
  static Partition balanced(std::span<const index_t> block_row_ptr, int parts);

  [[nodiscard]] int parts() const noexcept { return static_cast<int>(bounds_.size()) - 1; }
  [[nodiscard]] index_t first(int p) const noexcept { return bounds_[static_cast<std::size_t>(p)]; }
  [[nodiscard]] index_t count(int p) const noexcept { return first(p + 1) - first(p); }
  [[nodiscard]] std::span<const index_t> bounds() const noexcept { return bounds_; }
  /// The process owning block row `block_row` (in [0, bounds().back())).
  [[nodiscard]] int owner(index_t block_row) const noexcept;

private:
  std::vector<index_t> bounds_;
};

namespace detail {
template <class Local> struct LocalValue;
template <SolverValue T> struct LocalValue<CsrMatrix<T>> { using type = T; };
template <SolverValue T> struct LocalValue<BsrMatrix<T>> { using type = T; };
}  // namespace detail

/// A square matrix sharded by block rows. `Local` is `CsrMatrix<T>` (block size 1) or
/// `BsrMatrix<T>`, T float or double. Each process stores its rows as a diagonal part
/// (the columns it owns) and an off-process part over only the non-empty rows and the
/// referenced remote block columns (its ghosts), plus the exchange plan, all built once.
template <class Local>
class DistMatrix {
public:
  using value_type = typename detail::LocalValue<Local>::type;

  /// From each process's own block rows: `local_rows` holds this process's rows (a
  /// multiple of the block size except on the last process owning rows) with global
  /// column indices; processes hold consecutive ranges in rank order, and together all
  /// rows of a square matrix. @throw InvalidArgument on every process when they disagree
  /// (block sizes, column counts, rows not summing to the columns).
  DistMatrix(MPI_Comm comm, const Local& local_rows);
  /// From the global matrix on `root` (the same valid rank on every process), split by
  /// `partition` or, when null, balanced by stored blocks (non-zeros for CSR). `global`
  /// and `partition` are read on root only (elsewhere they may be null). The global
  /// matrix must hold fewer than 2^31 stored values (one MPI_Scatterv per array).
  /// @throw InvalidArgument (every process) for a non-square matrix, a null `global` on
  /// root, or a partition of the wrong size; OverflowError beyond 2^31 values.
  static DistMatrix scatter(MPI_Comm comm, const Local* global, int root = 0, const Partition* partition = nullptr);
  /// Every process reads its slice of a Matrix Market file, the entries move to their
  /// owners, and the matrix is split balanced by stored blocks (block_size must be 1
  /// for CSR). @throw IoError / ParseError (every process) for an unreadable or malformed file.
  static DistMatrix read_matrix_market(MPI_Comm comm, const std::filesystem::path& path, index_t block_size = 1);

  [[nodiscard]] MPI_Comm comm() const noexcept;
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] index_t rows() const noexcept { return rows_; }
  [[nodiscard]] index_t block_size() const noexcept { return b_; }
  [[nodiscard]] const Partition& partition() const noexcept { return partition_; }
  /// This process's first global row and row count.
  [[nodiscard]] index_t row_offset() const noexcept { return row_offset_; }
  [[nodiscard]] index_t local_rows() const noexcept { return local_rows_; }
  /// Stored blocks (non-zeros for CSR) on this process, and over all processes.
  [[nodiscard]] index_t local_stored() const noexcept { return local_stored_; }
  [[nodiscard]] index_t global_stored() const noexcept { return global_stored_; }
  /// Remote block rows this process receives per product (its ghosts), and sends.
  [[nodiscard]] index_t ghost_blocks() const noexcept { return static_cast<index_t>(ghosts_.size()); }
  [[nodiscard]] index_t sent_blocks() const noexcept { return static_cast<index_t>(send_blocks_.size()); }
  /// The diagonal part: local_rows() x local_rows(), local column indices.
  [[nodiscard]] const Local& diagonal_part() const noexcept { return *diag_; }

  /// Y = α A X + β Y on this process's rows; X and Y are local_rows() x k with the same
  /// k on every process. @throw DimensionMismatch (every process) for wrong shapes.
  void spmm(value_type alpha, DenseView<const value_type> X, value_type beta, DenseView<value_type> Y) const;
  /// y = α A x + β y on this process's rows.
  void spmv(value_type alpha, std::span<const value_type> x, value_type beta, std::span<value_type> y) const;

private:
  struct Comm;
  struct Layout;  // communicator, partition, rows, block size: agreed on by every process
  static Layout layout(MPI_Comm comm, const Local& local_rows);
  DistMatrix(Layout layout, const Local& local_rows);

  std::shared_ptr<Comm> comm_;
  int rank_ = 0;
  Partition partition_;
  index_t rows_ = 0;
  index_t b_ = 1;
  index_t row_offset_ = 0;
  index_t local_rows_ = 0;
  index_t local_stored_ = 0;
  index_t global_stored_ = 0;
  std::optional<Local> diag_;
  std::optional<Local> offd_;        ///< offd_rows_.size() x ghosts_.size() * b_
  std::vector<index_t> offd_rows_;   ///< the local block rows with off-process blocks
  std::vector<index_t> ghosts_;      ///< global block columns received, ascending (grouped by owner)
  std::vector<int> recv_ranks_;      ///< processes we receive from, ascending
  std::vector<index_t> recv_first_;  ///< recv_ranks_.size() + 1 offsets into ghosts_
  std::vector<int> send_ranks_;      ///< processes we send to, ascending
  std::vector<index_t> send_first_;  ///< send_ranks_.size() + 1 offsets into send_blocks_
  std::vector<index_t> send_blocks_; ///< local block rows to send, per destination
  index_t largest_message_ = 0;      ///< block rows in the largest message sent or received
};

template <SolverValue T> using DistCsrMatrix = DistMatrix<CsrMatrix<T>>;
template <SolverValue T> using DistBsrMatrix = DistMatrix<BsrMatrix<T>>;
/// The value type of a DistMatrix<Local>.
template <class Local> using value_t = typename DistMatrix<Local>::value_type;

/// The distributed operator for the solvers of solvers.hpp (A must outlive it).
template <class Local> LinearOperator<value_t<Local>> linear_operator(const DistMatrix<Local>& A);

/// This process's rows of M⁻¹ = 1 / diag(A). @throw InvalidArgument (every process)
/// naming the first zero or non-finite diagonal entry.
template <class Local> std::vector<value_t<Local>> jacobi_preconditioner(const DistMatrix<Local>& A);

/// `cg`, `chebyshev` and `power_iteration` of solvers.hpp over the distributed operator:
/// b, x0 and the preconditioner are this process's rows, and so are the returned x and
/// eigenvector; iterations, residuals, eigenvalue and status are global (the same on
/// every process), and agree with a single-process solve to rounding.
template <class Local>
SolveResult<value_t<Local>> cg(const DistMatrix<Local>& A, std::span<const value_t<Local>> b,
                               const CgOptions<value_t<Local>>& options = {});
/// `gmres` and `bicgstab` over the distributed operator, as `cg`. A preconditioner M
/// (options.M, on every process or none) is this process's own, of local_rows() rows:
/// built from `diagonal_part()` it is block Jacobi over the processes with the given
/// preconditioner inside each block (PETSc's PCBJACOBI), e.g.
///     const auto M = trnsparse::ilu0(D.diagonal_part());
///     auto res = trnsparse::mpi::gmres(D, b, {.tol = 1e-8, .M = &M});
/// cg takes such an M too (CgOptions::M; symmetric positive definite).
template <class Local>
SolveResult<value_t<Local>> gmres(const DistMatrix<Local>& A, std::span<const value_t<Local>> b,
                                  const KrylovOptions<value_t<Local>>& options = {});
template <class Local>
SolveResult<value_t<Local>> bicgstab(const DistMatrix<Local>& A, std::span<const value_t<Local>> b,
                                     const KrylovOptions<value_t<Local>>& options = {});
template <class Local>
SolveResult<value_t<Local>> chebyshev(const DistMatrix<Local>& A, std::span<const value_t<Local>> b, double lmin,
                                      double lmax, index_t steps, std::span<const value_t<Local>> x0 = {});
template <class Local>
EigenResult<value_t<Local>> power_iteration(const DistMatrix<Local>& A, index_t max_iter, double tol);

/// The global rows of a row-sharded panel (this process's local_rows() x k), gathered
/// on `root`; an empty Dense elsewhere.
template <class Local>
Dense<value_t<Local>> gather_rows(const DistMatrix<Local>& A, DenseView<const value_t<Local>> local, int root = 0);
/// This process's rows of `global` (rows() x k on root; ignored, may be null, elsewhere).
template <class Local>
Dense<value_t<Local>> scatter_rows(const DistMatrix<Local>& A, const Dense<value_t<Local>>* global, index_t k,
                                   int root = 0);

}  // namespace trnsparse::mpi
