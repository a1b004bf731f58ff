// The solvers of solvers.hpp over a DistMatrix: a LinearOperator whose reductions are
// summed over the processes (in process order), and argument checks agreed on by every
// process before the first collective, so that a bad argument on one process is an
// error on all of them rather than a process waiting forever.
#include <algorithm>
#include <cmath>

#include "mpi/collective.hpp"
#include "solvers/chunked.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/mpi.hpp"
#include "trnsparse/preconditioners.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::mpi {

using detail::agree;
using detail::concat;
using detail::count;
using detail::datatype;

namespace {

/// Checks that `values` agree on every process (the loop limits and tolerances of a
/// solve: a process leaving the loop early would leave the others waiting).
void check_same(MPI_Comm comm, std::span<const double> values, const char* who, const char* names) {
  const std::vector<double> all = detail::allgather(comm, values);
  for (std::size_t p = 1; p < all.size() / values.size(); ++p)
    for (std::size_t j = 0; j < values.size(); ++j)
      if (!(all[p * values.size() + j] == all[j]) && !(std::isnan(all[j]) && std::isnan(all[p * values.size() + j])))
        throw InvalidArgument(concat(who, ": ", names, " differ between process 0 and process ", p,
                                     ", expected the same on every process"));
}

/// An optional vector (x0, preconditioner) must be given on every process holding rows
/// or on none: a process without it would treat its rows as zero. Processes without
/// rows have nothing to give and are not counted.
template <class Local>
void check_presence(const DistMatrix<Local>& A, std::span<const value_t<Local>> v, const char* who, const char* what) {
  const int mine = A.local_rows() == 0 ? -1 : (v.empty() ? 0 : 1);
  const std::vector<int> all = detail::allgather(A.comm(), std::span<const int>(&mine, 1));
  int first = -1;
  for (std::size_t p = 0; p < all.size(); ++p) {
    if (all[p] < 0) continue;
    if (first < 0) first = static_cast<int>(p);
    else if (all[p] != all[static_cast<std::size_t>(first)])
      throw InvalidArgument(concat(who, ": ", what, " is ", all[first] ? "given" : "empty", " on process ", first, " and ",
                                   all[p] ? "given" : "empty", " on process ", p,
                                   ", expected it on every process holding rows or on none"));
  }
}

/// The message counts and displacements of every process's rows of a k-column panel.
template <class Local>
void row_counts(const DistMatrix<Local>& A, index_t k, std::vector<int>& counts, std::vector<int>& at, const char* who) {
  const index_t b = A.block_size();
  for (std::size_t p = 0; p < counts.size(); ++p) {
    const int q = static_cast<int>(p);
    const index_t f = std::min(A.rows(), A.partition().first(q) * b), l = std::min(A.rows(), A.partition().first(q + 1) * b);
    counts[p] = count((l - f) * k, who);
    at[p] = count(f * k, who);
  }
}

}  // namespace

template <class Local>
LinearOperator<value_t<Local>> linear_operator(const DistMatrix<Local>& A) {
  using T = value_t<Local>;
  return LinearOperator<T>(
      A.local_rows(), [&A](DenseView<const T> X, DenseView<T> Y) { A.spmm(T(1), X, T(0), Y); },
      typename LinearOperator<T>::Distribution{
          A.rows(), A.row_offset(), [&A](std::span<double> partial) { detail::allsum(A.comm(), partial); },
          [&A](const std::exception_ptr& error) { detail::agree_impl(A.comm(), error); }});
}

template <class Local>
std::vector<value_t<Local>> jacobi_preconditioner(const DistMatrix<Local>& A) {
  std::vector<value_t<Local>> m;
  agree(A.comm(), [&] {
    try {
      m = trnsparse::jacobi_preconditioner(A.diagonal_part());
    } catch (const InvalidArgument& e) {  // name the global row, not the local one
      throw InvalidArgument(concat(e.what(), " (local row of process ", A.rank(), ", whose rows start at ",
                                   A.row_offset(), ")"));
    }
  });
  return m;
}

template <class Local>
SolveResult<value_t<Local>> cg(const DistMatrix<Local>& A, std::span<const value_t<Local>> b,
                               const CgOptions<value_t<Local>>& options) {
  const char* who = "mpi::cg";
  check_presence(A, options.x0, who, "x0");
  check_presence(A, options.preconditioner, who, "preconditioner");
  check_preconditioner(A, options.M, who);
  const double limits[2] = {options.tol, static_cast<double>(options.max_iter)};
  check_same(A.comm(), limits, who, "tol and max_iter");
  return trnsparse::cg(linear_operator(A), b, options);
}

/// A preconditioner must be given on every process or on none (each applies its own to
/// its rows; a process without one would leave its rows unpreconditioned).
template <class Local>
void check_preconditioner(const DistMatrix<Local>& A, const Preconditioner<value_t<Local>>* M, const char* who) {
  const double given = M ? 1.0 : 0.0;
  check_same(A.comm(), std::span<const double>(&given, 1), who, "the presence of M");
}

template <class Local>
SolveResult<value_t<Local>> krylov(const DistMatrix<Local>& A, std::span<const value_t<Local>> b,
                                   const KrylovOptions<value_t<Local>>& options, bool use_gmres) {
  const char* who = use_gmres ? "mpi::gmres" : "mpi::bicgstab";
  check_presence(A, options.x0, who, "x0");
  check_preconditioner(A, options.M, who);
  const double limits[3] = {options.tol, static_cast<double>(options.max_iter), static_cast<double>(options.restart)};
  check_same(A.comm(), limits, who, "tol, max_iter and restart");
  const auto op = linear_operator(A);
  return use_gmres ? trnsparse::gmres(op, b, options) : trnsparse::bicgstab(op, b, options);
}

template <class Local>
SolveResult<value_t<Local>> gmres(const DistMatrix<Local>& A, std::span<const value_t<Local>> b,
                                  const KrylovOptions<value_t<Local>>& options) {
  return krylov(A, b, options, true);
}

template <class Local>
SolveResult<value_t<Local>> bicgstab(const DistMatrix<Local>& A, std::span<const value_t<Local>> b,
                                     const KrylovOptions<value_t<Local>>& options) {
  return krylov(A, b, options, false);
}

template <class Local>
SolveResult<value_t<Local>> chebyshev(const DistMatrix<Local>& A, std::span<const value_t<Local>> b, double lmin,
                                      double lmax, index_t steps, std::span<const value_t<Local>> x0) {
  const char* who = "mpi::chebyshev";
  check_presence(A, x0, who, "x0");
  const double limits[3] = {lmin, lmax, static_cast<double>(steps)};
  check_same(A.comm(), limits, who, "lmin, lmax and steps");
  return trnsparse::chebyshev(linear_operator(A), b, lmin, lmax, steps, x0);
}

template <class Local>
EigenResult<value_t<Local>> power_iteration(const DistMatrix<Local>& A, index_t max_iter, double tol) {
  const double limits[2] = {tol, static_cast<double>(max_iter)};
  check_same(A.comm(), limits, "mpi::power_iteration", "tol and max_iter");
  return trnsparse::power_iteration(linear_operator(A), max_iter, tol);
}

template <class Local>
Dense<value_t<Local>> gather_rows(const DistMatrix<Local>& A, DenseView<const value_t<Local>> local, int root) {
  using T = value_t<Local>;
  MPI_Comm comm = A.comm();
  const int rank = detail::rank_of(comm), size = detail::size_of(comm);
  const double k = static_cast<double>(local.cols);
  check_same(comm, std::span<const double>(&k, 1), "mpi::gather_rows", "the column counts of local");
  // Every process computes every count (all see the same overflow) before data moves.
  std::vector<int> counts(static_cast<std::size_t>(size)), at(counts.size());
  Dense<T> all;
  agree(comm, [&] {
    trnsparse::detail::check_dim(local.rows, A.local_rows(), "mpi::gather_rows", "local", "rows", "local_rows()");
    row_counts(A, local.cols, counts, at, "mpi::gather_rows");
    if (rank == root) all = Dense<T>(A.rows(), local.cols);
  });
  std::vector<T> packed(static_cast<std::size_t>(local.rows * local.cols));
  for (index_t i = 0; i < local.rows; ++i) std::copy_n(local.data + i * local.ld, local.cols, packed.data() + i * local.cols);
  MPI_Gatherv(packed.data(), counts[rank], datatype<T>(), rank == root ? all.values().data() : nullptr, counts.data(),
              at.data(), datatype<T>(), root, comm);
  return all;
}

template <class Local>
Dense<value_t<Local>> scatter_rows(const DistMatrix<Local>& A, const Dense<value_t<Local>>* global, index_t k, int root) {
  using T = value_t<Local>;
  MPI_Comm comm = A.comm();
  const int rank = detail::rank_of(comm), size = detail::size_of(comm);
  agree(comm, [&] {
    if (rank != root) return;
    if (global == nullptr) throw InvalidArgument(concat("mpi::scatter_rows: global is null on root process ", root));
    trnsparse::detail::check_dim(global->rows(), A.rows(), "mpi::scatter_rows", "global", "rows", "A.rows()");
    trnsparse::detail::check_dim(global->cols(), k, "mpi::scatter_rows", "global", "columns", "k");
  });
  const double kd = static_cast<double>(k);
  check_same(comm, std::span<const double>(&kd, 1), "mpi::scatter_rows", "k");
  std::vector<int> counts(static_cast<std::size_t>(size)), at(counts.size());
  agree(comm, [&] { row_counts(A, k, counts, at, "mpi::scatter_rows"); });
  Dense<T> mine(A.local_rows(), k);
  MPI_Scatterv(rank == root ? global->values().data() : nullptr, counts.data(), at.data(), datatype<T>(),
               mine.values().data(), counts[rank], datatype<T>(), root, comm);
  return mine;
}

#define TRNSPARSE_INSTANTIATE(Local)                                                                                 \
  template LinearOperator<value_t<Local>> linear_operator(const DistMatrix<Local>&);                                \
  template std::vector<value_t<Local>> jacobi_preconditioner(const DistMatrix<Local>&);                             \
  template SolveResult<value_t<Local>> cg(const DistMatrix<Local>&, std::span<const value_t<Local>>,                \
                                          const CgOptions<value_t<Local>>&);                                       \
  template SolveResult<value_t<Local>> gmres(const DistMatrix<Local>&, std::span<const value_t<Local>>,             \
                                             const KrylovOptions<value_t<Local>>&);                                  \
  template SolveResult<value_t<Local>> bicgstab(const DistMatrix<Local>&, std::span<const value_t<Local>>,          \
                                                const KrylovOptions<value_t<Local>>&);                               \
  template SolveResult<value_t<Local>> chebyshev(const DistMatrix<Local>&, std::span<const value_t<Local>>, double, \
                                                 double, index_t, std::span<const value_t<Local>>);                 \
  template EigenResult<value_t<Local>> power_iteration(const DistMatrix<Local>&, index_t, double);                  \
  template Dense<value_t<Local>> gather_rows(const DistMatrix<Local>&, DenseView<const value_t<Local>>, int);       \
  template Dense<value_t<Local>> scatter_rows(const DistMatrix<Local>&, const Dense<value_t<Local>>*, index_t, int);
TRNSPARSE_INSTANTIATE(CsrMatrix<float>)
TRNSPARSE_INSTANTIATE(CsrMatrix<double>)
TRNSPARSE_INSTANTIATE(BsrMatrix<float>)
TRNSPARSE_INSTANTIATE(BsrMatrix<double>)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse::mpi
