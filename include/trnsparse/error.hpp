/// @file error.hpp
/// The exceptions trnsparse throws. Every message names the argument (or file and
/// line) and the first offending position, e.g.
/// `csr: col_idx[17] = 40 is out of range [0, 32) (row 3)`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace trnsparse {

/// Base of every trnsparse exception: catch this to catch them all.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An argument has a bad value: negative shape, block size < 1, NaN threshold, ...
class InvalidArgument : public Error {
public:
  using Error::Error;
};

/// Operand shapes do not agree (e.g. `A.cols() != x.size()`).
class DimensionMismatch : public Error {
public:
  using Error::Error;
};

/// An index array is malformed: out of range, unsorted, duplicated, non-monotone
/// row pointers, or an array of the wrong length.
class IndexError : public Error {
public:
  using Error::Error;
};

/// A size or product of sizes does not fit in a signed 64-bit integer (or in memory).
class OverflowError : public Error {
public:
  using Error::Error;
};

/// A file could not be opened, read or written.
class IoError : public Error {
public:
  using Error::Error;
};

/// Malformed input text (Matrix Market). `line()` is 1-based; 0 when unknown.
class ParseError : public Error {
public:
  ParseError(const std::string& source, std::int64_t line, const std::string& what)
      : Error(source + ":" + std::to_string(line) + ": " + what), source_(source), line_(line) {}
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] std::int64_t line() const noexcept { return line_; }

private:
  std::string source_;
  std::int64_t line_;
};

/// A valid request that this build or this input kind does not support
/// (e.g. a `complex` Matrix Market file). Never a silent fallback.
class NotSupported : public Error {
public:
  using Error::Error;
};

}  // namespace trnsparse
