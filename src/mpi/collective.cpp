#include "mpi/collective.hpp"

#include <algorithm>

#include "trnsparse/error.hpp"

namespace trnsparse::mpi::detail {

namespace {

// The kinds of error that cross processes; the others travel as `other` (std::runtime_error).
enum Kind : int { none = 0, invalid_argument, dimension_mismatch, index_error, overflow_error, io_error, parse_error,
                  not_supported, other };

Kind kind_of(const std::exception_ptr& error, std::string& what, std::string& source, index_t& line) {
  try {
    std::rethrow_exception(error);
  } catch (const ParseError& e) {
    what = e.what();
    source = e.source();
    line = e.line();
    return parse_error;
  } catch (const InvalidArgument& e) {
    what = e.what();
    return invalid_argument;
  } catch (const DimensionMismatch& e) {
    what = e.what();
    return dimension_mismatch;
  } catch (const IndexError& e) {
    what = e.what();
    return index_error;
  } catch (const OverflowError& e) {
    what = e.what();
    return overflow_error;
  } catch (const IoError& e) {
    what = e.what();
    return io_error;
  } catch (const NotSupported& e) {
    what = e.what();
    return not_supported;
  } catch (const std::exception& e) {
    what = e.what();
    return other;
  } catch (...) {
    what = "unknown exception";
    return other;
  }
}

void bcast_string(MPI_Comm comm, std::string& s, int root) {
  index_t n = static_cast<index_t>(s.size());
  MPI_Bcast(&n, 1, MPI_INT64_T, root, comm);
  s.resize(static_cast<std::size_t>(n));
  MPI_Bcast(s.data(), count(n, "error message"), MPI_CHAR, root, comm);
}

[[noreturn]] void throw_as(Kind kind, const std::string& what, const std::string& source, index_t line) {
  switch (kind) {
    case invalid_argument: throw InvalidArgument(what);
    case dimension_mismatch: throw DimensionMismatch(what);
    case index_error: throw IndexError(what);
    case overflow_error: throw OverflowError(what);
    case io_error: throw IoError(what);
    case parse_error: throw ParseError(source, line, what);
    case not_supported: throw NotSupported(what);
    default: throw std::runtime_error(what);
  }
}

}  // namespace

int count(index_t n, const char* what) {
  if (n < 0 || n > INT_MAX)
    throw OverflowError(concat(what, ": ", n, " elements in one message, more than MPI's count limit ", INT_MAX));
  return static_cast<int>(n);
}

void agree_impl(MPI_Comm comm, const std::exception_ptr& error) {
  std::string what, source;
  index_t line = 0;
  const int mine = error ? kind_of(error, what, source, line) : none;
  const std::vector<int> kinds = allgather(comm, std::span<const int>(&mine, 1));
  const auto first = std::ranges::find_if(kinds, [](int k) { return k != none; });
  if (first == kinds.end()) return;
  const int root = static_cast<int>(first - kinds.begin());
  const int rank = rank_of(comm);
  // The first failing process's own message (a parse error: its reason after "source:line: ").
  std::string reason = what;
  if (mine == parse_error) reason = what.substr(std::min(what.size(), source.size() + std::to_string(line).size() + 3));
  bcast_string(comm, reason, root);
  bcast_string(comm, source, root);
  MPI_Bcast(&line, 1, MPI_INT64_T, root, comm);
  if (rank == root) std::rethrow_exception(error);
  const auto kind = static_cast<Kind>(*first);
  throw_as(kind, kind == parse_error ? concat("(read by process ", root, ") ", reason) : concat("process ", root, ": ", reason),
           source, line);
}

void allsum(MPI_Comm comm, std::span<double> partial) {
  const std::vector<double> all = allgather(comm, std::span<const double>(partial));
  const std::size_t m = partial.size();
  for (std::size_t j = 0; j < m; ++j) {
    double total = 0.0;
    for (std::size_t p = 0; p < all.size() / std::max<std::size_t>(m, 1); ++p) total += all[p * m + j];
    partial[j] = total;
  }
}

}  // namespace trnsparse::mpi::detail
