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
#include "trnsparse/csr.hpp"

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
/// files are expanded (the mirror of each off-diagonal entry is added, negated for
/// skew-symmetric; entries may lie in either triangle), `pattern` entries are 1,
/// array files list every element (zeros included, and the zero diagonal of a
/// skew-symmetric array), coordinate entries keep the file's order and duplicates.
struct MmMatrix {
  MmHeader header;
  index_t stored_entries = 0;    ///< entries (array: values) as written in the file, or in the slice
  index_t declared_entries = 0;  ///< entries (array: values) the size line declares for the whole file
  CooMatrix<double> entries{0, 0};
};

/// Reads a Matrix Market file. Banner words are case-insensitive; blank lines and
/// `%` comment lines may appear anywhere after the banner. Values are parsed
/// strictly (the whole token, "nan" and "inf" accepted for real; a value that
/// underflows reads as zero, one that overflows a double is an error). Memory grows
/// with the entries actually read, never with the size the header declares.
/// O(file size).
/// @throw IoError naming the path if it cannot be opened or read; ParseError (with
/// the 1-based line and what was expected) for malformed content; NotSupported for
/// `complex` or `hermitian`.
MmMatrix read_matrix_market(const std::filesystem::path& path);
/// Reads from a stream; `source` names it in errors.
MmMatrix read_matrix_market(std::istream& in, std::string_view source = "<stream>");

/// Reads slice `slice` of `slices` of a Matrix Market file, so that each of `slices`
/// processes can read its part. Every slice reads the header (banner, size line); the
/// bytes after the size line are cut into `slices` ranges whose lengths differ by at
/// most one, a line belongs to the range in which it starts, and this call parses only
/// the lines of its own range. Concatenating the `entries` of slices 0..slices-1 gives
/// exactly `read_matrix_market(path).entries` (same order and values, symmetric
/// expansion included; the zero diagonal of a skew-symmetric array comes with the last
/// slice); each slice has the full shape, and may hold no entry (more slices than data
/// lines). `stored_entries` counts the slice's own entries; over all slices they sum
/// to `declared_entries`.
///
///     auto part = trnsparse::read_matrix_market_slice("big.mtx", rank, nranks);
///
/// Errors are those of read_matrix_market, raised by the slice that holds the line:
/// each slice parses its own lines strictly and rejects an entry beyond the declared
/// count, and the last slice rejects a file with too few; messages name the path and
/// the file's true 1-based line. So either every slice succeeds and together they are
/// the whole file, or the first slice that fails throws what read_matrix_market does
/// (a caller that reads only some slices gets only their checks). Cost: the slice
/// passes over the lines before its range without parsing them (one memchr per line,
/// to count lines and array values), then parses its own: O(bytes up to the end of
/// its range) time, O(entries of the slice) memory plus a read buffer of 1 MiB (more
/// for a longer line).
/// @throw InvalidArgument for slices < 1 or slice outside [0, slices), before opening
/// the file; otherwise as read_matrix_market.
MmMatrix read_matrix_market_slice(const std::filesystem::path& path, index_t slice, index_t slices);

struct MmWriteOptions {
  MmFormat format = MmFormat::coordinate;
  MmField field = MmField::real;
  /// symmetric / skew_symmetric require A to be so (checked) and write one triangle.
  MmSymmetry symmetry = MmSymmetry::general;
  /// Significant digits for real values (>= 1). 17 or more writes the shortest
  /// representation that reads back as the same double.
  int precision = 17;
};

/// Writes A (duplicates summed, explicit zeros kept) row by row (coordinate) or
/// column by column (array). Symmetric kinds write the lower triangle (strictly
/// lower for skew-symmetric, whose diagonal is zero); `pattern` writes positions
/// only and needs a symmetric pattern (not values) for `symmetric`. The file is
/// written to a temporary beside `path` and renamed over it, so a failure never
/// leaves a partial file. O(nnz log nnz) time for coordinate (O(nnz) when A is
/// already canonical), plus O(rows * cols) for array; memory O(nnz) whatever the shape.
/// @throw IoError naming the path; InvalidArgument when A does not fit the options
/// (not symmetric / skew-symmetric, non-integer value for `integer`, `pattern` with
/// `array` or `skew_symmetric`, precision < 1), before anything is written.
void write_matrix_market(const std::filesystem::path& path, const CooMatrix<double>& A, const MmWriteOptions& options = {});
void write_matrix_market(std::ostream& out, const CooMatrix<double>& A, const MmWriteOptions& options = {});

/// True when A can be stored with `symmetry`: always for `general`; for `symmetric`
/// (`skew_symmetric`) when A is square and a_ij == a_ji (a_ij == -a_ji) for every
/// stored entry, a missing entry counting as zero and NaN matching NaN. O(nnz + rows).
///
///     bool s = trnsparse::has_symmetry(trnsparse::to_csr(mm.entries), trnsparse::MmSymmetry::symmetric);
bool has_symmetry(const CsrMatrix<double>& A, MmSymmetry symmetry);

/// Names as the Matrix Market banner spells them ("coordinate", "skew-symmetric", ...).
std::string_view to_string(MmFormat f) noexcept;
std::string_view to_string(MmField f) noexcept;
std::string_view to_string(MmSymmetry s) noexcept;

}  // namespace trnsparse
