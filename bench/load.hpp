// Internal to the benchmark: the `load` section (bench/load.cpp).
#pragma once

#include "bench.hpp"

namespace trnsparse::bench {

/// Small products (the Poisson SpMV in CSR and BSR-32, a 3 x 3 BSR SpMM of width 8, an
/// attention forward at L = 1024, a CG iteration) timed with the default thread count
/// and with one thread, paired, on an idle machine and with a child process keeping one
/// core busy. `head` holds the fields every row starts with.
void load_section(const Options& o, const Row& head, const Emit& emit);

}  // namespace trnsparse::bench
