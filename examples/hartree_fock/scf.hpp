/// @file scf.hpp
/// Restricted Hartree-Fock: core-Hamiltonian guess, symmetric orthogonalisation
/// X = S^(-1/2), Pulay DIIS on the commutator FDS - SDF, Fock diagonalisation by LAPACK
/// `dsyev`, and J, K from the ERI supermatrices (two trnsparse `spmv` per iteration).
///
///     auto result = trnsparse::hf::run_rhf(molecule, one_electron_integrals(basis, molecule), eri, {});
///     std::printf("%.12f\n", result.energy);
#pragma once

#include <functional>
#include <vector>

#include "integrals.hpp"
#include "molecule.hpp"

namespace trnsparse::hf {

struct ScfOptions {
  int charge = 0;
  int max_iterations = 100;
  double energy_tolerance = 1e-10;      ///< on |ΔE| between iterations (hartree)
  double commutator_tolerance = 1e-8;   ///< on ‖FDS - SDF‖_F
  int diis_size = 8;                    ///< Fock matrices kept for DIIS; 0 turns DIIS off
};

/// One SCF iteration: the energy of the density it started from.
struct ScfIteration {
  int iteration = 0;
  double energy = 0.0;          ///< total (electronic + nuclear repulsion)
  double delta_energy = 0.0;    ///< against the previous iteration (the energy itself first)
  double commutator_norm = 0.0; ///< ‖FDS - SDF‖_F
  double jk_seconds = 0.0;      ///< building J and K (trnsparse products and the pair gathers)
};

struct ScfResult {
  double energy = 0.0;  ///< total, hartree
  double electronic_energy = 0.0;
  double nuclear_repulsion = 0.0;
  int iterations = 0;
  bool converged = false;
  std::vector<double> orbital_energies;  ///< ascending
  Dense<double> density;                 ///< D = C_occ C_occᵀ of the last iteration
  double jk_seconds = 0.0;               ///< all J and K builds
  double seconds = 0.0;                  ///< the whole SCF loop
};

/// Runs RHF to convergence (or max_iterations). `on_iteration` is called once per iteration.
/// @throw InvalidArgument for an odd electron count, no electrons or more electron pairs
/// than basis functions, a singular overlap matrix, or bad options; DimensionMismatch when
/// the integrals do not share one basis.
ScfResult run_rhf(const Molecule& molecule, const OneElectron& one, const EriSupermatrices& eri,
                  const ScfOptions& options, const std::function<void(const ScfIteration&)>& on_iteration = {});

}  // namespace trnsparse::hf
