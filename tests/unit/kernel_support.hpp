/// @file kernel_support.hpp
/// Helpers for the kernel, plan, gradient and determinism tests (test_kernels.cpp,
/// test_plan.cpp, test_gradients.cpp, test_determinism.cpp), on top of support.hpp:
/// a guard that restores the runtime (ISA, threads), the ISAs this CPU runs, random
/// block structures with the features the tile kernels branch on (empty block rows,
/// all-zero blocks, one dense block row), the reference kernels' arrays, and the
/// comparison of an optimised kernel with its reference twin.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/reference/products.hpp"
#include "support.hpp"
#include "trnsparse/plan.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse::test {

// ---- runtime ----------------------------------------------------------------------------

/// Restores the ISA and thread count that were active at construction: every test that
/// changes either holds one, so no test leaks its runtime into the next.
class RuntimeGuard {
public:
  RuntimeGuard() : isa_(active_isa()), threads_(num_threads()) {}
  ~RuntimeGuard() {
    set_isa(isa_);
    set_num_threads(threads_);
  }
  RuntimeGuard(const RuntimeGuard&) = delete;
  RuntimeGuard& operator=(const RuntimeGuard&) = delete;

private:
  Isa isa_;
  int threads_;
};

/// The ISAs whose kernels can run here (scalar always).
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (const Isa isa : all_isas)
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

/// Runs f(isa) with each supported ISA active, traced by name. The caller holds a
/// RuntimeGuard.
template <class F>
void for_each_isa(F&& f) {
  for (const Isa isa : supported_isas()) {
    SCOPED_TRACE(::testing::Message() << "isa " << to_string(isa));
    set_isa(isa);
    f(isa);
  }
}

/// Runs `run()` (which returns the output values) with 1, 2 and 3 threads on every ISA
/// and expects the same bytes each time.
template <class F>
void expect_thread_independent(F&& run) {
  const RuntimeGuard guard;
  for_each_isa([&](Isa) {
    std::optional<decltype(run())> first;
    for (const int threads : {1, 2, 3}) {
      set_num_threads(threads);
      const auto out = run();
      if (!first) {
        first = out;
        continue;
      }
      ASSERT_EQ(out.size(), first->size());
      EXPECT_EQ(std::memcmp(out.data(), first->data(), out.size() * sizeof(out[0])), 0)
          << "the output with " << threads << " threads differs from the output with 1 thread";
    }
  });
}

// ---- values ---------------------------------------------------------------------------------


/// Byte-for-byte equality of two owning matrices (for the determinism checks).
template <class T>
bool same_bytes(const Dense<T>& a, const Dense<T>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.values().data(), b.values().data(), a.values().size_bytes()) == 0;
}

// ---- block structures ---------------------------------------------------------------------

/// How a random block pattern is drawn.
struct PatternSpec {
  double density = 0.3;         ///< P(a block is stored) in an ordinary block row
  double empty_row_rate = 0.2;  ///< P(an ordinary block row stores no block at all)
  bool dense_block_row = true;  ///< the middle block row stores every block column
  double zero_block_rate = 0.15;  ///< P(a stored block holds only zeros)
};

/// A random block structure for a rows x cols matrix with block size b.
inline std::shared_ptr<const BsrStructure> random_structure(Rng& rng, index_t rows, index_t cols, index_t b,
                                                            const PatternSpec& spec) {
  const index_t block_rows = ceil_div(rows, b);
  const index_t block_cols = ceil_div(cols, b);
  const index_t dense_row = spec.dense_block_row ? block_rows / 2 : -1;
  std::vector<index_t> ptr{0};
  std::vector<index_t> idx;
  for (index_t bi = 0; bi < block_rows; ++bi) {
    const bool empty = bi != dense_row && rng.bernoulli(spec.empty_row_rate);
    for (index_t bj = 0; bj < block_cols && !empty; ++bj)
      if (bi == dense_row || rng.bernoulli(spec.density)) idx.push_back(bj);
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  return BsrStructure::make(rows, cols, b, std::move(ptr), std::move(idx));
}

/// Random values on `s`: a stored block is all zero with probability `zero_block_rate`,
/// otherwise each element is non-zero with probability 0.9. Padding is zeroed by the
/// constructor.
template <Value T>
BsrMatrix<T> random_bsr(Rng& rng, std::shared_ptr<const BsrStructure> s, double zero_block_rate) {
  const index_t bb = s->block_size() * s->block_size();
  std::vector<T> blocks(static_cast<std::size_t>(s->n_blocks() * bb));
  for (index_t k = 0; k < s->n_blocks(); ++k) {
    if (rng.bernoulli(zero_block_rate)) continue;
    for (index_t e = 0; e < bb; ++e)
      if (rng.bernoulli(0.9)) blocks[static_cast<std::size_t>(k * bb + e)] = random_value<T>(rng);
  }
  return BsrMatrix<T>(std::move(s), std::move(blocks));
}

template <Value T>
BsrMatrix<T> random_bsr(Rng& rng, index_t rows, index_t cols, index_t b, const PatternSpec& spec = {}) {
  return random_bsr<T>(rng, random_structure(rng, rows, cols, b, spec), spec.zero_block_rate);
}

/// The structure as the reference kernels take it.
inline kernels::reference::BsrArrays arrays_of(const BsrStructure& s) {
  return {s.rows(), s.cols(), s.block_size(), s.block_rows(), s.block_row_ptr().data(), s.block_col_indices().data()};
}

// ---- comparisons -------------------------------------------------------------------------

/// support.hpp's near_reference with an extra absolute slack, for inputs that leave the
/// normal floating-point range (subnormals, which vdpbf16ps flushes to zero):
///     |got - r| <= 2^-8 |r| + (1 + 2^-8) 3 (k+3) u M + absolute   (2^-8 terms: bf16 output).
template <Value TA, class TY>
::testing::AssertionResult near_float64(DenseView<const TY> got, const Reference& ref, double absolute) {
  const double u = unit_roundoff<acc_t<TA>>;
  const double u_out = std::is_same_v<TY, bf16> ? unit_roundoff<bf16> : 0.0;
  std::ostringstream mismatches;
  index_t count = 0;
  for (index_t i = 0; i < got.rows; ++i)
    for (index_t j = 0; j < got.cols; ++j) {
      const double r = ref.value(i, j);
      const double e = 3.0 * static_cast<double>(ref.inner + 3) * u * ref.magnitude(i, j);
      const double tol = u_out * std::fabs(r) + (1.0 + u_out) * e + absolute;
      const double g = to_double(got(i, j));
      if (!(std::fabs(g - r) <= tol)) {
        if (count < 5)
          mismatches << "\n  (" << i << ", " << j << "): got " << g << ", reference " << r << ", |diff| "
                     << std::fabs(g - r) << " > tolerance " << tol;
        ++count;
      }
    }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << count << " of " << got.rows * got.cols
                                       << " elements differ from the float64 reference:" << mismatches.str();
}

/// Checks an optimised kernel's output against its reference twin on the same inputs.
///
/// Both evaluate the same inner products of length k in acc_t<TA> (unit roundoff u:
/// 2^-24 for float and bf16 operands, 2^-53 for double), in the same order up to FMA
/// contraction (the tile kernels) or in a different order (bf16 pairs, vector-path lane
/// sums). Each is within gamma_{k+3} M of the exact value (Higham §3.1; M from the float64
/// reference, see support.hpp), so they are within 2 gamma_{k+3} M < 3 (k+3) u M of each
/// other (k + 3 <= 1% of 1/u). Rounding both to a bf16 output adds at most
/// 2^-8 (|g^| + |w^|) <= 2^-8 (1 + 2^-7) (|g| + |w|) on top. `absolute` is an extra
/// absolute slack for callers whose inputs leave the normal range (flushed subnormals).
template <Value TA, class TY>
::testing::AssertionResult near_kernel(DenseView<const TY> got, DenseView<const TY> want, const Reference& ref,
                                       double absolute = 0.0) {
  if (got.rows != want.rows || got.cols != want.cols)
    return ::testing::AssertionFailure() << "shape " << got.rows << "x" << got.cols << ", reference kernel "
                                         << want.rows << "x" << want.cols;
  const double u = unit_roundoff<acc_t<TA>>;
  const double u_out = std::is_same_v<TY, bf16> ? unit_roundoff<bf16> : 0.0;
  std::ostringstream mismatches;
  index_t count = 0;
  for (index_t i = 0; i < got.rows; ++i)
    for (index_t j = 0; j < got.cols; ++j) {
      const double g = to_double(got(i, j));
      const double w = to_double(want(i, j));
      const double tol = 3.0 * static_cast<double>(ref.inner + 3) * u * ref.magnitude(i, j) +
                         u_out * (1.0 + 2.0 * u_out) * (std::fabs(g) + std::fabs(w)) + absolute;
      if (!(std::fabs(g - w) <= tol)) {
        if (count < 5)
          mismatches << "\n  (" << i << ", " << j << "): got " << g << ", reference kernel " << w << ", |diff| "
                     << std::fabs(g - w) << " > tolerance " << tol;
        ++count;
      }
    }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << count << " of " << got.rows * got.cols
                                       << " elements differ from the reference kernel (" << type_name<TA>()
                                       << " operands, " << type_name<TY>() << " output):" << mismatches.str();
}

}  // namespace trnsparse::test
