/// @file io.hpp
/// Matrix Market (https://math.nist.gov/MatrixMarket/formats.html) reading and
/// writing: `coordinate` and `array` formats; `real`, `integer` and `pattern` fields
/// (`complex` is rejected with NotSupported); `general`, `symmetric` and
/// `skew-symmetric` symmetry. Errors name the source and the 1-based line.
///
///     auto mm = trnsparse::read_matrix_market("1138_bus.mtx");
///     trnsparse::CsrMatrix<double> A = trnsparse::to_csr(mm.entries);  // full matrix
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>

#include "trnsparse/coo.hpp"

namespace trnsparse {

enum class MmFormat { coordinate, array };
enum class MmField { real, integer, pattern };
enum class MmSymmetry { general, symmetric, skew_symmetric };

struct MmHeader {
  MmFormat format = MmFormat::coordinate;
  MmField field = MmField::real;
  MmSymmetry symmetry = MmSymmetry::general;
};

/// What a file holds. `entries` is the full matrix: symmetric and skew-symmetric
/// files are expanded (the mirror of each off-diagonal entry is added), `pattern`
/// entries are 1, array files list every element (zeros included), coordinate
/// entries keep the file's order and duplicates.
struct MmMatrix {
  MmHeader header;
  index_t stored_entries = 0;  ///< entries as written in the file
  CooMatrix<double> entries{0, 0};
};

/// Reads a Matrix Market file. @throw IoError if it cannot be read; ParseError
/// (with the line) for malformed content; NotSupported for complex or hermitian.
MmMatrix read_matrix_market(const std::filesystem::path& path);
/// Reads from a stream; `source` names it in errors.
MmMatrix read_matrix_market(std::istream& in, std::string_view source = "<stream>");

struct MmWriteOptions {
  MmFormat format = MmFormat::coordinate;
  MmField field = MmField::real;
  /// symmetric / skew_symmetric require A to be so (checked) and write one triangle.
  MmSymmetry symmetry = MmSymmetry::general;
  /// Significant digits for real values; 17 round-trips a double exactly.
  int precision = 17;
};

/// Writes A (duplicates summed). The file is written to a temporary beside `path`
/// and renamed over it, so a failure never leaves a partial file.
/// @throw IoError; InvalidArgument when A does not fit the options (not symmetric,
/// non-integer value for `integer`).
void write_matrix_market(const std::filesystem::path& path, const CooMatrix<double>& A, const MmWriteOptions& options = {});
void write_matrix_market(std::ostream& out, const CooMatrix<double>& A, const MmWriteOptions& options = {});

/// Names as the Matrix Market banner spells them ("coordinate", "skew-symmetric", ...).
std::string_view to_string(MmFormat f) noexcept;
std::string_view to_string(MmField f) noexcept;
std::string_view to_string(MmSymmetry s) noexcept;

}  // namespace trnsparse
