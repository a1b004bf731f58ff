// Internal to the benchmark: the `solve` section (bench/solve.cpp).
#pragma once

#include "bench.hpp"

namespace trnsparse::bench {

/// Jacobi-preconditioned CG (fp64) on the 3D Poisson problem of edge `o.poisson_n`, with
/// the full CSR matrix and with its stored upper triangle, against Eigen's
/// ConjugateGradient and the memory-traffic bound; then block CG on 16 right-hand sides
/// against 16 single solves. `head` holds the fields every row starts with.
void solve_section(const Options& o, const Row& head, const Emit& emit);

}  // namespace trnsparse::bench
