/// @file molecule.hpp
/// Molecules for the Hartree-Fock example: atoms with nuclear charges and positions in
/// bohr, read from XYZ files (a count line, a comment line, then one `Symbol x y z` line
/// per atom).
///
///     auto water = trnsparse::hf::read_xyz("molecules/water.xyz", trnsparse::hf::Units::angstrom);
///     double enuc = trnsparse::hf::nuclear_repulsion(water);
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace trnsparse::hf {

/// Ångström per bohr (CODATA 2018).
inline constexpr double angstrom_per_bohr = 0.529177210903;

struct Atom {
  int Z = 0;                      ///< nuclear charge (atomic number)
  std::array<double, 3> xyz{};    ///< position in bohr
};

struct Molecule {
  std::vector<Atom> atoms;
  std::string comment;  ///< the XYZ comment line
};

/// The length unit of XYZ coordinates.
enum class Units { angstrom, bohr };

/// The atomic number of an element symbol (H .. Xe, any letter case), 0 when unknown.
int atomic_number(std::string_view symbol) noexcept;
/// The symbol of atomic number Z (1 .. 54). @throw InvalidArgument otherwise.
std::string_view element_symbol(int Z);

/// Parses XYZ text; `source` names it in errors. Blank lines after the atoms are allowed.
/// @throw ParseError (source:line) for a bad count line, an unknown element, a malformed
/// coordinate, too few or too many atom lines.
Molecule parse_xyz(std::string_view text, const std::string& source, Units units);
/// Reads an XYZ file. @throw IoError if it cannot be read; ParseError as parse_xyz.
Molecule read_xyz(const std::string& path, Units units);

/// Σ_{A<B} Z_A Z_B / |R_A - R_B| in hartree. @throw InvalidArgument for two atoms at the
/// same position.
double nuclear_repulsion(const Molecule& molecule);
/// Σ Z_A.
int nuclear_charge(const Molecule& molecule) noexcept;

}  // namespace trnsparse::hf
