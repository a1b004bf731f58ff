#include "molecule.hpp"

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "text.hpp"
#include "trnsparse/error.hpp"

namespace trnsparse::hf {
namespace {

constexpr std::array<std::string_view, 54> symbols{
    "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si", "P",  "S",  "Cl", "Ar",
    "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr",
    "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I",  "Xe"};

}  // namespace

int atomic_number(std::string_view symbol) noexcept {
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    const std::string_view s = symbols[i];
    if (s.size() != symbol.size()) continue;
    bool same = true;
    for (std::size_t c = 0; c < s.size(); ++c) same = same && text::lower(s[c]) == text::lower(symbol[c]);
    if (same) return static_cast<int>(i) + 1;
  }
  return 0;
}

std::string_view element_symbol(int Z) {
  if (Z < 1 || Z > static_cast<int>(symbols.size()))
    throw InvalidArgument("element_symbol: Z = " + std::to_string(Z) + " is outside [1, " +
                          std::to_string(symbols.size()) + "]");
  return symbols[static_cast<std::size_t>(Z - 1)];
}

Molecule parse_xyz(std::string_view text, const std::string& source, Units units) {
  const std::vector<std::string_view> lines = text::split_lines(text);
  if (lines.empty()) throw ParseError(source, 1, "empty file, expected the atom count");
  const std::vector<std::string_view> count_fields = text::fields(lines[0]);
  long long count = 0;
  if (count_fields.size() != 1 || !text::parse_integer(count_fields[0], count) || count < 1)
    throw ParseError(source, 1, "expected the atom count (a positive integer), found '" + std::string(lines[0]) + "'");
  if (lines.size() < 2) throw ParseError(source, 2, "missing the comment line");

  Molecule molecule;
  molecule.comment = std::string(text::trim(lines[1]));
  const double scale = units == Units::angstrom ? 1.0 / angstrom_per_bohr : 1.0;
  for (long long i = 0; i < count; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) + 2;
    const auto line_no = static_cast<std::int64_t>(at) + 1;
    if (at >= lines.size())
      throw ParseError(source, line_no,
                       "expected " + std::to_string(count) + " atoms, found " + std::to_string(i) + " (end of file)");
    const std::vector<std::string_view> f = text::fields(lines[at]);
    if (f.size() != 4)
      throw ParseError(source, line_no, "expected 'Symbol x y z', found '" + std::string(text::trim(lines[at])) + "'");
    Atom atom;
    atom.Z = atomic_number(f[0]);
    if (atom.Z == 0) throw ParseError(source, line_no, "unknown element '" + std::string(f[0]) + "'");
    for (int d = 0; d < 3; ++d) {
      double v = 0.0;
      if (!text::parse_real(f[static_cast<std::size_t>(d) + 1], v) || !std::isfinite(v))
        throw ParseError(source, line_no,
                         "expected a finite coordinate, found '" + std::string(f[static_cast<std::size_t>(d) + 1]) + "'");
      atom.xyz[static_cast<std::size_t>(d)] = v * scale;
    }
    molecule.atoms.push_back(atom);
  }
  for (std::size_t at = static_cast<std::size_t>(count) + 2; at < lines.size(); ++at)
    if (!text::trim(lines[at]).empty())
      throw ParseError(source, static_cast<std::int64_t>(at) + 1,
                       "more lines than the " + std::to_string(count) + " atoms of the count line");
  return molecule;
}

Molecule read_xyz(const std::string& path, Units units) {
  return parse_xyz(text::read_file(path), path, units);
}

double nuclear_repulsion(const Molecule& molecule) {
  double e = 0.0;
  const std::vector<Atom>& a = molecule.atoms;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      const double dx = a[i].xyz[0] - a[j].xyz[0];
      const double dy = a[i].xyz[1] - a[j].xyz[1];
      const double dz = a[i].xyz[2] - a[j].xyz[2];
      const double r = std::sqrt(dx * dx + dy * dy + dz * dz);
      if (r == 0.0)
        throw InvalidArgument("molecule: atoms " + std::to_string(j + 1) + " and " + std::to_string(i + 1) +
                              " are at the same position");
      e += a[i].Z * a[j].Z / r;
    }
  return e;
}

int nuclear_charge(const Molecule& molecule) noexcept {
  int z = 0;
  for (const Atom& a : molecule.atoms) z += a.Z;
  return z;
}

}  // namespace trnsparse::hf
