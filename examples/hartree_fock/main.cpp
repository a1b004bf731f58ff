/// @file main.cpp
/// The Hartree-Fock example: restricted Hartree-Fock on an XYZ file with Schwarz-screened
/// ERIs stored block-sparse, J and K built by trnsparse SpMV (see integrals.hpp). The
/// full command-line front end is `trnsparse hf`.
///
///     hartree_fock examples/hartree_fock/molecules/water.xyz sto-3g 1e-10

#include <cstdio>
#include <exception>
#include <string>

#include "basis.hpp"
#include "integrals.hpp"
#include "molecule.hpp"
#include "scf.hpp"

int main(int argc, char** argv) {
  using namespace trnsparse::hf;
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s molecule.xyz [basis = sto-3g] [threshold = 1e-10]\n", argv[0]);
    return 1;
  }
  try {
    const Molecule molecule = read_xyz(argv[1], Units::angstrom);
    const std::string basis_name = argc > 2 ? argv[2] : "sto-3g";
    const Basis basis = make_basis(molecule, read_gbs(basis_path(basis_name, default_basis_dir())));
    const double threshold = argc > 3 ? std::stod(argv[3]) : 1e-10;

    const OneElectron one = one_electron_integrals(basis, molecule);
    const EriSupermatrices eri = build_eri(basis, {.threshold = threshold, .block_size = 32});
    const EriStats& s = eri.stats();
    std::printf("%s / %s: %lld basis functions, %lld shells\n", argv[1], basis_name.c_str(),
                static_cast<long long>(basis.nbf()), static_cast<long long>(basis.n_shells()));
    std::printf("screening at %.1e: %lld of %lld shell quartets, %.1f%% of the ERI blocks kept; integrals %.2f s\n",
                threshold, static_cast<long long>(s.quartets_computed), static_cast<long long>(s.quartets),
                100.0 * s.kept_block_fraction, s.schwarz_seconds + s.eri_seconds);

    const ScfResult r = run_rhf(molecule, one, eri, {}, [](const ScfIteration& it) {
      std::printf("%3d  E = %18.12f  dE = %10.3e  |[F,DS]| = %9.3e  J+K %.2f ms\n", it.iteration, it.energy,
                  it.delta_energy, it.commutator_norm, 1e3 * it.jk_seconds);
    });
    std::printf("E(RHF) = %.12f Eh (%s after %d iterations)\n", r.energy, r.converged ? "converged" : "NOT converged",
                r.iterations);
    return r.converged ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hartree_fock: %s\n", e.what());
    return 1;
  }
}
