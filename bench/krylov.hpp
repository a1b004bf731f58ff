// Internal to the benchmark: the `krylov` section (bench/krylov.cpp).
#pragma once

#include "bench.hpp"

namespace trnsparse::bench {

/// Time to solution of our Krylov methods and preconditioners on each of o.problems
/// (default: poisson3d:48, elasticity3d:16, convdiff3d:48:1) against PETSc's
/// preconditioned KSPs through trnsparse-mpi-bench --ksp, one JSON row per solver and a
/// summary row per problem (ours_over_petsc: our best total over PETSc's best).
void krylov_section(const Options& o, const Row& head, const Emit& emit);

}  // namespace trnsparse::bench
