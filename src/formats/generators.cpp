#include "trnsparse/generators.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "runtime/checks.hpp"
#include "runtime/rng.hpp"
#include "runtime/value.hpp"

namespace trnsparse {

namespace {

/// Throws OverflowError naming `what`, its entries and the bytes they would take, when a
/// CSR matrix of `rows` rows and `entries` entries of `value_bytes` each (64-bit indices)
/// would not fit in the memory this machine has available (MemAvailable of /proc/meminfo;
/// no check under 1 GiB or where the file cannot be read): a size too large fails at
/// once, not after filling the memory.
void check_fits_in_memory(const char* what, index_t rows, index_t entries, std::size_t value_bytes) {
  const double need = static_cast<double>(entries) * static_cast<double>(sizeof(index_t) + value_bytes) +
                      static_cast<double>(rows + 1) * static_cast<double>(sizeof(index_t));
  if (need < 0x1p30) return;  // a small problem fits: no file to read on every call
  std::ifstream meminfo("/proc/meminfo");
  double kib = -1.0;
  for (std::string key, unit; meminfo >> key;) {
    if (key == "MemAvailable:") {
      meminfo >> kib >> unit;
      break;
    }
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  if (kib < 0.0) return;
  const double available = kib * 1024.0;
  if (need <= available) return;
  const auto gb = [](double bytes) { return std::round(bytes / 1e8) / 10.0; };
  throw OverflowError(detail::concat(what, ": ", entries, " entries in ", rows, " rows need ", gb(need),
                                     " GB for the CSR arrays; this machine has ", gb(available), " GB available"));
}

}  // namespace

template <Value T>
CsrMatrix<T> poisson3d_rows(index_t n, index_t first, index_t last) {
  detail::check_nonnegative(n, "poisson3d: n");
  const index_t N = detail::checked_mul(detail::checked_mul(n, n, "poisson3d: n^2"), n, "poisson3d: n^3");
  (void)detail::checked_mul(N, 7, "poisson3d: 7 n^3");
  if (!(0 <= first && first <= last && last <= N))
    throw InvalidArgument(detail::concat("poisson3d_rows: rows [", first, ", ", last, ") are not within [0, ", N, ")"));
  check_fits_in_memory("poisson3d", last - first, 7 * (last - first), sizeof(T));
  const index_t m = last - first;
  std::vector<index_t> ptr = detail::make_vector<index_t>(m + 1, "poisson3d: row_ptr");
  std::vector<index_t> idx = detail::huge_reserved<index_t>(7 * m, "poisson3d: col_indices");
  std::vector<T> vals = detail::huge_reserved<T>(7 * m, "poisson3d: values");
  // Row r = x + n*y + n*n*z; neighbours in ascending column order: -z, -y, -x, self, +x, +y, +z.
  const index_t stride[3] = {1, n, n * n};
  for (index_t r = first; r < last; ++r) {
    const index_t coord[3] = {r % n, (r / n) % n, r / (n * n)};
    for (int d = 2; d >= 0; --d)
      if (coord[d] > 0) {
        idx.push_back(r - stride[d]);
        vals.push_back(T(-1.0f));
      }
    idx.push_back(r);
    vals.push_back(T(6.0f));
    for (int d = 0; d < 3; ++d)
      if (coord[d] < n - 1) {
        idx.push_back(r + stride[d]);
        vals.push_back(T(-1.0f));
      }
    ptr[r - first + 1] = static_cast<index_t>(idx.size());
  }
  return CsrMatrix<T>(m, N, std::move(ptr), std::move(idx), std::move(vals));
}

template <Value T>
CsrMatrix<T> poisson3d(index_t n) {
  detail::check_nonnegative(n, "poisson3d: n");
  return poisson3d_rows<T>(n, 0, detail::checked_mul(detail::checked_mul(n, n, "poisson3d: n^2"), n, "poisson3d: n^3"));
}

template <Value T>
CsrMatrix<T> convdiff3d(index_t n, double peclet) {
  detail::check_nonnegative(n, "convdiff3d: n");
  if (!(peclet >= 0.0 && std::isfinite(peclet)))
    throw InvalidArgument(detail::concat("convdiff3d: peclet = ", peclet, ", expected a finite value >= 0"));
  const index_t N = detail::checked_mul(detail::checked_mul(n, n, "convdiff3d: n^2"), n, "convdiff3d: n^3");
  (void)detail::checked_mul(N, 7, "convdiff3d: 7 n^3");
  check_fits_in_memory("convdiff3d", N, 7 * N, sizeof(T));
  // Scaled by h²: diffusion is poisson3d's stencil, and first-order upwind convection with
  // velocity v_d (all positive) adds c_d = peclet v_d to the diagonal and -c_d to the
  // upstream (-e_d) neighbour.
  const double c[3] = {peclet, 0.5 * peclet, 0.25 * peclet};
  std::vector<index_t> ptr = detail::make_vector<index_t>(N + 1, "convdiff3d: row_ptr");
  std::vector<index_t> idx = detail::huge_reserved<index_t>(7 * N, "convdiff3d: col_indices");
  std::vector<T> vals = detail::huge_reserved<T>(7 * N, "convdiff3d: values");
  const index_t stride[3] = {1, n, n * n};
  const T diagonal = detail::value_cast<T>(6.0 + c[0] + c[1] + c[2]);
  for (index_t r = 0; r < N; ++r) {
    const index_t coord[3] = {r % n, (r / n) % n, r / (n * n)};
    for (int d = 2; d >= 0; --d)
      if (coord[d] > 0) {
        idx.push_back(r - stride[d]);
        vals.push_back(detail::value_cast<T>(-1.0 - c[d]));
      }
    idx.push_back(r);
    vals.push_back(diagonal);
    for (int d = 0; d < 3; ++d)
      if (coord[d] < n - 1) {
        idx.push_back(r + stride[d]);
        vals.push_back(T(-1.0f));
      }
    ptr[static_cast<std::size_t>(r) + 1] = static_cast<index_t>(idx.size());
  }
  return CsrMatrix<T>(N, N, std::move(ptr), std::move(idx), std::move(vals));
}

template <Value T>
CsrMatrix<T> random_csr(index_t rows, index_t cols, double density, std::uint64_t seed) {
  detail::check_nonnegative(rows, "random_csr: rows");
  detail::check_nonnegative(cols, "random_csr: cols");
  if (!(density >= 0.0 && density <= 1.0))
    throw InvalidArgument(detail::concat("random_csr: density = ", density, " must be in [0, 1]"));
  detail::SplitMix64 rng{seed};
  std::vector<index_t> ptr(static_cast<std::size_t>(rows) + 1, 0), idx;
  std::vector<T> vals;
  for (index_t i = 0; i < rows; ++i) {
    for (index_t j = 0; j < cols; ++j)
      if (rng.uniform() < density) {
        idx.push_back(j);
        vals.push_back(detail::value_cast<T>(rng.symmetric()));
      }
    ptr[i + 1] = static_cast<index_t>(idx.size());
  }
  return CsrMatrix<T>(rows, cols, std::move(ptr), std::move(idx), std::move(vals));
}

namespace {

/// The 24 x 24 stiffness of a cube of side h (trilinear, isotropic: Young's modulus E,
/// Poisson's ratio nu), 2 x 2 x 2 Gauss points; local node a at corner (a & 1, a >> 1 & 1,
/// a >> 2 & 1), unknowns 3 a + component.
std::vector<double> hex_stiffness(double h, double E, double nu) {
  const double lambda = E * nu / ((1 + nu) * (1 - 2 * nu)), mu = E / (2 * (1 + nu));
  std::vector<double> K(24 * 24, 0.0);
  const double g = 1 / std::sqrt(3.0);
  for (int q = 0; q < 8; ++q) {
    const double xi[3] = {(q & 1) ? g : -g, (q & 2) ? g : -g, (q & 4) ? g : -g};
    double dN[8][3];  // dN_a / dx, with dxi / dx = 2 / h
    for (int a = 0; a < 8; ++a) {
      const double s[3] = {(a & 1) ? 1.0 : -1.0, (a & 2) ? 1.0 : -1.0, (a & 4) ? 1.0 : -1.0};
      for (int d = 0; d < 3; ++d) {
        double v = s[d] / 8;
        for (int e = 0; e < 3; ++e)
          if (e != d) v *= 1 + s[e] * xi[e];
        dN[a][d] = v * 2 / h;
      }
    }
    const double w = h * h * h / 8;  // det J = (h / 2)^3, unit Gauss weights
    // K_ab,ij = lambda dN_a,i dN_b,j + mu (dN_a,j dN_b,i + delta_ij dN_a . dN_b)
    for (int a = 0; a < 8; ++a)
      for (int b = 0; b < 8; ++b) {
        const double dot = dN[a][0] * dN[b][0] + dN[a][1] * dN[b][1] + dN[a][2] * dN[b][2];
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j)
            K[(3 * a + i) * 24 + 3 * b + j] +=
                w * (lambda * dN[a][i] * dN[b][j] + mu * (dN[a][j] * dN[b][i] + (i == j ? dot : 0.0)));
      }
  }
  return K;
}

/// Assembles a node-block CSR matrix over grid nodes (x-fastest, `m` per side) whose
/// node blocks are b x b: `coupled(p, q)` lists the neighbour offsets, `block(node, nbr,
/// out)` adds node `nbr`'s b x b block into `out` (row-major). Node `keep` filters rows and
/// columns (renumbered in order).
template <Value T, class Neighbours, class Block, class Keep>
CsrMatrix<T> assemble_blocks(index_t m, index_t b, Neighbours neighbours, Block block, Keep keep) {
  const index_t nodes = m * m * m;
  std::vector<index_t> number(static_cast<std::size_t>(nodes), -1);
  index_t kept = 0;
  for (index_t v = 0; v < nodes; ++v)
    if (keep(v)) number[static_cast<std::size_t>(v)] = kept++;
  const index_t rows = detail::checked_mul(kept, b, "generator: rows");
  // At most 27 neighbours a node (grid_neighbours), b entries each a row.
  const index_t most = detail::checked_mul(rows, 27 * b, "generator: entries");
  std::vector<index_t> ptr = detail::make_vector<index_t>(rows + 1, "generator: row_ptr");
  std::vector<index_t> idx = detail::huge_reserved<index_t>(most, "generator: col_indices");
  std::vector<T> vals = detail::huge_reserved<T>(most, "generator: values");
  std::vector<index_t> nbrs;
  std::vector<double> blk(static_cast<std::size_t>(b * b));
  std::vector<std::vector<double>> row_blocks;
  for (index_t v = 0; v < nodes; ++v) {
    if (number[static_cast<std::size_t>(v)] < 0) continue;
    nbrs.clear();
    neighbours(v, nbrs);  // ascending node numbers
    row_blocks.assign(nbrs.size(), std::vector<double>(static_cast<std::size_t>(b * b), 0.0));
    for (std::size_t k = 0; k < nbrs.size(); ++k) block(v, nbrs[k], row_blocks[k].data());
    const index_t r0 = number[static_cast<std::size_t>(v)] * b;
    for (index_t i = 0; i < b; ++i) {
      for (std::size_t k = 0; k < nbrs.size(); ++k) {
        const index_t c = number[static_cast<std::size_t>(nbrs[k])];
        if (c < 0) continue;
        for (index_t j = 0; j < b; ++j) {
          idx.push_back(c * b + j);
          vals.push_back(detail::value_cast<T>(row_blocks[k][static_cast<std::size_t>(i * b + j)]));
        }
      }
      ptr[static_cast<std::size_t>(r0 + i + 1)] = static_cast<index_t>(idx.size());
    }
  }
  return CsrMatrix<T>(rows, rows, std::move(ptr), std::move(idx), std::move(vals));
}

/// Node v's neighbours within distance 1 in every coordinate (27-point) or along one axis
/// (7-point), ascending.
void grid_neighbours(index_t m, index_t v, bool box, std::vector<index_t>& out) {
  const index_t x = v % m, y = (v / m) % m, z = v / (m * m);
  for (index_t dz = -1; dz <= 1; ++dz)
    for (index_t dy = -1; dy <= 1; ++dy)
      for (index_t dx = -1; dx <= 1; ++dx) {
        if (!box && (dx != 0) + (dy != 0) + (dz != 0) > 1) continue;
        const index_t X = x + dx, Y = y + dy, Z = z + dz;
        if (X < 0 || Y < 0 || Z < 0 || X >= m || Y >= m || Z >= m) continue;
        out.push_back(X + m * (Y + m * Z));
      }
}

}  // namespace

template <Value T>
CsrMatrix<T> elasticity3d(index_t n) {
  if (n < 1) throw InvalidArgument(detail::concat("elasticity3d: n = ", n, " must be >= 1"));
  const index_t m = detail::checked_add(n, 1, "elasticity3d: n + 1");
  const index_t nodes = detail::checked_mul(detail::checked_mul(m, m, "elasticity3d: (n+1)^2"), m,
                                            "elasticity3d: (n+1)^3");
  check_fits_in_memory("elasticity3d", 3 * nodes, detail::checked_mul(nodes, 243, "elasticity3d: entries"),
                               sizeof(T));
  const std::vector<double> Ke = hex_stiffness(1.0 / static_cast<double>(n), 1.0, 0.3);
  const auto coord = [m](index_t v, int d) { return d == 0 ? v % m : d == 1 ? (v / m) % m : v / (m * m); };
  // Block (v, u) sums, over the elements holding both nodes, their local 3 x 3 block.
  const auto block = [&](index_t v, index_t u, double* out) {
    for (int e = 0; e < 8; ++e) {  // the element whose corner e is node v
      index_t lo[3];
      bool inside = true;
      for (int d = 0; d < 3; ++d) {
        lo[d] = coord(v, d) - ((e >> d) & 1);
        inside = inside && lo[d] >= 0 && lo[d] < n;
      }
      if (!inside) continue;
      int f = 0;  // u's corner in that element, if it is one
      bool corner = true;
      for (int d = 0; d < 3; ++d) {
        const index_t off = coord(u, d) - lo[d];
        corner = corner && (off == 0 || off == 1);
        f |= static_cast<int>(off & 1) << d;
      }
      if (!corner) continue;
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) out[i * 3 + j] += Ke[static_cast<std::size_t>((3 * e + i) * 24 + 3 * f + j)];
    }
  };
  return assemble_blocks<T>(
      m, 3, [m](index_t v, std::vector<index_t>& out) { grid_neighbours(m, v, true, out); }, block,
      [m](index_t v) { return v % m != 0; });  // the face x = 0 is clamped
}

Dense<double> elasticity3d_coordinates(index_t n) {
  if (n < 1) throw InvalidArgument(detail::concat("elasticity3d_coordinates: n = ", n, " must be >= 1"));
  const index_t m = detail::checked_add(n, 1, "elasticity3d_coordinates: n + 1");
  const index_t nodes = detail::checked_mul(detail::checked_mul(m, m, "elasticity3d_coordinates: (n+1)^2"), m,
                                            "elasticity3d_coordinates: (n+1)^3");
  Dense<double> xyz(nodes - m * m, 3);  // the face x = 0 is clamped, as in elasticity3d
  const double h = 1.0 / static_cast<double>(n);
  index_t row = 0;
  for (index_t v = 0; v < nodes; ++v) {
    if (v % m == 0) continue;
    xyz(row, 0) = h * static_cast<double>(v % m);
    xyz(row, 1) = h * static_cast<double>((v / m) % m);
    xyz(row, 2) = h * static_cast<double>(v / (m * m));
    ++row;
  }
  return xyz;
}

template <Value T>
CsrMatrix<T> block_stencil3d(index_t n, index_t fields) {
  detail::check_nonnegative(n, "block_stencil3d: n");
  if (fields < 1) throw InvalidArgument(detail::concat("block_stencil3d: fields = ", fields, " must be >= 1"));
  const index_t nodes = detail::checked_mul(detail::checked_mul(n, n, "block_stencil3d: n^2"), n,
                                            "block_stencil3d: n^3");
  check_fits_in_memory(
      "block_stencil3d", detail::checked_mul(nodes, fields, "block_stencil3d: rows"),
      detail::checked_mul(detail::checked_mul(nodes, 7, "block_stencil3d: 7 n^3"),
                          detail::checked_mul(fields, fields, "block_stencil3d: fields^2"), "block_stencil3d: entries"),
      sizeof(T));
  // Field f diffuses with 1 + f / fields and is convected in +x (upwinded: the -x
  // neighbour couples more); fields couple to each other through c(f, g) = 0.1 / (1 + |f - g|),
  // kept at the node and, scaled by a half, to its neighbours.
  const auto block = [fields](index_t v, index_t u, double* out) {
    const index_t dv = u - v;
    for (index_t f = 0; f < fields; ++f) {
      const double diff = 1.0 + static_cast<double>(f) / static_cast<double>(fields);
      for (index_t g = 0; g < fields; ++g) {
        const double c = 0.1 / static_cast<double>(1 + (f > g ? f - g : g - f));
        double a;
        if (dv == 0) a = f == g ? 6 * diff + 1.5 + 1.0 : c;  // diagonal: diffusion, convection, shift
        else a = (f == g ? -diff - (dv == -1 ? 1.5 : 0.0) : -0.5 * c);
        out[f * fields + g] += a;
      }
    }
  };
  return assemble_blocks<T>(
      n, fields, [n](index_t v, std::vector<index_t>& out) { grid_neighbours(n, v, false, out); }, block,
      [](index_t) { return true; });
}

template <Value T>
CsrMatrix<T> random_blocks(index_t n, index_t b, double block_density, std::uint64_t seed) {
  detail::check_nonnegative(n, "random_blocks: n");
  if (b < 1) throw InvalidArgument(detail::concat("random_blocks: block size = ", b, " must be >= 1"));
  if (!(block_density >= 0.0 && block_density <= 1.0))
    throw InvalidArgument(detail::concat("random_blocks: block_density = ", block_density, " must be in [0, 1]"));
  detail::SplitMix64 rng{seed};
  const index_t nb = (n + b - 1) / b;
  std::vector<index_t> ptr{0}, idx;
  std::vector<T> vals;
  std::vector<index_t> present;
  for (index_t bi = 0; bi < nb; ++bi) {
    present.clear();
    for (index_t bj = 0; bj < nb; ++bj)
      if (rng.uniform() < block_density) present.push_back(bj);
    // Values drawn block by block (b² each), scattered to the block's rows.
    const index_t rows = std::min(b, n - bi * b);
    std::vector<std::vector<std::pair<index_t, T>>> row_entries(static_cast<std::size_t>(rows));
    for (const index_t bj : present)
      for (index_t r = 0; r < b; ++r)
        for (index_t c = 0; c < b; ++c) {
          const T v = detail::value_cast<T>(rng.symmetric());
          if (r < rows && bj * b + c < n) row_entries[r].emplace_back(bj * b + c, v);
        }
    for (const auto& entries : row_entries) {
      for (const auto& [j, v] : entries) {
        idx.push_back(j);
        vals.push_back(v);
      }
      ptr.push_back(static_cast<index_t>(idx.size()));
    }
  }
  return CsrMatrix<T>(n, n, std::move(ptr), std::move(idx), std::move(vals));
}

namespace {

/// The fields of "name:a:b:c" after the name.
std::vector<std::string_view> spec_fields(std::string_view spec) {
  std::vector<std::string_view> fields;
  for (std::size_t at = spec.find(':'); at != std::string_view::npos;) {
    const std::size_t next = spec.find(':', at + 1);
    fields.push_back(spec.substr(at + 1, next == std::string_view::npos ? std::string_view::npos : next - at - 1));
    at = next;
  }
  return fields;
}

template <class N>
bool parse_number(std::string_view text, N& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

template <Value T>
CsrMatrix<T> named_problem(std::string_view spec) {
  const std::string_view name = spec.substr(0, spec.find(':'));
  const std::vector<std::string_view> f = spec_fields(spec);
  const auto fail = [&] {
    return InvalidArgument(detail::concat("problem \"", std::string(spec),
                                          "\": expected poisson3d:N, elasticity3d:N, convdiff3d:N[:PECLET], "
                                          "block_stencil3d:N[:FIELDS] or "
                                          "random_blocks:N:B:DENSITY, with 1 <= N <= 2^20"));
  };
  index_t n = 0;
  if (f.empty() || !parse_number(f[0], n) || n < 1 || n > (index_t{1} << 20)) throw fail();
  index_t b = 0;
  double density = 0, peclet = 0;
  // The generators' own argument and size errors, with the specification named.
  try {
    if (name == "poisson3d" && f.size() == 1) return poisson3d<T>(n);
    if (name == "elasticity3d" && f.size() == 1) return elasticity3d<T>(n);
    if (name == "convdiff3d" && f.size() == 1) return convdiff3d<T>(n);
    if (name == "convdiff3d" && f.size() == 2 && parse_number(f[1], peclet)) return convdiff3d<T>(n, peclet);
    if (name == "block_stencil3d" && f.size() == 1) return block_stencil3d<T>(n);
    if (name == "block_stencil3d" && f.size() == 2 && parse_number(f[1], b)) return block_stencil3d<T>(n, b);
    if (name == "random_blocks" && f.size() == 3 && parse_number(f[1], b) && parse_number(f[2], density)) {
      // One draw per block of the grid: at most 2^32, seconds, not days.
      if (b >= 1 && static_cast<double>(detail::ceil_div(n, b)) * static_cast<double>(detail::ceil_div(n, b)) > 0x1p32)
        throw InvalidArgument(detail::concat("random_blocks: (N / B)^2 = ", detail::ceil_div(n, b), "^2 blocks to draw, ",
                                             "at most 2^32"));
      return random_blocks<T>(n, b, density, 0);
    }
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat("problem \"", std::string(spec), "\": ", e.what()));
  } catch (const OverflowError& e) {
    throw InvalidArgument(detail::concat("problem \"", std::string(spec), "\": ", e.what()));
  }
  throw fail();
}

template CsrMatrix<float> random_blocks<float>(index_t, index_t, double, std::uint64_t);
template CsrMatrix<double> random_blocks<double>(index_t, index_t, double, std::uint64_t);
template CsrMatrix<bf16> random_blocks<bf16>(index_t, index_t, double, std::uint64_t);
template CsrMatrix<float> named_problem<float>(std::string_view);
template CsrMatrix<double> named_problem<double>(std::string_view);
template CsrMatrix<bf16> named_problem<bf16>(std::string_view);

template CsrMatrix<float> poisson3d_rows<float>(index_t, index_t, index_t);
template CsrMatrix<double> poisson3d_rows<double>(index_t, index_t, index_t);
template CsrMatrix<bf16> poisson3d_rows<bf16>(index_t, index_t, index_t);
template CsrMatrix<float> poisson3d<float>(index_t);
template CsrMatrix<double> poisson3d<double>(index_t);
template CsrMatrix<bf16> poisson3d<bf16>(index_t);
template CsrMatrix<float> random_csr<float>(index_t, index_t, double, std::uint64_t);
template CsrMatrix<float> elasticity3d<float>(index_t);
template CsrMatrix<double> elasticity3d<double>(index_t);
template CsrMatrix<bf16> elasticity3d<bf16>(index_t);
template CsrMatrix<float> convdiff3d<float>(index_t, double);
template CsrMatrix<double> convdiff3d<double>(index_t, double);
template CsrMatrix<bf16> convdiff3d<bf16>(index_t, double);
template CsrMatrix<float> block_stencil3d<float>(index_t, index_t);
template CsrMatrix<double> block_stencil3d<double>(index_t, index_t);
template CsrMatrix<bf16> block_stencil3d<bf16>(index_t, index_t);
template CsrMatrix<double> random_csr<double>(index_t, index_t, double, std::uint64_t);
template CsrMatrix<bf16> random_csr<bf16>(index_t, index_t, double, std::uint64_t);

}  // namespace trnsparse
