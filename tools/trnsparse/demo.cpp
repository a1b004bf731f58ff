/// @file demo.cpp
/// `trnsparse demo [--n N] [--block-size B] [--repeats R] [--json]`: the library's
/// main job on a built-in problem. Builds the 3D Poisson matrix poisson3d(N) (N^3
/// rows), shows how it tiles into BSR blocks of 16, 32, 64 and 128, then runs
/// y = A x in CSR (float64, float32) and BSR (float32, bf16 at block size B), timing
/// each (median of R runs) and checking it against the float64 CSR result.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::cli {
namespace {

struct DemoOptions {
  index_t n = 32;
  index_t block_size = 32;
  int repeats = 5;
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
  double median_ms;
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

/// Runs y = A x once (untimed: first touch of y, and the result to check), then
/// `repeats` timed runs. Returns the median time and the error against `reference`.
template <class TY, class Matrix, Value TA>
Measurement measure_spmv(const Matrix& A, std::span<const TA> x, std::span<const double> reference, int repeats) {
  std::vector<TY> y(static_cast<std::size_t>(A.rows()));
  const auto product = [&] { spmv(acc_t<TA>{1}, A, x, acc_t<TA>{0}, std::span<TY>(y)); };
  product();
  const double error = max_relative_error<TY>(y, reference);
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    product();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::ranges::nth_element(ms, ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2));
  return {ms[ms.size() / 2], error};
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
  std::printf("format  dtype     block  time [ms]  max rel error\n");
}

void print_spmv(const DemoOptions& o, const SpmvRun& r) {
  if (o.json) {
    JsonObject line;
    line.string("kind", "spmv").string("format", r.format).string("dtype", r.dtype);
    if (r.block_size > 0) line.integer("block_size", r.block_size);
    line.number("time_ms", r.measured.median_ms).number("max_rel_error", r.measured.error);
    return print_line(line.str());
  }
  const std::string block = r.block_size > 0 ? std::to_string(r.block_size) : "-";
  std::printf("%-6s  %-8s  %5s  %9.3f  %13.3g\n", r.format, r.dtype, block.c_str(), r.measured.median_ms,
              r.measured.error);
}

void print_footer(const DemoOptions& o) {
  if (o.json) return;
  std::printf("\nmax rel error = max|y - y64| / max|y64|, y64 from CSR float64; fill = non-zeros / stored block "
              "elements\n");
}

void run_demo(const DemoOptions& o) {
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

}  // namespace

Subcommand add_demo(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* command = app.add_subcommand(
      "demo", "Tile the 3D Poisson matrix into BSR blocks and time spmv in CSR and BSR against float64");
  command->add_option("--n", o->n, "Grid points per dimension (N^3 rows)")->check(CLI::Range(1, 256))->capture_default_str();
  command->add_option("--block-size", o->block_size, "BSR block size of the products")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--repeats", o->repeats, "Timed runs per product (the median is shown)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  add_json_flag(*command, o->json);
  return {command, [o] { run_demo(*o); }};
}

}  // namespace trnsparse::cli
