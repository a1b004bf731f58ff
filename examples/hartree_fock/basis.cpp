#include "basis.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "text.hpp"
#include "trnsparse/error.hpp"

#ifndef TRNSPARSE_HF_BASIS_DIR
#error "TRNSPARSE_HF_BASIS_DIR must name the directory of the .gbs files"
#endif

namespace trnsparse::hf {
namespace {

/// Angular momentum of a shell letter (S .. I), -1 otherwise.
int angular_momentum(char letter) noexcept {
  constexpr std::string_view letters = "spdfghi";
  const std::size_t l = letters.find(text::lower(letter));
  return l == std::string_view::npos ? -1 : static_cast<int>(l);
}

/// The line without its `!` comment.
std::string_view strip_comment(std::string_view line) noexcept {
  return text::trim(line.substr(0, line.find('!')));
}

bool equals_lower(std::string_view s, std::string_view lower_word) noexcept {
  if (s.size() != lower_word.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (text::lower(s[i]) != lower_word[i]) return false;
  return true;
}

}  // namespace

GbsFile parse_gbs(std::string_view contents, const std::string& source) {
  const std::vector<std::string_view> lines = text::split_lines(contents);
  GbsFile gbs;
  gbs.source = source;
  enum class State { header, between, element } state = State::header;
  std::vector<ElementShell>* shells = nullptr;  // the element being read
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = strip_comment(lines[i]);
    const auto line_no = static_cast<std::int64_t>(i) + 1;
    if (line.empty()) continue;
    const std::vector<std::string_view> f = text::fields(line);
    if (state == State::header) {
      if (f.size() != 1 || !(equals_lower(f[0], "spherical") || equals_lower(f[0], "cartesian")))
        throw ParseError(source, line_no, "expected 'spherical' or 'cartesian' before the basis functions, found '" +
                                              std::string(line) + "'");
      gbs.spherical = equals_lower(f[0], "spherical");
      state = State::between;
      continue;
    }
    if (line == "****") {
      state = State::between;
      continue;
    }
    if (state == State::between) {
      long long zero = -1;
      if (f.size() != 2 || !text::parse_integer(f[1], zero) || zero != 0)
        throw ParseError(source, line_no, "expected an element line 'Symbol 0', found '" + std::string(line) + "'");
      const int Z = atomic_number(f[0]);
      if (Z == 0) throw ParseError(source, line_no, "unknown element '" + std::string(f[0]) + "'");
      if (gbs.elements.count(Z) != 0)
        throw ParseError(source, line_no, "element " + std::string(f[0]) + " appears a second time");
      shells = &gbs.elements[Z];
      state = State::element;
      continue;
    }
    // A shell: TYPE NPRIM SCALE, then NPRIM lines of an exponent and its coefficient(s).
    long long nprim = 0;
    double scale = 0.0;
    if (f.size() != 3 || !text::parse_integer(f[1], nprim) || nprim < 1 || !text::parse_real(f[2], scale) ||
        !(scale > 0.0))
      throw ParseError(source, line_no,
                       "expected a shell line 'Type Primitives Scale' (e.g. 'S 3 1.00'), found '" + std::string(line) + "'");
    const bool sp = equals_lower(f[0], "sp") || equals_lower(f[0], "l");
    const int l = sp ? 0 : (f[0].size() == 1 ? angular_momentum(f[0][0]) : -1);
    if (l < 0) throw ParseError(source, line_no, "unknown shell type '" + std::string(f[0]) + "' (S P D F G H I SP L)");
    ElementShell s{l, {}, {}};
    ElementShell p{1, {}, {}};
    for (long long k = 0; k < nprim; ++k) {
      const std::size_t at = i + 1 + static_cast<std::size_t>(k);
      const auto prim_line_no = static_cast<std::int64_t>(at) + 1;
      if (at >= lines.size())
        throw ParseError(source, prim_line_no, "the shell of line " + std::to_string(line_no) + " needs " +
                                                   std::to_string(nprim) + " primitives (end of file)");
      const std::vector<std::string_view> g = text::fields(strip_comment(lines[at]));
      std::array<double, 3> v{};
      bool ok = g.size() == (sp ? 3u : 2u);
      for (std::size_t c = 0; ok && c < g.size(); ++c) ok = text::parse_real(g[c], v[c]) && std::isfinite(v[c]);
      if (!ok || !(v[0] > 0.0))
        throw ParseError(source, prim_line_no,
                         std::string("expected a positive exponent and ") + (sp ? "two coefficients" : "a coefficient") +
                             ", found '" + std::string(text::trim(lines[at])) + "'");
      const double exponent = v[0] * scale * scale;
      s.exponents.push_back(exponent);
      s.coefficients.push_back(v[1]);
      if (sp) {
        p.exponents.push_back(exponent);
        p.coefficients.push_back(v[2]);
      }
    }
    shells->push_back(std::move(s));
    if (sp) shells->push_back(std::move(p));
    i += static_cast<std::size_t>(nprim);
  }
  if (state == State::header) throw ParseError(source, static_cast<std::int64_t>(lines.size()), "no basis set header");
  if (gbs.elements.empty()) throw ParseError(source, static_cast<std::int64_t>(lines.size()), "no elements");
  return gbs;
}

GbsFile read_gbs(const std::string& path) { return parse_gbs(text::read_file(path), path); }

std::string default_basis_dir() { return TRNSPARSE_HF_BASIS_DIR; }

std::string basis_path(std::string_view name, const std::string& dir) {
  if (name.size() > 4 && name.substr(name.size() - 4) == ".gbs") {
    if (!std::filesystem::exists(std::string(name)))
      throw InvalidArgument("basis file '" + std::string(name) + "' does not exist");
    return std::string(name);
  }
  std::string file;
  for (const char c : name) {
    if (c == '*') file += 's';
    else if (c == '+') file += 'p';
    else if (c == '(' || c == ')' || c == ',') file += '_';
    else file += text::lower(c);
  }
  const std::string path = (std::filesystem::path(dir) / (file + ".gbs")).string();
  if (name.empty() || name.find('/') != std::string_view::npos || !std::filesystem::exists(path))
    throw InvalidArgument("unknown basis set '" + std::string(name) + "': no file " + path +
                          " (basis sets come from Debian's psi4-data; or give a .gbs file)");
  return path;
}

int Basis::max_l() const noexcept {
  int l = 0;
  for (const Shell& s : shells) l = std::max(l, s.l);
  return l;
}

std::size_t Basis::max_primitives() const noexcept {
  std::size_t n = 0;
  for (const Shell& s : shells) n = std::max(n, s.exponents.size());
  return n;
}

Basis make_basis(const Molecule& molecule, const GbsFile& gbs) {
  Basis basis;
  basis.first.push_back(0);
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    const Atom& atom = molecule.atoms[a];
    const auto found = gbs.elements.find(atom.Z);
    if (found == gbs.elements.end())
      throw InvalidArgument("basis " + gbs.source + " has no functions for element " +
                            std::string(element_symbol(atom.Z)) + " (atom " + std::to_string(a + 1) + ")");
    for (const ElementShell& e : found->second) {
      Shell s{e.l, gbs.spherical && e.l >= 2, e.exponents, e.coefficients, atom.xyz, static_cast<int>(a)};
      basis.first.push_back(basis.first.back() + s.size());
      basis.shells.push_back(std::move(s));
    }
  }
  return basis;
}

}  // namespace trnsparse::hf
