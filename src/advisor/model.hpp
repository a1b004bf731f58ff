// Internal: what the advisor's calibration and its advice share, the product they time
// and the model's terms (threads a product gets, bytes it streams per stored entry).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>

#include "runtime/parallel.hpp"
#include "runtime/rng.hpp"
#include "runtime/value.hpp"
#include "trnsparse/advisor.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/dense.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::detail::advisor {

template <Value T>
Dense<T> random_operand(index_t rows, index_t cols) {
  detail::SplitMix64 rng{11};
  Dense<T> B(rows, cols);
  for (T& v : B.values()) v = detail::value_cast<T>(rng.symmetric());
  return B;
}

/// One product of A in `format` (BSR: converted at construction) with a random operand
/// of `width` columns, ready to be timed.
template <Value T>
class Product {
public:
  Product(const CsrMatrix<T>& A, Format format, index_t block_size, index_t width)
      : A_(A), B_(random_operand<T>(A.cols(), width)), C_(A.rows(), width) {
    if (format == Format::bsr) blocked_.emplace(to_bsr(A, block_size));
  }
  void operator()() {
    if (blocked_) spmm(acc_t<T>(1), *blocked_, B_.view(), acc_t<T>(0), C_.view());
    else spmm(acc_t<T>(1), A_, B_.view(), acc_t<T>(0), C_.view());
  }

private:
  using TY = std::conditional_t<std::is_same_v<T, bf16>, float, T>;
  const CsrMatrix<T>& A_;
  Dense<T> B_;
  Dense<TY> C_;
  std::optional<BsrMatrix<T>> blocked_;
};

/// Stored entries of the calibration's in-cache matrices at `width`: wide operands shrink
/// the matrix, so that the operand (rows x width) stays in cache too.
inline double calibration_entries(index_t width) {
  return Calibration::kCachedEntries * std::min(1.0, 16.0 / static_cast<double>(width));
}

/// Threads the library gives a product of `stored` entries in blocks of b (b = 1: CSR)
/// over `block_rows` block rows at `width` with `threads` threads (the kernels' own
/// parts_for).
inline int product_parts(index_t b, double stored, index_t block_rows, index_t width, int threads) {
  const detail::Work family = b == 1 ? detail::Work::csr : b <= 8 ? detail::Work::small_blocks : detail::Work::tiles;
  return detail::parts_for(block_rows, detail::work_ns(family, stored * static_cast<double>(width), width), threads);
}

/// The thread count a calibration was measured with, from its machine line ("...;
/// threads N; ..."), or 1 when the line does not say.
inline int calibration_threads(const std::string& machine) {
  const auto at = machine.find("; threads ");
  if (at == std::string::npos) return 1;
  return std::max(1, std::atoi(machine.c_str() + at + 10));
}

/// The bytes a product streams per stored entry in BSR with b x b blocks (b = 1: CSR):
/// the value and its share of a block index (32 bits where the kernels read a compact
/// copy: CSR, and blocks up to 8).
template <Value T>
double bytes_per_entry(index_t b) {
  return static_cast<double>(sizeof(T)) + (b <= 8 ? 4.0 : 8.0) / static_cast<double>(b * b);
}

}  // namespace trnsparse::detail::advisor
