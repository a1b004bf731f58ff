/// @file info.cpp
/// `trnsparse info FILE [--json]`: what a Matrix Market file holds — banner, shape,
/// stored entries, nnz of the full matrix, density, entries per row (with a log2
/// histogram), structural block density for the tile sizes of interest, and whether
/// the matrix is numerically symmetric.

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "cli.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::cli {
namespace {

constexpr std::array<index_t, 4> block_sizes{16, 32, 64, 128};

struct InfoOptions {
  std::string file;
  bool json = false;
};

struct BlockCount {
  index_t block_size;
  index_t stored;  ///< blocks holding at least one entry
  index_t total;   ///< blocks of the whole grid
  [[nodiscard]] double density() const { return total > 0 ? static_cast<double>(stored) / static_cast<double>(total) : 0.0; }
};

struct RowStats {
  index_t min = 0;
  double mean = 0.0;
  index_t max = 0;
  /// Rows per bucket: bucket 0 counts empty rows, bucket k >= 1 rows with
  /// [2^(k-1), 2^k) entries.
  std::vector<index_t> histogram;
};

struct Summary {
  std::string file;
  MmHeader header;
  index_t rows = 0;
  index_t cols = 0;
  index_t stored_entries = 0;
  index_t nnz = 0;
  RowStats per_row;
  std::vector<BlockCount> blocks;
  bool symmetric = false;

  [[nodiscard]] double density() const {
    const double elements = static_cast<double>(rows) * static_cast<double>(cols);
    return elements > 0 ? static_cast<double>(nnz) / elements : 0.0;
  }
};

index_t ceil_div(index_t n, index_t b) { return (n + b - 1) / b; }

/// Blocks of the b x b grid over A that hold at least one entry of A (whatever its
/// value): one pass over the pattern, marking each block column once per block row.
/// O(nnz + cols / b).
BlockCount count_blocks(const CsrMatrix<double>& A, index_t b) {
  std::vector<index_t> marked_by(static_cast<std::size_t>(ceil_div(A.cols(), b)), -1);  // block row that last marked it
  index_t stored = 0;
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t p = A.row_ptr()[i]; p < A.row_ptr()[i + 1]; ++p) {
      index_t& mark = marked_by[static_cast<std::size_t>(A.col_indices()[p] / b)];
      if (mark == i / b) continue;
      mark = i / b;
      ++stored;
    }
  return {b, stored, ceil_div(A.rows(), b) * ceil_div(A.cols(), b)};
}

std::size_t log2_bucket(index_t count) {
  std::size_t bucket = 0;
  for (; count > 0; count >>= 1) ++bucket;
  return bucket;
}

/// "0", "1", "2-3", "4-7", ...: the entry counts of a histogram bucket.
std::string bucket_label(std::size_t bucket) {
  if (bucket <= 1) return std::to_string(bucket);
  const index_t low = index_t{1} << (bucket - 1);
  return std::to_string(low) + "-" + std::to_string(2 * low - 1);
}

RowStats row_stats(std::span<const index_t> counts) {
  RowStats stats;
  if (counts.empty()) return stats;
  const auto [min, max] = std::ranges::minmax_element(counts);
  stats.min = *min;
  stats.max = *max;
  stats.mean = static_cast<double>(std::accumulate(counts.begin(), counts.end(), index_t{0})) /
               static_cast<double>(counts.size());
  stats.histogram.assign(log2_bucket(stats.max) + 1, 0);
  for (const index_t c : counts) ++stats.histogram[log2_bucket(c)];
  return stats;
}

Summary summarize(const std::string& file) {
  const MmMatrix mm = read_matrix_market(file);
  const CsrMatrix<double> A = to_csr(mm.entries);
  Summary s{file, mm.header, A.rows(), A.cols(), mm.stored_entries, A.nnz(), row_stats(nnz_per_row(A)), {}, false};
  for (const index_t b : block_sizes) s.blocks.push_back(count_blocks(A, b));
  s.symmetric = has_symmetry(A, MmSymmetry::symmetric);
  return s;
}

void print_text(const Summary& s) {
  std::printf("file            %s\n", s.file.c_str());
  std::printf("banner          %s\n", banner_words(s.header).c_str());
  std::printf("shape           %lld x %lld\n", static_cast<long long>(s.rows), static_cast<long long>(s.cols));
  std::printf("stored entries  %lld\n", static_cast<long long>(s.stored_entries));
  std::printf("nnz             %lld\n", static_cast<long long>(s.nnz));
  std::printf("density         %.4g\n", s.density());
  std::printf("symmetric       %s\n", s.symmetric ? "yes" : "no");
  std::printf("nnz per row     min %lld, mean %.2f, max %lld\n", static_cast<long long>(s.per_row.min), s.per_row.mean,
              static_cast<long long>(s.per_row.max));
  for (std::size_t k = 0; k < s.per_row.histogram.size(); ++k)
    std::printf("  %-13s %lld rows\n", bucket_label(k).c_str(), static_cast<long long>(s.per_row.histogram[k]));
  std::printf("block density   (blocks holding an entry / all blocks)\n");
  for (const BlockCount& c : s.blocks)
    std::printf("  %4lld x %-6lld %.4g  (%lld of %lld)\n", static_cast<long long>(c.block_size),
                static_cast<long long>(c.block_size), c.density(), static_cast<long long>(c.stored),
                static_cast<long long>(c.total));
}

void print_json(const Summary& s) {
  JsonObject histogram;
  for (std::size_t k = 0; k < s.per_row.histogram.size(); ++k) histogram.integer(bucket_label(k), s.per_row.histogram[k]);
  JsonObject per_row;
  per_row.integer("min", s.per_row.min).number("mean", s.per_row.mean).integer("max", s.per_row.max);
  per_row.object("histogram", histogram);
  JsonObject density;
  JsonObject stored;
  for (const BlockCount& c : s.blocks) {
    density.number(std::to_string(c.block_size), c.density());
    stored.integer(std::to_string(c.block_size), c.stored);
  }
  JsonObject o;
  o.string("file", s.file)
      .string("format", to_string(s.header.format))
      .string("field", to_string(s.header.field))
      .string("symmetry", to_string(s.header.symmetry))
      .integer("rows", s.rows)
      .integer("cols", s.cols)
      .integer("stored_entries", s.stored_entries)
      .integer("nnz", s.nnz)
      .number("density", s.density())
      .object("nnz_per_row", per_row)
      .object("block_density", density)
      .object("stored_blocks", stored)
      .boolean("symmetric", s.symmetric);
  print_line(o.str());
}

}  // namespace

Subcommand add_info(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* command = app.add_subcommand(
      "info", "Describe a Matrix Market file: shape, nnz, density, entries per row, block density, symmetry");
  command->add_option("file", options->file, "Matrix Market file")->required();
  add_json_flag(*command, options->json);
  return {command, [options] {
            const Summary summary = summarize(options->file);
            options->json ? print_json(summary) : print_text(summary);
          }};
}

}  // namespace trnsparse::cli
