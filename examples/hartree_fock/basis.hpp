/// @file basis.hpp
/// Gaussian basis sets: a reader for the psi4 / Gaussian94 `.gbs` format (the files of
/// Debian's psi4-data in /usr/share/psi4/basis) and the basis of a molecule built from
/// one. A `.gbs` file starts with `spherical` or `cartesian` (which applies to shells
/// with l ≥ 2), then one block per element between `****` lines:
///
///     O     0
///     S   3   1.00                 <- type (S P D F G H I, or SP / L), primitives, scale
///           130.7093200  0.15432897   <- exponent, coefficient (SP: s and p coefficients)
///
/// Exponents may use the Fortran letter D (`1.0D+00`); `!` starts a comment.
///
///     auto gbs = trnsparse::hf::read_gbs(trnsparse::hf::basis_path("sto-3g", trnsparse::hf::default_basis_dir()));
///     auto basis = trnsparse::hf::make_basis(molecule, gbs);   // basis.nbf() functions
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "molecule.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::hf {

/// One contracted shell of an element: angular momentum, exponents and the contraction
/// coefficients of normalised primitives (SP shells are stored as an S and a P shell).
struct ElementShell {
  int l = 0;
  std::vector<double> exponents;
  std::vector<double> coefficients;
};

/// The contents of a `.gbs` file.
struct GbsFile {
  std::string source;                              ///< the file (or text) it was read from
  bool spherical = true;                           ///< the header: pure (5d, 7f) or cartesian (6d, 10f)
  std::map<int, std::vector<ElementShell>> elements;  ///< by atomic number
};

/// Parses `.gbs` text; `source` names it in errors.
/// @throw ParseError (source:line) for a missing header, a malformed shell or primitive
/// line, an unknown element or shell type, or a repeated element.
GbsFile parse_gbs(std::string_view text, const std::string& source);
/// @throw IoError if the file cannot be read; ParseError as parse_gbs.
GbsFile read_gbs(const std::string& path);

/// Where basis sets are looked up: the directory CMake configured (TRNSPARSE_HF_BASIS_DIR,
/// by default psi4-data's /usr/share/psi4/basis).
std::string default_basis_dir();
/// The file of basis `name`: `name` itself when it ends in `.gbs`, else
/// `dir/<name>.gbs` with psi4's file naming (lower case, `*` -> `s`, `+` -> `p`,
/// `(` `)` `,` -> `_`; so `6-31G*` is `6-31gs.gbs`).
/// @throw InvalidArgument naming the basis and the path when that file does not exist.
std::string basis_path(std::string_view name, const std::string& dir);

/// A shell placed on an atom.
struct Shell {
  int l = 0;
  bool pure = false;  ///< spherical harmonics (2l+1 functions), else cartesian
  std::vector<double> exponents;
  std::vector<double> coefficients;
  std::array<double, 3> center{};  ///< bohr
  int atom = 0;                    ///< index in the molecule
  [[nodiscard]] index_t size() const noexcept { return pure ? 2 * l + 1 : (l + 1) * (l + 2) / 2; }
};

/// The basis of a molecule: its shells atom by atom, in file order.
struct Basis {
  std::vector<Shell> shells;
  std::vector<index_t> first;  ///< first basis function of each shell; first.back() = nbf
  [[nodiscard]] index_t nbf() const noexcept { return first.empty() ? 0 : first.back(); }
  [[nodiscard]] index_t n_shells() const noexcept { return static_cast<index_t>(shells.size()); }
  [[nodiscard]] int max_l() const noexcept;
  [[nodiscard]] std::size_t max_primitives() const noexcept;
};

/// @throw InvalidArgument naming the element and atom when the basis set lacks it.
Basis make_basis(const Molecule& molecule, const GbsFile& gbs);

}  // namespace trnsparse::hf
