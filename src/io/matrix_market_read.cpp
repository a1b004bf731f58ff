/// @file matrix_market_read.cpp
/// Matrix Market reading (see io.hpp). The text streams through `LineReader` (chunks of
/// up to 1 MiB, each line a view into the chunk: no allocation per line) and the tokens
/// of a line parse with std::from_chars. A slice passes over the data lines before its
/// bytes without parsing them, then parses its own with the same code as the whole
/// file. Memory is O(entries), whatever the shape.
#include "trnsparse/io.hpp"

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
#include "runtime/huge_pages.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"

namespace trnsparse {

std::string_view to_string(MmFormat f) noexcept {
  switch (f) {
    case MmFormat::coordinate: return "coordinate";
    case MmFormat::array: return "array";
  }
  return "?";
}

std::string_view to_string(MmField f) noexcept {
  switch (f) {
    case MmField::real: return "real";
    case MmField::integer: return "integer";
    case MmField::pattern: return "pattern";
  }
  return "?";
}

std::string_view to_string(MmSymmetry s) noexcept {
  switch (s) {
    case MmSymmetry::general: return "general";
    case MmSymmetry::symmetric: return "symmetric";
    case MmSymmetry::skew_symmetric: return "skew-symmetric";
  }
  return "?";
}

namespace {

using detail::mm::first_stored_row;
using detail::mm::invalid_combination;

namespace fs = std::filesystem;

constexpr std::array all_formats{MmFormat::coordinate, MmFormat::array};
constexpr std::array all_fields{MmField::real, MmField::integer, MmField::pattern};
constexpr std::array all_symmetries{MmSymmetry::general, MmSymmetry::symmetric, MmSymmetry::skew_symmetric};

/// Entries reserved up front at most when the input length is unknown (a pipe);
/// beyond that, the arrays grow as entries arrive.
constexpr index_t unknown_length_reserve = index_t{1} << 16;

/// a * b, or nullopt when it does not fit in index_t. Both >= 0.
std::optional<index_t> product(index_t a, index_t b) noexcept {
  if (a != 0 && b > std::numeric_limits<index_t>::max() / a) return std::nullopt;
  return a * b;
}
// ---- text -------------------------------------------------------------------------

bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

bool iequals(std::string_view a, std::string_view b) noexcept {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

/// A blank line or a `%` comment: skipped everywhere after the banner.
bool is_blank_or_comment(std::string_view line) noexcept {
  const auto first = std::find_if_not(line.begin(), line.end(), is_space);
  return first == line.end() || *first == '%';
}

/// Input text for a message: quoted, cut to 40 bytes, every byte outside printable ASCII
/// (and the backslash) written as \xNN, so that a binary file never sends raw bytes to a
/// terminal; or "end of line".
std::string describe(std::string_view text) {
  constexpr std::size_t max_shown = 40;
  if (text.empty()) return "end of line";
  std::string out = "'";
  for (const char ch : text.substr(0, max_shown)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += ch;
    } else {
      constexpr char hex[] = "0123456789abcdef";
      out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
    }
  }
  return out + (text.size() > max_shown ? "...'" : "'");
}

/// The whitespace-separated tokens of one line, one at a time.
class Tokens {
public:
  explicit Tokens(std::string_view line) noexcept : rest_(line) {}
  /// The next token; empty at the end of the line.
  std::string_view next() noexcept {
    std::size_t first = 0;
    while (first < rest_.size() && is_space(rest_[first])) ++first;
    std::size_t last = first;
    while (last < rest_.size() && !is_space(rest_[last])) ++last;
    const std::string_view token(rest_.data() + first, last - first);
    rest_.remove_prefix(last);
    return token;
  }

private:
  std::string_view rest_;
};

// ---- numbers ----------------------------------------------------------------------

enum class Parsed { ok, invalid, out_of_range };

/// Drops a leading '+' (strtod accepts one, std::from_chars does not).
std::string_view without_plus(std::string_view token) noexcept {
  const bool plus = token.size() > 1 && token[0] == '+' && token[1] != '+' && token[1] != '-';
  return plus ? token.substr(1) : token;
}

/// Parses the whole token as T with std::from_chars: trailing characters are invalid.
template <class T>
Parsed parse_whole(std::string_view token, T& out) noexcept {
  token = without_plus(token);
  const char* last = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), last, out);
  if (ec == std::errc::invalid_argument || ptr != last) return Parsed::invalid;
  return ec == std::errc::result_out_of_range ? Parsed::out_of_range : Parsed::ok;
}

/// A real value. A value too small for a double reads as zero (as strtod does), so
/// only overflow is out of range.
Parsed parse_real(std::string_view token, double& out) {
  const Parsed parsed = parse_whole(token, out);
  if (parsed != Parsed::out_of_range) return parsed;
  out = std::strtod(std::string(without_plus(token)).c_str(), nullptr);
  return std::isinf(out) ? Parsed::out_of_range : Parsed::ok;
}

// ---- reading ----------------------------------------------------------------------

/// Bytes from the read position to the end, when the stream can seek (files and
/// string streams); nullopt otherwise. The position is restored.
std::optional<std::size_t> remaining_bytes(std::istream& in) {
  const std::istream::pos_type here = in.tellg();
  if (here == std::istream::pos_type(-1)) return std::nullopt;
  in.seekg(0, std::ios::end);
  const std::istream::pos_type end = in.tellg();
  in.clear();
  in.seekg(here);
  if (end == std::istream::pos_type(-1) || !in) return std::nullopt;
  return static_cast<std::size_t>(end - here);
}

/// The lines of a stream without their terminators ("\n" or "\r\n"). The stream is
/// read in large chunks; a line is a view into the chunk, valid until the next call.
/// Offsets count bytes from where the reader started; stop_at() ends the lines early.
class LineReader {
public:
  /// `length`: the input's length when known, to size the buffer of a small input.
  LineReader(std::istream& in, std::string_view source, std::optional<std::size_t> length)
      : in_(in),
        source_(source),
        capacity_(std::clamp(length.value_or(max_chunk) + 1, min_chunk, max_chunk)),
        buffer_(std::make_unique_for_overwrite<char[]>(capacity_)) {}

  /// The next line, or nullopt at the end of the input or when it would start at or
  /// after the stop offset. @throw IoError on a read error.
  std::optional<std::string_view> next() {
    if (offset() >= stop_) return std::nullopt;
    std::size_t searched = 0;  // bytes of the pending line known to hold no '\n'
    for (;;) {
      char* first = buffer_.get() + begin_;
      const std::size_t pending = end_ - begin_;
      if (auto* newline = static_cast<char*>(std::memchr(first + searched, '\n', pending - searched))) {
        begin_ += static_cast<std::size_t>(newline - first) + 1;
        return line(first, newline);
      }
      searched = pending;
      if (!refill()) break;
    }
    if (begin_ == end_) return std::nullopt;
    char* first = buffer_.get() + begin_;
    begin_ = end_;
    return line(first, buffer_.get() + end_);  // the last line has no terminator
  }

  /// 1-based number of the line last returned; 0 before the first.
  [[nodiscard]] index_t line_number() const noexcept { return line_number_; }

  /// Offset of the next line (of the end of the input once it is reached).
  [[nodiscard]] std::size_t offset() const noexcept { return dropped_ + begin_; }

  /// next() returns no line that starts at or after `offset` (none by default).
  void stop_at(std::size_t offset) noexcept { stop_ = offset; }

private:
  std::string_view line(const char* first, const char* last) noexcept {
    ++line_number_;
    if (last != first && last[-1] == '\r') --last;
    return {first, static_cast<std::size_t>(last - first)};
  }

  /// Moves the pending bytes to the front (doubling the buffer when a line fills
  /// it) and appends what the stream has; false when nothing was added.
  bool refill() {
    const std::size_t pending = end_ - begin_;
    std::memmove(buffer_.get(), buffer_.get() + begin_, pending);
    dropped_ += begin_;
    begin_ = 0;
    end_ = pending;
    if (end_ == capacity_) grow();
    in_.read(buffer_.get() + end_, static_cast<std::streamsize>(capacity_ - end_));
    if (in_.bad()) throw IoError(std::string(source_) + ": read error after line " + std::to_string(line_number_));
    const auto added = static_cast<std::size_t>(in_.gcount());
    end_ += added;
    return added > 0;
  }

  void grow() {
    auto bigger = std::make_unique_for_overwrite<char[]>(2 * capacity_);
    std::memcpy(bigger.get(), buffer_.get(), end_);
    buffer_ = std::move(bigger);
    capacity_ *= 2;
  }

  static constexpr std::size_t min_chunk = std::size_t{1} << 12;
  static constexpr std::size_t max_chunk = std::size_t{1} << 20;

  std::istream& in_;
  std::string_view source_;
  std::size_t capacity_;
  std::unique_ptr<char[]> buffer_;
  std::size_t begin_ = 0;    // first byte not yet returned
  std::size_t end_ = 0;      // one past the last byte read
  std::size_t dropped_ = 0;  // offset of buffer_[0]: bytes moved out of the buffer
  std::size_t stop_ = std::numeric_limits<std::size_t>::max();
  index_t line_number_ = 0;
};

/// Reads one Matrix Market text: banner, size line, entries, end of input; or, for a
/// slice, banner, size line and the entries of the data lines that start in its bytes.
class MmReader {
public:
  MmReader(std::istream& in, std::string_view source)
      : source_(source), length_(remaining_bytes(in)), lines_(in, source_, length_) {}

  /// Slice `slice` of `slices` (see read_matrix_market_slice), `slice` in [0, slices)
  /// as the caller checks; slice 0 of 1 is the whole input, whose length need not be
  /// known (a pipe).
  MmMatrix read(index_t slice, index_t slices) {
    read_banner();
    read_size_line();
    data_offset_ = lines_.offset();
    row_ = first_stored_row(0, header_.symmetry);
    const bool last_slice = slice + 1 == slices;
    const std::size_t first = slice_start(slice, slices);
    const std::size_t last = slice_start(slice + 1, slices);
    lines_.stop_at(first);
    skip_data_lines();
    const index_t before = read_;
    lines_.stop_at(last_slice ? std::numeric_limits<std::size_t>::max() : last);
    reserve(length_ ? std::optional(std::max(first, last) - first) : std::nullopt);
    if (header_.format == MmFormat::coordinate)
      read_coordinate_entries();
    else
      read_array_values();
    if (last_slice) expect_complete();
    MmMatrix result;
    result.header = header_;
    result.stored_entries = read_ - before;
    result.declared_entries = count_;
    result.entries = CooMatrix<double>(rows_, cols_, std::move(row_idx_), std::move(col_idx_), std::move(values_));
    return result;
  }

private:
  [[noreturn]] void fail(const std::string& what) const { throw ParseError(source_, lines_.line_number(), what); }
  /// Fails on the line after the last one: `expected` was missing.
  [[noreturn]] void fail_at_end(const std::string& expected) const {
    throw ParseError(source_, lines_.line_number() + 1, expected + ", found end of file");
  }
  [[noreturn]] void not_supported(std::string_view what) const {
    throw NotSupported(source_ + ":" + std::to_string(lines_.line_number()) + ": " + std::string(what) +
                       " matrices are not supported");
  }

  void read_banner() {
    const std::string expected = "expected the banner '%%MatrixMarket matrix <format> <field> <symmetry>'";
    const auto line = lines_.next();
    if (!line) fail_at_end(expected);
    Tokens words(*line);
    if (!iequals(words.next(), "%%MatrixMarket")) fail(expected + ", found " + describe(*line));
    const std::string_view object = words.next();
    if (!iequals(object, "matrix")) fail("expected the object 'matrix' in the banner, found " + describe(object));
    header_.format = banner_word(words.next(), all_formats, "format");
    const std::string_view field = words.next();
    if (iequals(field, "complex")) not_supported("complex");
    header_.field = banner_word(field, all_fields, "field");
    const std::string_view symmetry = words.next();
    if (iequals(symmetry, "hermitian")) not_supported("hermitian");
    header_.symmetry = banner_word(symmetry, all_symmetries, "symmetry");
    expect_end_of_line(words);
    if (const char* why = invalid_combination(header_.format, header_.field, header_.symmetry)) fail(why);
  }

  /// The banner word among `choices` (case-insensitive); fails naming them otherwise.
  template <class E, std::size_t N>
  E banner_word(std::string_view word, const std::array<E, N>& choices, const char* what) const {
    std::string names;
    for (std::size_t k = 0; k < N; ++k) {
      if (iequals(word, to_string(choices[k]))) return choices[k];
      names += (k == 0 ? "'" : k + 1 == N ? " or '" : ", '") + std::string(to_string(choices[k])) + "'";
    }
    fail("expected the " + std::string(what) + " " + names + " in the banner, found " + describe(word));
  }

  /// The next line that is neither blank nor a comment; nullopt at the end of input.
  std::optional<std::string_view> next_data_line() {
    while (auto line = lines_.next())
      if (!is_blank_or_comment(*line)) return line;
    return std::nullopt;
  }

  void read_size_line() {
    const bool coordinate = header_.format == MmFormat::coordinate;
    const std::string layout = coordinate ? "'rows cols entries'" : "'rows cols'";
    const auto line = next_data_line();
    if (!line) fail_at_end("expected the size line " + layout);
    Tokens tokens(*line);
    rows_ = parse_size(tokens.next(), "rows", layout);
    cols_ = parse_size(tokens.next(), "cols", layout);
    if (coordinate) count_ = parse_size(tokens.next(), "entries", layout);
    expect_end_of_line(tokens);
    check_size();
  }

  index_t parse_size(std::string_view token, const std::string& name, const std::string& layout) const {
    index_t n = 0;
    switch (parse_whole(token, n)) {
      case Parsed::invalid: fail("expected an integer for " + name + " on the size line " + layout + ", found " + describe(token));
      case Parsed::out_of_range: fail("expected " + name + " < 2^63 on the size line, found " + describe(token));
      case Parsed::ok: break;
    }
    if (n < 0) fail("expected " + name + " >= 0 on the size line, found " + std::to_string(n));
    return n;
  }

  /// Checks the declared size against the banner; sets the value count of arrays.
  void check_size() {
    const std::string shape = std::to_string(rows_) + " x " + std::to_string(cols_);
    if (header_.symmetry != MmSymmetry::general && rows_ != cols_)
      fail("expected a square matrix for '" + std::string(to_string(header_.symmetry)) + "', found " + shape);
    const std::optional<index_t> elements = product(rows_, cols_);
    if (header_.format == MmFormat::coordinate) {
      if (elements && count_ > *elements)
        fail("expected entries <= rows * cols = " + std::to_string(*elements) + " on the size line, found " +
             std::to_string(count_));
      return;
    }
    if (!elements) fail("expected rows * cols < 2^63 for an array, found " + shape);
    switch (header_.symmetry) {
      case MmSymmetry::general: count_ = *elements; break;
      case MmSymmetry::symmetric: count_ = rows_ % 2 == 0 ? rows_ / 2 * (rows_ + 1) : (rows_ + 1) / 2 * rows_; break;
      case MmSymmetry::skew_symmetric: count_ = rows_ % 2 == 0 ? rows_ / 2 * (rows_ - 1) : (rows_ - 1) / 2 * rows_; break;
    }
  }

  /// Where the data lines of slice `s` of `slices` begin: the bytes after the size line
  /// cut into `slices` ranges whose lengths differ by at most one; for s == slices,
  /// the end of the input (or the largest offset when its length is unknown).
  /// @throw IoError when 0 < s < slices and the length of the input is unknown.
  std::size_t slice_start(index_t s, index_t slices) const {
    if (s == 0) return data_offset_;
    if (s == slices) return length_.value_or(std::numeric_limits<std::size_t>::max());
    if (!length_) throw IoError(source_ + ": cannot cut an input of unknown length into slices");
    const std::size_t bytes = *length_ > data_offset_ ? *length_ - data_offset_ : 0;
    const auto n = static_cast<std::size_t>(slices);
    const auto k = static_cast<std::size_t>(s);
    return data_offset_ + k * (bytes / n) + std::min(k, bytes % n);
  }

  /// Passes over the data lines before the stop offset without parsing them, counting
  /// them (and moving the array position) as if they had been read.
  void skip_data_lines() {
    while (next_data_line()) {
      ++read_;
      if (header_.format == MmFormat::array) next_array_position();
    }
  }

  /// Reserves room for the entries the size line declares, but never for more than
  /// `bytes` of input can hold (a coordinate line takes at least 4 bytes, "1 1\n", an
  /// array line 2), so that a fuzzed header cannot exhaust memory.
  void reserve(std::optional<std::size_t> bytes) {
    const index_t line_bytes = header_.format == MmFormat::coordinate ? 4 : 2;
    const index_t room = bytes ? static_cast<index_t>(*bytes) / line_bytes : unknown_length_reserve;
    const index_t mirrored = header_.symmetry == MmSymmetry::general ? 1 : 2;
    const auto n = static_cast<std::size_t>(std::min(count_, room) * mirrored);
    row_idx_.reserve(n);
    col_idx_.reserve(n);
    values_.reserve(n);
    detail::advise_huge_pages(row_idx_);
    detail::advise_huge_pages(col_idx_);
    detail::advise_huge_pages(values_);
  }

  /// The entries of the data lines up to the stop offset.
  void read_coordinate_entries() {
    while (const auto line = next_data_line()) {
      if (read_ == count_) fail_beyond_count();
      Tokens tokens(*line);
      const index_t i = parse_index(tokens.next(), rows_, "row");
      const index_t j = parse_index(tokens.next(), cols_, "column");
      const double v = header_.field == MmField::pattern ? 1.0 : parse_value(tokens.next());
      expect_end_of_line(tokens);
      if (i == j && header_.symmetry == MmSymmetry::skew_symmetric)
        fail("expected no diagonal entry in a skew-symmetric matrix, found (" + std::to_string(i) + ", " +
             std::to_string(j) + ")");
      add(i - 1, j - 1, v);
      ++read_;
    }
  }

  /// The array values of the data lines up to the stop offset, one per line.
  void read_array_values() {
    while (const auto line = next_data_line()) {
      if (read_ == count_) fail_beyond_count();
      Tokens tokens(*line);
      const double v = parse_value(tokens.next());
      expect_end_of_line(tokens);
      add(row_, col_, v);
      ++read_;
      next_array_position();
    }
  }

  /// Array values go column by column over the stored rows of each column (see
  /// first_stored_row).
  void next_array_position() noexcept {
    if (++row_ == rows_) row_ = first_stored_row(++col_, header_.symmetry);
  }

  /// A 1-based index in [1, size].
  index_t parse_index(std::string_view token, index_t size, const char* what) const {
    index_t k = 0;
    const Parsed parsed = parse_whole(token, k);
    if (parsed == Parsed::invalid) fail("expected an integer " + std::string(what) + " index, found " + describe(token));
    if (parsed == Parsed::out_of_range || k < 1 || k > size)
      fail("expected a " + std::string(what) + " index in [1, " + std::to_string(size) + "], found " + describe(token));
    return k;
  }

  double parse_value(std::string_view token) const {
    if (header_.field == MmField::integer) {
      index_t k = 0;
      switch (parse_whole(token, k)) {
        case Parsed::invalid: fail("expected an integer value, found " + describe(token));
        case Parsed::out_of_range: fail("expected an integer value < 2^63, found " + describe(token));
        case Parsed::ok: return static_cast<double>(k);
      }
    }
    double v = 0;
    switch (parse_real(token, v)) {
      case Parsed::invalid: fail("expected a real value, found " + describe(token));
      case Parsed::out_of_range: fail("expected a real value in the range of a double, found " + describe(token));
      case Parsed::ok: break;
    }
    return v;
  }

  void expect_end_of_line(Tokens& tokens) const {
    if (const std::string_view extra = tokens.next(); !extra.empty())
      fail("expected end of line, found trailing " + describe(extra));
  }

  /// Fails on a data line after the entries (values) the size line declares.
  [[noreturn]] void fail_beyond_count() const {
    fail("expected end of file after the " + std::to_string(count_) + " " +
         (header_.format == MmFormat::coordinate ? "entries" : "values") + " the size line declares");
  }

  /// At the end of the input: fails unless every declared entry (value) was read; adds
  /// the zero diagonal of a skew-symmetric array.
  void expect_complete() {
    const bool coordinate = header_.format == MmFormat::coordinate;
    if (read_ < count_)
      fail_at_end("expected " + std::string(coordinate ? "entry " : "value ") + std::to_string(read_ + 1) + " of " +
                  std::to_string(count_));
    if (!coordinate && header_.symmetry == MmSymmetry::skew_symmetric)
      for (index_t d = 0; d < rows_; ++d) push(d, d, 0.0);
  }

  /// Adds the 0-based entry (i, j) and, for symmetric kinds, its mirror.
  void add(index_t i, index_t j, double v) {
    push(i, j, v);
    if (i != j && header_.symmetry != MmSymmetry::general)
      push(j, i, header_.symmetry == MmSymmetry::skew_symmetric ? -v : v);
  }

  void push(index_t i, index_t j, double v) {
    row_idx_.push_back(i);
    col_idx_.push_back(j);
    values_.push_back(v);
  }

  std::string source_;
  std::optional<std::size_t> length_;  // bytes of input, when the stream can tell
  LineReader lines_;
  MmHeader header_;
  index_t rows_ = 0;
  index_t cols_ = 0;
  index_t count_ = 0;  // entries (coordinate) or values (array) the file stores
  std::size_t data_offset_ = 0;  // of the first line after the size line
  index_t read_ = 0;             // entries (values) before the next data line
  index_t row_ = 0;              // array: the 0-based (row, column) of the next value
  index_t col_ = 0;
  std::vector<index_t> row_idx_;
  std::vector<index_t> col_idx_;
  std::vector<double> values_;
};

}  // namespace

MmMatrix read_matrix_market(std::istream& in, std::string_view source) { return MmReader(in, source).read(0, 1); }

MmMatrix read_matrix_market(const fs::path& path) { return read_matrix_market_slice(path, 0, 1); }

MmMatrix read_matrix_market_slice(const fs::path& path, index_t slice, index_t slices) {
  if (slices < 1) throw InvalidArgument("read_matrix_market_slice: slices = " + std::to_string(slices) + ", expected >= 1");
  if (slice < 0 || slice >= slices)
    throw InvalidArgument("read_matrix_market_slice: slice = " + std::to_string(slice) + " is out of range [0, " +
                          std::to_string(slices) + ")");
  const std::string name = path.string();
  std::error_code error;
  if (fs::is_directory(path, error)) throw IoError("cannot read '" + name + "': is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read '" + name + "': " + std::strerror(errno));
  return MmReader(in, name).read(slice, slices);
}

}  // namespace trnsparse
