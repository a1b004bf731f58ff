// Internal to trnsparse-mpi-bench: what its modes share (bench/mpi.cpp, bench/mpi_ksp.cpp).
#pragma once

#include <mpi.h>
#include <petscsys.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "trnsparse/types.hpp"

namespace trnsparse::mpi_bench {

using trnsparse::index_t;

inline int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
inline int size_of(MPI_Comm c) {
  int s = 0;
  MPI_Comm_size(c, &s);
  return s;
}

/// Median over `reps` runs (after one warm-up) of the slowest process's time of f, in ms.
template <class F>
double median_ms(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    f();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

inline void check(PetscErrorCode e, const char* what) {
  if (e != 0) {
    std::fprintf(stderr, "trnsparse-mpi-bench: PETSc error %d in %s\n", static_cast<int>(e), what);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

inline double global_norm(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return std::sqrt(s);
}

/// `--ksp` mode (mpi_ksp.cpp): PETSc's KSP with a named preconditioner on a problem.
int run_ksp(int argc, char** argv);

}  // namespace trnsparse::mpi_bench
