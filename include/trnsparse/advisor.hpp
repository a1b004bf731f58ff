/// @file advisor.hpp
/// Which format a matrix's products run fastest in, before converting it: CSR, or BSR
/// with a block size from 2 to 128.
///
///     trnsparse::Advice a = trnsparse::choose_format(A, {.width = 8});
///     auto B = trnsparse::to_bsr(A, trnsparse::BlockSize::automatic, {.width = 8});
///
/// The prediction for each candidate is its stored entries (the fill ratio, sampled as
/// OSKI samples it, times A's entries) and rows, priced at this machine's speed per entry
/// and per row for that format, dtype and width: a `Calibration`, measured once per
/// (dtype, width) in about a second and cached in a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "trnsparse/bsr.hpp"
#include "trnsparse/csr.hpp"

namespace trnsparse {

/// The fill ratio of A in BSR with b x b blocks: the elements of the stored blocks over
/// A's entries, n_blocks · b² / nnz (1 when A's blocks are full; 1 for an empty A).
/// Estimated from a sample of block rows, each kept with probability `fraction` (all of
/// them at 1, where the result is exact), as OSKI samples them: time linear in the sampled
/// rows' entries, plus O(block columns) once. The sample is drawn from `seed`, the same on
/// every platform; an empty sample falls back to the first block row with entries.
/// @throw InvalidArgument for b < 1 or a fraction outside (0, 1].
template <Value T>
double estimate_fill(const CsrMatrix<T>& A, index_t block_size, double fraction = 1.0, std::uint64_t seed = 0);

enum class Format { csr, bsr };

/// The products a matrix will serve: C = A B with `width` columns (1: SpMV).
struct Workload {
  index_t width = 1;
};

/// "fp32", "fp64" or "bf16": the calibration's name for T.
template <Value T>
constexpr std::string_view dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "fp32";
  else if constexpr (std::is_same_v<T, double>) return "fp64";
  else return "bf16";
}

/// A machine's speed for each format: a product costs ns_per_call, plus a time per stored
/// entry, plus ns_per_row per row (block row for BSR), keyed by (dtype, width, block size), where
/// block size 1 is CSR. The time per entry is ns_per_entry_cached for a matrix whose
/// values and indices take kCachedBytes or fewer (measured in cache: the compute of the
/// format), ns_per_entry for kLargeBytes or more (streamed: the slower of that compute and
/// the format's bytes per entry at the machine's read bandwidth), and between the two on
/// a log scale: compute separates the block sizes in cache, bytes from memory. The
/// bounds are bytes, not entries, because the caches hold bytes: a bf16 matrix of 8 M
/// entries fits the L3 that a fp64 one of as many overflows.
class Calibration {
public:
  struct Speed {
    double ns_per_entry = 0.0;
    double ns_per_row = 0.0;
    double ns_per_entry_cached = 0.0;  ///< 0: ns_per_entry at every size
    double ns_per_call = 0.0;          ///< checks, plan and dispatch: what a product of nothing costs
    /// The time per stored entry of a matrix whose values and indices take `bytes`.
    [[nodiscard]] double per_entry(double bytes) const;
  };
  /// Stored entries of the matrices the calibration times in cache.
  static constexpr double kCachedEntries = 1 << 18;
  /// 4 MiB: holds the calibration's in-cache matrices (2^18 fp64 CSR entries: 3 MiB).
  static constexpr double kCachedBytes = 1 << 22;
  static constexpr double kLargeBytes = 1 << 26;   ///< 64 MiB: twice the largest L3 met
  /// The block sizes measured and weighed, 1 meaning CSR.
  static constexpr index_t block_sizes[] = {1, 2, 3, 4, 5, 6, 8, 16, 32, 64, 128};

  /// An empty calibration for the machine `machine` (see this_machine()).
  explicit Calibration(std::string machine = this_machine()) : machine_(std::move(machine)) {}

  void set(std::string_view dtype, index_t width, index_t block_size, Speed s);
  /// The speed for (dtype, width, block size), or nullptr.
  [[nodiscard]] const Speed* find(std::string_view dtype, index_t width, index_t block_size) const;
  /// Whether every block size is known at (dtype, width).
  [[nodiscard]] bool covers(std::string_view dtype, index_t width) const;
  [[nodiscard]] const std::string& machine() const { return machine_; }

  /// Measures every block size at (dtype, width) on this machine with the current thread
  /// count, on mesh-like block matrices of kCachedEntries stored entries, and the read
  /// bandwidth: about a second.
  /// `progress(done, total)` is called after each block size.
  /// @throw InvalidArgument for an unknown dtype or width < 1.
  void measure(std::string_view dtype, index_t width,
               const std::function<void(int, int)>& progress = nullptr);
  /// Empty when the last measure() ran on a quiet machine with settled timings; else why
  /// its speeds may be off (other processes' CPU use, timings too far apart).
  [[nodiscard]] const std::string& unsettled() const { return unsettled_; }

  /// The text form: a header line naming the format version and the machine, then one
  /// line per speed.
  [[nodiscard]] std::string serialize() const;
  /// Parses serialize()'s text. A calibration of another format version or another
  /// machine, a truncated or malformed text: an empty calibration, with `*why` (when not
  /// null) saying which.
  static Calibration parse(std::string_view text, const std::string& machine = this_machine(),
                           std::string* why = nullptr);

  /// $XDG_CACHE_HOME/trnsparse/calibration.txt, else $HOME/.cache/trnsparse/calibration.txt
  /// (empty when neither variable is set).
  static std::filesystem::path default_path();
  /// The CPU model, the active ISA, the thread count and the library version: a cached
  /// calibration is used only on the machine (and library) that measured it.
  static std::string this_machine();

private:
  std::string machine_;
  std::string unsettled_;
  std::map<std::tuple<std::string, index_t, index_t>, Speed> speeds_;
};

/// The calibration in `path` (default_path() when empty) covering (dtype, width): loaded,
/// or measured and saved (with its directory) when the file is missing, unreadable,
/// truncated, of another machine or version, lacks (dtype, width), or `refresh` is set
/// (which keeps the file's speeds for other (dtype, width) pairs).
/// `*status` (when not null) says which: "cached", or "measured: <reason>". A cache that
/// cannot be written is not an error (the measurement is used once). A measurement taken
/// while other processes kept the CPU busy, or whose timings stayed too far apart, is
/// taken once more; if it is still unsettled it is used but not saved, and the status
/// starts "measured under load, not cached" (unless the environment sets
/// TRNSPARSE_CALIBRATE_UNDER_LOAD=1: on a machine that is never quiet, such speeds are the
/// ones its products meet).
Calibration load_calibration(std::string_view dtype, index_t width, const std::filesystem::path& path = {},
                             bool refresh = false, std::string* status = nullptr,
                             const std::function<void(int, int)>& progress = nullptr);

struct Candidate {
  Format format = Format::csr;
  index_t block_size = 1;  ///< 1 for CSR
  double fill = 1.0;       ///< stored entries / A's entries (estimated)
  double predicted_ms = 0.0;
};

struct Advice {
  std::vector<Candidate> candidates;  ///< CSR first, then BSR by block size
  Format format = Format::csr;        ///< the choice: the smallest predicted time
  index_t block_size = 1;
  double predicted_speedup_vs_csr = 1.0;
};

/// The candidates' predicted times for A's products under `workload` at `calibration`'s
/// speeds, and the fastest. No timing: the same inputs give the same advice. A product
/// small enough to run on fewer threads than the calibration's in-cache matrices (with
/// the thread count its machine line names) is priced slower by that ratio. A BSR
/// candidate whose estimated stored entries exceed 16 x A's (or 2^31 elements) is left
/// out, as is any block size larger than both dimensions of A.
/// @throw InvalidArgument for width < 1, or when `calibration` does not cover
/// (dtype_name<T>(), width).
template <Value T>
Advice advise(const CsrMatrix<T>& A, Workload workload, const Calibration& calibration);

/// advise() with load_calibration(dtype_name<T>(), width): measures this machine once
/// per (dtype, width), then reads the cache.
template <Value T>
Advice choose_format(const CsrMatrix<T>& A, Workload workload = {});

/// `to_bsr(A, BlockSize::automatic, workload)`: A in BSR with the block size
/// choose_format picks for `workload` (its best BSR candidate when CSR is predicted
/// faster still).
enum class BlockSize { automatic };
template <Value T>
BsrMatrix<T> to_bsr(const CsrMatrix<T>& A, BlockSize, Workload workload = {});

/// The time of one product of A in `format` (BSR: block size b, converted first and not
/// timed) with a random operand of `workload.width` columns: the median of `reps` runs
/// after a warm-up that lasts until the threads are awake and the times settle, in
/// milliseconds.
/// @throw InvalidArgument for width < 1, reps < 1 or b < 1.
template <Value T>
double measure_product_ms(const CsrMatrix<T>& A, Format format, index_t block_size, Workload workload, int reps = 5);

/// A candidate's measured product time.
struct Measured {
  double ms = 0.0;      ///< median, in milliseconds
  double spread = 0.0;  ///< (third quartile - first quartile) / median of its runs
  /// Spread within the timing harness's limit (10%) after retries, no thread team met a
  /// worker taken off its core, and other processes used at most a quarter of a core
  /// meanwhile.
  bool stable = true;
};

/// The product times of A in each of `candidates`' formats, as measure_product_ms, with
/// each BSR candidate timed in alternating chunks against CSR, so that a drift of the
/// machine's load reaches both: its time is CSR's median times the pair's ratio. One
/// conversion lives at a time.
/// @throw InvalidArgument for width < 1 or reps < 1.
template <Value T>
std::vector<Measured> measure_candidates(const CsrMatrix<T>& A, std::span<const Candidate> candidates,
                                         Workload workload, int reps = 11);

}  // namespace trnsparse
