/// @file test_matrix_market_slice.cpp
/// read_matrix_market_slice: for many slice counts, the slices of the reference files
/// and of generated files (every format x field x symmetry, comments and blank lines
/// between data lines, CRLF, no final newline, lines longer than a read chunk) put
/// together are the full read; slices are near-equal; an error is thrown by the slice
/// that holds its line, with the message and true line of read_matrix_market; bad
/// slice arguments are refused.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <typeindex>
#include <utility>
#include <vector>

#include "support.hpp"

namespace trnsparse::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path data_dir = TRNSPARSE_TEST_DATA_DIR;

/// The slice counts every test tries: one, a few, more than most files have lines.
const std::vector<index_t> slice_counts{1, 2, 3, 4, 7, 1000};

using Triplets = std::vector<std::tuple<index_t, index_t, double>>;

/// The entries of a COO as (row, col, value) triplets in stored order.
void append_triplets(const CooMatrix<double>& A, Triplets& out) {
  for (index_t k = 0; k < A.nnz(); ++k) out.emplace_back(A.row_indices()[k], A.col_indices()[k], A.values()[k]);
}

/// A file of its own under the system temporary directory, removed at the end.
class TempFile {
public:
  explicit TempFile(const std::string& text) {
    std::random_device random;
    path_ = fs::temp_directory_path() / ("trnsparse_test_slice_" + std::to_string(random()) + std::to_string(random()) + ".mtx");
    std::ofstream out(path_, std::ios::binary);
    out << text;
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

private:
  fs::path path_;
};

/// Reads every slice of `slices` and checks that together they are the full read:
/// header, shape and declared count in each slice, entries in order, stored counts
/// summing to the declared one. Returns the entry count of each slice.
std::vector<index_t> expect_slices_make_the_file(const fs::path& path, index_t slices) {
  SCOPED_TRACE(path.filename().string() + ", " + std::to_string(slices) + " slices");
  const MmMatrix full = read_matrix_market(path);
  EXPECT_EQ(full.declared_entries, full.stored_entries);
  Triplets whole;
  append_triplets(full.entries, whole);
  Triplets joined;
  index_t stored = 0;
  std::vector<index_t> counts;
  for (index_t s = 0; s < slices; ++s) {
    const MmMatrix part = read_matrix_market_slice(path, s, slices);
    EXPECT_EQ(part.header.format, full.header.format);
    EXPECT_EQ(part.header.field, full.header.field);
    EXPECT_EQ(part.header.symmetry, full.header.symmetry);
    EXPECT_EQ(part.entries.rows(), full.entries.rows());
    EXPECT_EQ(part.entries.cols(), full.entries.cols());
    EXPECT_EQ(part.declared_entries, full.declared_entries);
    stored += part.stored_entries;
    counts.push_back(part.stored_entries);
    append_triplets(part.entries, joined);
  }
  EXPECT_EQ(stored, full.declared_entries);
  EXPECT_EQ(joined, whole);  // no NaN in these files: == is exact
  return counts;
}

/// What a read throws: the exception's type and message.
using Failure = std::pair<std::type_index, std::string>;

std::optional<Failure> failure_of(const auto& read) {
  try {
    read();
  } catch (const Error& e) {
    return Failure{typeid(e), e.what()};  // the dynamic type: ParseError, NotSupported, ...
  }
  return std::nullopt;
}

/// Checks that read_matrix_market fails on `path` and that, for every slice count,
/// the slices read in order succeed up to one that fails exactly as it does (same
/// type, same message, so the same path and line).
void expect_first_failing_slice_fails_like_the_file(const fs::path& path) {
  const auto full = failure_of([&] { read_matrix_market(path); });
  ASSERT_TRUE(full) << path << " was accepted";
  for (const index_t slices : slice_counts) {
    SCOPED_TRACE(std::to_string(slices) + " slices");
    std::optional<Failure> first;
    for (index_t s = 0; s < slices && !first; ++s) first = failure_of([&] { read_matrix_market_slice(path, s, slices); });
    ASSERT_TRUE(first) << "every slice was accepted";
    EXPECT_EQ(first->first, full->first);
    EXPECT_EQ(first->second, full->second);
  }
}

// ---- generated files ----------------------------------------------------------------

/// How a generated file lays out its lines.
struct Layout {
  bool crlf = false;
  bool final_newline = true;
  bool comments = true;  ///< comment and blank lines around and between the data lines
};

using Combination = std::tuple<MmFormat, MmField, MmSymmetry>;

/// The combinations the Matrix Market rules allow.
std::vector<Combination> allowed_combinations() {
  std::vector<Combination> all;
  for (const MmFormat format : {MmFormat::coordinate, MmFormat::array})
    for (const MmField field : {MmField::real, MmField::integer, MmField::pattern})
      for (const MmSymmetry symmetry : {MmSymmetry::general, MmSymmetry::symmetric, MmSymmetry::skew_symmetric})
        if (field != MmField::pattern || (format == MmFormat::coordinate && symmetry != MmSymmetry::skew_symmetric))
          all.emplace_back(format, field, symmetry);
  return all;
}

std::string combination_name(const Combination& c) {
  const auto [format, field, symmetry] = c;
  return std::string(to_string(format)) + " " + std::string(to_string(field)) + " " + std::string(to_string(symmetry));
}

class MatrixMarketSlice : public Seeded<> {
protected:
  /// A value token the field can hold (none for pattern).
  std::string value_token(MmField field) {
    if (field == MmField::pattern) return "";
    if (field == MmField::integer) return " " + std::to_string(rng.below(2001) - 1000);
    return " " + std::to_string(rng.uniform(-1.0, 1.0));
  }

  /// Extra lines before a data line: none mostly, else comments and blank lines.
  std::vector<std::string> filler() {
    std::vector<std::string> lines;
    while (rng.bernoulli(0.3)) {
      switch (rng.below(4)) {
        case 0: lines.emplace_back(""); break;
        case 1: lines.emplace_back(" \t "); break;
        case 2: lines.emplace_back("% a comment"); break;
        default: lines.emplace_back("  %" + std::string(static_cast<std::size_t>(rng.below(200)), 'c')); break;
      }
    }
    return lines;
  }

  /// The lines of an n x n (general: n x n+2, n >= 2) file of the combination: banner,
  /// size line, data lines (coordinate: random positions of the stored triangle, in
  /// random order, some repeated; array: every stored element), with filler lines
  /// when the layout asks.
  std::vector<std::string> lines_of(const Combination& c, index_t n, const Layout& layout) {
    const auto [format, field, symmetry] = c;
    const index_t rows = n;
    const index_t cols = symmetry == MmSymmetry::general ? n + 2 : n;
    std::vector<std::string> data;
    if (format == MmFormat::coordinate) {
      const index_t count = 2 * n;  // <= rows * cols for n >= 2
      for (index_t k = 0; k < count; ++k) {
        index_t i = rng.below(rows);
        index_t j = rng.below(cols);
        if (symmetry != MmSymmetry::general && i < j) std::swap(i, j);
        if (symmetry == MmSymmetry::skew_symmetric && i == j) i = (i + 1) % rows;  // n >= 2
        if (symmetry == MmSymmetry::skew_symmetric && i < j) std::swap(i, j);
        data.push_back(std::to_string(i + 1) + " " + std::to_string(j + 1) + value_token(field));
      }
    } else {
      for (index_t j = 0; j < cols; ++j)
        for (index_t i = symmetry == MmSymmetry::general ? 0 : symmetry == MmSymmetry::symmetric ? j : j + 1; i < rows; ++i)
          data.push_back(value_token(field).substr(1));
    }
    std::vector<std::string> lines{"%%MatrixMarket matrix " + combination_name(c)};
    const auto add_filler = [&] {
      if (!layout.comments) return;
      for (std::string& line : filler()) lines.push_back(std::move(line));
    };
    add_filler();
    lines.push_back(std::to_string(rows) + " " + std::to_string(cols) +
                    (format == MmFormat::coordinate ? " " + std::to_string(data.size()) : ""));
    for (std::string& line : data) {
      add_filler();
      lines.push_back((rng.bernoulli(0.2) ? "  " : "") + line);
    }
    add_filler();
    return lines;
  }

  static std::string join(const std::vector<std::string>& lines, const Layout& layout) {
    std::string text;
    for (std::size_t k = 0; k < lines.size(); ++k) {
      text += lines[k];
      if (k + 1 < lines.size() || layout.final_newline) text += layout.crlf ? "\r\n" : "\n";
    }
    return text;
  }

  /// 1-based numbers of the data lines after the size line.
  static std::vector<index_t> data_line_numbers(const std::vector<std::string>& lines) {
    std::vector<index_t> numbers;
    bool size_line_seen = false;
    for (std::size_t k = 1; k < lines.size(); ++k) {
      const auto first = lines[k].find_first_not_of(" \t");
      if (first == std::string::npos || lines[k][first] == '%') continue;
      if (size_line_seen) numbers.push_back(static_cast<index_t>(k + 1));
      size_line_seen = true;
    }
    return numbers;
  }
};

// ---- the slices put together are the file ------------------------------------------------

TEST_F(MatrixMarketSlice, ReferenceFilesAreTheirSlicesPutTogether) {
  for (const auto& entry : fs::directory_iterator(data_dir)) {
    if (entry.path().extension() != ".mtx") continue;
    for (const index_t slices : slice_counts) expect_slices_make_the_file(entry.path(), slices);
  }
}

TEST_F(MatrixMarketSlice, GeneratedFilesAreTheirSlicesPutTogether) {
  const std::vector<Layout> layouts{{.crlf = false, .final_newline = true, .comments = false},
                                    {.crlf = false, .final_newline = true, .comments = true},
                                    {.crlf = true, .final_newline = true, .comments = true},
                                    {.crlf = false, .final_newline = false, .comments = true},
                                    {.crlf = true, .final_newline = false, .comments = false}};
  for (const Combination& c : allowed_combinations())
    for (const Layout& layout : layouts)
      for (const index_t n : {2, 3, 17}) {
        SCOPED_TRACE(combination_name(c) + ", n = " + std::to_string(n) + (layout.crlf ? ", CRLF" : "") +
                     (layout.final_newline ? "" : ", no final newline") + (layout.comments ? ", comments" : ""));
        const TempFile file(join(lines_of(c, n, layout), layout));
        for (const index_t slices : slice_counts) expect_slices_make_the_file(file.path(), slices);
      }
}

TEST_F(MatrixMarketSlice, EmptySlicesHaveTheShapeAndNoEntries) {
  const TempFile file("%%MatrixMarket matrix coordinate real general\n4 5 2\n1 1 1.5\n4 5 -2\n");
  const std::vector<index_t> counts = expect_slices_make_the_file(file.path(), 7);
  EXPECT_EQ(std::ranges::count(counts, 0), 5);
  const TempFile no_data("%%MatrixMarket matrix array real general\n0 3");
  for (index_t s = 0; s < 3; ++s) {
    const MmMatrix part = read_matrix_market_slice(no_data.path(), s, 3);
    EXPECT_EQ(part.entries.rows(), 0);
    EXPECT_EQ(part.entries.cols(), 3);
    EXPECT_EQ(part.entries.nnz(), 0);
    EXPECT_EQ(part.stored_entries, 0);
    EXPECT_EQ(part.declared_entries, 0);
  }
}

TEST_F(MatrixMarketSlice, SkewSymmetricArrayDiagonalComesWithTheLastSlice) {
  const TempFile file("%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n2\n3\n");
  const MmMatrix first = read_matrix_market_slice(file.path(), 0, 2);
  const MmMatrix last = read_matrix_market_slice(file.path(), 1, 2);
  EXPECT_EQ(first.stored_entries + last.stored_entries, 3);
  EXPECT_EQ(first.entries.nnz(), 2 * first.stored_entries);  // each value and its mirror
  EXPECT_EQ(last.entries.nnz(), 2 * last.stored_entries + 3);
  expect_slices_make_the_file(file.path(), 2);
}

TEST_F(MatrixMarketSlice, SlicesCrossReadChunksAndLinesLongerThanAChunk) {
  // Some 2 MiB, with a comment longer than the 1 MiB read chunk in the middle.
  constexpr index_t n = 100000;
  std::string text = "%%MatrixMarket matrix coordinate integer general\n" + std::to_string(n) + " 3 " + std::to_string(n) + "\n";
  for (index_t i = 0; i < n; ++i) {
    if (i == n / 2) text += "%" + std::string(std::size_t{3} << 19, 'x') + "\n";
    text += std::to_string(i + 1) + " " + std::to_string(i % 3 + 1) + " " + std::to_string(i) + "\n";
  }
  const TempFile file(text);
  for (const index_t slices : {2, 3, 7}) expect_slices_make_the_file(file.path(), slices);
}

TEST_F(MatrixMarketSlice, SlicesOfEqualLinesHoldNearEqualCounts) {
  // 1000 data lines of 12 bytes each: a slice's range of bytes holds the floor or the
  // ceiling of its share of lines.
  constexpr index_t n = 1000;
  std::string text = "%%MatrixMarket matrix coordinate integer general\n1000 1 1000\n";
  for (index_t i = 0; i < n; ++i) text += std::string(i < 9 ? "000" : i < 99 ? "00" : i < 999 ? "0" : "") + std::to_string(i + 1) + " 1 12345\n";
  const TempFile file(text);
  for (const index_t slices : {3, 7, 64}) {
    const std::vector<index_t> counts = expect_slices_make_the_file(file.path(), slices);
    for (const index_t count : counts) {
      EXPECT_GE(count, n / slices - 1);
      EXPECT_LE(count, n / slices + 1);
    }
  }
}

// ---- errors ------------------------------------------------------------------------------

TEST_F(MatrixMarketSlice, ErrorOnADataLineIsThrownByItsSliceWithItsLine) {
  const std::vector<std::pair<std::string, const char*>> bad_lines{
      {"1 x 1", "expected an integer column index, found 'x'"},
      {"99 1 1", "expected a row index in [1, 17], found '99'"},
      {"1 1 1 7", "expected end of line, found trailing '7'"},
      {"2 1 1e999", "expected a real value in the range of a double, found '1e999'"}};
  const Combination c{MmFormat::coordinate, MmField::real, MmSymmetry::general};
  for (const bool crlf : {false, true}) {
    const Layout layout{.crlf = crlf, .final_newline = true, .comments = true};
    std::vector<std::string> lines = lines_of(c, 17, layout);
    const std::vector<index_t> data = data_line_numbers(lines);
    for (const index_t line : {data.front(), data[data.size() / 3], data[data.size() / 2 + 1], data.back()})
      for (const auto& [bad, message] : bad_lines) {
        SCOPED_TRACE("line " + std::to_string(line) + ": '" + bad + "'" + (crlf ? ", CRLF" : ""));
        std::vector<std::string> broken = lines;
        broken[static_cast<std::size_t>(line - 1)] = bad;
        const TempFile file(join(broken, layout));
        const std::string where = file.path().string() + ":" + std::to_string(line) + ": ";
        EXPECT_THAT([&] { read_matrix_market(file.path()); }, throws_naming<ParseError>(where, message));
        expect_first_failing_slice_fails_like_the_file(file.path());
      }
  }
}

TEST_F(MatrixMarketSlice, ArrayErrorsNameTheLineAfterCommentsAndBlankLines) {
  const Layout layout{.crlf = true, .final_newline = false, .comments = true};
  const Combination c{MmFormat::array, MmField::integer, MmSymmetry::symmetric};
  std::vector<std::string> lines = lines_of(c, 9, layout);
  const index_t line = data_line_numbers(lines)[30];
  lines[static_cast<std::size_t>(line - 1)] = "1.5";
  const TempFile file(join(lines, layout));
  EXPECT_THAT([&] { read_matrix_market(file.path()); },
              throws_naming<ParseError>(":" + std::to_string(line) + ": expected an integer value, found '1.5'"));
  expect_first_failing_slice_fails_like_the_file(file.path());
}

TEST_F(MatrixMarketSlice, TooManyEntriesFailInTheirSliceAndTooFewInTheLast) {
  for (const MmFormat format : {MmFormat::coordinate, MmFormat::array}) {
    const Layout layout{.crlf = false, .final_newline = true, .comments = true};
    const Combination c{format, MmField::real, MmSymmetry::general};
    const std::vector<std::string> lines = lines_of(c, 5, layout);
    const std::vector<index_t> data = data_line_numbers(lines);

    std::vector<std::string> extra = lines;  // a data line after the last entry
    extra.insert(extra.begin() + data.back(), format == MmFormat::coordinate ? "1 1 1" : "1");
    const TempFile too_many(join(extra, layout));
    EXPECT_THAT([&] { read_matrix_market(too_many.path()); },
                throws_naming<ParseError>(":" + std::to_string(data.back() + 1) + ": expected end of file after the"));
    expect_first_failing_slice_fails_like_the_file(too_many.path());

    std::vector<std::string> missing = lines;  // the last entry turned into a comment
    missing[static_cast<std::size_t>(data.back() - 1)] = "% was the last entry";
    const TempFile too_few(join(missing, layout));
    const std::string end_line = std::to_string(lines.size() + 1);
    EXPECT_THAT([&] { read_matrix_market(too_few.path()); },
                throws_naming<ParseError>(":" + end_line + ": expected ", std::to_string(data.size()) + " of " +
                                                                      std::to_string(data.size()) + ", found end of file"));
    expect_first_failing_slice_fails_like_the_file(too_few.path());
    for (const index_t slices : slice_counts) {
      for (index_t s = 0; s + 1 < slices; ++s) EXPECT_NO_THROW(read_matrix_market_slice(too_few.path(), s, slices));
      EXPECT_THAT([&] { read_matrix_market_slice(too_few.path(), slices - 1, slices); },
                  throws_naming<ParseError>(":" + end_line + ": "));
    }
  }
}

TEST_F(MatrixMarketSlice, MalformedFilesFailInTheirSliceAsInTheFullRead) {
  for (const auto& entry : fs::directory_iterator(data_dir / "malformed")) {
    SCOPED_TRACE(entry.path().filename().string());
    expect_first_failing_slice_fails_like_the_file(entry.path());
  }
}

TEST_F(MatrixMarketSlice, BadSliceArgumentsAreRefusedBeforeOpeningTheFile) {
  const fs::path missing = data_dir / "no_such_file.mtx";
  EXPECT_THAT([&] { read_matrix_market_slice(missing, 0, 0); },
              throws_naming<InvalidArgument>("read_matrix_market_slice: slices = 0, expected >= 1"));
  EXPECT_THAT([&] { read_matrix_market_slice(missing, 0, -2); }, throws_naming<InvalidArgument>("slices = -2"));
  EXPECT_THAT([&] { read_matrix_market_slice(missing, 3, 3); },
              throws_naming<InvalidArgument>("read_matrix_market_slice: slice = 3 is out of range [0, 3)"));
  EXPECT_THAT([&] { read_matrix_market_slice(missing, -1, 3); }, throws_naming<InvalidArgument>("slice = -1"));
  EXPECT_THAT([&] { read_matrix_market_slice(missing, 1, 3); }, throws_naming<IoError>(missing.string(), "No such file"));
  EXPECT_THAT([&] { read_matrix_market_slice(data_dir, 0, 2); }, throws_naming<IoError>(data_dir.string(), "is a directory"));
}

}  // namespace
}  // namespace trnsparse::test
