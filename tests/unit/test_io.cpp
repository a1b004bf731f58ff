/// @file test_io.cpp
/// Matrix Market reading and writing: the reference files, every reading rule, the
/// malformed files of tests/data/malformed (each with its line and message), round
/// trips over every format x field x symmetry, the checks the writer makes before
/// writing, and atomic file writes.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "support.hpp"

namespace trnsparse::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const fs::path data_dir = TRNSPARSE_TEST_DATA_DIR;

MmMatrix read_text(const std::string& text) {
  std::istringstream in(text);
  return read_matrix_market(in, "text");
}

std::string write_text(const CooMatrix<double>& A, const MmWriteOptions& options = {}) {
  std::ostringstream out;
  write_matrix_market(out, A, options);
  return out.str();
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The entries of a COO as (row, col, value) triplets in stored order.
std::vector<std::tuple<index_t, index_t, double>> triplets(const CooMatrix<double>& A) {
  std::vector<std::tuple<index_t, index_t, double>> t;
  for (index_t k = 0; k < A.nnz(); ++k) t.emplace_back(A.row_indices()[k], A.col_indices()[k], A.values()[k]);
  return t;
}

// ---- the reference files ------------------------------------------------------------

TEST(MatrixMarketRead, Bus1138IsExpandedFromItsLowerTriangle) {
  const MmMatrix mm = read_matrix_market(data_dir / "1138_bus.mtx");
  EXPECT_EQ(mm.header.format, MmFormat::coordinate);
  EXPECT_EQ(mm.header.field, MmField::real);
  EXPECT_EQ(mm.header.symmetry, MmSymmetry::symmetric);
  EXPECT_EQ(mm.stored_entries, 2596);
  // 1138 of the 2596 stored entries are diagonal (counted with
  // awk '!/^%/ && ++n > 1 && $1 == $2' 1138_bus.mtx); each other one gains a mirror.
  const auto all = triplets(mm.entries);
  EXPECT_EQ(std::ranges::count_if(all, [](const auto& t) { return std::get<0>(t) == std::get<1>(t); }), 1138);
  EXPECT_EQ(mm.entries.nnz(), 2 * 2596 - 1138);

  const CsrMatrix<double> A = to_csr(mm.entries);
  EXPECT_EQ(A.rows(), 1138);
  EXPECT_EQ(A.cols(), 1138);
  EXPECT_EQ(A.nnz(), 4054);
  EXPECT_TRUE(has_symmetry(A, MmSymmetry::symmetric));
  const Dense<double> d = to_dense(A);
  EXPECT_EQ(d(0, 0), 1474.779);  // "1 1 1474.779"
  EXPECT_EQ(d(4, 0), -9.017133);  // "5 1 -9.017133"
  EXPECT_EQ(d(0, 4), -9.017133);  // its mirror
  EXPECT_EQ(d(26, 3), -.4755112);  // "27 4 -.4755112": no digit before the point
}

TEST(MatrixMarketRead, Ani1IsGeneralAndNotExactlySymmetric) {
  const MmMatrix mm = read_matrix_market(data_dir / "ani1.mtx");
  EXPECT_EQ(mm.header.symmetry, MmSymmetry::general);
  EXPECT_EQ(mm.stored_entries, 208);
  const CsrMatrix<double> A = to_csr(mm.entries);
  EXPECT_EQ(A.rows(), 36);
  EXPECT_EQ(A.cols(), 36);
  EXPECT_EQ(A.nnz(), 208);
  const Dense<double> d = to_dense(A);
  EXPECT_EQ(d(1, 0), -0.4376456351621489);  // "2 1 -0.4376456351621489"
  EXPECT_EQ(d(3, 3), 1.0);                  // "4 4  1"
  // "7 1 -0.3634459594396363" but "1 7 -0.3634459594396362": symmetric only to rounding.
  EXPECT_FALSE(has_symmetry(A, MmSymmetry::symmetric));
}

// ---- reading rules ------------------------------------------------------------------

TEST(MatrixMarketRead, BannerWordsAreCaseInsensitive) {
  const MmMatrix mm = read_text("%%matrixmarket MATRIX Coordinate INTEGER Skew-Symmetric\n2 2 1\n2 1 3\n");
  EXPECT_EQ(mm.header.field, MmField::integer);
  EXPECT_EQ(mm.header.symmetry, MmSymmetry::skew_symmetric);
}

TEST(MatrixMarketRead, SkipsCommentsAndBlankLinesAndAcceptsCrLfTabsAndNoFinalNewline) {
  const std::string text =
      "%%MatrixMarket matrix coordinate real general\r\n"
      "% a comment\r\n"
      "\r\n"
      "   \t\r\n"
      "%another\n"
      "2 3 3\r\n"
      "1\t1   1.5\r\n"
      "\n"
      "% a comment between entries\n"
      "2 3 -2\n"
      "  1 2 7";
  const MmMatrix mm = read_text(text);
  EXPECT_EQ(mm.entries.rows(), 2);
  EXPECT_EQ(mm.entries.cols(), 3);
  EXPECT_EQ(triplets(mm.entries), (std::vector<std::tuple<index_t, index_t, double>>{{0, 0, 1.5}, {1, 2, -2.0}, {0, 1, 7.0}}));
}

TEST(MatrixMarketRead, RealValuesFollowStrtodSpellings) {
  const MmMatrix mm = read_text(
      "%%MatrixMarket matrix array real general\n8 1\n"
      "nan\ninf\n-inf\n+1.5\n-.5\n1E3\n1e-400\n4.9e-324\n");
  const auto v = mm.entries.values();
  ASSERT_EQ(v.size(), 8u);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(v[2], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(v[3], 1.5);
  EXPECT_EQ(v[4], -0.5);
  EXPECT_EQ(v[5], 1000.0);
  EXPECT_EQ(v[6], 0.0);  // underflows to zero, as strtod
  EXPECT_EQ(v[7], std::numeric_limits<double>::denorm_min());
}

TEST(MatrixMarketRead, PatternEntriesAreOneAndIntegersAreExact) {
  const MmMatrix pattern = read_text("%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n2 1\n");
  EXPECT_EQ(triplets(pattern.entries), (std::vector<std::tuple<index_t, index_t, double>>{{0, 1, 1.0}, {1, 0, 1.0}}));
  const MmMatrix integer = read_text("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 -9007199254740992\n");
  EXPECT_EQ(integer.entries.values()[0], -9007199254740992.0);
}

TEST(MatrixMarketRead, SymmetricMirrorsEntriesOfEitherTriangle) {
  const MmMatrix mm = read_text("%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 4\n3 1 2\n1 2 5\n");
  EXPECT_EQ(mm.stored_entries, 3);
  EXPECT_EQ(triplets(mm.entries), (std::vector<std::tuple<index_t, index_t, double>>{
                                      {0, 0, 4.0}, {2, 0, 2.0}, {0, 2, 2.0}, {0, 1, 5.0}, {1, 0, 5.0}}));
}

TEST(MatrixMarketRead, SkewSymmetricMirrorsNegated) {
  const MmMatrix mm = read_text("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 3\n1 3 -2\n");
  EXPECT_EQ(triplets(mm.entries), (std::vector<std::tuple<index_t, index_t, double>>{
                                      {1, 0, 3.0}, {0, 1, -3.0}, {0, 2, -2.0}, {2, 0, 2.0}}));
  EXPECT_TRUE(has_symmetry(to_csr(mm.entries), MmSymmetry::skew_symmetric));
}

TEST(MatrixMarketRead, CoordinateKeepsFileOrderDuplicatesAndExplicitZeros) {
  const MmMatrix mm = read_text("%%MatrixMarket matrix coordinate real general\n2 2 3\n2 2 1\n1 1 0\n2 2 3\n");
  EXPECT_EQ(triplets(mm.entries), (std::vector<std::tuple<index_t, index_t, double>>{{1, 1, 1.0}, {0, 0, 0.0}, {1, 1, 3.0}}));
}

TEST(MatrixMarketRead, ArrayIsColumnMajor) {
  const MmMatrix mm = read_text("%%MatrixMarket matrix array real general\n2 3\n1\n2\n3\n4\n5\n0\n");
  EXPECT_EQ(mm.stored_entries, 6);
  const Dense<double> d = to_dense(mm.entries);
  EXPECT_TRUE(same_matrix<double>(d, Dense<double>(2, 3, {1, 3, 5, 2, 4, 0})));
  EXPECT_EQ(mm.entries.nnz(), 6);  // the zero is an element too
}

TEST(MatrixMarketRead, SymmetricArrayListsTheLowerTriangleByColumns) {
  const MmMatrix mm = read_text("%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n");
  EXPECT_EQ(mm.stored_entries, 6);
  EXPECT_EQ(mm.entries.nnz(), 9);
  EXPECT_TRUE(same_matrix<double>(to_dense(mm.entries), Dense<double>(3, 3, {1, 2, 3, 2, 4, 5, 3, 5, 6})));
}

TEST(MatrixMarketRead, SkewSymmetricArrayListsTheStrictLowerTriangleByColumns) {
  const MmMatrix mm = read_text("%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n2\n3\n");
  EXPECT_EQ(mm.stored_entries, 3);
  EXPECT_EQ(mm.entries.nnz(), 9);  // every element, the zero diagonal included
  EXPECT_TRUE(same_matrix<double>(to_dense(mm.entries), Dense<double>(3, 3, {0, -1, -2, 1, 0, -3, 2, 3, 0})));
}

TEST(MatrixMarketRead, EmptyMatrices) {
  for (const char* text : {"%%MatrixMarket matrix coordinate real general\n0 0 0\n",
                           "%%MatrixMarket matrix coordinate pattern symmetric\n0 0 0\n",
                           "%%MatrixMarket matrix array real general\n0 5\n",
                           "%%MatrixMarket matrix array real skew-symmetric\n0 0\n",
                           "%%MatrixMarket matrix coordinate real general\n4 0 0\n"}) {
    SCOPED_TRACE(text);
    const MmMatrix mm = read_text(text);
    EXPECT_EQ(mm.stored_entries, 0);
    EXPECT_EQ(mm.entries.nnz(), 0);
  }
  const MmMatrix one = read_text("%%MatrixMarket matrix array real skew-symmetric\n1 1\n");
  EXPECT_EQ(triplets(one.entries), (std::vector<std::tuple<index_t, index_t, double>>{{0, 0, 0.0}}));
}

TEST(MatrixMarketRead, DeclaredSizeAllocatesNothingUpFront) {
  // A header promising 10^12 entries of a 10^6 x 10^6 array must fail at the end of the
  // (short) input, not exhaust memory first.
  EXPECT_THAT([] { read_text("%%MatrixMarket matrix coordinate real general\n1000000 1000000 1000000000000\n1 1 1\n"); },
              throws_naming<ParseError>("text:4: expected entry 2 of 1000000000000, found end of file"));
  EXPECT_THAT([] { read_text("%%MatrixMarket matrix array real symmetric\n1000000 1000000\n1\n"); },
              throws_naming<ParseError>("expected value 2 of 500000500000"));
}

TEST(MatrixMarketRead, LinesCrossingChunkBoundariesAndLongLines) {
  // Far more than one 1 MiB read chunk, with a comment longer than a chunk in the middle.
  constexpr index_t n = 150000;
  std::string text = "%%MatrixMarket matrix coordinate integer general\n" + std::to_string(n) + " 3 " + std::to_string(n) + "\n";
  for (index_t i = 0; i < n; ++i) {
    if (i == n / 2) text += "%" + std::string(std::size_t{3} << 20, 'x') + "\n";
    text += std::to_string(i + 1) + " " + std::to_string(i % 3 + 1) + " " + std::to_string(i) + "\n";
  }
  const MmMatrix mm = read_text(text);
  ASSERT_EQ(mm.entries.nnz(), n);
  for (index_t k = 0; k < n; ++k) {
    ASSERT_EQ(mm.entries.row_indices()[k], k);
    ASSERT_EQ(mm.entries.col_indices()[k], k % 3);
    ASSERT_EQ(mm.entries.values()[k], static_cast<double>(k));
  }
}

/// A stream buffer that cannot seek, like a pipe, and hands out a few bytes at a time.
class PipeBuffer : public std::streambuf {
public:
  explicit PipeBuffer(std::string text) : text_(std::move(text)) {}

protected:
  int_type underflow() override {
    if (served_ == text_.size()) return traits_type::eof();
    const std::size_t n = std::min<std::size_t>(7, text_.size() - served_);
    char* first = text_.data() + served_;
    setg(first, first, first + n);
    served_ += n;
    return traits_type::to_int_type(*first);
  }

private:
  std::string text_;
  std::size_t served_ = 0;
};

TEST(MatrixMarketRead, StreamOfUnknownLengthReadsLikeTheFile) {
  PipeBuffer pipe(slurp(data_dir / "1138_bus.mtx"));
  std::istream in(&pipe);
  ASSERT_EQ(in.tellg(), std::istream::pos_type(-1));  // the reader cannot size its buffers
  const MmMatrix piped = read_matrix_market(in, "pipe");
  const MmMatrix file = read_matrix_market(data_dir / "1138_bus.mtx");
  EXPECT_EQ(triplets(piped.entries), triplets(file.entries));
}

TEST(MatrixMarketRead, StreamErrorsNameTheSource) {
  std::istringstream in("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n");
  EXPECT_THAT([&] { read_matrix_market(in, "my-stream"); },
              throws_naming<ParseError>("my-stream:3: expected a row index in [1, 2], found '3'"));
}

/// Bytes outside printable ASCII in the input reach messages as \xNN, never raw (a binary
/// file read by mistake must not write control bytes to a terminal).
TEST(MatrixMarketRead, MessagesEscapeNonPrintableBytes) {
  std::istringstream in(std::string("%%MatrixMarket matrix coordinate real general\n\x9f\xff\x01\\ 2 3\n"));
  try {
    read_matrix_market(in, "binary");
    FAIL() << "no ParseError";
  } catch (const ParseError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("found '\\x9f\\xff\\x01\\x5c'"), std::string::npos) << what;
    for (const char c : what) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << static_cast<int>(static_cast<unsigned char>(c));
  }
}

TEST(MatrixMarketRead, UnreadablePathsAreIoErrors) {
  const fs::path missing = data_dir / "no_such_file.mtx";
  EXPECT_THAT([&] { read_matrix_market(missing); }, throws_naming<IoError>(missing.string(), "No such file"));
  EXPECT_THAT([&] { read_matrix_market(data_dir); }, throws_naming<IoError>(data_dir.string(), "is a directory"));
}

// ---- malformed files -------------------------------------------------------------------

struct Malformed {
  const char* file;  ///< in tests/data/malformed, without ".mtx"
  index_t line;
  const char* message;  ///< a fragment of the message after "path:line: "
};

void PrintTo(const Malformed& m, std::ostream* os) { *os << m.file; }

const std::vector<Malformed> malformed_files{
    {"empty", 1, "expected the banner '%%MatrixMarket matrix <format> <field> <symmetry>', found end of file"},
    {"bad_banner", 1, "expected the banner '%%MatrixMarket matrix <format> <field> <symmetry>', found '%%MatrixMarkt"},
    {"bad_object", 1, "expected the object 'matrix' in the banner, found 'vector'"},
    {"bad_format", 1, "expected the format 'coordinate' or 'array' in the banner, found 'sparse'"},
    {"bad_symmetry", 1, "expected the symmetry 'general', 'symmetric' or 'skew-symmetric' in the banner, found 'diagonal'"},
    {"array_pattern", 1, "the 'pattern' field requires the 'coordinate' format"},
    {"pattern_skew", 1, "the 'pattern' field cannot be 'skew-symmetric'"},
    {"missing_size_line", 4, "expected the size line 'rows cols entries', found end of file"},
    {"negative_size", 3, "expected rows >= 0 on the size line, found -3"},
    {"size_overflow", 3, "expected rows * cols < 2^63 for an array, found 4294967296 x 4294967296"},
    {"too_many_declared", 3, "expected entries <= rows * cols = 1 on the size line, found 999999999999"},
    {"size_line_garbage", 3, "expected end of line, found trailing '7'"},
    {"symmetric_not_square", 3, "expected a square matrix for 'symmetric', found 3 x 4"},
    {"index_out_of_range", 5, "expected a row index in [1, 3], found '4'"},
    {"zero_index", 5, "expected a column index in [1, 3], found '0'"},
    {"index_overflow", 4, "expected a row index in [1, 3], found '99999999999999999999'"},
    {"missing_column", 4, "expected an integer column index, found end of line"},
    {"truncated_line", 5, "expected a real value, found end of line"},
    {"non_numeric_value", 5, "expected a real value, found 'abc'"},
    {"value_suffix", 4, "expected a real value, found '1.5e3x'"},
    {"value_overflow", 4, "expected a real value in the range of a double, found '1e999'"},
    {"trailing_garbage", 5, "expected end of line, found trailing 'x'"},
    {"integer_fraction", 5, "expected an integer value, found '1.5'"},
    {"skew_diagonal", 5, "expected no diagonal entry in a skew-symmetric matrix, found (2, 2)"},
    {"too_few_entries", 6, "expected entry 3 of 3, found end of file"},
    {"too_many_entries", 6, "expected end of file after the 2 entries the size line declares"},
    {"array_too_few_values", 7, "expected value 4 of 4, found end of file"},
};

/// Files the reader must refuse as valid but unsupported.
const std::vector<Malformed> unsupported_files{
    {"complex", 1, "complex matrices are not supported"},
    {"hermitian", 1, "hermitian matrices are not supported"},
};

fs::path malformed_path(const char* file) { return data_dir / "malformed" / (std::string(file) + ".mtx"); }

class MatrixMarketMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(MatrixMarketMalformed, ThrowsParseErrorNamingFileLineAndExpectation) {
  const Malformed& m = GetParam();
  const fs::path path = malformed_path(m.file);
  try {
    read_matrix_market(path);
    FAIL() << path << " was accepted";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.source(), path.string());
    EXPECT_EQ(e.line(), m.line) << e.what();
    EXPECT_THAT(e.what(), StartsWith(path.string() + ":" + std::to_string(m.line) + ": "));
    EXPECT_THAT(e.what(), HasSubstr(m.message));
  }
}

INSTANTIATE_TEST_SUITE_P(Files, MatrixMarketMalformed, ::testing::ValuesIn(malformed_files),
                         [](const auto& info) { return std::string(info.param.file); });

class MatrixMarketUnsupported : public ::testing::TestWithParam<Malformed> {};

TEST_P(MatrixMarketUnsupported, ThrowsNotSupportedNamingFileAndLine) {
  const Malformed& m = GetParam();
  const fs::path path = malformed_path(m.file);
  EXPECT_THAT([&] { read_matrix_market(path); },
              throws_naming<NotSupported>(path.string() + ":" + std::to_string(m.line) + ": " + m.message));
}

INSTANTIATE_TEST_SUITE_P(Files, MatrixMarketUnsupported, ::testing::ValuesIn(unsupported_files),
                         [](const auto& info) { return std::string(info.param.file); });

TEST(MatrixMarketMalformedFiles, EveryFileIsCovered) {
  std::set<std::string> listed;
  for (const auto* table : {&malformed_files, &unsupported_files})
    for (const Malformed& m : *table) listed.insert(m.file);
  std::set<std::string> present;
  for (const auto& entry : fs::directory_iterator(data_dir / "malformed")) present.insert(entry.path().stem().string());
  EXPECT_EQ(listed, present);
  EXPECT_GE(malformed_files.size(), 15u);
}

// ---- writing --------------------------------------------------------------------------

TEST(MatrixMarketWrite, CoordinateTextSumsDuplicatesAndKeepsExplicitZeros) {
  const CooMatrix<double> A(2, 3, {1, 0, 1, 0}, {2, 0, 2, 1}, {-2.0, 1.5, 0.5, 0.0});
  EXPECT_EQ(write_text(A),
            "%%MatrixMarket matrix coordinate real general\n"
            "2 3 3\n"
            "1 1 1.5\n"
            "1 2 0\n"
            "2 3 -1.5\n");
}

TEST(MatrixMarketWrite, SymmetricTextHoldsTheLowerTriangle) {
  const CooMatrix<double> A(2, 2, {0, 0, 1, 1}, {0, 1, 0, 1}, {4.0, -1.0, -1.0, 3.0});
  EXPECT_EQ(write_text(A, {MmFormat::coordinate, MmField::integer, MmSymmetry::symmetric}),
            "%%MatrixMarket matrix coordinate integer symmetric\n2 2 3\n1 1 4\n2 1 -1\n2 2 3\n");
  EXPECT_EQ(write_text(A, {MmFormat::array, MmField::real, MmSymmetry::symmetric}),
            "%%MatrixMarket matrix array real symmetric\n2 2\n4\n-1\n3\n");
}

TEST(MatrixMarketWrite, ArrayTextIsColumnMajorWithZeros) {
  const CooMatrix<double> A(2, 2, {1}, {0}, {7.0});
  EXPECT_EQ(write_text(A, {MmFormat::array}), "%%MatrixMarket matrix array real general\n2 2\n0\n7\n0\n0\n");
  const CooMatrix<double> skew(2, 2, {1, 0}, {0, 1}, {7.0, -7.0});
  EXPECT_EQ(write_text(skew, {MmFormat::array, MmField::real, MmSymmetry::skew_symmetric}),
            "%%MatrixMarket matrix array real skew-symmetric\n2 2\n7\n");
}

TEST(MatrixMarketWrite, PatternWritesPositionsOnly) {
  const CooMatrix<double> A(3, 3, {2, 0}, {0, 2}, {5.0, -1.0});  // pattern-symmetric, values not
  EXPECT_EQ(write_text(A, {MmFormat::coordinate, MmField::pattern, MmSymmetry::symmetric}),
            "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 1\n3 1\n");
}

TEST(MatrixMarketWrite, PrecisionSetsSignificantDigits) {
  const CooMatrix<double> A(1, 2, {0, 0}, {0, 1}, {1.0 / 3.0, 123456789.0});
  EXPECT_EQ(write_text(A, {.precision = 6}),
            "%%MatrixMarket matrix coordinate real general\n1 2 2\n1 1 0.333333\n1 2 1.23457e+08\n");
  const MmMatrix back = read_text(write_text(A, {.precision = 6}));
  EXPECT_NEAR(back.entries.values()[0], 1.0 / 3.0, 1e-6);
  // The default writes the shortest text that reads back as the same double.
  EXPECT_EQ(write_text(A), "%%MatrixMarket matrix coordinate real general\n1 2 2\n1 1 0.3333333333333333\n1 2 123456789\n");
}

TEST(MatrixMarketWrite, NonFiniteValuesRoundTrip) {
  const double inf = std::numeric_limits<double>::infinity();
  const CooMatrix<double> A(1, 4, {0, 0, 0, 0}, {0, 1, 2, 3}, {std::nan(""), inf, -inf, -0.0});
  const MmMatrix back = read_text(write_text(A));
  const auto v = back.entries.values();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], inf);
  EXPECT_EQ(v[2], -inf);
  EXPECT_TRUE(v[3] == 0.0 && std::signbit(v[3]));
}

TEST(MatrixMarketWrite, HugeShapesNeedMemoryForTheEntriesOnly) {
  // Nothing may be allocated per row or column: 2^50 of them would not fit in memory.
  constexpr index_t n = index_t{1} << 50;
  const CooMatrix<double> A(n, n, {n - 1, 5, 0, 5}, {0, 5, n - 1, 5}, {2.0, 0.5, 2.0, 0.5});
  const std::string size = std::to_string(n) + " " + std::to_string(n);
  const std::string text = write_text(A, {.symmetry = MmSymmetry::symmetric});
  EXPECT_EQ(text, "%%MatrixMarket matrix coordinate real symmetric\n" + size + " 2\n6 6 1\n" + std::to_string(n) + " 1 2\n");
  CooMatrix<double> back = read_text(text).entries;
  back.canonicalize();
  EXPECT_EQ(triplets(back), (std::vector<std::tuple<index_t, index_t, double>>{{0, n - 1, 2.0}, {5, 5, 1.0}, {n - 1, 0, 2.0}}));
  EXPECT_EQ(write_text(CooMatrix<double>(0, n), {.format = MmFormat::array}),
            "%%MatrixMarket matrix array real general\n0 " + std::to_string(n) + "\n");
  EXPECT_THAT([&] { write_text(A, {.symmetry = MmSymmetry::skew_symmetric}); },
              throws_naming<InvalidArgument>("A(0, " + std::to_string(n - 1) + ") = 2 but A(" + std::to_string(n - 1) +
                                             ", 0) = 2"));
}

TEST(MatrixMarketWrite, RefusesMatricesThatDoNotFitTheOptions) {
  const CooMatrix<double> A(2, 2, {1, 0}, {0, 1}, {2.0, 3.0});
  EXPECT_THAT([&] { write_text(A, {.symmetry = MmSymmetry::symmetric}); },
              throws_naming<InvalidArgument>("A is not symmetric: A(0, 1) = 3 but A(1, 0) = 2"));
  EXPECT_THAT([&] { write_text(A, {.symmetry = MmSymmetry::skew_symmetric}); },
              throws_naming<InvalidArgument>("A is not skew-symmetric"));
  const CooMatrix<double> one_sided(2, 2, {0}, {1}, {0.0});  // numerically symmetric, its pattern is not
  EXPECT_NO_THROW(write_text(one_sided, {.symmetry = MmSymmetry::symmetric}));
  EXPECT_THAT([&] { write_text(one_sided, {.field = MmField::pattern, .symmetry = MmSymmetry::symmetric}); },
              throws_naming<InvalidArgument>("the pattern of A is not symmetric: A(0, 1) and A(1, 0) are not both stored"));
  const CooMatrix<double> diagonal(2, 2, {1}, {1}, {1.0});
  EXPECT_THAT([&] { write_text(diagonal, {.symmetry = MmSymmetry::skew_symmetric}); },
              throws_naming<InvalidArgument>("A is not skew-symmetric: the diagonal A(1, 1) = 1 is not zero"));
  EXPECT_THAT([] { write_text(CooMatrix<double>(2, 3), {.symmetry = MmSymmetry::symmetric}); },
              throws_naming<InvalidArgument>("'symmetric' requires a square matrix, A is 2 x 3"));
  const CooMatrix<double> fraction(1, 1, {0}, {0}, {1.5});
  EXPECT_THAT([&] { write_text(fraction, {.field = MmField::integer}); },
              throws_naming<InvalidArgument>("A(0, 0) = 1.5 is not a 64-bit integer"));
  const CooMatrix<double> huge(1, 1, {0}, {0}, {0x1p63});
  EXPECT_THAT([&] { write_text(huge, {.field = MmField::integer}); }, throws_naming<InvalidArgument>("9223372036854775808"));
  EXPECT_THAT([&] { write_text(A, {.precision = 0}); }, throws_naming<InvalidArgument>("precision = 0, expected >= 1"));
  EXPECT_THAT([&] { write_text(A, {.format = MmFormat::array, .field = MmField::pattern}); },
              throws_naming<InvalidArgument>("the 'pattern' field requires the 'coordinate' format"));
  EXPECT_THAT([&] { write_text(A, {.field = MmField::pattern, .symmetry = MmSymmetry::skew_symmetric}); },
              throws_naming<InvalidArgument>("the 'pattern' field cannot be 'skew-symmetric'"));
}

TEST(MatrixMarketWrite, SymmetryIsNumericAfterSummingDuplicates) {
  // (0,1) is stored as 1 + 2 and (1,0) as 3; the upper explicit zero (0,2) has no mirror.
  const CooMatrix<double> A(3, 3, {0, 1, 0, 0}, {1, 0, 1, 2}, {1.0, 3.0, 2.0, 0.0});
  EXPECT_NO_THROW(write_text(A, {.symmetry = MmSymmetry::symmetric}));
  const double nan = std::nan("");
  const CooMatrix<double> with_nan(2, 2, {0, 1}, {1, 0}, {nan, nan});
  EXPECT_TRUE(has_symmetry(to_csr(with_nan), MmSymmetry::symmetric));
  EXPECT_TRUE(has_symmetry(to_csr(CooMatrix<double>(2, 3)), MmSymmetry::general));
  EXPECT_FALSE(has_symmetry(to_csr(CooMatrix<double>(2, 3)), MmSymmetry::symmetric));
}

// ---- round trips -----------------------------------------------------------------------

using Combination = std::tuple<MmFormat, MmField, MmSymmetry>;

/// True when the Matrix Market rules allow the combination.
bool allowed(const Combination& c) {
  const auto [format, field, symmetry] = c;
  return field != MmField::pattern || (format == MmFormat::coordinate && symmetry != MmSymmetry::skew_symmetric);
}

class MatrixMarketRoundTrip : public Seeded<::testing::TestWithParam<Combination>> {
protected:
  /// A random rows x cols matrix with the given symmetry whose values the field can
  /// hold: about a third of the stored triangle present, one in ten of those an
  /// explicit zero, and every off-diagonal entry mirrored for symmetric kinds.
  CooMatrix<double> random_matrix(index_t rows, index_t cols, MmField field, MmSymmetry symmetry) {
    CooMatrix<double> A(rows, cols);
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) {
        const bool in_triangle = symmetry == MmSymmetry::general || (symmetry == MmSymmetry::symmetric ? i >= j : i > j);
        if (!in_triangle || !rng.bernoulli(0.35)) continue;
        double v = field == MmField::integer ? static_cast<double>(rng.below(2001) - 1000) : rng.uniform(-1.0, 1.0);
        if (rng.bernoulli(0.1)) v = 0.0;
        A.push_back(i, j, v);
        if (i != j && symmetry != MmSymmetry::general) A.push_back(j, i, symmetry == MmSymmetry::skew_symmetric ? -v : v);
      }
    return A;
  }
};

TEST_P(MatrixMarketRoundTrip, WriteThenReadGivesTheSameMatrix) {
  const auto [format, field, symmetry] = GetParam();
  const MmWriteOptions options{format, field, symmetry};
  std::vector<std::pair<index_t, index_t>> shapes{{0, 0}, {1, 1}, {12, 12}, {40, 40}};
  if (symmetry == MmSymmetry::general) shapes.insert(shapes.end(), {{7, 5}, {3, 0}, {1, 9}});
  for (const auto& [rows, cols] : shapes) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    const CooMatrix<double> A = random_matrix(rows, cols, field, symmetry);
    if (!allowed(GetParam())) {
      EXPECT_THROW(write_text(A, options), InvalidArgument);
      continue;
    }
    const std::string text = write_text(A, options);
    const MmMatrix back = read_text(text);
    EXPECT_EQ(back.header.format, format);
    EXPECT_EQ(back.header.field, field);
    EXPECT_EQ(back.header.symmetry, symmetry);
    CsrMatrix<double> want = to_csr(A);
    if (field == MmField::pattern) std::ranges::fill(want.values(), 1.0);
    if (format == MmFormat::coordinate) {
      EXPECT_TRUE(same_csr(to_csr(back.entries), want));  // explicit zeros included
    } else {
      EXPECT_EQ(back.entries.nnz(), rows * cols);  // every element
      EXPECT_TRUE(same_matrix<double>(to_dense(back.entries), to_dense(want)));
    }
  }
}

std::string combination_name(const ::testing::TestParamInfo<Combination>& info) {
  const auto [format, field, symmetry] = info.param;
  std::string name =
      std::string(to_string(format)) + "_" + std::string(to_string(field)) + "_" + std::string(to_string(symmetry));
  std::ranges::replace(name, '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(All, MatrixMarketRoundTrip,
                         ::testing::Combine(::testing::Values(MmFormat::coordinate, MmFormat::array),
                                            ::testing::Values(MmField::real, MmField::integer, MmField::pattern),
                                            ::testing::Values(MmSymmetry::general, MmSymmetry::symmetric,
                                                              MmSymmetry::skew_symmetric)),
                         combination_name);

// ---- atomic file writes ------------------------------------------------------------------

TEST(MatrixMarketAtomicWrite, WritesAndReplacesTheFileLeavingNoTemporary) {
  const TempDir dir("trnsparse_test_io_");
  const fs::path path = dir.path() / "a.mtx";
  const CooMatrix<double> A(2, 2, {0, 1}, {1, 0}, {1.0, 2.0});
  write_matrix_market(path, A);
  EXPECT_EQ(slurp(path), write_text(A));
  const CooMatrix<double> B(1, 1, {0}, {0}, {5.0});
  write_matrix_market(path, B, {.format = MmFormat::array});
  EXPECT_EQ(slurp(path), "%%MatrixMarket matrix array real general\n1 1\n5\n");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"a.mtx"});
  EXPECT_TRUE(same_csr(to_csr(read_matrix_market(path).entries), to_csr(B)));
}

TEST(MatrixMarketAtomicWrite, MissingDirectoryIsAnIoErrorAndCreatesNothing) {
  const TempDir dir("trnsparse_test_io_");
  const fs::path path = dir.path() / "no_such_dir" / "a.mtx";
  EXPECT_THAT([&] { write_matrix_market(path, CooMatrix<double>(1, 1)); }, throws_naming<IoError>(path.string()));
  EXPECT_TRUE(dir.listing().empty());
}

TEST(MatrixMarketAtomicWrite, FailedRenameRemovesTheTemporary) {
  const TempDir dir("trnsparse_test_io_");
  const fs::path path = dir.path() / "taken";
  fs::create_directories(path / "child");  // a non-empty directory cannot be replaced by a file
  EXPECT_THAT([&] { write_matrix_market(path, CooMatrix<double>(1, 1)); }, throws_naming<IoError>(path.string()));
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"taken"});
}

TEST(MatrixMarketAtomicWrite, RefusedMatrixLeavesTheOldFileUntouched) {
  const TempDir dir("trnsparse_test_io_");
  const fs::path path = dir.path() / "a.mtx";
  const CooMatrix<double> old(1, 1, {0}, {0}, {1.0});
  write_matrix_market(path, old);
  const CooMatrix<double> not_symmetric(2, 2, {1}, {0}, {1.0});
  EXPECT_THROW(write_matrix_market(path, not_symmetric, {.symmetry = MmSymmetry::symmetric}), InvalidArgument);
  EXPECT_EQ(slurp(path), write_text(old));
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"a.mtx"});
}

}  // namespace
}  // namespace trnsparse::test
