// Internal to the benchmark: the `attn` section (bench/attention.cpp).
#pragma once

#include "bench.hpp"

namespace trnsparse::bench {

/// Block-sparse attention against dense OpenBLAS attention; `head` holds the fields every
/// row starts with (its "threads" entry is the thread count used).
void attention_section(const Options& o, const Row& head, const Emit& emit);

/// The "threads" field of a row header.
int head_threads(const Row& head);

}  // namespace trnsparse::bench
