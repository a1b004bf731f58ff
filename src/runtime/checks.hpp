// Internal: argument checking and message building shared by every API function.
#pragma once

#include <cstddef>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <new>
#include <stdexcept>
#include <vector>

#include "trnsparse/dense.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::detail {

/// Concatenates anything streamable into one message.
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// ceil(n / b) for n >= 0, b >= 1, without overflow.
constexpr index_t ceil_div(index_t n, index_t b) noexcept { return n / b + (n % b != 0 ? 1 : 0); }

/// Runs `allocate` (which asks for n elements) and returns what it returns; an
/// OverflowError naming `what` when n does not fit in memory, instead of std::bad_alloc
/// or std::length_error.
template <class F>
auto allocating(index_t n, const char* what, F&& allocate) {
  try {
    return allocate();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw OverflowError(concat(what, ": ", n, " elements do not fit in memory"));
}

/// An empty vector with room for n elements, advised huge pages before its first touch
/// (advise_huge_pages); OverflowError naming `what` when they do not fit in memory.
template <class T>
std::vector<T> huge_reserved(index_t n, const char* what) {
  std::vector<T> v = allocating(n, what, [&] {
    std::vector<T> r;
    r.reserve(static_cast<std::size_t>(n));
    return r;
  });
  advise_huge_pages(v);
  return v;
}

/// A vector of n value-initialised elements, on huge pages where it is large;
/// OverflowError naming `what` when n does not fit in memory.
template <class T>
std::vector<T> make_vector(index_t n, const char* what) {
  std::vector<T> v = huge_reserved<T>(n, what);
  v.resize(static_cast<std::size_t>(n));
  return v;
}

/// Throws InvalidArgument unless `threshold >= 0` (NaN fails).
void check_threshold(double threshold, const char* who);
/// Throws InvalidArgument unless `block_size >= 1`.
void check_block_size(index_t block_size, const char* who);

/// Throws DimensionMismatch `who: <what> has <got> <unit>, expected <want_name> = <want>`
/// unless got == want.
void check_dim(index_t got, index_t want, const char* who, const char* what, const char* unit, const char* want_name);

/// Throws InvalidArgument if the memory of [a, a + a_bytes) and [b, b + b_bytes) overlap:
/// an output may not alias an input.
void check_no_alias(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, const char* who,
                    const char* in_name, const char* out_name);

/// Bytes spanned by a row-major view: from its first to one past its last element.
template <class T>
std::size_t span_bytes(const DenseView<T>& v) noexcept {
  if (v.rows == 0 || v.cols == 0) return 0;
  return static_cast<std::size_t>((v.rows - 1) * v.ld + v.cols) * sizeof(T);
}

/// Checks the compressed-row arrays shared by CSR and BSR: `ptr` has n_rows + 1
/// entries, starts at 0, never decreases and ends at idx.size(); every index lies in
/// [0, n_cols). With `require_sorted`, indices must be strictly increasing in each row
/// (IndexError otherwise). Returns whether every row is strictly increasing.
/// `who` prefixes messages; `ptr_name`, `idx_name` name the arrays; `unit` names a row
/// ("row", "block row").
bool validate_compressed(std::string_view who, std::span<const index_t> ptr, index_t n_rows,
                         std::span<const index_t> idx, index_t n_cols, bool require_sorted, const char* ptr_name,
                         const char* idx_name, const char* unit);

/// Shapes and aliasing of y = op(A) x with op(A) rows x cols.
template <class TX, class TY>
void check_spmv(const char* who, index_t rows, index_t cols, std::span<const TX> x, std::span<TY> y) {
  check_dim(static_cast<index_t>(x.size()), cols, who, "x", "elements", "A.cols()");
  check_dim(static_cast<index_t>(y.size()), rows, who, "y", "elements", "A.rows()");
  check_no_alias(x.data(), x.size_bytes(), y.data(), y.size_bytes(), who, "x", "y");
}

/// Shapes and aliasing of C = op(A) B with op(A) rows x cols.
template <class TB, class TC>
void check_spmm(const char* who, index_t rows, index_t cols, const DenseView<const TB>& B, const DenseView<TC>& C,
                const char* rows_name = "A.rows()", const char* cols_name = "A.cols()") {
  check_dim(B.rows, cols, who, "B", "rows", cols_name);
  check_dim(C.rows, rows, who, "C", "rows", rows_name);
  check_dim(C.cols, B.cols, who, "C", "columns", "B.cols");
  check_no_alias(B.data, span_bytes(B), C.data, span_bytes(C), who, "B", "C");
}

}  // namespace trnsparse::detail
