// Internal: collective helpers of the MPI layer. `agree` turns an error on some
// processes into the same error on every process (so none waits forever in a later
// collective); `allsum` adds per-process partial sums in process order (the same bits
// on every process and in every run); `datatype` maps value types to MPI's. MPI calls
// are not checked one by one: the default handler (MPI_ERRORS_ARE_FATAL) aborts the job
// on a failed call.
#pragma once

#include <mpi.h>

#include <climits>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "runtime/checks.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::mpi::detail {

using trnsparse::detail::concat;

template <class T> MPI_Datatype datatype();
template <> inline MPI_Datatype datatype<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype datatype<double>() { return MPI_DOUBLE; }
template <> inline MPI_Datatype datatype<index_t>() { return MPI_INT64_T; }
template <> inline MPI_Datatype datatype<int>() { return MPI_INT; }

/// This process's rank in `comm`, and the number of processes.
inline int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
inline int size_of(MPI_Comm comm) {
  int s = 0;
  MPI_Comm_size(comm, &s);
  return s;
}

/// `n` as an MPI count. @throw OverflowError naming `what` beyond INT_MAX.
int count(index_t n, const char* what);

/// Runs `check` on this process; when it throws on any process, every process throws:
/// the first failing process rethrows its own exception, the others throw the same kind
/// with "process p: " before its message. Costs one allgather of an int when all is well.
void agree_impl(MPI_Comm comm, const std::exception_ptr& error);
template <class Check>
void agree(MPI_Comm comm, Check&& check) {
  std::exception_ptr error;
  try {
    check();
  } catch (...) {
    error = std::current_exception();
  }
  agree_impl(comm, error);
}

/// partial[j] ← Σ_p partial_p[j], added in process order.
void allsum(MPI_Comm comm, std::span<double> partial);

/// Every process's `values` (the same count on each), concatenated in process order.
template <class T>
std::vector<T> allgather(MPI_Comm comm, std::span<const T> values) {
  std::vector<T> all(values.size() * static_cast<std::size_t>(size_of(comm)));
  MPI_Allgather(values.data(), count(static_cast<index_t>(values.size()), "allgather"), datatype<T>(), all.data(),
                count(static_cast<index_t>(values.size()), "allgather"), datatype<T>(), comm);
  return all;
}

}  // namespace trnsparse::mpi::detail
