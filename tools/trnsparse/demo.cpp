/// @file demo.cpp
/// `trnsparse demo [--threads T] [--json]`: the library's main jobs on built-in problems,
/// each next to its baseline in the same run (a tour through the benchmark's sections at
/// small sizes, in under a minute on 2 cores): BSR-128 SpMM against dense SGEMM (fp32 and
/// bf16), block-sparse attention (local window + global tokens) against dense attention,
/// CG on the 3D Poisson problem against its memory-traffic bound, and a screened product
/// against the unscreened one. It needs the benchmark's baselines (OpenBLAS, Eigen).
///
/// `trnsparse demo --formats [--n N] [--block-size B] [--repeats R] [--json]`: how the 3D
/// Poisson matrix poisson3d(N) (N^3 rows) tiles into BSR blocks of 16, 32, 64 and 128,
/// and y = A x in CSR (float64, float32) and BSR (float32, bf16 at block size B), timed
/// (median of R runs) and checked against the float64 CSR result: what BSR costs on a
/// matrix without block structure.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli.hpp"
#include "progress.hpp"
#include "runtime/timing.hpp"
#ifdef TRNSPARSE_WITH_BENCH
#include "bench.hpp"
#endif
#include "trnsparse/convert.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::cli {
namespace {

struct DemoOptions {
  bool formats = false;
  index_t n = 32;
  index_t block_size = 32;
  int repeats = 5;
  int threads = 0;  ///< tour: 0 for the library default
  bool json = false;
};

/// How A tiles into b x b blocks.
struct Tiling {
  index_t block_size;
  index_t stored_blocks;
  double block_density;  ///< stored blocks / all blocks of the grid
  double fill;           ///< entries of A / elements of the stored blocks
};

struct Measurement {
  detail::Timing time;
  double error;  ///< max |y - y_ref| / max |y_ref|, y_ref the float64 CSR result
};

/// One timed product.
struct SpmvRun {
  const char* format;
  const char* dtype;
  index_t block_size;  ///< 0 for CSR
  Measurement measured;
};

/// The block sizes of the tiling table: 16, 32, 64, 128 and the chosen one.
std::vector<index_t> tiling_sizes(index_t chosen) {
  std::vector<index_t> sizes{16, 32, 64, 128, chosen};
  std::ranges::sort(sizes);
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

Tiling tiling(const BsrMatrix<float>& B, index_t nnz) {
  const index_t b = B.block_size();
  const double elements = static_cast<double>(B.n_blocks()) * static_cast<double>(b * b);
  return {b, B.n_blocks(), B.structure().block_density(), elements > 0 ? static_cast<double>(nnz) / elements : 0.0};
}

/// x_i = 1 + sin(i) / 2: smooth, non-constant (a constant x hides errors, since the
/// rows of the Laplacian mostly sum to zero), the same on every run.
std::vector<double> make_x(index_t n) {
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0 + 0.5 * std::sin(static_cast<double>(i));
  return x;
}

template <class To>
std::vector<To> cast_vector(std::span<const double> v) {
  std::vector<To> out;
  out.reserve(v.size());
  for (const double e : v) out.push_back(static_cast<To>(e));
  return out;
}

template <class TY>
double max_relative_error(std::span<const TY> y, std::span<const double> reference) {
  double diff = 0.0;
  double scale = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(y[i]) - reference[i]));
    scale = std::max(scale, std::fabs(reference[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

/// Runs y = A x once (the result to check), then times it with the harness
/// (runtime/timing.hpp): `repeats` timed runs after the warm-up. Returns the time and the
/// error against `reference`.
template <class TY, class Matrix, Value TA>
Measurement measure_spmv(const Matrix& A, std::span<const TA> x, std::span<const double> reference, int repeats) {
  std::vector<TY> y(static_cast<std::size_t>(A.rows()));
  const auto product = [&] { spmv(acc_t<TA>{1}, A, x, acc_t<TA>{0}, std::span<TY>(y)); };
  product();
  const double error = max_relative_error<TY>(y, reference);
  return {detail::measure(product, {.reps = repeats}), error};
}

void print_problem(const DemoOptions& o, const CsrMatrix<double>& A) {
  if (o.json) {
    JsonObject line;
    line.string("kind", "problem").string("matrix", "poisson3d").integer("n", o.n);
    line.integer("rows", A.rows()).integer("cols", A.cols()).integer("nnz", A.nnz());
    return print_line(line.str());
  }
  std::printf("poisson3d(%lld): %lld x %lld, %lld non-zeros (7-point Laplacian)\n\n", static_cast<long long>(o.n),
              static_cast<long long>(A.rows()), static_cast<long long>(A.cols()), static_cast<long long>(A.nnz()));
  std::printf("block size  stored blocks  block density    fill\n");
}

void print_tiling(const DemoOptions& o, const Tiling& t) {
  if (o.json) {
    JsonObject line;
    line.string("kind", "tiling").integer("block_size", t.block_size).integer("stored_blocks", t.stored_blocks);
    line.number("block_density", t.block_density).number("fill", t.fill);
    return print_line(line.str());
  }
  std::printf("%10lld  %13lld  %13.4g  %6.3f\n", static_cast<long long>(t.block_size),
              static_cast<long long>(t.stored_blocks), t.block_density, t.fill);
}

void print_spmv_header(const DemoOptions& o) {
  if (o.json) return;
  std::printf("\nspmv y = A x (median of %d runs)\n", o.repeats);
  std::printf("format  dtype     block  time [ms]   spread  max rel error\n");
}

void print_spmv(const DemoOptions& o, const SpmvRun& r) {
  if (!r.measured.time.stable)
    std::fprintf(stderr,
                 "demo: warning: %s %s timings %.0f%% apart, %lu thread teams stalled, after retries (another "
                 "process is busy?)\n",
                 r.format, r.dtype, 100.0 * r.measured.time.spread, r.measured.time.stalled_teams);
  if (o.json) {
    JsonObject line;
    line.string("kind", "spmv").string("format", r.format).string("dtype", r.dtype);
    if (r.block_size > 0) line.integer("block_size", r.block_size);
    line.number("time_ms", r.measured.time.median_ms).number("spread", r.measured.time.spread);
    line.boolean("unstable", !r.measured.time.stable).number("max_rel_error", r.measured.error);
    return print_line(line.str());
  }
  const std::string block = r.block_size > 0 ? std::to_string(r.block_size) : "-";
  std::printf("%-6s  %-8s  %5s  %9.3f  %6.0f%%  %13.3g%s\n", r.format, r.dtype, block.c_str(), r.measured.time.median_ms,
              100.0 * r.measured.time.spread, r.measured.error, r.measured.time.stable ? "" : "  (unstable)");
}

void print_footer(const DemoOptions& o) {
  if (o.json) return;
  std::printf("\nspread = interquartile range / median of the timed runs; max rel error = max|y - y64| / max|y64|, "
              "y64 from CSR float64; fill = non-zeros / stored block elements\n");
}

void run_formats(const DemoOptions& o) {
  const CsrMatrix<double> A64 = poisson3d<double>(o.n);
  const CsrMatrix<float> A32 = cast<float>(A64);
  print_problem(o, A64);

  // The chosen BSR is kept for the products; the others only report their tiling.
  std::unique_ptr<BsrMatrix<float>> chosen;
  for (const index_t b : tiling_sizes(o.block_size)) {
    auto B = std::make_unique<BsrMatrix<float>>(to_bsr(A32, b));
    print_tiling(o, tiling(*B, A64.nnz()));
    if (b == o.block_size) chosen = std::move(B);
  }
  const BsrMatrix<bf16> Bbf16 = cast<bf16>(*chosen);

  const std::vector<double> x64 = make_x(A64.cols());
  const std::vector<float> x32 = cast_vector<float>(x64);
  const std::vector<bf16> xbf16 = cast_vector<bf16>(x64);
  std::vector<double> y64(static_cast<std::size_t>(A64.rows()));
  spmv(1.0, A64, std::span<const double>(x64), 0.0, std::span<double>(y64));

  const std::span<const double> ref(y64);
  const index_t b = o.block_size;
  print_spmv_header(o);
  print_spmv(o, {"csr", "float64", 0, measure_spmv<double>(A64, std::span<const double>(x64), ref, o.repeats)});
  print_spmv(o, {"csr", "float32", 0, measure_spmv<float>(A32, std::span<const float>(x32), ref, o.repeats)});
  print_spmv(o, {"bsr", "float32", b, measure_spmv<float>(*chosen, std::span<const float>(x32), ref, o.repeats)});
  print_spmv(o, {"bsr", "bf16", b, measure_spmv<float>(Bbf16, std::span<const bf16>(xbf16), ref, o.repeats)});
  print_footer(o);
}

#ifdef TRNSPARSE_WITH_BENCH
// ---- the tour ---------------------------------------------------------------------------

using bench::field;

/// A string of a bench row, without its quotes ("" when absent).
std::string text(const bench::Row& row, std::string_view key) {
  for (const auto& [k, v] : row)
    if (k == key) return v.size() >= 2 && v.front() == '"' ? v.substr(1, v.size() - 2) : v;
  return "";
}

/// The options of one bench section at the tour's sizes (the others at their defaults).
bench::Options options(std::string section, std::vector<index_t> sizes, std::vector<index_t> widths) {
  bench::Options o;
  o.section = std::move(section);
  o.sizes = std::move(sizes);
  o.widths = std::move(widths);
  o.reps = 3;
  return o;
}

/// Runs one bench section with `o` and returns its rows; with --json, prints each as a
/// JSON line tagged with the tour's part.
std::vector<bench::Row> section(bench::Options o, const DemoOptions& d, const std::string& self, const char* part) {
  o.self = self;
  o.threads = d.threads;
  Progress progress(!d.json);
  progress.update(std::string("demo: measuring ") + part);
  std::vector<bench::Row> rows;
  bench::run(o, [&](const bench::Row& row) {
    rows.push_back(row);
    if (!d.json) return;
    std::string line = std::string("{\"demo\":\"") + part + "\"";
    for (const auto& [k, v] : row) line += ",\"" + k + "\":" + v;
    print_line(line + "}");
  });
  return rows;
}

/// The first row whose `key` has the string value `want`.
const bench::Row& pick(const std::vector<bench::Row>& rows, std::string_view key, std::string_view want) {
  for (const bench::Row& r : rows)
    if (text(r, key) == want) return r;
  throw Error("demo: the benchmark gave no row with " + std::string(key) + " = " + std::string(want));
}

void run_tour(const DemoOptions& d) {
  const std::string self = self_path();
  ensure_passive_wait_policy(self);
  if (!d.json) std::printf("trnsparse demo: each line is a ratio measured in this run, on the same data\n");

  // 1. BSR-128 SpMM: a 4096 x 4096 operator with 5% of its 128 x 128 blocks stored.
  bench::Options bsr = options("bsr", {4096}, {256});
  bsr.densities = {0.05};
  std::vector<bench::Row> spmm;
  for (const char* dtype : {"fp32", "bf16"}) {
    bsr.dtype = dtype;
    for (bench::Row& r : section(bsr, d, self, "bsr_spmm")) spmm.push_back(std::move(r));
  }
  if (!d.json) {
    const bench::Row& h = spmm.front();
    std::printf("\n(%s, %s, %d threads)\n", text(h, "machine").c_str(), text(h, "isa").c_str(),
                static_cast<int>(field(h, "threads")));
    std::printf("\n1. Block-sparse operator times dense (BSR-128 SpMM): 4096 x 4096, 5%% of its blocks stored, "
                "256 columns\n");
    for (const bench::Row& r : spmm)
      std::printf("   %-4s  %7.2f ms   dense SGEMM (OpenBLAS %s) %7.2f ms   %5.1fx faster   %6.1f GFLOP/s   "
                  "rel. error %.1e\n",
                  text(r, "dtype").c_str(), field(r, "trnsparse_ms"), text(r, "dense_core").c_str(),
                  field(r, "dense_ms"), field(r, "speedup_vs_dense"), field(r, "gflops"), field(r, "rel_err"));
  }

  // 2. Attention with a local window and one global block, one head of 4096 x 64.
  bench::Options attention = options("attn", {4096}, {});
  attention.head_dims = {64};
  const auto attn = section(attention, d, self, "attention");
  if (!d.json) {
    const bench::Row& r = pick(attn, "mask", "global");
    std::printf("\n2. Block-sparse attention, local window + global tokens (%.0f%% of the blocks), sequence 4096, "
                "head dim 64\n",
                100 * field(r, "block_density"));
    std::printf("   forward           %7.2f ms   dense attention (OpenBLAS) %7.2f ms   %5.1fx faster\n",
                field(r, "fwd_ms"), field(r, "dense_fwd_ms"), field(r, "dense_fwd_ms") / field(r, "fwd_ms"));
    std::printf("   forward+backward  %7.2f ms   dense attention (OpenBLAS) %7.2f ms   %5.1fx faster   "
                "rel. error %.1e\n",
                field(r, "fwd_bwd_ms"), field(r, "dense_fwd_bwd_ms"),
                field(r, "dense_fwd_bwd_ms") / field(r, "fwd_bwd_ms"), field(r, "bwd_rel_err"));
  }

  // 3. CG on the 3D Poisson problem, 100^3 unknowns (its matrix and vectors exceed the caches).
  bench::Options solve = options("solve", {}, {});
  solve.reps = 1;
  solve.poisson_n = 100;
  const auto cg = section(solve, d, self, "cg");
  if (!d.json) {
    std::printf("\n3. Conjugate gradients (Jacobi), 3D Poisson, 100^3 unknowns, fp64, to a relative residual of 1e-8\n");
    for (const char* storage : {"full", "upper"}) {
      const bench::Row& r = pick(cg, "storage", storage);
      std::printf("   %-5s storage  %6.2f ms per iteration   memory-traffic bound %6.2f ms (STREAM triad %4.1f GB/s): "
                  "%4.2fx the bound   Eigen %6.2f ms\n",
                  storage, field(r, "trnsparse_iter_ms"), field(r, "bound_iter_ms"), field(r, "stream_gbps"),
                  field(r, "iter_vs_bound"), field(r, "eigen_iter_ms"));
    }
  }

  // 4. Schwarz-screened product: a decaying 2048 x 2048 operator, 10% of its pairs kept.
  const auto screen = section(options("screen", {2048}, {128}), d, self, "screen");
  if (!d.json) {
    const bench::Row* r = &screen.back();  // the sparsest threshold
    std::printf("\n4. Screened product (A o M) B, 2048 x 2048 times 128 columns, %.0f%% of the pairs kept\n",
                100 * field(*r, "kept_fraction"));
    std::printf("   fused             %7.2f ms   mask applied, then multiplied %7.2f ms   %5.1fx faster   "
                "dense SGEMM %7.2f ms\n",
                field(*r, "fused_ms"), field(*r, "unfused_ms"), field(*r, "speedup_vs_unfused"),
                field(*r, "dense_ms"));
    std::printf("\nMore: `trnsparse demo --formats` (the Poisson matrix in CSR and BSR), `trnsparse bench --help`, "
                "docs/benchmarks.md\n");
  }
}
#endif

}  // namespace

Subcommand add_demo(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* command = app.add_subcommand(
      "demo", "The main jobs on built-in problems against their baselines (--formats: the Poisson matrix in CSR "
              "and BSR)");
  command->add_flag("--formats", o->formats, "Tile the 3D Poisson matrix into BSR and time spmv in CSR and BSR");
  command->add_option("--n", o->n, "--formats: grid points per dimension (N^3 rows)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  command->add_option("--block-size", o->block_size, "--formats: BSR block size of the products")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--repeats", o->repeats, "--formats: timed runs per product (the median is shown)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("--threads", o->threads, "Threads (default: TRNSPARSE_NUM_THREADS or all)")
      ->check(CLI::PositiveNumber);
  add_json_flag(*command, o->json);
  return {command, [o] {
#ifdef TRNSPARSE_WITH_BENCH
            if (!o->formats) return run_tour(*o);
#else
            if (!o->formats)
              throw NotSupported("demo: the tour needs the benchmark's baselines (OpenBLAS, Eigen), which this build "
                                 "lacks; `trnsparse demo --formats` runs without them");
#endif
            run_formats(*o);
          }};
}

}  // namespace trnsparse::cli
