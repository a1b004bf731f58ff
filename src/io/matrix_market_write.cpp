/// @file matrix_market_write.cpp
/// Matrix Market writing (see io.hpp). Everything is validated first, then canonical
/// entries are formatted into a 64 KiB buffer with std::to_chars; files go through a
/// temporary that is renamed over the target only once complete. Memory is O(entries),
/// whatever the shape.
#include "trnsparse/io.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"

#include "io/matrix_market_rules.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"

namespace trnsparse {

namespace {

namespace fs = std::filesystem;
using detail::mm::first_stored_row;
using detail::mm::invalid_combination;

/// The shortest text that reads back as `v`.
std::string format_double(double v) {
  std::array<char, 32> text{};
  const auto result = std::to_chars(text.data(), text.data() + text.size(), v);
  return {text.data(), result.ptr};
}

// ---- canonical entries --------------------------------------------------------------
// Canonical: sorted row-major with no repeated position, as CooMatrix::canonicalize
// leaves it. The writer and the symmetry check work on canonical entries only.

/// A sorted copy of A with duplicates summed (in input order; explicit zeros kept).
/// A counting sort by row (through CSR) when there are no more rows than entries, a
/// comparison sort otherwise: memory stays O(nnz) whatever the shape, so a
/// 10^15 x 10^15 matrix with a few entries is fine.
CooMatrix<double> sorted_copy(const CooMatrix<double>& A) {
  if (A.rows() <= A.nnz()) return to_coo(to_csr(A));
  CooMatrix<double> copy = A;
  copy.canonicalize();
  return copy;
}

/// A itself when canonical (no copy: a large matrix is often written as built),
/// otherwise its sorted copy, kept in `storage`.
const CooMatrix<double>& canonical(const CooMatrix<double>& A, std::optional<CooMatrix<double>>& storage) {
  if (A.is_canonical()) return A;
  return storage.emplace(sorted_copy(A));
}

/// Aᵀ, canonical: the entries of A column by column.
CooMatrix<double> canonical_transpose(const CooMatrix<double>& A) {
  const auto rows = A.row_indices();
  const auto cols = A.col_indices();
  const auto values = A.values();
  CooMatrix<double> swapped(A.cols(), A.rows(), {cols.begin(), cols.end()}, {rows.begin(), rows.end()},
                            {values.begin(), values.end()});
  if (swapped.is_canonical()) return swapped;
  return sorted_copy(swapped);
}

/// (row, column) of entry k: canonical entries are in increasing position order.
std::pair<index_t, index_t> position(const CooMatrix<double>& A, index_t k) {
  return {A.row_indices()[k], A.col_indices()[k]};
}

/// a_ij of the canonical A, or 0 when it stores no (i, j). O(log nnz).
double element(const CooMatrix<double>& A, index_t i, index_t j) {
  index_t first = 0;  // binary search for the first entry at or after (i, j)
  for (index_t count = A.nnz(); count > 0;) {
    const index_t half = count / 2;
    if (position(A, first + half) < std::pair{i, j}) {
      first += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  return first < A.nnz() && position(A, first) == std::pair{i, j} ? A.values()[first] : 0.0;
}

/// Which entries the symmetry check compares.
enum class Compare { values, pattern };

/// The first (i, j) where the square, canonical A breaks `symmetry`, or nullopt.
/// Merges the entries of A and Aᵀ in position order. Comparing values, a missing
/// entry is zero, NaN matches NaN and the diagonal of a skew-symmetric matrix must be
/// zero; comparing the pattern, (i, j) and (j, i) must both be stored or both not.
/// O(nnz log nnz).
std::optional<std::pair<index_t, index_t>> find_asymmetry(const CooMatrix<double>& A, MmSymmetry symmetry,
                                                         Compare compare) {
  if (symmetry == MmSymmetry::general) return std::nullopt;
  const bool skew = symmetry == MmSymmetry::skew_symmetric;
  const CooMatrix<double> At = canonical_transpose(A);
  constexpr index_t none = std::numeric_limits<index_t>::max();
  index_t p = 0;
  index_t q = 0;
  while (p < A.nnz() || q < At.nnz()) {
    const auto in_a = p < A.nnz() ? position(A, p) : std::pair{none, none};
    const auto in_at = q < At.nnz() ? position(At, q) : std::pair{none, none};
    const auto at = std::min(in_a, in_at);
    const bool stored_ij = in_a == at;
    const bool stored_ji = in_at == at;
    const double a_ij = stored_ij ? A.values()[p++] : 0.0;
    const double a_ji = stored_ji ? At.values()[q++] : 0.0;
    const double want = skew ? (at.first == at.second ? 0.0 : -a_ji) : a_ji;
    const bool matches = compare == Compare::pattern ? stored_ij == stored_ji
                                                     : a_ij == want || (std::isnan(a_ij) && std::isnan(want));
    if (!matches) return at;
  }
  return std::nullopt;
}

// ---- writing ----------------------------------------------------------------------

/// Checks the options alone (before any work on A).
void check_options(const MmWriteOptions& options) {
  if (options.precision < 1)
    throw InvalidArgument("write_matrix_market: precision = " + std::to_string(options.precision) + ", expected >= 1");
  if (const char* why = invalid_combination(options.format, options.field, options.symmetry))
    throw InvalidArgument(std::string("write_matrix_market: ") + why);
}

/// Checks that every value of the canonical A is an integer that fits in 64 bits.
void check_integral(const CooMatrix<double>& A) {
  constexpr double limit = 9223372036854775808.0;  // 2^63
  for (index_t k = 0; k < A.nnz(); ++k) {
    const double v = A.values()[k];
    if (!(std::trunc(v) == v && v >= -limit && v < limit))
      throw InvalidArgument("write_matrix_market: A(" + std::to_string(A.row_indices()[k]) + ", " +
                            std::to_string(A.col_indices()[k]) + ") = " + format_double(v) +
                            " is not a 64-bit integer, as the 'integer' field requires");
  }
}

/// Checks that the canonical A has the symmetry (of its pattern only, for the
/// `pattern` field); names the first misfit otherwise.
void check_symmetry(const CooMatrix<double>& A, MmSymmetry symmetry, MmField field) {
  const std::string where = "write_matrix_market: ";
  const std::string name(to_string(symmetry));
  if (symmetry != MmSymmetry::general && A.rows() != A.cols())
    throw InvalidArgument(where + "'" + name + "' requires a square matrix, A is " + std::to_string(A.rows()) + " x " +
                          std::to_string(A.cols()));
  const Compare compare = field == MmField::pattern ? Compare::pattern : Compare::values;
  const auto at = find_asymmetry(A, symmetry, compare);
  if (!at) return;
  const auto [i, j] = *at;
  const std::string ij = "A(" + std::to_string(i) + ", " + std::to_string(j) + ")";
  const std::string ji = "A(" + std::to_string(j) + ", " + std::to_string(i) + ")";
  if (compare == Compare::pattern)
    throw InvalidArgument(where + "the pattern of A is not symmetric: " + ij + " and " + ji + " are not both stored");
  const std::string a_ij = ij + " = " + format_double(element(A, i, j));
  const std::string a_ji = ji + " = " + format_double(element(A, j, i));
  throw InvalidArgument(where + "A is not " + name + ": " +
                        (i == j ? "the diagonal " + a_ij + " is not zero" : a_ij + " but " + a_ji));
}

/// The entries of A as they will be written: canonical (A itself or its sorted copy
/// in `storage`), checked against the options. @throw InvalidArgument.
const CooMatrix<double>& prepare_for_writing(const CooMatrix<double>& A, const MmWriteOptions& options,
                                             std::optional<CooMatrix<double>>& storage) {
  check_options(options);
  const CooMatrix<double>& entries = canonical(A, storage);
  if (options.field == MmField::integer) check_integral(entries);
  check_symmetry(entries, options.symmetry, options.field);
  return entries;
}

/// Text output through a 64 KiB buffer; numbers are formatted in place.
class BufferedWriter {
public:
  BufferedWriter(std::ostream& out, std::string_view target, const MmWriteOptions& options)
      : out_(out), target_(target), options_(options), buffer_(std::make_unique_for_overwrite<char[]>(capacity)) {}

  void text(std::string_view s) {
    if (capacity - used_ < s.size()) flush();
    if (capacity < s.size()) return write(s);
    std::memcpy(buffer_.get() + used_, s.data(), s.size());
    used_ += s.size();
  }
  void put(char c) {
    make_room();
    buffer_[used_++] = c;
  }
  void index(index_t k) {
    make_room();
    used_ = static_cast<std::size_t>(std::to_chars(cursor(), end(), k).ptr - buffer_.get());
  }
  /// A value as the field asks: an integer, or a real with the options' precision.
  void value(double v) {
    if (options_.field == MmField::integer) return index(static_cast<index_t>(v));
    make_room();
    const auto result = options_.precision >= 17
                            ? std::to_chars(cursor(), end(), v)
                            : std::to_chars(cursor(), end(), v, std::chars_format::general, options_.precision);
    used_ = static_cast<std::size_t>(result.ptr - buffer_.get());
  }
  /// Writes out what is buffered. @throw IoError naming the target.
  void flush() {
    write({buffer_.get(), used_});
    used_ = 0;
  }

private:
  static constexpr std::size_t capacity = std::size_t{1} << 16;
  static constexpr std::size_t longest_number = 64;  // >= any to_chars output above

  char* cursor() noexcept { return buffer_.get() + used_; }
  char* end() noexcept { return buffer_.get() + capacity; }
  void make_room() {
    if (capacity - used_ < longest_number) flush();
  }
  void write(std::string_view s) {
    out_.write(s.data(), static_cast<std::streamsize>(s.size()));
    if (!out_) throw IoError("cannot write " + std::string(target_) + ": write failed");
  }

  std::ostream& out_;
  std::string_view target_;
  const MmWriteOptions& options_;
  std::unique_ptr<char[]> buffer_;
  std::size_t used_ = 0;
};

/// The entries of the canonical A in the stored triangle, row by row.
void write_coordinate(BufferedWriter& out, const CooMatrix<double>& A, const MmWriteOptions& options) {
  const auto stored = [&](index_t k) {
    return A.row_indices()[k] >= first_stored_row(A.col_indices()[k], options.symmetry);
  };
  index_t count = 0;
  for (index_t k = 0; k < A.nnz(); ++k) count += stored(k) ? 1 : 0;
  out.index(count);
  out.put('\n');
  for (index_t k = 0; k < A.nnz(); ++k) {
    if (!stored(k)) continue;
    out.index(A.row_indices()[k] + 1);
    out.put(' ');
    out.index(A.col_indices()[k] + 1);
    if (options.field != MmField::pattern) {
      out.put(' ');
      out.value(A.values()[k]);
    }
    out.put('\n');
  }
}

/// Every element of the stored triangle of the canonical A, column by column: walks
/// the entries of Aᵀ, where a_ij sits at position (j, i). Stops at the first column
/// that stores no row, so the work is O(output) even for a 0 x 10^12 matrix.
void write_array(BufferedWriter& out, const CooMatrix<double>& A, const MmWriteOptions& options) {
  out.put('\n');
  const CooMatrix<double> At = canonical_transpose(A);
  index_t p = 0;
  for (index_t j = 0; j < A.cols() && first_stored_row(j, options.symmetry) < A.rows(); ++j)
    for (index_t i = first_stored_row(j, options.symmetry); i < A.rows(); ++i) {
      const std::pair at{j, i};
      while (p < At.nnz() && position(At, p) < at) ++p;
      const bool present = p < At.nnz() && position(At, p) == at;
      out.value(present ? At.values()[p] : 0.0);
      out.put('\n');
    }
}

/// Banner, size line and entries of the prepared A.
void write_prepared(std::ostream& stream, std::string_view target, const CooMatrix<double>& A,
                    const MmWriteOptions& options) {
  BufferedWriter out(stream, target, options);
  out.text("%%MatrixMarket matrix ");
  out.text(to_string(options.format));
  out.put(' ');
  out.text(to_string(options.field));
  out.put(' ');
  out.text(to_string(options.symmetry));
  out.put('\n');
  out.index(A.rows());
  out.put(' ');
  out.index(A.cols());
  if (options.format == MmFormat::coordinate) {
    out.put(' ');
    write_coordinate(out, A, options);
  } else {
    write_array(out, A, options);
  }
  out.flush();
}

/// A temporary file beside `target`, renamed over it by commit() and removed when
/// dropped uncommitted, so `target` is never seen half written.
class TempFile {
public:
  explicit TempFile(const fs::path& target) : target_(target), path_(temporary_beside(target)) {
    stream_.open(path_, std::ios::binary | std::ios::trunc);
    if (!stream_)
      throw IoError("cannot write " + quote(target_) + ": cannot create " + quote(path_) + ": " + std::strerror(errno));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (committed_) return;
    stream_.close();
    std::error_code ignored;
    fs::remove(path_, ignored);
  }

  std::ostream& stream() noexcept { return stream_; }

  /// Closes the temporary and renames it over the target. @throw IoError.
  void commit() {
    stream_.close();
    if (stream_.fail()) throw IoError("cannot write " + quote(target_) + ": closing " + quote(path_) + " failed");
    std::error_code error;
    fs::rename(path_, target_, error);
    if (error) throw IoError("cannot write " + quote(target_) + ": " + error.message());
    committed_ = true;
  }

  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "'" + a temporary.
  static std::string quote(const fs::path& path) {
    std::string q = "'";
    q += path.string();
    q += '\'';
    return q;
  }

private:
  /// ".<name>.tmp-<64 random bits>" in the target's directory.
  static fs::path temporary_beside(const fs::path& target) {
    if (!target.has_filename()) throw IoError("cannot write " + quote(target) + ": not a file name");
    std::random_device random;
    const std::uint64_t tag = (std::uint64_t{random()} << 32) ^ random();
    std::array<char, 17> hex{};
    const auto end = std::to_chars(hex.data(), hex.data() + hex.size(), tag, 16).ptr;
    std::string name = ".";
    name += target.filename().string();
    name += ".tmp-";
    name.append(hex.data(), end);
    return target.parent_path() / name;
  }

  fs::path target_;
  fs::path path_;
  std::ofstream stream_;
  bool committed_ = false;
};

}  // namespace
void write_matrix_market(std::ostream& out, const CooMatrix<double>& A, const MmWriteOptions& options) {
  std::optional<CooMatrix<double>> storage;
  write_prepared(out, "the output stream", prepare_for_writing(A, options, storage), options);
}

void write_matrix_market(const fs::path& path, const CooMatrix<double>& A, const MmWriteOptions& options) {
  std::optional<CooMatrix<double>> storage;
  const CooMatrix<double>& prepared = prepare_for_writing(A, options, storage);
  TempFile file(path);
  write_prepared(file.stream(), TempFile::quote(path), prepared, options);
  file.commit();
}

bool has_symmetry(const CsrMatrix<double>& A, MmSymmetry symmetry) {
  if (symmetry == MmSymmetry::general) return true;
  return A.rows() == A.cols() && !find_asymmetry(to_coo(A), symmetry, Compare::values);  // CSR order is canonical
}

}  // namespace trnsparse
