/// @file advise.cpp
/// `trnsparse advise FILE [--width W] [--dtype fp32|fp64|bf16] [--measure] [--recalibrate]
/// [--calibration PATH] [--json]`, or `--problem SPEC` instead of FILE: which format a
/// matrix's products run fastest in (CSR, or BSR with a block size), from its sampled
/// fill ratios and this machine's calibrated speed per stored entry (advisor.hpp). The
/// first run on a machine, for each (dtype, width), measures the calibration (a few
/// seconds; progress on stderr when it is a terminal) and caches it.
///
/// --json prints one object: `candidates` (format, block_size, fill, predicted_ms,
/// and with --measure measured_ms, measured_spread and unstable), `choice` (format,
/// block_size), predicted_speedup_vs_csr, the calibration's status and, with --measure,
/// measured_choice_vs_best. Without it, a table. --measure times each BSR candidate in
/// alternating chunks against CSR (measure_candidates), so that the ratios hold on a
/// machine whose load drifts.

#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli.hpp"
#include "progress.hpp"
#include "trnsparse/advisor.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/io.hpp"

namespace trnsparse::cli {
namespace {

struct AdviseOptions {
  std::string file;
  std::string problem;
  index_t width = 1;
  std::string dtype = "fp32";
  bool measure = false;
  bool recalibrate = false;
  std::string calibration;
  bool json = false;
};

const char* format_name(Format f) { return f == Format::csr ? "csr" : "bsr"; }

template <Value T>
void run_advise(const AdviseOptions& o, const CsrMatrix<double>& A64, const std::string& name) {
  const CsrMatrix<T> A = cast<T>(A64);
  const Workload workload{.width = o.width};
  std::string status;
  Progress progress(!o.json);
  const Calibration calibration = load_calibration(
      dtype_name<T>(), o.width, o.calibration, o.recalibrate, &status, [&](int done, int total) {
        progress.update("advise: calibrating " + std::string(dtype_name<T>()) + " width " + std::to_string(o.width) +
                            " (" + std::to_string(done) + "/" + std::to_string(total) + " formats)",
                        static_cast<double>(done) / total);
      });
  const Advice advice = advise(A, workload, calibration);
  if (status.starts_with("measured under load"))
    std::fprintf(stderr, "advise: warning: calibration %s\n", status.c_str());
  std::vector<Measured> measured;
  double choice_vs_best = NAN;
  if (o.measure) {
    progress.update("advise: measuring " + std::to_string(advice.candidates.size()) + " formats");
    measured = measure_candidates(A, std::span<const Candidate>(advice.candidates), workload);
    double best = INFINITY, chosen = NAN;
    bool unstable = false;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      const Candidate& c = advice.candidates[i];
      best = std::min(best, measured[i].ms);
      if (c.format == advice.format && c.block_size == advice.block_size) chosen = measured[i].ms;
      unstable = unstable || !measured[i].stable;
    }
    choice_vs_best = chosen / best;
    if (unstable)
      std::fprintf(stderr, "advise: warning: some measured times stayed more than 10%% apart after retries "
                           "(marked unstable); another process may be busy\n");
  }
  progress.clear();

  if (o.json) {
    std::vector<JsonObject> candidates;
    for (std::size_t i = 0; i < advice.candidates.size(); ++i) {
      const Candidate& c = advice.candidates[i];
      JsonObject& item = candidates.emplace_back();
      item.string("format", format_name(c.format))
          .integer("block_size", c.block_size)
          .number("fill", c.fill)
          .number("predicted_ms", c.predicted_ms);
      if (o.measure)
        item.number("measured_ms", measured[i].ms)
            .number("measured_spread", measured[i].spread)
            .boolean("unstable", !measured[i].stable);
    }
    JsonObject choice;
    choice.string("format", format_name(advice.format)).integer("block_size", advice.block_size);
    JsonObject line;
    line.string("matrix", name)
        .integer("rows", A.rows())
        .integer("cols", A.cols())
        .integer("nnz", A.nnz())
        .string("dtype", dtype_name<T>())
        .integer("width", o.width)
        .array("candidates", candidates)
        .object("choice", choice)
        .number("predicted_speedup_vs_csr", advice.predicted_speedup_vs_csr)
        .string("calibration", status);
    if (o.measure) line.number("measured_choice_vs_best", choice_vs_best);
    print_line(line.str());
    return;
  }
  std::printf("%s: %lld x %lld, %lld non-zeros; %s products of width %lld\n", name.c_str(),
              static_cast<long long>(A.rows()), static_cast<long long>(A.cols()), static_cast<long long>(A.nnz()),
              std::string(dtype_name<T>()).c_str(), static_cast<long long>(o.width));
  std::printf("%-8s %6s %10s%s\n", "format", "fill", "predicted", o.measure ? "   measured" : "");
  for (std::size_t i = 0; i < advice.candidates.size(); ++i) {
    const Candidate& c = advice.candidates[i];
    const std::string label = c.format == Format::csr ? "csr" : "bsr-" + std::to_string(c.block_size);
    const bool chosen = c.format == advice.format && c.block_size == advice.block_size;
    std::printf("%-8s %6.2f %8.3f ms", label.c_str(), c.fill, c.predicted_ms);
    if (o.measure) std::printf(" %6.3f ms%s", measured[i].ms, measured[i].stable ? "" : " (unstable)");
    std::printf("%s\n", chosen ? "  <- choice" : "");
  }
  std::printf("choice: %s%s, predicted %.2fx CSR (calibration %s)\n", format_name(advice.format),
              advice.format == Format::bsr ? (" block size " + std::to_string(advice.block_size)).c_str() : "",
              advice.predicted_speedup_vs_csr, status.c_str());
  if (o.measure) std::printf("measured: the choice takes %.2fx the fastest's time\n", choice_vs_best);
}

}  // namespace

Subcommand add_advise(CLI::App& app) {
  auto o = std::make_shared<AdviseOptions>();
  CLI::App* command = app.add_subcommand(
      "advise", "Which format (CSR, or BSR with a block size) runs a matrix's products fastest on this machine");
  auto* file = command->add_option("file", o->file, "Matrix Market file")->check(CLI::ExistingFile);
  command->add_option("--problem", o->problem,
                      "An embedded matrix instead of a file: poisson3d:N, elasticity3d:N, block_stencil3d:N[:FIELDS] "
                      "or random_blocks:N:B:DENSITY")
      ->excludes(file);
  command->add_option("--width", o->width, "Columns of the dense operand (1: SpMV)")
      ->check(CLI::Range(index_t{1}, index_t{1} << 20))
      ->capture_default_str();
  command->add_option("--dtype", o->dtype, "Value type of the products")
      ->check(CLI::IsMember({"fp32", "fp64", "bf16"}))
      ->capture_default_str();
  command->add_flag("--measure", o->measure, "Also convert to each candidate and time its product");
  command->add_flag("--recalibrate", o->recalibrate, "Measure this machine's speeds again and rewrite the cache");
  command->add_option("--calibration", o->calibration,
                      "Calibration cache file (default: $XDG_CACHE_HOME/trnsparse/calibration.txt)");
  add_json_flag(*command, o->json);
  return {command, [o] {
            if (o->file.empty() && o->problem.empty())
              throw InvalidArgument("advise: expected a Matrix Market FILE or --problem SPEC");
            const bool from_file = !o->file.empty();
            const CsrMatrix<double> A =
                from_file ? to_csr(read_matrix_market(o->file).entries) : named_problem<double>(o->problem);
            const std::string& name = from_file ? o->file : o->problem;
            if (o->dtype == "fp64") run_advise<double>(*o, A, name);
            else if (o->dtype == "bf16") run_advise<bf16>(*o, A, name);
            else run_advise<float>(*o, A, name);
          }};
}

}  // namespace trnsparse::cli
