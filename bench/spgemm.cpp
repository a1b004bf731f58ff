// The `spgemm` section: C = A² on real and generated matrices against Eigen and PETSc.
#include "spgemm.hpp"

#include <Eigen/Sparse>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <string>

#include "attention.hpp"
#include "baselines.hpp"
#include "common.hpp"
#include "runtime/checks.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/spgemm.hpp"

namespace trnsparse::bench {

namespace {

/// PETSc's MatMatMult on SOURCE in trnsparse-mpi-bench (one process, MATSEQAIJ):
/// {petsc_ms: the full product, petsc_numeric_ms: MAT_REUSE_MATRIX}, empty when the
/// child is not built or fails.
Row petsc_matmatmult(const Options& o, const std::string& source, int reps) {
  if (o.self.empty()) return {};
  const std::filesystem::path child = std::filesystem::path(o.self).parent_path() / "trnsparse-mpi-bench";
  if (!std::filesystem::exists(child)) return {};
  std::string cmd = "'";  // appended piece by piece: GCC 12 warns (-Wrestrict) on a chain of + here
  cmd += child.string();
  cmd += "' --matmatmult '" + source + "' --reps " + std::to_string(reps) + " 2>/dev/null";
  return child_row(cmd, {"petsc_ms", "petsc_numeric_ms"});
}

/// max |x - y| / max |y| over the union of two compressed-row matrices' entries (an
/// entry one of them lacks counts as zero there): rows `rows`, arrays of either.
template <class PX, class IX, class VX, class PY, class IY, class VY>
double rel_diff(index_t rows, const PX* xp, const IX* xi, const VX* xv, const PY* yp, const IY* yi, const VY* yv) {
  double diff = 0.0, scale = 0.0;
  for (index_t i = 0; i < rows; ++i) {
    auto p = static_cast<index_t>(xp[i]), q = static_cast<index_t>(yp[i]);
    const auto pe = static_cast<index_t>(xp[i + 1]), qe = static_cast<index_t>(yp[i + 1]);
    while (p < pe || q < qe) {
      const index_t cx = p < pe ? static_cast<index_t>(xi[p]) : INT64_MAX;
      const index_t cy = q < qe ? static_cast<index_t>(yi[q]) : INT64_MAX;
      const double x = cx <= cy ? static_cast<double>(xv[p]) : 0.0;
      const double y = cy <= cx ? static_cast<double>(yv[q]) : 0.0;
      if (cx <= cy) ++p;
      if (cy <= cx) ++q;
      diff = std::max(diff, std::fabs(x - y));
      scale = std::max(scale, std::fabs(y));
    }
  }
  return scale > 0 ? diff / scale : diff;
}

/// The block size of a problem's BSR row: a random_blocks:N:B:DENSITY problem's own B,
/// 3 for elasticity (its unknowns per node), or --block-size when set below the other
/// sections' default of 128; 0 for no BSR row.
index_t bsr_block_size(const Options& o, const std::string& name) {
  const std::string prefix = "random_blocks:";
  if (name.rfind(prefix, 0) == 0) {  // random_blocks:N:B:DENSITY, already parsed by named_problem
    const std::size_t n_end = name.find(':', prefix.size()), b_end = name.find(':', n_end + 1);
    return std::stoll(name.substr(n_end + 1, b_end - n_end - 1));
  }
  if (o.block_size <= 8) return o.block_size;
  return name.find("elasticity") != std::string::npos ? 3 : 0;
}

template <class T>
void spgemm_rows(const Options& o, const Row& head, const Emit& emit) {
  const int threads = head_threads(head);
  const int reps = std::max(o.reps, 3);
  Stream yardstick(index_t{1} << 24, threads);
  std::vector<std::pair<std::string, std::string>> sources;
  for (const std::string& p : o.problems) sources.emplace_back(p, p);
  for (const auto& path : o.matrices) sources.emplace_back(path.filename().string(), path.string());
  if (sources.empty()) throw InvalidArgument("bench: --section spgemm needs --problem SPEC or --matrix FILE");
  for (const auto& [name, source] : sources) {
    const bool file = std::filesystem::exists(source);
    const CsrMatrix<T> A = cast<T>(file ? to_csr(read_matrix_market(source).entries) : named_problem<double>(source));
    if (A.rows() != A.cols()) throw InvalidArgument("bench: spgemm squares its matrices; " + name + " is not square");

    const auto full = [&] {
      clear_spgemm_plan_cache();
      (void)multiply(A, A);
    };
    const CsrMatrix<T> C = multiply(A, A);
    const auto plan = spgemm_plan(A, A);
    // On huge pages, as the library's own results are (the full and cached products'): a
    // std::vector's 4 KiB pages would time C's stores to them as well as the phase.
    std::vector<T> values = detail::make_vector<T>(plan->stored(), "bench: C's values");

    // Eigen's sparse product (single-threaded: Eigen runs sparse × sparse on one core)
    // on 32-bit indices, its default and its fastest.
    using E = Eigen::SparseMatrix<T, Eigen::RowMajor, int>;
    double eigen_ms = NAN, err = NAN;
    if (A.nnz() <= INT_MAX) {
      E a(static_cast<int>(A.rows()), static_cast<int>(A.cols()));
      std::vector<Eigen::Triplet<T, int>> triplets;
      for (index_t i = 0; i < A.rows(); ++i)
        for (index_t q = A.row_ptr()[i]; q < A.row_ptr()[i + 1]; ++q)
          triplets.emplace_back(static_cast<int>(i), static_cast<int>(A.col_indices()[q]), A.values()[q]);
      a.setFromTriplets(triplets.begin(), triplets.end());
      E c;
      double ours_ms = NAN;
      std::tie(ours_ms, eigen_ms) = paired_median_ms(reps, 1, full, [&] { c = a * a; });
      err = rel_diff(C.rows(), C.row_ptr().data(), C.col_indices().data(), C.values().data(), c.outerIndexPtr(),
                     c.innerIndexPtr(), c.valuePtr());
    }
    const double full_ms = median_ms(reps, full);
    const double cached_ms = median_ms(reps, [&] { (void)multiply(A, A); });
    const double numeric_ms = median_ms(reps, [&] { plan->numeric(A, A, std::span<T>(values)); });
    const Row petsc = std::is_same_v<T, double> ? petsc_matmatmult(o, source, reps) : Row{};
    const double petsc_ms = field(petsc, "petsc_ms"), petsc_numeric_ms = field(petsc, "petsc_numeric_ms");
    // What the numeric phase must move at least: C's values written, A read twice
    // (values and 32-bit indices), C's structure read; at the triad's bandwidth.
    double gbps = 0.0;
    for (int r = 0; r < 3; ++r) gbps = std::max(gbps, yardstick.triad_gbps());
    const double bytes = static_cast<double>(C.nnz()) * (sizeof(T) + sizeof(index_t)) +
                         2.0 * static_cast<double>(A.nnz()) * (sizeof(T) + 4.0);
    Row row = head;
    row.insert(row.end(), {{"problem", str(name)},
                           {"format", str("csr")},
                           {"n", num(A.rows())},
                           {"nnz", num(A.nnz())},
                           {"nnz_c", num(C.nnz())},
                           {"multiply_adds", num(plan->multiply_adds())},
                           {"trnsparse_ms", num(full_ms)},
                           {"cached_ms", num(cached_ms)},
                           {"numeric_ms", num(numeric_ms)},
                           {"eigen_ms", num(eigen_ms)},
                           {"petsc_ms", num(petsc_ms)},
                           {"petsc_numeric_ms", num(petsc_numeric_ms)},
                           {"speedup_vs_eigen", num(eigen_ms / full_ms)},
                           {"speedup_vs_petsc", num(petsc_ms / full_ms)},
                           {"numeric_vs_full", num(full_ms / numeric_ms)},
                           {"numeric_vs_petsc_numeric", num(petsc_numeric_ms / numeric_ms)},
                           {"numeric_bound_ms", num(bytes / gbps / 1e6)},
                           {"triad_gbps", num(gbps)},
                           {"rel_diff_vs_eigen", num(err)}});
    emit(row);

    const index_t b = bsr_block_size(o, name);
    if (b < 2) continue;
    const BsrMatrix<T> Ab = to_bsr(A, b);
    const auto bsr_full = [&] {
      clear_spgemm_plan_cache();
      (void)multiply(Ab, Ab);
    };
    const auto [bsr_ms, csr_ms] = paired_median_ms(reps, 1, bsr_full, full);
    const BsrMatrix<T> Cb = multiply(Ab, Ab);
    const CsrMatrix<T> Cc = to_csr(Cb);
    const auto bplan = spgemm_plan(Ab, Ab);
    std::vector<T> bvalues = detail::make_vector<T>(bplan->stored() * b * b, "bench: C's values");
    const double bsr_numeric_ms = median_ms(reps, [&] { bplan->numeric(Ab, Ab, std::span<T>(bvalues)); });
    Row brow = head;
    brow.insert(brow.end(), {{"problem", str(name)},
                             {"format", str("bsr")},
                             {"block_size", num(b)},
                             {"n", num(A.rows())},
                             {"n_blocks", num(Ab.n_blocks())},
                             {"n_blocks_c", num(Cb.n_blocks())},
                             {"trnsparse_ms", num(bsr_ms)},
                             {"numeric_ms", num(bsr_numeric_ms)},
                             {"numeric_gflops", num(2.0 * bplan->multiply_adds() / bsr_numeric_ms / 1e6)},
                             {"csr_ms", num(csr_ms)},
                             {"speedup_vs_csr", num(csr_ms / bsr_ms)},
                             {"rel_diff_vs_csr", num(rel_diff(C.rows(), Cc.row_ptr().data(), Cc.col_indices().data(),
                                                              Cc.values().data(), C.row_ptr().data(),
                                                              C.col_indices().data(), C.values().data()))}});
    emit(brow);
  }
}

}  // namespace

void spgemm_section(const Options& o, const Row& head, const Emit& emit) {
  if (o.dtype == "fp64") return spgemm_rows<double>(o, head, emit);
  if (o.dtype == "fp32") return spgemm_rows<float>(o, head, emit);
  throw InvalidArgument("bench: --dtype " + o.dtype + " is not available for section spgemm (fp32 or fp64)");
}

}  // namespace trnsparse::bench
