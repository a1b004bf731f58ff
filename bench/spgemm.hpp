// Internal to the benchmark: the `spgemm` section (bench/spgemm.cpp).
#pragma once

#include "bench.hpp"

namespace trnsparse::bench {

/// A² (sparse × sparse) for each --problem and --matrix, fp64 or fp32: the full product
/// (symbolic and numeric), the product with its plan cached, and the numeric phase alone
/// into existing values, next to Eigen's sparse product and PETSc's MatMatMult (from
/// trnsparse-mpi-bench, when built) on the same matrix, and the output's memory-traffic
/// bound; with --block-size B <= 8 (3 for elasticity problems otherwise) the BSR-B
/// product against our CSR one, timed side by side. `head` holds the common fields.
void spgemm_section(const Options& o, const Row& head, const Emit& emit);

}  // namespace trnsparse::bench
