/// @file text.hpp
/// Line and field splitting and number parsing shared by the XYZ and basis-set readers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace trnsparse::hf::text {

/// The file's contents. @throw IoError naming the path if it cannot be opened or read.
std::string read_file(const std::string& path);
/// Lines without their terminators ("\n" or "\r\n"); a final newline ends the last line.
std::vector<std::string_view> split_lines(std::string_view text);
/// Whitespace-separated fields.
std::vector<std::string_view> fields(std::string_view line);
std::string_view trim(std::string_view s) noexcept;
constexpr char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
/// The whole field as a decimal integer; false otherwise.
bool parse_integer(std::string_view field, long long& value) noexcept;
/// The whole field as a real number, accepting the Fortran exponent letter D
/// (`1.0D+00`); false otherwise.
bool parse_real(std::string_view field, double& value);

}  // namespace trnsparse::hf::text
