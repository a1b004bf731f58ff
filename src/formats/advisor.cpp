// The format advisor of advisor.hpp: the fill-ratio estimate (per sampled block row,
// the distinct block columns of its rows' entries, marked in one array stamped with the
// block row's number, so nothing is cleared between block rows), the calibration (its
// measurement and its cache file), and the advice, a pure function of the two.
#include "trnsparse/advisor.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <vector>

#include "runtime/checks.hpp"
#include "runtime/parallel.hpp"
#include "runtime/rng.hpp"
#include "runtime/timing.hpp"
#include "runtime/value.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/dense.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/runtime.hpp"
#include "trnsparse/version.hpp"

namespace trnsparse {

template <Value T>
double estimate_fill(const CsrMatrix<T>& A, index_t block_size, double fraction, std::uint64_t seed) {
  detail::check_block_size(block_size, "estimate_fill");
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw InvalidArgument(detail::concat("estimate_fill: fraction = ", fraction, " must be in (0, 1]"));
  const index_t b = block_size, block_rows = detail::ceil_div(A.rows(), b), block_cols = detail::ceil_div(A.cols(), b);
  const auto ptr = A.row_ptr();
  const auto col = A.col_indices();
  std::vector<index_t> stamp(static_cast<std::size_t>(block_cols), -1);
  index_t blocks = 0, entries = 0;
  // Counts block row I's blocks and entries into the totals.
  const auto count = [&](index_t I) {
    const index_t r1 = std::min(A.rows(), (I + 1) * b);
    for (index_t k = ptr[I * b]; k < ptr[r1]; ++k) {
      index_t& s = stamp[static_cast<std::size_t>(col[k] / b)];
      if (s != I) {
        s = I;
        ++blocks;
      }
    }
    entries += ptr[r1] - ptr[I * b];
  };
  detail::SplitMix64 rng{seed};
  for (index_t I = 0; I < block_rows; ++I)
    if (fraction >= 1.0 || rng.uniform() < fraction) count(I);
  for (index_t I = 0; entries == 0 && I < block_rows; ++I) count(I);  // empty sample: the first rows with entries
  return entries == 0 ? 1.0 : static_cast<double>(blocks) * static_cast<double>(b * b) / static_cast<double>(entries);
}

// ---- calibration -------------------------------------------------------------------------

namespace {

/// The file format and the kernels it measured: a change to either that moves the
/// per-format speeds bumps the number, so that caches written before it are measured
/// again instead of pricing today's kernels with yesterday's speeds.
constexpr std::string_view kHeader = "trnsparse-calibration 8";

/// What differs between the machine line of a cached calibration and this machine's
/// (this_machine(): "model; isa I; threads N; trnsparse V"), named part by part.
std::string machine_change(const std::string& cached, const std::string& now) {
  const auto parts = [](const std::string& m) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at <= m.size();) {
      const std::size_t end = std::min(m.find("; ", at), m.size());
      out.push_back(m.substr(at, end - at));
      at = end + 2;
    }
    return out;
  };
  const std::vector<std::string> was = parts(cached), is = parts(now);
  if (was.size() != is.size()) return "measured on another machine or library version: " + cached;
  static constexpr const char* names[] = {"the CPU", "the instruction set", "the thread count", "the library version"};
  std::string why;
  for (std::size_t i = 0; i < is.size(); ++i)
    if (was[i] != is[i])
      why += detail::concat(why.empty() ? "" : "; ", i < std::size(names) ? names[i] : "the machine", " changed (",
                            was[i], " -> ", is[i], ")");
  return why.empty() ? "measured on another machine: " + cached : why;
}

bool known_dtype(std::string_view d) { return d == "fp32" || d == "fp64" || d == "bf16"; }

bool known_block_size(index_t b) {
  return std::ranges::find(Calibration::block_sizes, b) != std::end(Calibration::block_sizes);
}

/// A mesh-like block matrix: `block_rows` block rows (nodes of an m x m x m grid, m the
/// cube root, numbered x-fastest), block row I holding full b x b blocks at the first
/// `per_row` of the 27-point stencil's neighbours of node I, nearest first (so a row's
/// columns spread over the grid's planes as a finite-element matrix's do), values
/// uniform in [-1, 1).
template <Value T>
CsrMatrix<T> mesh_blocks(index_t block_rows, index_t per_row, index_t b) {
  const auto m = std::max<index_t>(2, static_cast<index_t>(std::cbrt(static_cast<double>(block_rows))));
  std::vector<std::array<index_t, 4>> stencil;  // (distance², dx, dy, dz)
  for (index_t dz = -1; dz <= 1; ++dz)
    for (index_t dy = -1; dy <= 1; ++dy)
      for (index_t dx = -1; dx <= 1; ++dx) stencil.push_back({dx * dx + dy * dy + dz * dz, dx, dy, dz});
  std::ranges::sort(stencil);
  stencil.resize(static_cast<std::size_t>(std::min<index_t>(per_row, 27)));
  const index_t n = block_rows * b;
  std::vector<index_t> ptr{0}, idx, cols;
  std::vector<T> vals;
  detail::SplitMix64 rng{7};
  for (index_t I = 0; I < block_rows; ++I) {
    cols.clear();
    for (const auto& [d, dx, dy, dz] : stencil) {
      const index_t J = I + dx + m * dy + m * m * dz;
      if (J >= 0 && J < block_rows) cols.push_back(J);
    }
    std::ranges::sort(cols);
    for (index_t r = 0; r < b; ++r) {
      for (const index_t J : cols)
        for (index_t c = 0; c < b; ++c) {
          idx.push_back(J * b + c);
          vals.push_back(detail::value_cast<T>(rng.symmetric()));
        }
      ptr.push_back(static_cast<index_t>(idx.size()));
    }
  }
  return CsrMatrix<T>(n, n, std::move(ptr), std::move(idx), std::move(vals));
}

template <Value T>
Dense<T> random_operand(index_t rows, index_t cols) {
  detail::SplitMix64 rng{11};
  Dense<T> B(rows, cols);
  for (T& v : B.values()) v = detail::value_cast<T>(rng.symmetric());
  return B;
}

/// One product of A in `format` (BSR: converted at construction) with a random operand
/// of `width` columns, ready to be timed.
template <Value T>
class Product {
public:
  Product(const CsrMatrix<T>& A, Format format, index_t block_size, index_t width)
      : A_(A), B_(random_operand<T>(A.cols(), width)), C_(A.rows(), width) {
    if (format == Format::bsr) blocked_.emplace(to_bsr(A, block_size));
  }
  void operator()() {
    if (blocked_) spmm(acc_t<T>(1), *blocked_, B_.view(), acc_t<T>(0), C_.view());
    else spmm(acc_t<T>(1), A_, B_.view(), acc_t<T>(0), C_.view());
  }

private:
  using TY = std::conditional_t<std::is_same_v<T, bf16>, float, T>;
  const CsrMatrix<T>& A_;
  Dense<T> B_;
  Dense<TY> C_;
  std::optional<BsrMatrix<T>> blocked_;
};

/// Stored entries of the calibration's in-cache matrices at `width`: wide operands shrink
/// the matrix, so that the operand (rows x width) stays in cache too.
double calibration_entries(index_t width) {
  return Calibration::kCachedEntries * std::min(1.0, 16.0 / static_cast<double>(width));
}

/// Threads the library gives a product of `stored` entries in blocks of b (b = 1: CSR)
/// over `block_rows` block rows at `width` with `threads` threads (the kernels' own
/// parts_for).
int product_parts(index_t b, double stored, index_t block_rows, index_t width, int threads) {
  const detail::Work family = b == 1 ? detail::Work::csr : b <= 8 ? detail::Work::small_blocks : detail::Work::tiles;
  return detail::parts_for(block_rows, detail::work_ns(family, stored * static_cast<double>(width), width), threads);
}

/// The thread count a calibration was measured with, from its machine line ("...;
/// threads N; ..."), or 1 when the line does not say.
int calibration_threads(const std::string& machine) {
  const auto at = machine.find("; threads ");
  if (at == std::string::npos) return 1;
  return std::max(1, std::atoi(machine.c_str() + at + 10));
}

/// The bytes a product streams per stored entry in BSR with b x b blocks (b = 1: CSR):
/// the value and its share of a block index (32 bits where the kernels read a compact
/// copy: CSR, and blocks up to 8).
template <Value T>
double bytes_per_entry(index_t b) {
  return static_cast<double>(sizeof(T)) + (b <= 8 ? 4.0 : 8.0) / static_cast<double>(b * b);
}

/// Bytes per ns the current thread count reads from memory: the best of 5 passes over
/// 2^26 bytes, twice the L3 of the hosts this library meets, so that each pass streams.
double read_bytes_per_ns() {
  constexpr std::size_t n = std::size_t{1} << 23;  // doubles
  constexpr index_t pieces = 64;
  std::vector<double> a(n, 1.0), sums(pieces);
  const int threads = num_threads();
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    detail::parallel_for(threads, pieces, [&](int, index_t i) {
      double sum = 0.0;
      for (std::size_t j = n * i / pieces; j < n * (i + 1) / pieces; ++j) sum += a[j];
      sums[static_cast<std::size_t>(i)] = sum;
    });
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    if (std::accumulate(sums.begin(), sums.end(), 0.0) == 0.0) return 0.0;  // keeps the loops; never true
    best = std::max(best, static_cast<double>(n * sizeof(double)) / ns);
  }
  return best;
}

/// The Speed of block size b at `width`, given the machine's read bandwidth: in cache,
/// from a matrix of one block and two mesh-like matrices of kCachedEntries stored
/// entries with 7 and 27 blocks per block row when b <= 8 (the three times give the three
/// terms), else the one block and one with 7 per row (few rows: no row term); streamed,
/// the slower of that compute time and the bytes per entry at the bandwidth. The call
/// term (checks, the plan lookup, dispatch) decides between formats on products of a few
/// microseconds (docs/benchmarks.md, "The format advisor").
/// `unsettled` takes the widest spread of a timing that stayed above the harness's limit.
template <Value T>
Calibration::Speed measure_speed(index_t b, index_t width, double bytes_per_ns, double& unsettled) {
  const Format f = b == 1 ? Format::csr : Format::bsr;
  struct Run {
    double ns, entries, rows;
  };
  // Wide operands shrink the matrix, so that the operand (rows x width) stays in cache too.
  const double entries = calibration_entries(width);
  // `rows` block rows of `per_row` blocks each.
  const auto run = [&](index_t rows, index_t per_row) {
    const CsrMatrix<T> A = mesh_blocks<T>(rows, per_row, b);
    Product<T> product(A, f, b, width);
    const detail::Timing t = detail::measure(std::ref(product), {.reps = 7});
    if (!t.stable) unsettled = std::max(unsettled, t.spread);
    return Run{t.median_ms * 1e6, static_cast<double>(A.nnz()), static_cast<double>(rows)};
  };
  // The in-cache matrix of `per_row` blocks a block row.
  const auto cached = [&](index_t per_row) {
    return run(std::max<index_t>(8, static_cast<index_t>(entries / static_cast<double>(per_row * b * b))), per_row);
  };
  // ns = per_call + per_entry * entries + per_row * rows for every run. The one block
  // (r0) is nearly all call: differences from it leave the other two terms.
  Run r0 = run(1, 1);
  double per_entry = 0.0, per_row = 0.0;
  if (b > 8) {
    const Run r = cached(7);
    per_entry = (r.ns - r0.ns) / (r.entries - r0.entries);
  } else {
    const Run r1 = cached(7), r2 = cached(27);
    const double e1 = r1.entries - r0.entries, e2 = r2.entries - r0.entries;
    const double w1 = r1.rows - r0.rows, w2 = r2.rows - r0.rows;
    const double t1 = r1.ns - r0.ns, t2 = r2.ns - r0.ns;
    const double det = e1 * w2 - e2 * w1;
    per_entry = (t1 * w2 - t2 * w1) / det;
    per_row = (e1 * t2 - e2 * t1) / det;
    if (!(per_row >= 0.0) || !(per_entry > 0.0)) {  // noise: the per-entry cost alone
      per_entry = (t1 + t2) / (e1 + e2);
      per_row = 0.0;
    }
  }
  if (!(per_entry > 0.0)) {  // noise on a product barely longer than a call
    per_entry = r0.ns / r0.entries;
    r0.ns = 0.0;
  }
  const double per_call = std::max(0.0, r0.ns - per_entry * r0.entries - per_row * r0.rows);
  const double streamed = bytes_per_ns > 0.0 ? std::max(per_entry, bytes_per_entry<T>(b) / bytes_per_ns) : per_entry;
  return {streamed, per_row, per_entry, per_call};
}


}  // namespace

double Calibration::Speed::per_entry(double bytes) const {
  if (!(ns_per_entry_cached > 0.0) || bytes >= kLargeBytes) return ns_per_entry;
  if (bytes <= kCachedBytes) return ns_per_entry_cached;
  const double t = std::log2(bytes / kCachedBytes) / std::log2(kLargeBytes / kCachedBytes);
  return ns_per_entry_cached + t * (ns_per_entry - ns_per_entry_cached);
}

void Calibration::set(std::string_view dtype, index_t width, index_t block_size, Speed s) {
  speeds_[{std::string(dtype), width, block_size}] = s;
}

const Calibration::Speed* Calibration::find(std::string_view dtype, index_t width, index_t block_size) const {
  const auto it = speeds_.find({std::string(dtype), width, block_size});
  return it == speeds_.end() ? nullptr : &it->second;
}

bool Calibration::covers(std::string_view dtype, index_t width) const {
  return std::ranges::all_of(block_sizes, [&](index_t b) { return find(dtype, width, b) != nullptr; });
}

void Calibration::measure(std::string_view dtype, index_t width, const std::function<void(int, int)>& progress) {
  if (!known_dtype(dtype))
    throw InvalidArgument(detail::concat("Calibration::measure: dtype \"", std::string(dtype),
                                         "\", expected fp32, fp64 or bf16"));
  if (width < 1) throw InvalidArgument(detail::concat("Calibration::measure: width = ", width, " must be >= 1"));
  const int total = static_cast<int>(std::size(block_sizes));
  int done = 0;
  const detail::LoadProbe probe;
  double spread = 0.0;
  const double bandwidth = read_bytes_per_ns();
  for (const index_t b : block_sizes) {
    const Speed s = dtype == "fp32"   ? measure_speed<float>(b, width, bandwidth, spread)
                    : dtype == "fp64" ? measure_speed<double>(b, width, bandwidth, spread)
                                      : measure_speed<bf16>(b, width, bandwidth, spread);
    set(dtype, width, b, s);
    if (progress) progress(++done, total);
  }
  const double others = probe.other_cores();
  unsettled_.clear();
  if (others > detail::kQuietOtherCores)
    unsettled_ = detail::concat("other processes used ", std::round(others * 100.0) / 100.0, " cores");
  if (spread > 0.0)
    unsettled_ += detail::concat(unsettled_.empty() ? "" : ", ", "timings ", std::round(spread * 100.0),
                                 "% apart after retries");
}

std::string Calibration::serialize() const {
  std::ostringstream out;
  out << kHeader << "\nmachine " << machine_ << '\n';
  out.precision(17);
  for (const auto& [key, s] : speeds_)
    out << std::get<0>(key) << ' ' << std::get<1>(key) << ' ' << std::get<2>(key) << ' ' << s.ns_per_entry << ' '
        << s.ns_per_row << ' ' << s.ns_per_entry_cached << ' ' << s.ns_per_call << '\n';
  out << "end\n";
  return out.str();
}

Calibration Calibration::parse(std::string_view text, const std::string& machine, std::string* why) {
  const auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return Calibration(machine);
  };
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || line != kHeader)
    return fail("not a calibration file of this version (expected \"" + std::string(kHeader) + "\")");
  if (!std::getline(in, line) || line.rfind("machine ", 0) != 0) return fail("truncated: no machine line");
  if (line.substr(8) != machine) return fail(machine_change(line.substr(8), machine));
  Calibration c(machine);
  for (int number = 3; std::getline(in, line); ++number) {
    if (line == "end") {
      if (why) why->clear();
      return c;
    }
    std::istringstream fields(line);
    std::string dtype, rest;
    index_t width = 0, b = 0;
    Speed s;
    if (!(fields >> dtype >> width >> b >> s.ns_per_entry >> s.ns_per_row >> s.ns_per_entry_cached >> s.ns_per_call) ||
        (fields >> rest) || !known_dtype(dtype) || width < 1 || !known_block_size(b) ||
        !std::isfinite(s.ns_per_entry) || !std::isfinite(s.ns_per_row) || !std::isfinite(s.ns_per_entry_cached) ||
        !std::isfinite(s.ns_per_call) || s.ns_per_entry <= 0.0 || s.ns_per_row < 0.0 ||
        s.ns_per_entry_cached < 0.0 || s.ns_per_call < 0.0)
      return fail(detail::concat("malformed line ", number));
    c.set(dtype, width, b, s);
  }
  return fail("truncated: no end line");
}

std::filesystem::path Calibration::default_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::filesystem::path(xdg) / "trnsparse" / "calibration.txt";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::filesystem::path(home) / ".cache" / "trnsparse" / "calibration.txt";
  return {};
}

std::string Calibration::this_machine() {
  std::string model = "unknown cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) model = line.substr(colon + 2);
      break;
    }
  return detail::concat(model, "; isa ", to_string(active_isa()), "; threads ", num_threads(), "; trnsparse ",
                        version_major, '.', version_minor, '.', version_patch);
}

Calibration load_calibration(std::string_view dtype, index_t width, const std::filesystem::path& path, bool refresh,
                             std::string* status, const std::function<void(int, int)>& progress) {
  const std::filesystem::path file = path.empty() ? Calibration::default_path() : path;
  std::string why;
  Calibration c;
  if (file.empty()) {
    why = "no cache directory (XDG_CACHE_HOME and HOME unset)";
  } else if (std::ifstream in{file, std::ios::binary}; !in) {
    why = "no cache file " + file.string();
  } else {
    std::ostringstream text;
    text << in.rdbuf();
    c = Calibration::parse(text.str(), Calibration::this_machine(), &why);
    if (why.empty() && !c.covers(dtype, width)) why = detail::concat("no speeds for ", std::string(dtype), " width ", width);
  }
  if (refresh) why = "refresh asked";  // the file's other (dtype, width) speeds are kept
  if (why.empty()) {
    if (status) *status = "cached";
    return c;
  }
  c.measure(dtype, width, progress);
  if (!c.unsettled().empty()) c.measure(dtype, width, progress);  // once more: the load may have passed
  const char* accept = std::getenv("TRNSPARSE_CALIBRATE_UNDER_LOAD");
  const bool accept_load = accept && std::string_view(accept) == "1";
  if (!c.unsettled().empty() && !accept_load) {
    if (status)
      *status = "measured under load, not cached (" + c.unsettled() + "; " + why +
                "): measure again with --recalibrate (load_calibration's refresh) on a quieter machine";
    return c;
  }
  if (status) {
    *status = "measured: " + why;
    if (!c.unsettled().empty())
      *status += " (under load: " + c.unsettled() + "; cached as TRNSPARSE_CALIBRATE_UNDER_LOAD=1 asks)";
  }
  if (!file.empty()) {  // written whole, then renamed: a reader never sees half a file
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    // A name of its own per writer (process and call), so concurrent calibrations of one
    // process never share a temporary file; the last rename wins, whole.
    static std::atomic<unsigned> writers{0};
    const std::filesystem::path tmp =
        file.string() + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(writers.fetch_add(1));
    if (std::ofstream out{tmp, std::ios::binary}; out && (out << c.serialize()) && (out.close(), !out.fail()))
      std::filesystem::rename(tmp, file, ec);
    std::filesystem::remove(tmp, ec);
  }
  return c;
}

// ---- advice ------------------------------------------------------------------------------

template <Value T>
Advice advise(const CsrMatrix<T>& A, Workload workload, const Calibration& calibration) {
  const index_t width = workload.width;
  if (width < 1) throw InvalidArgument(detail::concat("advise: width = ", width, " must be >= 1"));
  const std::string_view dtype = dtype_name<T>();
  if (!calibration.covers(dtype, width))
    throw InvalidArgument(detail::concat("advise: the calibration has no speeds for ", std::string(dtype), " at width ",
                                         width, " (measure them with load_calibration or Calibration::measure)"));
  const double nnz = static_cast<double>(A.nnz());
  // The calibration timed each format with the threads its in-cache matrices get; a
  // smaller product may get fewer (parts_for) and runs slower by that ratio (in cache,
  // where compute sets the pace). More threads than that are not credited: a large
  // product's time is mostly the bandwidth, measured with every thread.
  const int calibrated = calibration_threads(calibration.machine());
  const auto predict = [&](index_t b, double stored) {
    const Calibration::Speed& s = *calibration.find(dtype, width, b);
    const index_t block_rows = detail::ceil_div(A.rows(), b);
    const double threads = std::max(
        1.0, static_cast<double>(product_parts(b, calibration_entries(width), index_t{1} << 30, width, calibrated)) /
                 static_cast<double>(product_parts(b, stored, block_rows, width, calibrated)));
    return (s.ns_per_call +
            (stored * s.per_entry(stored * bytes_per_entry<T>(b)) + static_cast<double>(block_rows) * s.ns_per_row) *
                threads) *
           1e-6;
  };
  Advice advice;
  advice.candidates.push_back({Format::csr, 1, 1.0, predict(1, nnz)});
  for (const index_t b : Calibration::block_sizes) {
    if (b == 1 || (b > A.rows() && b > A.cols())) continue;
    // About 4096 block rows sampled, all of them for smaller matrices.
    const double fraction = std::min(1.0, 4096.0 / static_cast<double>(std::max<index_t>(1, detail::ceil_div(A.rows(), b))));
    const double fill = estimate_fill(A, b, fraction, 0);
    const double stored = fill * nnz;
    if (stored > 16.0 * std::max(nnz, 1.0) || stored > 0x1p31) continue;
    advice.candidates.push_back({Format::bsr, b, fill, predict(b, stored)});
  }
  const Candidate* best = &advice.candidates.front();
  for (const Candidate& c : advice.candidates)
    if (c.predicted_ms < best->predicted_ms) best = &c;
  advice.format = best->format;
  advice.block_size = best->block_size;
  advice.predicted_speedup_vs_csr = best->predicted_ms > 0.0 ? advice.candidates.front().predicted_ms / best->predicted_ms : 1.0;
  return advice;
}

template <Value T>
Advice choose_format(const CsrMatrix<T>& A, Workload workload) {
  if (workload.width < 1) throw InvalidArgument(detail::concat("choose_format: width = ", workload.width, " must be >= 1"));
  return advise(A, workload, load_calibration(dtype_name<T>(), workload.width));
}

template <Value T>
BsrMatrix<T> to_bsr(const CsrMatrix<T>& A, BlockSize, Workload workload) {
  const Advice advice = choose_format(A, workload);
  const Candidate* best = nullptr;
  for (const Candidate& c : advice.candidates)
    if (c.format == Format::bsr && (!best || c.predicted_ms < best->predicted_ms)) best = &c;
  return to_bsr(A, best ? best->block_size : index_t{2});
}


template <Value T>
double measure_product_ms(const CsrMatrix<T>& A, Format format, index_t block_size, Workload workload, int reps) {
  if (workload.width < 1)
    throw InvalidArgument(detail::concat("measure_product_ms: width = ", workload.width, " must be >= 1"));
  if (reps < 1) throw InvalidArgument(detail::concat("measure_product_ms: reps = ", reps, " must be >= 1"));
  detail::check_block_size(block_size, "measure_product_ms");
  Product<T> product(A, format, block_size, workload.width);
  return detail::measure(std::ref(product), {.reps = reps}).median_ms;
}

template <Value T>
std::vector<Measured> measure_candidates(const CsrMatrix<T>& A, std::span<const Candidate> candidates,
                                         Workload workload, int reps) {
  if (workload.width < 1)
    throw InvalidArgument(detail::concat("measure_candidates: width = ", workload.width, " must be >= 1"));
  if (reps < 1) throw InvalidArgument(detail::concat("measure_candidates: reps = ", reps, " must be >= 1"));
  Product<T> csr(A, Format::csr, 1, workload.width);
  const detail::TimingOptions o{.reps = reps};
  struct Pair {
    detail::Timing self, csr;
  };
  std::vector<Pair> pairs(candidates.size());
  std::vector<double> csr_ms;
  double csr_spread = 0.0;
  bool csr_stable = true;
  const auto add_csr = [&](const detail::Timing& t) {
    csr_ms.push_back(t.median_ms);
    csr_spread = std::max(csr_spread, t.spread);
    csr_stable = csr_stable && t.stable;
  };
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].format == Format::csr) continue;
    Product<T> product(A, Format::bsr, candidates[i].block_size, workload.width);
    const detail::LoadProbe probe;
    auto [self, base] = detail::measure_pair(std::ref(product), std::ref(csr), o);
    // Other processes busy meanwhile: the pair may have run at a speed it will not keep.
    if (probe.other_cores() > detail::kQuietOtherCores) self.stable = base.stable = false;
    pairs[i] = {self, base};
    add_csr(base);
  }
  if (csr_ms.empty()) add_csr(detail::measure(std::ref(csr), o));  // CSR alone among the candidates
  const double csr_median = detail::summarise(csr_ms, o).median_ms;
  std::vector<Measured> out(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].format == Format::csr) {
      out[i] = {csr_median, csr_spread, csr_stable};
      continue;
    }
    const Pair& p = pairs[i];
    out[i] = {csr_median * p.self.median_ms / p.csr.median_ms, std::max(p.self.spread, p.csr.spread),
              p.self.stable && p.csr.stable};
  }
  return out;
}

#define TRNSPARSE_INSTANTIATE(T)                                                                        \
  template double estimate_fill<T>(const CsrMatrix<T>&, index_t, double, std::uint64_t);              \
  template Advice advise<T>(const CsrMatrix<T>&, Workload, const Calibration&);                        \
  template Advice choose_format<T>(const CsrMatrix<T>&, Workload);                                     \
  template BsrMatrix<T> to_bsr<T>(const CsrMatrix<T>&, BlockSize, Workload);                            \
  template double measure_product_ms<T>(const CsrMatrix<T>&, Format, index_t, Workload, int);          \
  template std::vector<Measured> measure_candidates<T>(const CsrMatrix<T>&, std::span<const Candidate>, Workload, int);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
TRNSPARSE_INSTANTIATE(bf16)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
