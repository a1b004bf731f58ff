// The Hartree-Fock example: XYZ and .gbs readers, the ERI supermatrices against the dense
// reference tensor, RHF energies against the literature, and screened against unscreened.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "basis.hpp"
#include "integrals.hpp"
#include "molecule.hpp"
#include "scf.hpp"
#include "trnsparse/error.hpp"

namespace {

using namespace trnsparse;
using namespace trnsparse::hf;

std::string molecule_path(const std::string& name) { return std::string(TRNSPARSE_HF_MOLECULES) + "/" + name + ".xyz"; }

Basis basis_of(const Molecule& m, const std::string& name) {
  return make_basis(m, read_gbs(basis_path(name, TRNSPARSE_HF_BASIS_DIR)));
}

/// Water at the geometry of T. D. Crawford's programming project 3 (bohr).
Molecule crawford_water() {
  return parse_xyz("3\nCrawford project 3, bohr\n"
                   "O  0.000000000000 -0.143225816552 0.000000000000\n"
                   "H  1.638036840407  1.136548822547 -0.000000000000\n"
                   "H -1.638036840407  1.136548822547 -0.000000000000\n",
                   "crawford", Units::bohr);
}

double rhf_energy(const Molecule& m, const Basis& basis, double threshold) {
  const EriSupermatrices eri = build_eri(basis, {.threshold = threshold, .block_size = 32});
  const ScfResult r = run_rhf(m, one_electron_integrals(basis, m), eri, {});
  EXPECT_TRUE(r.converged);
  return r.energy;
}

/// The ParseError's line, after checking its message holds `fragment`.
std::int64_t parse_error_line(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    return e.line();
  }
  ADD_FAILURE() << "no ParseError";
  return -1;
}

// ---- XYZ --------------------------------------------------------------------------------

TEST(Xyz, ReadsAngstromAndBohr) {
  const std::string text = "2\n comment here \nH 0 0 0\nh 0.0 0.0 1.0D0\n\n";
  const Molecule a = parse_xyz(text, "t.xyz", Units::angstrom);
  ASSERT_EQ(a.atoms.size(), 2u);
  EXPECT_EQ(a.comment, "comment here");
  EXPECT_EQ(a.atoms[1].Z, 1);
  EXPECT_DOUBLE_EQ(a.atoms[1].xyz[2], 1.0 / angstrom_per_bohr);
  const Molecule b = parse_xyz(text, "t.xyz", Units::bohr);
  EXPECT_DOUBLE_EQ(b.atoms[1].xyz[2], 1.0);
  EXPECT_NEAR(nuclear_repulsion(b), 1.0, 1e-15);
}

TEST(Xyz, ErrorsNameTheLine) {
  const auto parse = [](const std::string& text) { return [text] { parse_xyz(text, "bad.xyz", Units::angstrom); }; };
  EXPECT_EQ(parse_error_line(parse("two\nc\nH 0 0 0\n"), "atom count"), 1);
  EXPECT_EQ(parse_error_line(parse("0\nc\n"), "atom count"), 1);
  EXPECT_EQ(parse_error_line(parse("1\n"), "comment"), 2);
  EXPECT_EQ(parse_error_line(parse("2\nc\nH 0 0 0\nXx 0 0 1\n"), "unknown element 'Xx'"), 4);
  EXPECT_EQ(parse_error_line(parse("1\nc\nH 0 zero 0\n"), "coordinate"), 3);
  EXPECT_EQ(parse_error_line(parse("1\nc\nH 0 0\n"), "Symbol x y z"), 3);
  EXPECT_EQ(parse_error_line(parse("2\nc\nH 0 0 0\n"), "expected 2 atoms, found 1"), 4);
  EXPECT_EQ(parse_error_line(parse("1\nc\nH 0 0 0\nH 0 0 1\n"), "more lines"), 4);
  EXPECT_THROW(read_xyz(molecule_path("no_such_molecule"), Units::angstrom), IoError);
  EXPECT_THROW(nuclear_repulsion(parse_xyz("2\nc\nH 0 0 0\nH 0 0 0\n", "t", Units::bohr)), InvalidArgument);
}

TEST(Xyz, ShippedMolecules) {
  for (const auto& [name, atoms] : {std::pair{"water", 3u}, {"methane", 5u}, {"benzene", 12u}, {"decane", 32u}})
    EXPECT_EQ(read_xyz(molecule_path(name), Units::angstrom).atoms.size(), atoms) << name;
}

// ---- basis sets -------------------------------------------------------------------------

TEST(Gbs, SpShellsExponentsInDNotationAndTheHeader) {
  const GbsFile g = parse_gbs("! comment\ncartesian\n****\nC 0\nS 2 1.00\n 1.0D+01 0.5\n 2.0 0.6\n"
                              "SP 1 2.00\n 0.25 0.7 0.8\nD 1 1.00\n 0.5 1.0\n****\n",
                              "t.gbs");
  EXPECT_FALSE(g.spherical);
  const std::vector<ElementShell>& c = g.elements.at(6);
  ASSERT_EQ(c.size(), 4u);  // S, SP -> S + P, D
  EXPECT_EQ(c[0].exponents, (std::vector<double>{10.0, 2.0}));
  EXPECT_EQ(c[1].l, 0);
  EXPECT_EQ(c[2].l, 1);
  EXPECT_DOUBLE_EQ(c[2].exponents[0], 1.0);  // 0.25 scaled by 2.00²
  EXPECT_DOUBLE_EQ(c[2].coefficients[0], 0.8);
  const Molecule m = parse_xyz("1\nc\nC 0 0 0\n", "t", Units::bohr);
  EXPECT_EQ(make_basis(m, g).nbf(), 1 + 1 + 3 + 6);  // cartesian d: 6 functions
  GbsFile pure = g;
  pure.spherical = true;
  EXPECT_EQ(make_basis(m, pure).nbf(), 1 + 1 + 3 + 5);
}

TEST(Gbs, ErrorsNameTheLine) {
  const auto parse = [](const std::string& text) { return [text] { parse_gbs(text, "bad.gbs"); }; };
  EXPECT_EQ(parse_error_line(parse("****\nH 0\n"), "'spherical' or 'cartesian'"), 1);
  EXPECT_EQ(parse_error_line(parse("spherical\n****\nQq 0\n"), "unknown element 'Qq'"), 3);
  EXPECT_EQ(parse_error_line(parse("spherical\n****\nH 0\nX 1 1.00\n 1.0 1.0\n"), "unknown shell type 'X'"), 4);
  EXPECT_EQ(parse_error_line(parse("spherical\n****\nH 0\nS 2 1.00\n 1.0 1.0\n"), "needs 2 primitives"), 6);
  EXPECT_EQ(parse_error_line(parse("spherical\n****\nH 0\nS 1 1.00\n -1.0 1.0\n"), "positive exponent"), 5);
  EXPECT_EQ(parse_error_line(parse("spherical\n****\nH 0\nS one 1.00\n"), "shell line"), 4);
  EXPECT_EQ(parse_error_line(parse("spherical\n****\nH 0\n****\nH 0\n"), "second time"), 5);
}

TEST(Gbs, PsiDataFilesAndLookup) {
  const Molecule water = crawford_water();
  EXPECT_EQ(basis_of(water, "sto-3g").nbf(), 7);
  EXPECT_EQ(basis_of(water, "6-31G").nbf(), 13);
  EXPECT_EQ(basis_of(water, "6-31G*").nbf(), 19);  // 6-31gs.gbs, cartesian: 6 d functions
  EXPECT_EQ(basis_of(water, "cc-pVDZ").nbf(), 24);  // spherical: 5 d functions
  EXPECT_EQ(basis_of(read_xyz(molecule_path("decane"), Units::angstrom), "6-31g").nbf(), 134);
  try {
    basis_path("no-such-basis", TRNSPARSE_HF_BASIS_DIR);
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown basis set 'no-such-basis'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(basis_path("/no/such/file.gbs", "."), InvalidArgument);
  const GbsFile h_only = parse_gbs("spherical\n****\nH 0\nS 1 1.00\n 1.0 1.0\n****\n", "h.gbs");
  try {
    make_basis(water, h_only);
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("element O (atom 1)"), std::string::npos) << e.what();
  }
}

// ---- supermatrices ----------------------------------------------------------------------

/// J and K of a random symmetric D from the supermatrices against the dense ERI tensor,
/// for bases with SP, cartesian d and spherical d shells and block sizes with padding.
TEST(Supermatrices, MatchTheDenseReference) {
  for (const auto& [molecule, basis_name] : {std::pair{"water", "cc-pvdz"}, {"methane", "6-31g*"}}) {
    const Molecule m = read_xyz(molecule_path(molecule), Units::angstrom);
    const Basis basis = basis_of(m, basis_name);
    const index_t n = basis.nbf();
    const Dense<double> eri = eri_reference(basis);
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    Dense<double> D(n, n);
    for (index_t p = 0; p < n; ++p)
      for (index_t q = 0; q <= p; ++q) D(p, q) = D(q, p) = u(rng);
    Dense<double> J_ref(n, n), K_ref(n, n);
    for (index_t p = 0; p < n; ++p)
      for (index_t q = 0; q < n; ++q)
        for (index_t r = 0; r < n; ++r)
          for (index_t s = 0; s < n; ++s) {
            J_ref(p, q) += eri(p * n + q, r * n + s) * D(r, s);
            K_ref(p, q) += eri(p * n + r, q * n + s) * D(r, s);
          }
    for (const index_t b : {1, 4, 32}) {
      const EriSupermatrices sup = build_eri(basis, {.threshold = 0.0, .block_size = b});
      EXPECT_EQ(sup.stats().quartets_computed, sup.stats().quartets);
      Dense<double> J(n, n), K(n, n);
      sup.coulomb_exchange(D, J, K);
      for (index_t p = 0; p < n; ++p)
        for (index_t q = 0; q < n; ++q) {
          ASSERT_NEAR(J(p, q), J_ref(p, q), 1e-12) << molecule << "/" << basis_name << " b=" << b << " J " << p << "," << q;
          ASSERT_NEAR(K(p, q), K_ref(p, q), 1e-12) << molecule << "/" << basis_name << " b=" << b << " K " << p << "," << q;
        }
    }
  }
}

TEST(Supermatrices, RejectBadOptionsAndShapes) {
  const Molecule m = crawford_water();
  const Basis basis = basis_of(m, "sto-3g");
  EXPECT_THROW(build_eri(basis, {.threshold = -1.0}), InvalidArgument);
  EXPECT_THROW(build_eri(basis, {.threshold = std::numeric_limits<double>::quiet_NaN()}), InvalidArgument);
  EXPECT_THROW(build_eri(basis, {.block_size = 24}), InvalidArgument);
  EXPECT_THROW(build_eri(basis, {.block_size = 0}), InvalidArgument);
  const EriSupermatrices eri = build_eri(basis, {});
  Dense<double> D(7, 7), J(7, 7), K(6, 7);
  EXPECT_THROW(eri.coulomb_exchange(D, J, K), DimensionMismatch);
  EXPECT_THROW(PairLayout(basis, {0, 1, 2, 3, 3}, rank_pairs(5)), InvalidArgument);
  std::vector<ShellPair> pairs = rank_pairs(5);
  EXPECT_EQ(pairs.size(), 15u);
  EXPECT_EQ(pairs[4], (ShellPair{2, 1}));
  pairs.back() = pairs.front();
  EXPECT_THROW(PairLayout(basis, {0, 1, 2, 3, 4}, pairs), InvalidArgument);
  pairs.pop_back();
  EXPECT_THROW(PairLayout(basis, {0, 1, 2, 3, 4}, pairs), InvalidArgument);
}

// ---- energies ---------------------------------------------------------------------------

TEST(Rhf, WaterSto3gMatchesCrawford) {
  constexpr double reference = -74.942079928192;  // Crawford, programming project 3
  const Molecule bohr = crawford_water();
  EXPECT_NEAR(rhf_energy(bohr, basis_of(bohr, "sto-3g"), 1e-10), reference, 1e-8);
  const Molecule angstrom = read_xyz(molecule_path("water"), Units::angstrom);  // the same geometry, shipped
  EXPECT_NEAR(rhf_energy(angstrom, basis_of(angstrom, "sto-3g"), 1e-10), reference, 1e-8);
  EXPECT_NEAR(nuclear_repulsion(bohr), 8.002367061810450, 1e-12);
}

TEST(Rhf, RejectsOddElectronCounts) {
  const Molecule m = crawford_water();
  const Basis basis = basis_of(m, "sto-3g");
  const EriSupermatrices eri = build_eri(basis, {});
  EXPECT_THROW(run_rhf(m, one_electron_integrals(basis, m), eri, {.charge = 1}), InvalidArgument);
}

/// Screening at 1e-10 changes the energy by less than 1e-8 Eh.
void expect_screened_matches_unscreened(const std::string& molecule, const std::string& basis_name) {
  const Molecule m = read_xyz(molecule_path(molecule), Units::angstrom);
  const Basis basis = basis_of(m, basis_name);
  EXPECT_NEAR(rhf_energy(m, basis, 1e-10), rhf_energy(m, basis, 0.0), 1e-8) << molecule << "/" << basis_name;
}

TEST(Rhf, ScreenedMatchesUnscreenedSto3g) {
  for (const char* molecule : {"water", "methane", "benzene", "decane"}) expect_screened_matches_unscreened(molecule, "sto-3g");
}

TEST(Rhf, ScreenedMatchesUnscreened631g) {
  for (const char* molecule : {"water", "methane", "benzene"}) expect_screened_matches_unscreened(molecule, "6-31g");
}

TEST(Rhf, ScreeningDropsBlocksOfTheAlkane) {
  const Molecule m = read_xyz(molecule_path("decane"), Units::angstrom);
  const EriSupermatrices eri = build_eri(basis_of(m, "sto-3g"), {.threshold = 1e-10, .block_size = 32});
  const EriStats& s = eri.stats();
  EXPECT_LT(s.quartets_computed, s.quartets / 2);
  EXPECT_LT(s.coulomb_blocks, s.blocks);
  EXPECT_LT(s.exchange_blocks, s.blocks);
  EXPECT_LT(s.kept_block_fraction, 0.9);
  EXPECT_EQ(eri.coulomb().n_blocks(), s.coulomb_blocks);
}

}  // namespace
