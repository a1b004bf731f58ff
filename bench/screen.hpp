// Internal to the benchmark: the `screen` section (bench/screen.cpp).
#pragma once

#include "bench.hpp"

namespace trnsparse::bench {

/// `screened_spmm` on an n x n matrix (BSR, every block stored) with exponentially
/// decaying bounds, at thresholds keeping 100%, 50% and 10% of the entries, against the
/// unfused path (bounds, mask, masked dense, CSR, CSR SpMM) and OpenBLAS GEMM on the
/// masked matrix. `head` holds the fields every row starts with.
void screen_section(const Options& o, const Row& head, const Emit& emit);

}  // namespace trnsparse::bench
