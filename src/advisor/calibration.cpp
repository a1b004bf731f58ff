// The advisor's calibration (advisor.hpp): per dtype, width and block size, the speeds
// of products measured through the timing harness, and their cache file.
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

#include "advisor/model.hpp"
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

using namespace detail::advisor;

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

}  // namespace trnsparse
