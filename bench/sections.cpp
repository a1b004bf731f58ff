// The benchmark sections. Every row carries the machine, the ISA, the thread count, the
// sizes and, measured in the same run on the same data, trnsparse and its baselines.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "attention.hpp"
#include "baselines.hpp"
#include "common.hpp"
#include "load.hpp"
#include "screen.hpp"
#include "krylov.hpp"
#include "solve.hpp"
#include "spgemm.hpp"
#include "kernels/reference/products.hpp"
#include "trnsparse/advisor.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/plan.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse::bench {

Row child_row(const std::string& cmd, std::initializer_list<const char*> keys) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe.get())) out += buf;
  if (pclose(pipe.release()) != 0) return {};
  Row row;
  for (const char* key : keys) {
    const std::string k = std::string("\"") + key + "\":";
    const auto at = out.find(k);
    if (at == std::string::npos) return {};
    const auto begin = at + k.size();
    const auto end = out.find_first_of(",}", begin);
    row.emplace_back(key, out.substr(begin, end - begin));
  }
  return row;
}

/// Runs the dense baseline in a child process with OPENBLAS_CORETYPE and
/// OPENBLAS_L2_SIZE unset (OpenBLAS then picks its own kernel for this CPU). Returns
/// the child's row (dense_ms, rel_err, corename), empty if the child failed.
Row dense_child(const Options& o, index_t n, index_t width, int threads) {
  if (o.self.empty()) return {};
  const std::string cmd = "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE '" + o.self + "' bench --section dense-child" +
                          " --size " + std::to_string(n) + " --widths " + std::to_string(width) + " --dtype " +
                          (o.dtype == "fp64" ? "fp64" : "fp32") + " --reps " + std::to_string(o.reps) +
                          " --threads " + std::to_string(threads) + " --json";
  return child_row(cmd, {"dense_ms", "rel_err", "corename"});
}

double field(const Row& row, const std::string& key) {
  for (const auto& [k, v] : row)
    if (k == key) {  // a number, else NaN (null, nan, garbage from a failed child)
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      return end != v.c_str() && *end == '\0' ? x : NAN;
    }
  return NAN;
}

namespace {

/// The dense GEMM baseline for C (n x width) = A (n x n) B: in this process and in a
/// child with OpenBLAS's own kernel choice; the faster one that computes correctly.
struct DenseBaseline {
  double ms = NAN;
  std::string core;
  double inproc_ms = NAN;
  double child_ms = NAN;
};

/// "<model name> (family F model M)" of the first CPU in /proc/cpuinfo. VMs often name
/// only the vendor line ("AMD EPYC"); family and model tell Zen 4 (25/17, AVX-512 on
/// 256-bit units) from Zen 5 (26/x, full-width), whose FMA peaks differ by 2x.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string name = "unknown", family, model;
  const auto value = [](const std::string& line) {
    const auto colon = line.find(':');
    return colon == std::string::npos || colon + 2 > line.size() ? std::string() : line.substr(colon + 2);
  };
  for (std::string line; std::getline(in, line) && !line.empty();) {
    if (line.rfind("model name", 0) == 0) name = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model\t", 0) == 0) model = value(line);
  }
  if (family.empty() || model.empty()) return name;
  return name + " (family " + family + " model " + model + ")";
}

/// The fields every row starts with.
Row header(const char* section, const Options& o, int threads) {
  static const std::string machine = cpu_model();
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  return {{"section", str(section)},
          {"machine", str(machine)},
          {"isa", str(to_string(active_isa()))},
          {"threads", num(threads)},
          {"dtype", str(o.dtype)},
          {"omp_wait_policy", str(wait ? wait : "default")},
          {"openblas_thread_timeout", str(spin ? spin : "default")}};
}

/// A random b x b block pattern of the given block density on an n x n matrix, values
/// uniform in [-1, 1): the same for the same arguments.
template <class T>
BsrMatrix<T> random_bsr(index_t n, index_t b, double density, std::uint64_t seed) {
  Rng rng{seed};
  const index_t nb = (n + b - 1) / b;
  std::vector<index_t> ptr{0}, idx;
  for (index_t i = 0; i < nb; ++i) {
    for (index_t j = 0; j < nb; ++j)
      if (rng.uniform() < density) idx.push_back(j);
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  BsrMatrix<T> A(BsrStructure::make(n, n, b, std::move(ptr), std::move(idx)));
  for (T& v : A.blocks()) v = T(static_cast<float>(rng.symmetric()));
  A.zero_padding();
  return A;
}

/// max over `samples` evenly spaced rows i of C (rows x cols) and every column j of
/// |C(i, j) - r| / m, where r = sum of the terms of the reference inner product and m the
/// sum of their magnitudes, both in float64; terms(i, j, add) calls add(term) for each.
template <class Terms, class Got>
double sampled_rel_err(index_t rows, index_t cols, index_t samples, Terms&& terms, Got&& got) {
  double worst = 0;
  const index_t step = std::max<index_t>(1, rows / samples);
  for (index_t i = 0; i < rows; i += step)
    for (index_t j = 0; j < cols; ++j) {
      double ref = 0, mag = 0;
      terms(i, j, [&](double t) {
        ref += t;
        mag += std::fabs(t);
      });
      if (mag > 0) worst = std::max(worst, std::fabs(got(i, j) - ref) / mag);
    }
  return worst;
}

/// |C - A B| / (|A| |B|) on 32 sampled rows for a dense float64 A.
template <class T, class TC>
double sampled_rel_err(const Dense<double>& A, DenseView<const T> B, DenseView<const TC> C) {
  return sampled_rel_err(
      A.rows(), B.cols, 32,
      [&](index_t i, index_t j, auto add) {
        for (index_t k = 0; k < A.cols(); ++k) add(A(i, k) * static_cast<double>(static_cast<float>(B(k, j))));
      },
      [&](index_t i, index_t j) { return static_cast<double>(static_cast<float>(C(i, j))); });
}

/// |Y - A X| / (|A| |X|) on 4096 sampled rows for a CSR A.
template <class T>
double csr_rel_err(const CsrMatrix<T>& A, DenseView<const T> X, DenseView<const T> Y) {
  return sampled_rel_err(
      A.rows(), X.cols, 4096,
      [&](index_t i, index_t j, auto add) {
        for (index_t p = A.row_ptr()[i]; p < A.row_ptr()[i + 1]; ++p)
          add(static_cast<double>(A.values()[p]) * static_cast<double>(X(A.col_indices()[p], j)));
      },
      [&](index_t i, index_t j) { return static_cast<double>(Y(i, j)); });
}

template <class G>
DenseBaseline dense_baseline(const Options& o, const Dense<G>& A, const Dense<G>& B, int threads) {
  Dense<G> C(A.rows(), B.cols());
  DenseBaseline d;
  d.inproc_ms = gemm_ms(A.view(), B.view(), C.view(), o.reps, threads);
  d.ms = d.inproc_ms;
  d.core = openblas_core();
  const Row child = dense_child(o, A.rows(), B.cols(), threads);
  d.child_ms = field(child, "dense_ms");
  const double child_err = field(child, "rel_err");
  if (std::isfinite(d.child_ms) && child_err < 1e-3 && d.child_ms < d.ms) {
    d.ms = d.child_ms;
    for (const auto& [k, v] : child)
      if (k == "corename") d.core = v.substr(1, v.size() - 2);
  }
  return d;
}

/// bf16 products compare against fp32 baselines (OpenBLAS and Eigen have no bf16 GEMM here).
template <class T>
using Baseline = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T, class TC>
void bsr_section(const Options& o, int threads, const Emit& emit) {
  using G = Baseline<T>;
  const double peak = fma_peak_gflops(threads);
  for (index_t n : o.sizes) {
    const Dense<G> A_dense = random_dense<G>(n, n, 1);
    for (index_t width : o.widths) {
      const Dense<T> B = random_dense<T>(n, width, 2);
      const Dense<G> B_base = cast<G>(B.view());
      const DenseBaseline dense = dense_baseline(o, A_dense, B_base, threads);
      for (double density : o.densities) {
        const BsrMatrix<T> A = random_bsr<T>(n, o.block_size, density, 3);
        const Dense<double> A64 = to_dense(cast<double>(A));
        Dense<TC> C(n, width);
        clear_plan_cache();
        auto t0 = std::chrono::steady_clock::now();
        const auto p = plan(A);
        const double plan_first = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        t0 = std::chrono::steady_clock::now();
        (void)plan(A);
        const double plan_repeat = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const double ms = median_ms(o.reps, [&] { spmm(acc_t<T>(1), A, B.view(), acc_t<T>(0), C.view()); });
        const double rel_err = sampled_rel_err<T, TC>(A64, B.view(), C.view());
        const double flops = 2.0 * static_cast<double>(A.n_blocks()) * o.block_size * o.block_size * width;

        const CsrMatrix<G> A_csr = to_csr(cast<G>(A));
        Dense<G> C_base(n, width);
        const double eigen = eigen_spmm_ms(A_csr, B_base.view(), C_base.view(), o.reps, threads);
        double reference = NAN;
        if (flops <= o.reference_gflop_limit * 1e9) {
          const auto& s = A.structure();
          const kernels::reference::BsrArrays arr{s.rows(), s.cols(), s.block_size(), s.block_rows(),
                                                  s.block_row_ptr().data(), s.block_col_indices().data()};
          reference = median_ms(1, [&] {
            kernels::reference::bsr_spmm(arr, A.blocks().data(), width, acc_t<T>(1), B.view().data, B.ld(),
                                         acc_t<T>(0), C.view().data, C.ld());
          });
        }
        Row row = header("bsr", o, threads);
        row.insert(row.end(), {{"n", num(n)},
                               {"width", num(width)},
                               {"block_size", num(o.block_size)},
                               {"block_density", num(density)},
                               {"stored_blocks", num(A.n_blocks())},
                               {"trnsparse_ms", num(ms)},
                               {"dense_ms", num(dense.ms)},
                               {"dense_core", str(dense.core)},
                               {"dense_inproc_ms", num(dense.inproc_ms)},
                               {"dense_child_ms", num(dense.child_ms)},
                               {"eigen_ms", num(eigen)},
                               {"reference_ms", num(reference)},
                               {"rel_err", num(rel_err)},
                               {"gflops", num(flops / ms / 1e6)},
                               {"peak_gflops", num(peak)},
                               {"speedup_vs_dense", num(dense.ms / ms)},
                               {"speedup_vs_eigen", num(eigen / ms)},
                               {"plan_ms_first", num(plan_first)},
                               {"plan_ms_repeat", num(plan_repeat)}});
        emit(row);
      }
    }
  }
}

/// The PETSc BAIJ baseline: `trnsparse-mpi-bench --baij` (next to this executable, when
/// PETSc was found) times MatMult of the matrix `source` names (a named_problem spec or
/// a Matrix Market file) as MATSEQBAIJ with b x b blocks, in double on one process with
/// one thread per process as PETSc runs; NaN when the binary is absent or failed.
/// `kind` "sbaij": MATSEQSBAIJ, the upper block triangle.
double petsc_baij_ms(const Options& o, const std::string& source, index_t b, const std::string& kind = "baij") {
  if (o.self.empty()) return NAN;
  const std::filesystem::path child = std::filesystem::path(o.self).parent_path() / "trnsparse-mpi-bench";
  if (!std::filesystem::exists(child)) return NAN;
  const std::string cmd = "'" + child.string() + "' --" + kind + " '" + source + "' --block-size " +
                          std::to_string(b) + " --reps " + std::to_string(std::max(o.reps, 5) * 4) + " 2>/dev/null";
  const std::string key = "petsc_" + kind + "_ms";
  return field(child_row(cmd, {key.c_str()}), key.c_str());
}

/// |C - A B| / (|A| |B|) on 4096 sampled rows for a float64 CSR A and any B, C.
template <class TB, class TC>
double product_rel_err(const CsrMatrix<double>& A, DenseView<const TB> B, DenseView<const TC> C) {
  return sampled_rel_err(
      A.rows(), B.cols, 4096,
      [&](index_t i, index_t j, auto add) {
        for (index_t p = A.row_ptr()[i]; p < A.row_ptr()[i + 1]; ++p)
          add(A.values()[p] * static_cast<double>(static_cast<float>(B(A.col_indices()[p], j))));
      },
      [&](index_t i, index_t j) { return static_cast<double>(static_cast<float>(C(i, j))); });
}

/// Whether A equals its transpose, values to a few units of T's rounding of its largest
/// entry (a generator's a_ij and a_ji may be summed in different orders, and cancel to
/// different tiny values).
template <class T>
bool is_symmetric(const CsrMatrix<T>& A) {
  if (A.rows() != A.cols()) return false;
  const CsrMatrix<T> t = transpose(A);
  const double eps = std::is_same_v<T, double> ? 0x1p-52 : std::is_same_v<T, float> ? 0x1p-23 : 0x1p-7;
  double scale = 0.0;
  for (const T v : A.values()) scale = std::max(scale, std::fabs(static_cast<double>(acc_t<T>(v))));
  return std::ranges::equal(A.row_ptr(), t.row_ptr()) && std::ranges::equal(A.col_indices(), t.col_indices()) &&
         std::ranges::equal(A.values(), t.values(), [&](T a, T b) {
           return std::fabs(static_cast<double>(acc_t<T>(a)) - static_cast<double>(acc_t<T>(b))) <= 4 * eps * scale;
         });
}

/// Half storage of a symmetric A, SpMV (a "bsr-symmetric" row per block size): the BSR
/// upper block triangle against the full BSR with the same blocks, our CSR upper
/// triangle, our full CSR and, in double, PETSc's SBAIJ.
template <class T, class TC>
void symmetric_rows(const Options& o, int threads, const std::string& name, const std::string& source,
                    const CsrMatrix<T>& A, const CsrMatrix<double>& A_rounded, std::span<const index_t> block_sizes,
                    double csr_ms, int reps, const Emit& emit) {
  const Dense<T> x = random_dense<T>(A.cols(), 1, 8);
  Dense<TC> y(A.rows(), 1);
  const CsrMatrix<T> U = triangle(A, Triangle::upper);
  const double csr_symmetric_ms =
      median_ms(reps, [&] { spmv_symmetric(acc_t<T>(1), U, Triangle::upper, x.values(), acc_t<T>(0), y.values()); });
  for (const index_t b : block_sizes) {
    const BsrMatrix<T> full = to_bsr(A, b);
    const BsrMatrix<T> half = triangle(full, Triangle::upper);
    // Side by side: the row quotes their ratio. The half storage's runs end each chunk,
    // so y holds its product for rel_err.
    const auto [ms, full_ms] = paired_median_ms(
        reps, 5, [&] { spmv_symmetric(acc_t<T>(1), half, Triangle::upper, x.values(), acc_t<T>(0), y.values()); },
        [&] { spmv(acc_t<T>(1), full, x.values(), acc_t<T>(0), y.values()); });
    const double err = product_rel_err<T, TC>(A_rounded, x.view(), y.view());
    const double petsc = std::is_same_v<T, double> && A.rows() % b == 0 ? petsc_baij_ms(o, source, b, "sbaij") : NAN;
    Row row = header("bsr-symmetric", o, threads);
    row.insert(row.end(), {{"problem", str(name)},
                           {"n", num(A.rows())},
                           {"nnz", num(A.nnz())},
                           {"width", num(1)},
                           {"block_size", num(b)},
                           {"stored_blocks", num(half.n_blocks())},
                           {"trnsparse_ms", num(ms)},
                           {"bsr_full_ms", num(full_ms)},
                           {"csr_symmetric_ms", num(csr_symmetric_ms)},
                           {"csr_ms", num(csr_ms)},
                           {"petsc_sbaij_ms", num(petsc)},
                           {"speedup_vs_bsr_full", num(full_ms / ms)},
                           {"speedup_vs_csr_symmetric", num(csr_symmetric_ms / ms)},
                           {"speedup_vs_petsc_sbaij", num(petsc / ms)},
                           {"rel_err", num(err)}});
    emit(row);
  }
}

/// Bytes a product of width w moves at least once from memory: the stored values, their
/// indices as the kernels read them (32 bits for CSR and blocks up to 8, when they fit),
/// the row pointers, B once, and C written and read for ownership. `entries`: stored
/// values (blocks times b²); `indices`: column indices (entries for CSR, blocks for BSR).
template <class T, class TC>
double product_bytes(double entries, double indices, index_t b, index_t rows, index_t cols, index_t width) {
  const double index = b <= 8 && cols <= INT32_MAX ? 4.0 : 8.0;
  return entries * sizeof(T) + indices * index + static_cast<double>((rows + b - 1) / b + 1) * sizeof(index_t) +
         static_cast<double>(cols * width) * sizeof(T) + 2.0 * static_cast<double>(rows * width) * sizeof(TC);
}

/// The bsr section on real and generated matrices (--problem, --matrix): for each matrix
/// and width, every candidate the advisor weighs (CSR, BSR block sizes) is converted and
/// timed (brute force), next to Eigen's CSR and PETSc's BAIJ on the same matrix; one row
/// per candidate, then an "advise" row comparing the advisor's pick with the fastest.
/// For a symmetric matrix at width 1, also the half storage (symmetric_rows) for the
/// candidates' small block sizes.
template <class T, class TC>
void problem_section(const Options& o, int threads, const Emit& emit) {
  using G = Baseline<T>;
  struct Source {
    std::string name, spec_or_path;
    bool file;
  };
  std::vector<Source> sources;
  for (const std::string& p : o.problems) sources.push_back({p, p, false});
  for (const auto& path : o.matrices) sources.push_back({path.filename().string(), path.string(), true});
  const int reps = std::max(o.reps, 5) * 4;  // products of a few ms or less: more samples
  // The host's read bandwidth, measured before each matrix and width, next to which a
  // row's `gbps` tells how close to the bytes a product from memory runs (arrays of 128
  // MB: four times the largest L3 of the hosts this library meets).
  Stream yardstick(index_t{1} << 24, threads);
  for (const auto& [name, source, file] : sources) {
    const CsrMatrix<double> A64 = file ? to_csr(read_matrix_market(source).entries) : named_problem<double>(source);
    const CsrMatrix<T> A = cast<T>(A64);
    const CsrMatrix<double> A_rounded = cast<double>(A);  // the values the products see
    const CsrMatrix<G> A_base = cast<G>(A);
    for (const index_t width : o.widths) {
      std::string status;
      const Advice advice = advise(A, {.width = width}, load_calibration(dtype_name<T>(), width, {}, false, &status));
      const Dense<T> B = random_dense<T>(A.cols(), width, 8);
      const Dense<G> B_base = cast<G>(B.view());
      Dense<TC> C(A.rows(), width);
      Dense<G> C_base(A.rows(), width);
      const auto csr_product = [&] { spmm(acc_t<T>(1), A, B.view(), acc_t<T>(0), C.view()); };
      const double csr_ms = median_ms(reps, csr_product);
      const double csr_err = product_rel_err<T, TC>(A_rounded, B.view(), C.view());
      const double eigen = eigen_spmm_ms(A_base, B_base.view(), C_base.view(), reps, threads);
      // bf16 against fp32 on the same pattern, values and operand (cast up exactly), the
      // two products timed side by side: their own rows come from runs minutes apart.
      constexpr bool kBf16 = std::is_same_v<T, bf16>;
      const CsrMatrix<float> A32 = kBf16 ? cast<float>(A) : CsrMatrix<float>(0, 0);
      const Dense<float> B32 = kBf16 ? cast<float>(B.view()) : Dense<float>();
      Dense<float> C32(kBf16 ? A.rows() : 0, width);
      double read_gbps = 0.0;
      for (int r = 0; r < 3; ++r) read_gbps = std::max(read_gbps, yardstick.read_gbps());
      double best_ms = INFINITY, pick_ms = NAN;
      index_t best_b = 1;
      for (const Candidate& c : advice.candidates) {
        double ms = csr_ms, err = csr_err, petsc = NAN, row_csr_ms = csr_ms;
        double bytes = product_bytes<T, TC>(static_cast<double>(A.nnz()), static_cast<double>(A.nnz()), 1, A.rows(),
                                            A.cols(), width);
        std::pair<double, double> vs_fp32{NAN, NAN};  // (bf16 ms, fp32 ms), timed side by side
        if (c.format == Format::bsr) {
          const BsrMatrix<T> Ab = to_bsr(A, c.block_size);
          const auto product = [&] { spmm(acc_t<T>(1), Ab, B.view(), acc_t<T>(0), C.view()); };
          const auto blocks = static_cast<double>(Ab.n_blocks());
          bytes = product_bytes<T, TC>(blocks * static_cast<double>(c.block_size * c.block_size), blocks, c.block_size,
                                       A.rows(), A.cols(), width);
          // Against our CSR timed alongside (paired_median_ms), so that × CSR compares
          // the two under the same host load.
          std::tie(ms, row_csr_ms) = paired_median_ms(reps, 5, product, csr_product);
          err = product_rel_err<T, TC>(A_rounded, B.view(), C.view());
          if constexpr (kBf16) {
            const BsrMatrix<float> Ab32 = to_bsr(A32, c.block_size);
            vs_fp32 = paired_median_ms(reps, 5, product, [&] { spmm(1.0f, Ab32, B32.view(), 0.0f, C32.view()); });
          }
        } else if constexpr (kBf16) {
          vs_fp32 = paired_median_ms(reps, 5, csr_product, [&] { spmm(1.0f, A32, B32.view(), 0.0f, C32.view()); });
        }
        if (std::is_same_v<T, double> && width == 1 && A.rows() % c.block_size == 0 && c.block_size <= 16)
          petsc = petsc_baij_ms(o, source, c.block_size);
        const bool chosen = c.format == advice.format && c.block_size == advice.block_size;
        if (ms < best_ms) best_ms = ms, best_b = c.block_size;
        if (chosen) pick_ms = ms;
        Row row = header("bsr", o, threads);
        row.insert(row.end(), {{"problem", str(name)},
                               {"n", num(A.rows())},
                               {"nnz", num(A.nnz())},
                               {"width", num(width)},
                               {"format", str(c.format == Format::csr ? "csr" : "bsr")},
                               {"block_size", num(c.block_size)},
                               {"fill", num(c.fill)},
                               {"trnsparse_ms", num(ms)},
                               {"csr_ms", num(row_csr_ms)},
                               {"eigen_ms", num(eigen)},
                               {"petsc_baij_ms", num(petsc)},
                               {"speedup_vs_csr", num(row_csr_ms / ms)},
                               {"speedup_vs_eigen", num(eigen / ms)},
                               {"speedup_vs_petsc_baij", num(petsc / ms)},
                               {"gbps", num(bytes / ms / 1e6)},
                               {"stream_read_gbps", num(read_gbps)},
                               {"bf16_ms", num(vs_fp32.first)},
                               {"fp32_ms", num(vs_fp32.second)},
                               {"speedup_vs_fp32", num(vs_fp32.second / vs_fp32.first)},
                               {"predicted_ms", num(c.predicted_ms)},
                               {"advisor_choice", chosen ? "true" : "false"},
                               {"rel_err", num(err)}});
        emit(row);
      }
      if (width == 1 && is_symmetric(A)) {
        std::vector<index_t> small;
        for (const Candidate& c : advice.candidates)
          if (c.format == Format::bsr && c.block_size <= 8) small.push_back(c.block_size);
        symmetric_rows<T, TC>(o, threads, name, source, A, A_rounded, small, csr_ms, reps, emit);
      }
      // The pick against the fastest, timed side by side when they differ: their own
      // medians came minutes apart on a host whose load drifts.
      double choice_vs_best = 1.0;
      if (best_b != advice.block_size) {
        const std::optional<BsrMatrix<T>> pick = advice.block_size > 1 ? std::optional(to_bsr(A, advice.block_size)) : std::nullopt;
        const std::optional<BsrMatrix<T>> best = best_b > 1 ? std::optional(to_bsr(A, best_b)) : std::nullopt;
        const auto product = [&](const std::optional<BsrMatrix<T>>& Ab) {
          if (Ab) spmm(acc_t<T>(1), *Ab, B.view(), acc_t<T>(0), C.view());
          else csr_product();
        };
        const auto [p_ms, b_ms] = paired_median_ms(reps, 5, [&] { product(pick); }, [&] { product(best); });
        choice_vs_best = p_ms / b_ms;
      }
      Row row = header("advise", o, threads);
      row.insert(row.end(), {{"problem", str(name)},
                             {"n", num(A.rows())},
                             {"nnz", num(A.nnz())},
                             {"width", num(width)},
                             {"choice_format", str(advice.format == Format::csr ? "csr" : "bsr")},
                             {"choice_block_size", num(advice.block_size)},
                             {"choice_ms", num(pick_ms)},
                             {"best_block_size", num(best_b)},
                             {"best_ms", num(best_ms)},
                             {"choice_vs_best", num(choice_vs_best)},
                             {"csr_ms", num(csr_ms)},
                             {"calibration", str(status)}});
      emit(row);
    }
  }
}

/// CSR SpMM at element densities `o.densities`, against Eigen on the same matrix.
template <class T>
void csr_section(const Options& o, int threads, const Emit& emit) {
  for (index_t n : o.sizes)
    for (double density : o.densities) {
      const CsrMatrix<T> A = random_csr<T>(n, n, density, 4);
      for (index_t width : o.widths) {
        const Dense<T> B = random_dense<T>(n, width, 5);
        Dense<T> C(n, width), C_eigen(n, width);
        const double ms = median_ms(o.reps, [&] { spmm(T(1), A, B.view(), T(0), C.view()); });
        const double eigen = eigen_spmm_ms(A, B.view(), C_eigen.view(), o.reps, threads);
        const double rel_err = csr_rel_err(A, B.view(), DenseView<const T>(C.view()));
        const double flops = 2.0 * static_cast<double>(A.nnz()) * width;
        Row row = header("csr", o, threads);
        row.insert(row.end(), {{"n", num(n)},
                               {"width", num(width)},
                               {"density", num(density)},
                               {"nnz", num(A.nnz())},
                               {"trnsparse_ms", num(ms)},
                               {"eigen_ms", num(eigen)},
                               {"rel_err", num(rel_err)},
                               {"gflops", num(flops / ms / 1e6)},
                               {"speedup_vs_eigen", num(eigen / ms)}});
        emit(row);
      }
    }
}

/// Bytes a CSR SpMV moves at least once: values, column indices (as read: index_bytes),
/// row pointers, x, y.
template <class T>
double spmv_bytes(const CsrMatrix<T>& A) {
  return static_cast<double>(A.nnz()) * (sizeof(T) + index_bytes(A)) +
         static_cast<double>(A.rows() + 1) * sizeof(index_t) + static_cast<double>(A.rows() + A.cols()) * sizeof(T);
}

template <class T>
void spmv_row(const Options& o, int threads, Stream& yardstick, const std::string& name, const CsrMatrix<T>& A,
              const Emit& emit) {
  const Dense<T> x_dense = random_dense<T>(A.cols(), 1, 6);
  const std::span<const T> x = x_dense.values();
  Dense<T> y_dense(A.rows(), 1);  // the memory Eigen's result gets (Dense: huge pages where large)
  const std::span<T> y = y_dense.values();
  const auto y_view = [&] { return DenseView<const T>(y.data(), A.rows(), 1, 1); };
  std::optional<CsrMatrix<T>> U;  // the stored upper triangle, when A is symmetric
  if (A.rows() == A.cols()) {
    const CsrMatrix<T> At = transpose(A);
    if (std::ranges::equal(At.col_indices(), A.col_indices()) && std::ranges::equal(At.values(), A.values()))
      U = triangle(A, Triangle::upper);
  }
  const auto product = [&] { spmv(T(1), A, x, T(0), y); };
  const auto symmetric = [&] { spmv_symmetric(T(1), *U, Triangle::upper, x, T(0), y); };
  // Rounds interleave the yardsticks with the products, so that a drift of the host's
  // bandwidth reaches both: each keeps its fastest run, and the bandwidth ratios come
  // from those; times against Eigen's come from the medians. Each timed product follows
  // an untimed one, as Eigen's runs follow each other: a matrix that fits in cache is
  // timed from cache, not after the yardstick evicted it.
  std::vector<double> times, sym_times;
  double stream = 0, read = 0;
  for (int r = 0; r < std::max(o.reps, 1); ++r) {
    stream = std::max(stream, yardstick.triad_gbps());
    read = std::max(read, yardstick.read_gbps());
    product();
    times.push_back(elapsed_ms(product));
    if (!U) continue;
    symmetric();
    sym_times.push_back(elapsed_ms(symmetric));
  }
  const detail::TimingOptions harness{.reps = o.reps};
  row_timings().add(detail::summarise(times, harness));
  if (U) row_timings().add(detail::summarise(sym_times, harness));
  std::ranges::sort(times);
  std::ranges::sort(sym_times);
  const double ms = times[times.size() / 2];
  product();
  const double rel_err = csr_rel_err(A, x_dense.view(), y_view());
  Dense<T> y_eigen(A.rows(), 1);
  const double eigen = eigen_spmm_ms(A, x_dense.view(), y_eigen.view(), o.reps, threads);
  Row row = header("spmv", o, threads);
  row.insert(row.end(), {{"matrix", str(name)},
                         {"n", num(A.rows())},
                         {"nnz", num(A.nnz())},
                         {"trnsparse_ms", num(ms)},
                         {"eigen_ms", num(eigen)},
                         {"rel_err", num(rel_err)},
                         {"best_ms", num(times.front())},
                         {"gbps", num(spmv_bytes(A) / times.front() / 1e6)},
                         {"gbps_vs_stream", num(spmv_bytes(A) / times.front() / 1e6 / stream)},
                         {"stream_gbps", num(stream)},
                         {"gbps_vs_read", num(spmv_bytes(A) / times.front() / 1e6 / read)},
                         {"stream_read_gbps", num(read)},
                         {"speedup_vs_eigen", num(eigen / ms)}});
  if (U) {
    const double sym = sym_times[sym_times.size() / 2];
    symmetric();
    row.emplace_back("sym_ms", num(sym));
    row.emplace_back("sym_rel_err", num(csr_rel_err(A, x_dense.view(), y_view())));
    row.emplace_back("sym_gbps", num(spmv_bytes(*U) / sym_times.front() / 1e6));
    row.emplace_back("sym_speedup_vs_eigen", num(eigen / sym));
  }
  emit(row);
}

template <class T>
void spmv_section(const Options& o, int threads, const Emit& emit) {
  Stream yardstick(index_t{1} << 25, threads);
  spmv_row(o, threads, yardstick, "poisson3d_" + std::to_string(o.poisson_n), poisson3d<T>(o.poisson_n), emit);
  for (const auto& path : o.matrices) {
    const MmMatrix mm = read_matrix_market(path);
    spmv_row(o, threads, yardstick, path.filename().string(), cast<T>(to_csr(mm.entries)), emit);
  }
}

}  // namespace

RowTimings& row_timings() {
  static RowTimings timings;
  return timings;
}

void run(const Options& o, const Emit& emit_row) {
  if (o.threads > 0) set_num_threads(o.threads);
  row_timings() = {};
  // Every row says how far apart its timings were, and which stayed too far apart.
  const Emit emit = [&](const Row& row) {
    Row tagged = row;
    RowTimings& t = row_timings();
    tagged.emplace_back("spread", num(t.spread));
    tagged.emplace_back("unstable", t.unstable ? "true" : "false");
    if (t.unstable)
      std::fprintf(stderr,
                   "bench %s: warning: timings %.0f%% apart (interquartile range over the median), %lu thread teams "
                   "stalled, after retries; the row says unstable: true (another process is busy?)\n",
                   o.section.c_str(), 100.0 * t.spread, t.stalled_teams);
    t = {};
    emit_row(tagged);
  };
  const int threads = num_threads();
  if (o.section == "bsr" && !(o.problems.empty() && o.matrices.empty())) {
    if (o.dtype == "fp32") return problem_section<float, float>(o, threads, emit);
    if (o.dtype == "fp64") return problem_section<double, double>(o, threads, emit);
    if (o.dtype == "bf16") return problem_section<bf16, float>(o, threads, emit);
  } else if (o.section == "bsr") {
    if (o.dtype == "fp32") return bsr_section<float, float>(o, threads, emit);
    if (o.dtype == "fp64") return bsr_section<double, double>(o, threads, emit);
    if (o.dtype == "bf16") return bsr_section<bf16, float>(o, threads, emit);
  } else if (o.section == "csr" || o.section == "spmv") {
    const bool csr = o.section == "csr";
    if (o.dtype == "fp32") return csr ? csr_section<float>(o, threads, emit) : spmv_section<float>(o, threads, emit);
    if (o.dtype == "fp64") return csr ? csr_section<double>(o, threads, emit) : spmv_section<double>(o, threads, emit);
    throw InvalidArgument("bench: --dtype " + o.dtype + " is not available for section " + o.section +
                          " (its Eigen baselines are fp32 and fp64; --section bsr --problem times bf16 CSR)");
  } else if (o.section == "attn") {
    return attention_section(o, header("attn", o, threads), emit);
  } else if (o.section == "solve") {
    return solve_section(o, header("solve", o, threads), emit);
  } else if (o.section == "screen") {
    return screen_section(o, header("screen", o, threads), emit);
  } else if (o.section == "load") {
    return load_section(o, header("load", o, threads), emit);
  } else if (o.section == "spgemm") {
    return spgemm_section(o, header("spgemm", o, threads), emit);
  } else if (o.section == "krylov") {
    return krylov_section(o, header("krylov", o, threads), emit);
  } else {
    throw InvalidArgument("bench: --section " + o.section +
                          ": expected bsr, csr, spmv, attn, solve, screen, load, spgemm or krylov");
  }
  throw InvalidArgument("bench: --dtype " + o.dtype + ": expected fp32, fp64 or bf16");
}

void run_dense_child(index_t n, index_t width, std::string_view dtype, int reps, int threads, const Emit& emit) {
  auto measure = [&](auto zero) {
    using G = decltype(zero);
    const Dense<G> A = random_dense<G>(n, n, 1), B = random_dense<G>(n, width, 2);
    Dense<G> C(n, width);
    const double ms = gemm_ms(A.view(), B.view(), C.view(), reps, threads);
    const double err = sampled_rel_err<G, G>(cast<double>(A.view()), B.view(), C.view());
    emit({{"dense_ms", num(ms)}, {"rel_err", num(err)}, {"corename", str(openblas_core())}});
  };
  if (dtype == "fp64") measure(0.0);
  else measure(0.0f);
}

}  // namespace trnsparse::bench
