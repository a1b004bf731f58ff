/// @file support.hpp
/// Test support for the trnsparse unit tests: a replayable seeded RNG, random and
/// adversarial matrices built from raw arrays (independently of the conversions under
/// test), float64 dense reference implementations of the operations, and comparisons
/// with tolerances derived from the precision of the computation.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "trnsparse/trnsparse.hpp"

namespace trnsparse::test {

// ---- the process's surroundings ---------------------------------------------------------

/// A directory of its own under the system temporary directory (named from `prefix` and
/// random digits), removed with its contents when the guard goes.
class TempDir {
public:
  explicit TempDir(std::string_view prefix = "trnsparse_test_") {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() /
            (std::string(prefix) + std::to_string(random()) + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  /// Names of the files in the directory, sorted.
  [[nodiscard]] std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) names.push_back(entry.path().filename().string());
    std::ranges::sort(names);
    return names;
  }

private:
  std::filesystem::path path_;
};

/// Environment variables set for a while and restored (or unset again) when the guard goes.
class EnvGuard {
public:
  EnvGuard() = default;
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;
  ~EnvGuard() {
    for (const auto& [name, value] : saved_)
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
  }
  /// Sets (or, with nullptr, unsets) `name` until the guard goes.
  void set(const char* name, const char* value) {
    if (std::ranges::none_of(saved_, [&](const auto& s) { return s.first == name; })) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    }
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// ---- seeds ------------------------------------------------------------------------

/// The seed every random test derives its stream from: `TRNSPARSE_TEST_SEED` when set
/// (decimal or 0x-prefixed hexadecimal), otherwise a fixed default.
inline std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("TRNSPARSE_TEST_SEED");
    if (env == nullptr || *env == '\0') return std::uint64_t{20240611};
    char* end = nullptr;
    const std::uint64_t parsed = std::strtoull(env, &end, 0);
    if (*end != '\0') throw std::invalid_argument(std::string("TRNSPARSE_TEST_SEED='") + env + "' is not an integer");
    return parsed;
  }();
  return seed;
}

/// The text after `field` (e.g. "AnonHugePages:", "VmFlags:") in /proc/self/smaps for the
/// mapping that holds `p`; empty if there is none.
inline std::string smaps_field(const void* p, std::string_view field) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= at && at < hi;
    else if (inside && line.starts_with(field)) return line.substr(field.size());
  }
  return {};
}

/// The kB of huge pages backing the mapping that holds `p`.
inline long huge_kb_at(const void* p) {
  const std::string kb = smaps_field(p, "AnonHugePages:");
  return kb.empty() ? -1 : std::stol(kb);
}

/// An anonymous private mapping, unmapped at the end of its scope.
struct Mapping {
  std::size_t bytes;
  char* p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ~Mapping() { munmap(p, bytes); }
};

inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

/// The first 2 MiB boundary at or after `p`.
template <class T>
T* first_huge_page(T* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<T*>((at + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes);
}

/// Whether the mapping that holds `p` carries huge-page advice (VmFlags "hg", set by
/// MADV_HUGEPAGE).
inline bool advised_at(const void* p) {
  return (" " + smaps_field(p, "VmFlags:") + " ").find(" hg ") != std::string::npos;
}

/// Whether this kernel takes huge-page advice and says so in /proc/self/smaps.
inline bool kernel_shows_advice() {
  const Mapping probe{2 * huge_page_bytes};
  char* page = first_huge_page(probe.p);
  return madvise(page, huge_page_bytes, MADV_HUGEPAGE) == 0 && advised_at(page);
}

/// Whether this kernel collapses anonymous memory on request (Linux 6.1 and later, with
/// transparent huge pages built in).
inline bool kernel_collapses() {
  const Mapping probe{2 * huge_page_bytes};
  char* page = first_huge_page(probe.p);
  std::memset(page, 1, huge_page_bytes);
  return madvise(page, huge_page_bytes, 25 /* MADV_COLLAPSE */) == 0;
}

/// 64-bit FNV-1a: mixes a test's name into its seed, so a test draws the same numbers
/// whether it runs alone or with others.
inline std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

/// A deterministic generator: mt19937_64 (specified bit for bit by the standard) with
/// its own transforms, because the standard distributions differ between libraries.
class Rng {
public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  std::uint64_t bits() { return engine_(); }
  /// Uniform in [lo, hi), 53 random bits.
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(bits() >> 11) * 0x1p-53; }
  bool bernoulli(double p) { return uniform(0.0, 1.0) < p; }
  /// Uniform in [0, n), n >= 1.
  index_t below(index_t n) { return static_cast<index_t>(bits() % static_cast<std::uint64_t>(n)); }

private:
  std::mt19937_64 engine_;
};

/// The name gtest_discover_tests (CMake 3.25) gives the running test, so that `ctest -R`
/// finds it: Suite.Test for plain and fixture tests; Suite.Test<TypeParam> for typed
/// tests (the suite cut at its first '/'); for value-parameterised tests, Suite.Test/P
/// when named by index and "Suite.Test/name  # GetParam() = P" otherwise.
inline std::string ctest_name(const ::testing::TestInfo& info) {
  const std::string suite = info.test_suite_name();
  const std::string name = info.name();
  if (info.type_param() != nullptr) return suite.substr(0, suite.find('/')) + "." + name + "<" + info.type_param() + ">";
  if (info.value_param() == nullptr) return suite + "." + name;
  const auto slash = name.rfind('/');
  if (name.find_first_not_of("0123456789", slash + 1) == std::string::npos)
    return suite + "." + name.substr(0, slash + 1) + info.value_param();
  return suite + "." + name + "  # GetParam() = " + info.value_param();
}

/// `text` as a regular expression that matches exactly itself.
inline std::string regex_literal(std::string_view text) {
  std::string out = "^";
  for (const char c : text) {
    if (std::string_view(".^$*+?()[]{}|\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out + "$";
}

/// Fixture base for tests that use randomness. Each test draws from its own stream,
/// seeded by base_seed() and its name; the seed is recorded as a test property and
/// printed with every failure, with the command that replays the test:
///   TRNSPARSE_TEST_SEED=<seed> ctest -R '<test name>'
template <class Base = ::testing::Test>
class Seeded : public Base {
protected:
  Seeded() { ::testing::Test::RecordProperty("seed", std::to_string(base_seed())); }

private:
  static const ::testing::TestInfo& info() { return *::testing::UnitTest::GetInstance()->current_test_info(); }
  ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__,
                                     "replay with TRNSPARSE_TEST_SEED=" + std::to_string(base_seed()) +
                                         " ctest -R '" + regex_literal(ctest_name(info())) + "'"};

protected:
  Rng rng{base_seed() ^ fnv1a(std::string(info().test_suite_name()) + "." + info().name())};
};

// ---- value types --------------------------------------------------------------------

template <Value T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else return "bf16";
}

/// Unit roundoff (half the machine epsilon): |fl(x) - x| <= u |x| for round to nearest.
template <Value T>
inline constexpr double unit_roundoff = std::is_same_v<T, double> ? 0x1p-53 : std::is_same_v<T, float> ? 0x1p-24 : 0x1p-8;

template <Value T>
double to_double(T v) {
  return static_cast<double>(v);
}

/// {1, 2.5, ...} as a vector of T (the values must be representable in T).
template <Value T>
std::vector<T> values_of(std::initializer_list<double> values) {
  std::vector<T> out;
  for (const double v : values) out.push_back(static_cast<T>(v));
  return out;
}

template <Value T>
bool is_nan(T v) {
  return std::isnan(to_double(v));
}

/// The elements of a range of values, widened exactly (for readable expectations).
template <class Range>
std::vector<double> as_doubles(const Range& values) {
  std::vector<double> out;
  for (const auto v : values) out.push_back(to_double(v));
  return out;
}

/// Same value, or both NaN. (+0 and -0 compare equal: dropping a -0 entry is allowed.)
template <Value T>
bool same_value(T a, T b) {
  return (is_nan(a) && is_nan(b)) || to_double(a) == to_double(b);
}

/// One (TA, TY) operand/output combination of the products.
template <Value A, class Y>
requires OutputFor<A, Y>
struct TypePair {
  using TA = A;
  using TY = Y;
};

using ValueTypes = ::testing::Types<float, double, bf16>;
using ProductTypes = ::testing::Types<TypePair<float, float>, TypePair<double, double>, TypePair<bf16, float>,
                                      TypePair<bf16, bf16>>;

/// Readable typed-test names: `Suite/bf16_float/2.Test` instead of `Suite/2.Test`. The
/// trailing index keeps the form gtest_discover_tests parses, which names the ctest test
/// `Suite.Test<TypeParam>`.
struct TypeNames {
  template <class T>
  static std::string GetName(int index) {
    if constexpr (Value<T>) return std::string(type_name<T>()) + "/" + std::to_string(index);
    else
      return std::string(type_name<typename T::TA>()) + "_" + type_name<typename T::TY>() + "/" +
             std::to_string(index);
  }
};

// ---- matrices from raw arrays ---------------------------------------------------------

template <Value T>
Dense<double> widen(DenseView<const T> a) {
  Dense<double> w(a.rows, a.cols);
  for (index_t i = 0; i < a.rows; ++i)
    for (index_t j = 0; j < a.cols; ++j) w(i, j) = to_double(a(i, j));
  return w;
}

template <Value T>
Dense<T> transpose_dense(DenseView<const T> a) {
  Dense<T> t(a.cols, a.rows);
  for (index_t i = 0; i < a.rows; ++i)
    for (index_t j = 0; j < a.cols; ++j) t(j, i) = a(i, j);
  return t;
}

/// The CSR holding exactly the non-zero (or NaN) elements of `a`, built from raw arrays.
template <Value T>
CsrMatrix<T> csr_from_dense(DenseView<const T> a) {
  std::vector<index_t> row_ptr{0};
  std::vector<index_t> col_idx;
  std::vector<T> values;
  for (index_t i = 0; i < a.rows; ++i) {
    for (index_t j = 0; j < a.cols; ++j) {
      if (to_double(a(i, j)) != 0.0) {  // NaN != 0: kept
        col_idx.push_back(j);
        values.push_back(a(i, j));
      }
    }
    row_ptr.push_back(static_cast<index_t>(col_idx.size()));
  }
  return {a.rows, a.cols, std::move(row_ptr), std::move(col_idx), std::move(values)};
}

inline index_t ceil_div(index_t n, index_t b) { return n / b + (n % b != 0 ? 1 : 0); }

/// The BSR of `a` with block size b, built from raw arrays. A block is stored when it
/// holds a non-zero; an all-zero block is stored too with probability `zero_block_rate`.
template <Value T>
BsrMatrix<T> bsr_from_dense(DenseView<const T> a, index_t b, Rng& rng, double zero_block_rate) {
  std::vector<index_t> row_ptr{0};
  std::vector<index_t> col_idx;
  std::vector<T> blocks;
  for (index_t bi = 0; bi < ceil_div(a.rows, b); ++bi) {
    for (index_t bj = 0; bj < ceil_div(a.cols, b); ++bj) {
      const index_t i_end = std::min(a.rows, (bi + 1) * b);
      const index_t j_end = std::min(a.cols, (bj + 1) * b);
      bool any_nonzero = false;
      for (index_t i = bi * b; i < i_end; ++i)
        for (index_t j = bj * b; j < j_end; ++j) any_nonzero = any_nonzero || to_double(a(i, j)) != 0.0;
      if (!any_nonzero && !rng.bernoulli(zero_block_rate)) continue;
      col_idx.push_back(bj);
      for (index_t r = 0; r < b; ++r)
        for (index_t c = 0; c < b; ++c) {
          const index_t i = bi * b + r;
          const index_t j = bj * b + c;
          blocks.push_back(i < a.rows && j < a.cols ? a(i, j) : T{});
        }
    }
    row_ptr.push_back(static_cast<index_t>(col_idx.size()));
  }
  return {a.rows, a.cols, b, std::move(row_ptr), std::move(col_idx), std::move(blocks)};
}

/// The logical matrix a CSR stores, read from its arrays.
template <Value T>
Dense<T> dense_of(const CsrMatrix<T>& A) {
  Dense<T> d(A.rows(), A.cols());
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t p = A.row_ptr()[i]; p < A.row_ptr()[i + 1]; ++p) d(i, A.col_indices()[p]) = A.values()[p];
  return d;
}

/// The logical matrix a BSR stores, read from its arrays (padding is not part of it).
template <Value T>
Dense<T> dense_of(const BsrMatrix<T>& A) {
  const BsrStructure& s = A.structure();
  const index_t b = s.block_size();
  Dense<T> d(A.rows(), A.cols());
  for (index_t bi = 0; bi < s.block_rows(); ++bi)
    for (index_t k = s.block_row_ptr()[bi]; k < s.block_row_ptr()[bi + 1]; ++k) {
      const index_t bj = s.block_col_indices()[k];
      for (index_t r = 0; r < s.row_extent(bi); ++r)
        for (index_t c = 0; c < s.col_extent(bj); ++c) d(bi * b + r, bj * b + c) = A.block(k)[r * b + c];
    }
  return d;
}

/// The (block row, block column) coordinates of the stored blocks.
inline std::set<std::pair<index_t, index_t>> stored_blocks(const BsrStructure& s) {
  std::set<std::pair<index_t, index_t>> blocks;
  for (index_t bi = 0; bi < s.block_rows(); ++bi)
    for (index_t k = s.block_row_ptr()[bi]; k < s.block_row_ptr()[bi + 1]; ++k)
      blocks.emplace(bi, s.block_col_indices()[k]);
  return blocks;
}

/// True when every padding element (outside the logical shape) of every block is +0.
template <Value T>
bool padding_is_zero(const BsrMatrix<T>& A) {
  const BsrStructure& s = A.structure();
  const index_t b = s.block_size();
  for (index_t bi = 0; bi < s.block_rows(); ++bi)
    for (index_t k = s.block_row_ptr()[bi]; k < s.block_row_ptr()[bi + 1]; ++k)
      for (index_t r = 0; r < b; ++r)
        for (index_t c = 0; c < b; ++c) {
          const bool padding = r >= s.row_extent(bi) || c >= s.col_extent(s.block_col_indices()[k]);
          if (padding && std::bit_cast<std::uint64_t>(to_double(A.block(k)[r * b + c])) != 0) return false;
        }
  return true;
}

// ---- random and adversarial matrices ----------------------------------------------------

/// A value uniform in [-1, 1) rounded to T, never zero (so "stored" means "non-zero").
template <Value T>
T random_value(Rng& rng) {
  for (;;) {
    const T v = static_cast<T>(rng.uniform(-1.0, 1.0));
    if (to_double(v) != 0.0) return v;
  }
}

/// rows x cols; each element non-zero with probability `density`.
template <Value T>
Dense<T> random_dense(Rng& rng, index_t rows, index_t cols, double density = 1.0) {
  Dense<T> a(rows, cols);
  for (index_t i = 0; i < rows; ++i)
    for (index_t j = 0; j < cols; ++j)
      if (rng.bernoulli(density)) a(i, j) = random_value<T>(rng);
  return a;
}

/// A named matrix shape and pattern; tests loop over them under SCOPED_TRACE(name).
struct MatrixSpec {
  std::string name;
  index_t rows;
  index_t cols;
  double density;
  /// Row filled completely on top of the random pattern (-1: none).
  index_t dense_row = -1;
};

/// The shapes every format and operation must handle: empty in each dimension, 1x1,
/// unaligned to every block size used, all-zero, one dense row among sparse ones, long
/// rows, and a square matrix larger than the default block size.
inline std::vector<MatrixSpec> adversarial_specs() {
  return {
      {"empty_0x0", 0, 0, 0.5},
      {"no_rows_0x5", 0, 5, 0.5},
      {"no_cols_6x0", 6, 0, 0.5},
      {"single_1x1", 1, 1, 1.0},
      {"unaligned_7x5", 7, 5, 0.4},
      {"all_zero_9x11", 9, 11, 0.0},
      {"one_dense_row_24x40", 24, 40, 0.05, 17},
      {"long_rows_3x300", 3, 300, 0.7},
      {"unaligned_130x67", 130, 67, 0.05},
      {"square_140x140", 140, 140, 0.03},
  };
}

template <Value T>
Dense<T> random_dense(Rng& rng, const MatrixSpec& spec) {
  Dense<T> a = random_dense<T>(rng, spec.rows, spec.cols, spec.density);
  if (spec.dense_row >= 0)
    for (index_t j = 0; j < spec.cols; ++j) a(spec.dense_row, j) = random_value<T>(rng);
  return a;
}

template <Value T>
T quiet_nan() {
  return static_cast<T>(std::numeric_limits<double>::quiet_NaN());
}

/// Written beyond the logical columns of an output to detect stray writes; exact in every type.
template <Value T>
T sentinel_value() {
  return static_cast<T>(1024.0);
}

template <Value T>
Dense<T> filled(index_t rows, index_t cols, T value) {
  Dense<T> d(rows, cols);
  std::ranges::fill(d.values(), value);
  return d;
}

/// The initial output of y = alpha A x + beta y: random, or NaN when beta == 0 (it must
/// then be written without being read).
template <Value T>
Dense<T> initial_output(Rng& rng, index_t rows, index_t cols, double beta) {
  return beta == 0.0 ? filled<T>(rows, cols, quiet_nan<T>()) : random_dense<T>(rng, rows, cols);
}

/// A rows x cols view with leading dimension `ld` over storage whose elements beyond
/// `cols` in each row hold `fill`: a sentinel to check they are never written, or NaN to
/// check they are never read.
template <Value T>
class StridedDense {
public:
  StridedDense(index_t rows, index_t cols, index_t ld, T fill)
      : rows_(rows), cols_(cols), ld_(ld), data_(static_cast<std::size_t>(std::max<index_t>(rows * ld, 1)), fill) {}
  StridedDense(const Dense<T>& values, index_t ld, T fill) : StridedDense(values.rows(), values.cols(), ld, fill) {
    for (index_t i = 0; i < rows_; ++i)
      for (index_t j = 0; j < cols_; ++j) view()(i, j) = values(i, j);
  }

  [[nodiscard]] DenseView<T> view() { return {data_.data(), rows_, cols_, ld_}; }
  [[nodiscard]] DenseView<const T> view() const { return {data_.data(), rows_, cols_, ld_}; }
  /// True when every element beyond `cols` still holds `fill` (bit for bit).
  [[nodiscard]] bool padding_holds(T fill) const {
    for (index_t i = 0; i < rows_; ++i)
      for (index_t j = cols_; j < ld_; ++j)
        if (std::memcmp(&data_[static_cast<std::size_t>(i * ld_ + j)], &fill, sizeof(T)) != 0) return false;
    return true;
  }

private:
  index_t rows_;
  index_t cols_;
  index_t ld_;
  std::vector<T> data_;
};

// ---- float64 references ------------------------------------------------------------

/// The float64 value of an operation and the magnitude that bounds its rounding error.
struct Reference {
  Dense<double> value;
  /// Elementwise |alpha| sum_j |a_ij||b_jk| + |beta||c_ik| (the beta term only when beta != 0).
  Dense<double> magnitude;
  /// The longest inner product behind an element.
  index_t inner = 0;
};

/// alpha * A * B + beta * C for a finite B; C is not read when beta == 0 (it may hold
/// NaN). Zeros of A are skipped, as in a sparse product: O(rows * cols + nnz(A) * k).
inline Reference reference_gemm(double alpha, const Dense<double>& A, const Dense<double>& B, double beta,
                                const Dense<double>& C) {
  Reference ref{Dense<double>(A.rows(), B.cols()), Dense<double>(A.rows(), B.cols()), A.cols()};
  for (index_t i = 0; i < A.rows(); ++i) {
    for (index_t j = 0; j < A.cols(); ++j) {
      if (A(i, j) == 0.0) continue;
      for (index_t k = 0; k < B.cols(); ++k) {
        ref.value(i, k) += A(i, j) * B(j, k);
        ref.magnitude(i, k) += std::fabs(A(i, j) * B(j, k));
      }
    }
    for (index_t k = 0; k < B.cols(); ++k) {
      ref.value(i, k) = alpha * ref.value(i, k) + (beta != 0.0 ? beta * C(i, k) : 0.0);
      ref.magnitude(i, k) = std::fabs(alpha) * ref.magnitude(i, k) + (beta != 0.0 ? std::fabs(beta * C(i, k)) : 0.0);
    }
  }
  return ref;
}

/// alpha * A + beta * B elementwise: each element is two products and one sum.
inline Reference reference_add(double alpha, const Dense<double>& A, double beta, const Dense<double>& B) {
  Reference ref{Dense<double>(A.rows(), A.cols()), Dense<double>(A.rows(), A.cols()), 0};
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t j = 0; j < A.cols(); ++j) {
      ref.value(i, j) = alpha * A(i, j) + beta * B(i, j);
      ref.magnitude(i, j) = std::fabs(alpha * A(i, j)) + std::fabs(beta * B(i, j));
    }
  return ref;
}

/// The `uplo` triangle (with the diagonal) of A, as spmv_symmetric and the solvers'
/// stored-triangle operators take it.
template <Value T>
CsrMatrix<T> triangle_of(const CsrMatrix<T>& A, Triangle uplo) {
  std::vector<index_t> ptr{0}, col;
  std::vector<T> val;
  for (index_t i = 0; i < A.rows(); ++i) {
    for (index_t p = A.row_ptr()[i]; p < A.row_ptr()[i + 1]; ++p) {
      const index_t j = A.col_indices()[p];
      if (uplo == Triangle::upper ? j >= i : j <= i) {
        col.push_back(j);
        val.push_back(A.values()[p]);
      }
    }
    ptr.push_back(static_cast<index_t>(col.size()));
  }
  return {A.rows(), A.cols(), std::move(ptr), std::move(col), std::move(val)};
}

/// One triangle of a large banded symmetric matrix, built from arrays (no dense n x n):
/// the diagonals at `offsets` (>= 0) from the main one and, when `arrow`, a full last
/// column (upper) or row (lower), whose mirrored entries reach across the whole matrix.
template <Value T>
CsrMatrix<T> banded_triangle(Rng& rng, index_t n, std::initializer_list<index_t> offsets, bool arrow, Triangle uplo) {
  std::vector<index_t> ptr{0}, idx;
  std::vector<T> vals;
  for (index_t i = 0; i < n; ++i) {
    std::set<index_t> cols;
    for (const index_t d : offsets)
      if (uplo == Triangle::upper ? i + d < n : i - d >= 0) cols.insert(uplo == Triangle::upper ? i + d : i - d);
    if (arrow && uplo == Triangle::upper) cols.insert(n - 1);
    if (arrow && uplo == Triangle::lower && i == n - 1)
      for (index_t j = 0; j < n; ++j) cols.insert(j);
    for (const index_t j : cols) {
      idx.push_back(j);
      vals.push_back(random_value<T>(rng));
    }
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  return CsrMatrix<T>(n, n, std::move(ptr), std::move(idx), std::move(vals));
}

/// alpha * S * x + beta * y in float64 for the symmetric S of which A stores one
/// triangle, from the sparse entries (O(nnz)); `inner` is the longest row of S.
template <Value T, class TY>
Reference reference_symmetric(double alpha, const CsrMatrix<T>& A, const Dense<T>& x, double beta,
                              const Dense<TY>& y) {
  const index_t n = A.rows();
  Reference ref{Dense<double>(n, 1), Dense<double>(n, 1), 0};
  std::vector<index_t> row_length(static_cast<std::size_t>(n), 0);
  const auto ptr = A.row_ptr();
  for (index_t i = 0; i < n; ++i)
    for (index_t p = ptr[i]; p < ptr[i + 1]; ++p) {
      const index_t j = A.col_indices()[p];
      const double a = to_double(A.values()[p]);
      ref.value(i, 0) += a * to_double(x(j, 0));
      ref.magnitude(i, 0) += std::fabs(a * to_double(x(j, 0)));
      ++row_length[i];
      if (j == i) continue;
      ref.value(j, 0) += a * to_double(x(i, 0));
      ref.magnitude(j, 0) += std::fabs(a * to_double(x(i, 0)));
      ++row_length[j];
    }
  for (index_t i = 0; i < n; ++i) {
    const double c = beta != 0.0 ? beta * to_double(y(i, 0)) : 0.0;
    ref.value(i, 0) = alpha * ref.value(i, 0) + c;
    ref.magnitude(i, 0) = std::fabs(alpha) * ref.magnitude(i, 0) + std::fabs(c);
    ref.inner = std::max(ref.inner, row_length[i]);
  }
  return ref;
}

// ---- comparisons --------------------------------------------------------------------------

/// Matches a callable that throws E (or a type derived from it) whose message contains
/// every one of `parts`, e.g. the argument name and the offending position:
///     EXPECT_THAT([&] { f(); }, throws_naming<IndexError>("col_idx[3]"));
template <class E, class... Parts>
auto throws_naming(const Parts&... parts) {
  return ::testing::ThrowsMessage<E>(::testing::AllOf(::testing::HasSubstr(std::string(parts))...));
}

/// Checks a computed result against its float64 reference.
///
/// Error model (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1):
/// an inner product of length k evaluated in any order, with or without FMA, in a
/// precision with unit roundoff u obeys |fl(a.x) - a.x| <= gamma_k |a|.|x|, with
/// gamma_k = k u / (1 - k u). Scaling by alpha, forming beta * y and adding them are three
/// more roundings, so the accumulated result r^ of r = alpha A x + beta y satisfies
///     |r^ - r| <= gamma_{k+3} M,   M = |alpha| sum_j |a_ij||x_j| + |beta||y_i|,
/// with u = 2^-24 when accumulating in fp32 (float and bf16 operands) and u = 2^-53 in
/// fp64. The operands are exactly representable in their type (bf16 operands are drawn
/// as bf16 and widened exactly), so the reference sees the very same inputs; it is
/// computed in fp64 and is itself off by at most gamma_{k+3}(2^-53) M. Since
/// (k+3) u < 0.01 at our sizes, gamma_{k+3} < 1.01 (k+3) u and the sum of both errors is
/// below E = 3 (k+3) u M (the factor 3 > 2 * 1.01 matters for fp64, where the
/// reference's error is of the same order as the result's).
/// A bf16 output rounds r^ once more, by at most 2^-8 |r^| <= 2^-8 (|r| + E), so there
///     |got - r| <= 2^-8 |r| + (1 + 2^-8) E.
/// NaN in the result is always a mismatch.
/// Call as near_reference<TA>(view, ref): TY is the view's element type (const or not).
template <Value TA, class ViewElement>
::testing::AssertionResult near_reference(DenseView<ViewElement> got, const Reference& ref) {
  using TY = std::remove_const_t<ViewElement>;
  if (got.rows != ref.value.rows() || got.cols != ref.value.cols())
    return ::testing::AssertionFailure() << "shape " << got.rows << "x" << got.cols << ", reference "
                                         << ref.value.rows() << "x" << ref.value.cols();
  const double u = unit_roundoff<acc_t<TA>>;
  const double u_out = std::is_same_v<TY, bf16> ? unit_roundoff<bf16> : 0.0;
  std::ostringstream mismatches;
  index_t count = 0;
  for (index_t i = 0; i < got.rows; ++i)
    for (index_t j = 0; j < got.cols; ++j) {
      const double r = ref.value(i, j);
      const double e = 3.0 * static_cast<double>(ref.inner + 3) * u * ref.magnitude(i, j);
      const double tol = u_out * std::fabs(r) + (1.0 + u_out) * e;
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
                                       << " elements differ from the float64 reference (" << type_name<TA>()
                                       << " operands, " << type_name<TY>() << " output):" << mismatches.str();
}

/// Element-for-element equality (NaN matches NaN, +0 matches -0).
template <Value T>
::testing::AssertionResult same_matrix(DenseView<const T> got, DenseView<const T> want) {
  if (got.rows != want.rows || got.cols != want.cols)
    return ::testing::AssertionFailure() << "shape " << got.rows << "x" << got.cols << ", expected " << want.rows
                                         << "x" << want.cols;
  for (index_t i = 0; i < got.rows; ++i)
    for (index_t j = 0; j < got.cols; ++j)
      if (!same_value(got(i, j), want(i, j)))
        return ::testing::AssertionFailure() << "(" << i << ", " << j << "): got " << to_double(got(i, j))
                                             << ", expected " << to_double(want(i, j));
  return ::testing::AssertionSuccess();
}

/// Identical arrays and values (NaN matches NaN).
template <Value T>
::testing::AssertionResult same_csr(const CsrMatrix<T>& got, const CsrMatrix<T>& want) {
  if (got.rows() != want.rows() || got.cols() != want.cols())
    return ::testing::AssertionFailure() << "shape " << got.rows() << "x" << got.cols() << ", expected "
                                         << want.rows() << "x" << want.cols();
  if (!std::ranges::equal(got.row_ptr(), want.row_ptr())) return ::testing::AssertionFailure() << "row_ptr differs";
  if (!std::ranges::equal(got.col_indices(), want.col_indices()))
    return ::testing::AssertionFailure() << "col_idx differs";
  for (index_t p = 0; p < got.nnz(); ++p)
    if (!same_value(got.values()[p], want.values()[p]))
      return ::testing::AssertionFailure() << "values[" << p << "]: got " << to_double(got.values()[p])
                                           << ", expected " << to_double(want.values()[p]);
  return ::testing::AssertionSuccess();
}

/// Identical structures and block values (NaN matches NaN).
template <Value T>
::testing::AssertionResult same_bsr(const BsrMatrix<T>& got, const BsrMatrix<T>& want) {
  if (!(got.structure() == want.structure())) return ::testing::AssertionFailure() << "structures differ";
  for (std::size_t p = 0; p < got.blocks().size(); ++p)
    if (!same_value(got.blocks()[p], want.blocks()[p]))
      return ::testing::AssertionFailure() << "blocks[" << p << "]: got " << to_double(got.blocks()[p])
                                           << ", expected " << to_double(want.blocks()[p]);
  return ::testing::AssertionSuccess();
}

}  // namespace trnsparse::test
