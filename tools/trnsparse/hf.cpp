/// @file hf.cpp
/// `trnsparse hf MOLECULE.xyz [--basis NAME|FILE.gbs] [--basis-dir DIR] [--threshold T]
/// [--bohr] [--charge Q] [--block-size B] [--max-iter N] [--bench] [--json]`: restricted
/// Hartree-Fock with Schwarz-screened ERIs stored as block-sparse supermatrices and J, K
/// built by trnsparse SpMV (examples/hartree_fock). XYZ coordinates are in Ångström unless
/// --bohr; basis sets are psi4-data's .gbs files. --bench also runs the unscreened
/// calculation (every quartet computed, every block stored) and times J + K with both.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "basis.hpp"
#include "cli.hpp"
#include "progress.hpp"
#include "integrals.hpp"
#include "molecule.hpp"
#include "scf.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct HfCliOptions {
  std::string file;
  std::string basis = "sto-3g";
  std::string basis_dir = hf::default_basis_dir();
  double threshold = 1e-10;
  bool bohr = false;
  int charge = 0;
  index_t block_size = 32;
  int max_iterations = 100;
  bool bench = false;
  bool json = false;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double megabytes(const BsrMatrix<double>& A) {
  return static_cast<double>(A.blocks().size()) * sizeof(double) / 1e6;
}

/// Milliseconds of one J + K build from D.
double time_jk(const hf::EriSupermatrices& eri, const Dense<double>& D, Dense<double>& J, Dense<double>& K) {
  const auto start = Clock::now();
  eri.coulomb_exchange(D, J, K);
  return 1e3 * seconds_since(start);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// One calculation: integrals, screening, supermatrices, SCF.
struct Calculation {
  hf::EriSupermatrices eri;
  hf::ScfResult scf;
  double integral_seconds;  ///< one-electron, Schwarz diagonal and ERIs
};

Calculation calculate(const hf::Molecule& molecule, const hf::Basis& basis, const HfCliOptions& o, double threshold,
                      bool print) {
  Progress progress(!o.json);
  progress.update("hf: integrals and screening (libint2)");
  auto start = Clock::now();
  const hf::OneElectron one = hf::one_electron_integrals(basis, molecule);
  const double one_seconds = seconds_since(start);
  hf::EriSupermatrices eri = hf::build_eri(basis, {.threshold = threshold, .block_size = o.block_size});
  const hf::EriStats& s = eri.stats();
  progress.clear();
  if (print) {
    std::printf("integrals (libint2): one-electron %.3f s, Schwarz diagonal %.3f s, ERIs into the supermatrices "
                "%.3f s\n",
                one_seconds, s.schwarz_seconds, s.eri_seconds);
    std::printf("screening: threshold %.1e on Q_PQ*Q_RS: %lld of %lld shell quartets computed (%.1f%%); "
                "screen_quartets and block patterns %.3f s\n",
                threshold, static_cast<long long>(s.quartets_computed), static_cast<long long>(s.quartets),
                100.0 * static_cast<double>(s.quartets_computed) / static_cast<double>(s.quartets),
                s.structure_seconds);
    std::printf("supermatrices: %lld x %lld pairs, block %lld: J %lld and K %lld of %lld blocks stored, kept "
                "fraction %.4f (%.1f MB)\n",
                static_cast<long long>(eri.coulomb_layout().dim()), static_cast<long long>(eri.coulomb_layout().dim()),
                static_cast<long long>(o.block_size), static_cast<long long>(s.coulomb_blocks),
                static_cast<long long>(s.exchange_blocks), static_cast<long long>(s.blocks), s.kept_block_fraction,
                megabytes(eri.coulomb()) + megabytes(eri.exchange()));
    std::printf("%4s  %20s  %11s  %11s  %10s\n", "iter", "E (Eh)", "dE", "|[F,DS]|", "J+K (ms)");
  }
  const auto on_iteration = [&](const hf::ScfIteration& it) {
    progress.clear();
    if (print)
      std::printf("%4d  %20.12f  %11.3e  %11.3e  %10.3f\n", it.iteration, it.energy, it.delta_energy,
                  it.commutator_norm, 1e3 * it.jk_seconds);
    std::fflush(stdout);
    char status[96];
    std::snprintf(status, sizeof status, "hf: SCF iteration %d done, dE %.2e", it.iteration, it.delta_energy);
    progress.update(status);
  };
  const hf::ScfOptions scf_options{.charge = o.charge, .max_iterations = o.max_iterations};
  hf::ScfResult scf = hf::run_rhf(molecule, one, eri, scf_options, on_iteration);
  return {std::move(eri), std::move(scf), one_seconds + s.schwarz_seconds + s.eri_seconds};
}

void run_hf(const HfCliOptions& o) {
  const auto start = Clock::now();
  const hf::Molecule molecule = hf::read_xyz(o.file, o.bohr ? hf::Units::bohr : hf::Units::angstrom);
  const std::string basis_file = hf::basis_path(o.basis, o.basis_dir);
  const hf::GbsFile gbs = hf::read_gbs(basis_file);
  const hf::Basis basis = hf::make_basis(molecule, gbs);
  const bool text = !o.json;
  if (text) {
    std::printf("%s: %zu atoms, %s\n", o.file.c_str(), molecule.atoms.size(), molecule.comment.c_str());
    std::printf("basis %s (%s): %lld functions in %lld shells; nuclear repulsion %.12f Eh\n", basis_file.c_str(),
                gbs.spherical ? "spherical" : "cartesian", static_cast<long long>(basis.nbf()),
                static_cast<long long>(basis.n_shells()), hf::nuclear_repulsion(molecule));
  }
  const Calculation run = calculate(molecule, basis, o, o.threshold, text);
  const hf::EriStats& s = run.eri.stats();
  const double seconds = seconds_since(start);
  const double jk_ms = run.scf.iterations > 0 ? 1e3 * run.scf.jk_seconds / run.scf.iterations : 0.0;

  JsonObject line;
  line.string("molecule", o.file)
      .string("basis", o.basis)
      .integer("nbf", basis.nbf())
      .integer("shells", basis.n_shells())
      .number("threshold", o.threshold)
      .integer("block_size", o.block_size)
      .number("energy", run.scf.energy)
      .boolean("converged", run.scf.converged)
      .integer("iterations", run.scf.iterations)
      .number("kept_quartet_fraction", s.kept_quartet_fraction)
      .number("kept_block_fraction", s.kept_block_fraction)
      .number("coulomb_block_fraction", static_cast<double>(s.coulomb_blocks) / static_cast<double>(s.blocks))
      .number("exchange_block_fraction", static_cast<double>(s.exchange_blocks) / static_cast<double>(s.blocks))
      .number("integrals_s", run.integral_seconds)
      .number("jk_ms_per_iteration", jk_ms)
      .number("supermatrix_mb", megabytes(run.eri.coulomb()) + megabytes(run.eri.exchange()));
  if (text) {
    std::printf("E(RHF) = %.12f Eh, %s after %d iterations\n", run.scf.energy,
                run.scf.converged ? "converged" : "NOT converged", run.scf.iterations);
    std::printf("time: integrals %.3f s, J+K with trnsparse %.3f s (%.3f ms per iteration), total %.3f s\n",
                run.integral_seconds, run.scf.jk_seconds, jk_ms, seconds);
  }
  if (o.bench) {
    if (text) std::printf("\nunscreened (threshold 0: every quartet computed, every block stored):\n");
    const Calculation full = calculate(molecule, basis, o, 0.0, text);
    // Both on the converged density, alternating so that both see the same machine.
    constexpr int reps = 11;
    const Dense<double>& D = run.scf.density;
    Dense<double> J(D.rows(), D.cols()), K(D.rows(), D.cols());
    std::vector<double> screened, unscreened;
    for (int r = 0; r < reps; ++r) {
      screened.push_back(time_jk(run.eri, D, J, K));
      unscreened.push_back(time_jk(full.eri, D, J, K));
    }
    const double screened_ms = median(screened), unscreened_ms = median(unscreened);
    line.integer("threads", num_threads())
        .number("jk_screened_ms", screened_ms)
        .number("jk_unscreened_ms", unscreened_ms)
        .number("speedup", unscreened_ms / screened_ms)
        .number("integrals_unscreened_s", full.integral_seconds)
        .number("energy_unscreened", full.scf.energy)
        .number("energy_difference", run.scf.energy - full.scf.energy)
        .number("unscreened_mb", megabytes(full.eri.coulomb()) + megabytes(full.eri.exchange()));
    if (text)
      std::printf("bench: J+K %.3f ms screened vs %.3f ms unscreened (median of %d, %d threads): speed-up %.2f; "
                  "E(screened) - E(unscreened) = %.3e Eh\n",
                  screened_ms, unscreened_ms, reps, num_threads(), unscreened_ms / screened_ms,
                  run.scf.energy - full.scf.energy);
  }
  if (o.json) {
    line.number("seconds", seconds_since(start));
    print_line(line.str());
  }
}

}  // namespace

Subcommand add_hf(CLI::App& app) {
  auto o = std::make_shared<HfCliOptions>();
  CLI::App* command = app.add_subcommand(
      "hf", "Restricted Hartree-Fock with Schwarz-screened ERIs in block-sparse supermatrices (libint2 integrals)");
  command->add_option("molecule", o->file, "XYZ file (Ångström unless --bohr)")->required()->check(CLI::ExistingFile);
  command->add_option("--basis", o->basis, "Basis set name (sto-3g, 6-31g, cc-pvdz, ...) or a .gbs file")
      ->capture_default_str();
  command->add_option("--basis-dir", o->basis_dir, "Directory of the .gbs files")->capture_default_str();
  command->add_option("--threshold", o->threshold, "Schwarz threshold on Q_PQ*Q_RS; 0 computes every quartet")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command->add_flag("--bohr", o->bohr, "XYZ coordinates are in bohr");
  command->add_option("--charge", o->charge, "Molecular charge")->capture_default_str();
  command->add_option("--block-size", o->block_size, "BSR block size of the supermatrices (a power of two)")
      ->check(CLI::IsMember({1, 2, 4, 8, 16, 32, 64, 128, 256}))
      ->capture_default_str();
  command->add_option("--max-iter", o->max_iterations, "Maximum SCF iterations")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  command->add_flag("--bench", o->bench, "Also run unscreened and compare J+K times (memory: ~nbf^4/2 doubles)");
  add_json_flag(*command, o->json);
  return {command, [o] { run_hf(*o); }};
}

}  // namespace trnsparse::cli
