/// @file convert.cpp
/// `trnsparse convert IN OUT [--format F] [--field F] [--symmetry S] [--precision P]
/// [--transpose] [--json]`: reads a Matrix Market file and writes it again, by default
/// with the input's banner. The output is complete or absent (an atomic rename), and
/// is not touched at all when the input is malformed or does not fit the options.

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "trnsparse/io.hpp"

namespace trnsparse::cli {
namespace {

constexpr std::array formats{MmFormat::coordinate, MmFormat::array};
constexpr std::array fields{MmField::real, MmField::integer, MmField::pattern};
constexpr std::array symmetries{MmSymmetry::general, MmSymmetry::symmetric, MmSymmetry::skew_symmetric};

struct ConvertOptions {
  std::string input;
  std::string output;
  // Banner words as given (CLI11 checks them); empty: as the input.
  std::string format;
  std::string field;
  std::string symmetry;
  int precision = MmWriteOptions{}.precision;
  bool transpose = false;
  bool json = false;
};

template <class E, std::size_t N>
std::vector<std::string> words_of(const std::array<E, N>& values) {
  std::vector<std::string> words;
  for (const E v : values) words.emplace_back(to_string(v));
  return words;
}

/// The value spelled `word`, or `otherwise` when the option was not given.
template <class E, std::size_t N>
E chosen(const std::string& word, const std::array<E, N>& values, E otherwise) {
  const auto it = std::ranges::find_if(values, [&](E v) { return to_string(v) == word; });
  return it != values.end() ? *it : otherwise;
}

CooMatrix<double> transposed(const CooMatrix<double>& A) {
  const auto rows = A.row_indices();
  const auto cols = A.col_indices();
  const auto values = A.values();
  return {A.cols(), A.rows(), {cols.begin(), cols.end()}, {rows.begin(), rows.end()}, {values.begin(), values.end()}};
}

void run_convert(const ConvertOptions& o) {
  MmMatrix mm = read_matrix_market(o.input);
  const MmWriteOptions write{chosen(o.format, formats, mm.header.format), chosen(o.field, fields, mm.header.field),
                             chosen(o.symmetry, symmetries, mm.header.symmetry), o.precision};
  if (o.transpose) mm.entries = transposed(mm.entries);
  write_matrix_market(o.output, mm.entries, write);

  const MmHeader written{write.format, write.field, write.symmetry};
  if (!o.json) {
    std::printf("wrote %s: %lld x %lld, %s\n", o.output.c_str(), static_cast<long long>(mm.entries.rows()),
                static_cast<long long>(mm.entries.cols()), banner_words(written).c_str());
    return;
  }
  JsonObject line;
  line.string("input", o.input)
      .string("output", o.output)
      .integer("rows", mm.entries.rows())
      .integer("cols", mm.entries.cols())
      .string("format", to_string(written.format))
      .string("field", to_string(written.field))
      .string("symmetry", to_string(written.symmetry))
      .boolean("transpose", o.transpose);
  print_line(line.str());
}

}  // namespace

Subcommand add_convert(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* command = app.add_subcommand(
      "convert", "Rewrite a Matrix Market file, by default with the input's banner; the output is written atomically");
  command->add_option("input", o->input, "Matrix Market file to read")->required();
  command->add_option("output", o->output, "Matrix Market file to write")->required();
  command->add_option("--format", o->format, "coordinate or array (default: as the input)")
      ->transform(CLI::IsMember(words_of(formats), CLI::ignore_case));
  command->add_option("--field", o->field, "real, integer or pattern (default: as the input)")
      ->transform(CLI::IsMember(words_of(fields), CLI::ignore_case));
  command->add_option("--symmetry", o->symmetry, "general, symmetric or skew-symmetric (checked; default: as the input)")
      ->transform(CLI::IsMember(words_of(symmetries), CLI::ignore_case));
  command
      ->add_option("--precision", o->precision,
                   "Significant digits of real values; 17 writes the shortest text that reads back exactly")
      ->check(CLI::Range(1, 17))
      ->capture_default_str();
  command->add_flag("--transpose", o->transpose, "Write the transpose");
  add_json_flag(*command, o->json);
  return {command, [o] { run_convert(*o); }};
}

}  // namespace trnsparse::cli
