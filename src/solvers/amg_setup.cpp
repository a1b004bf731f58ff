// Setup of smoothed-aggregation AMG (Vaněk, Mandel, Brezina 1996), level by level:
// strength of connection between nodes, greedy aggregation, the tentative prolongator
// from a QR of the near-nullspace per aggregate, its Jacobi smoothing, the Galerkin
// coarse operator (row-wise products of its own: they run once per setup, where the
// library's cached SpGEMM plans would not be reused), Chebyshev bounds by Lanczos, and
// the dense Cholesky factor of the last level. Every pass over rows is threaded with one
// writer per row (results independent of the thread count); the aggregation is one
// sequential sweep, so its result is the same for any thread count too. Large arrays
// are on huge pages: a fresh 4 KiB page costs about 10 µs on the machines we run on.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "ops/fused.hpp"
#include "ops/run.hpp"
#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
#include "runtime/rng.hpp"
#include "solvers/amg.hpp"
#include "solvers/chunked.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::amg {

namespace {

using detail::concat;
using solvers::ChunkedSums;
using solvers::for_rows;
using solvers::kChunkRows;
using solvers::kLanes;

/// ChunkedSums::reduce's operator for a single process: nothing to add up.
struct Local {
  void sum(std::span<double>) const noexcept {}
};

/// A thread's list of distinct columns of one row: room for every column, allocated once,
/// so that adding one is a store (std::vector::push_back is an out-of-line call here).
template <class I>
struct List {
  std::vector<I> v;
  std::size_t n = 0;
  void reserve(index_t capacity) {
    if (v.empty()) v.resize(static_cast<std::size_t>(std::max<index_t>(capacity, 1)));
  }
  void clear() noexcept { n = 0; }
  void push_back(I x) noexcept { v[n++] = x; }
  [[nodiscard]] std::size_t size() const noexcept { return n; }
  I* begin() noexcept { return v.data(); }
  I* end() noexcept { return v.data() + n; }
  I operator[](std::size_t q) const noexcept { return v[q]; }
};

/// Runs f(i0, i1) over chunks of [0, n) on the threads a pass of `ns` one-thread
/// nanoseconds is worth; each index is handled by exactly one call.
template <class F>
void for_chunks(index_t n, index_t chunk, double ns, F&& f) {
  const index_t chunks = detail::ceil_div(n, chunk);
  detail::parallel_for(detail::parts_for(chunks, ns), chunks,
                       [&](int, index_t c) { f(c * chunk, std::min(n, (c + 1) * chunk)); });
}

/// Lanczos steps for λmax(D⁻¹A): the largest Ritz value converges much faster than power
/// iteration's Rayleigh quotient (ten steps give a few per cent), and the smoother's
/// upper bound 1.1 λ covers the rest.
constexpr index_t kLanczosSteps = 10;
/// The smoother's interval [λ / kSmootherRatio, 1.1 λ] of D⁻¹A: PETSc GAMG's default
/// (0.1, 1.1). ML's 30 damps less where aggregation leaves most error: on poisson3d:96,
/// 17 CG iterations instead of 15 at the same cost per cycle.
constexpr double kSmootherRatio = 10.0;

// ---- the level-0 operator --------------------------------------------------------------

/// The matrix with g x g blocks holding the entries of (ptr, idx, vals) in gs x gs blocks
/// (gs = 1: CSR) of a rows x rows matrix. A block is stored where any stored source block
/// overlaps it, whatever the values, so that the structure depends on the source
/// structure only (update() keeps it).
template <SolverValue T>
BsrMatrix<T> reblock(std::span<const index_t> ptr, std::span<const index_t> idx, std::span<const T> vals, index_t gs,
                     index_t rows, index_t g) {
  const index_t out_rows = rows / g, out_cols = rows / g, gg = g * g, sgs = gs * gs;
  const index_t chunk = 1024;
  const index_t chunks = detail::ceil_div(out_rows, chunk);
  const int parts = detail::parts_for(chunks, detail::work_ns(detail::Work::stream, 2.0 * static_cast<double>(vals.size())));
  struct Scratch {
    std::vector<index_t> mark, pos;
    List<index_t> list;
  };
  std::vector<Scratch> scratch(static_cast<std::size_t>(parts));
  // The block columns of output block row I, sorted, in sc.list.
  const auto columns = [&](Scratch& sc, index_t I) {
    if (sc.mark.empty()) {
      sc.mark.assign(static_cast<std::size_t>(out_cols), -1);
      sc.pos.resize(static_cast<std::size_t>(out_cols));
      sc.list.reserve(out_cols);
    }
    sc.list.clear();
    for (index_t sb = I * g / gs; sb <= (I * g + g - 1) / gs; ++sb)
      for (index_t p = ptr[sb]; p < ptr[sb + 1]; ++p) {
        const index_t c0 = idx[p] * gs, c1 = std::min(rows, c0 + gs);
        for (index_t J = c0 / g; c0 < c1 && J <= (c1 - 1) / g; ++J)
          if (sc.mark[J] != I) {
            sc.mark[J] = I;
            sc.list.push_back(J);
          }
      }
    std::sort(sc.list.begin(), sc.list.end());
  };
  std::vector<index_t> optr = detail::make_vector<index_t>(out_rows + 1, "amg: level 0 blocks");
  detail::UnitRanges ranges;
  detail::parallel_for(parts, chunks, ranges, [&](int t, index_t c) {
    for (index_t I = c * chunk; I < std::min(out_rows, (c + 1) * chunk); ++I) {
      columns(scratch[t], I);
      optr[I + 1] = static_cast<index_t>(scratch[t].list.size());
    }
  });
  for (index_t I = 0; I < out_rows; ++I) optr[I + 1] += optr[I];
  std::vector<index_t> oidx = detail::make_vector<index_t>(optr[out_rows], "amg: level 0 blocks");
  std::vector<T> ov = detail::make_vector<T>(optr[out_rows] * gg, "amg: level 0 blocks");
  for (auto& sc : scratch) std::fill(sc.mark.begin(), sc.mark.end(), -1);
  detail::parallel_for(parts, chunks, ranges, [&](int t, index_t c) {
    Scratch& sc = scratch[t];
    for (index_t I = c * chunk; I < std::min(out_rows, (c + 1) * chunk); ++I) {
      columns(sc, I);
      for (std::size_t q = 0; q < sc.list.size(); ++q) {
        oidx[optr[I] + static_cast<index_t>(q)] = sc.list[q];
        sc.pos[sc.list[q]] = optr[I] + static_cast<index_t>(q);
      }
      for (index_t sb = I * g / gs; sb <= (I * g + g - 1) / gs; ++sb)
        for (index_t p = ptr[sb]; p < ptr[sb + 1]; ++p)
          for (index_t r = 0; r < gs; ++r) {
            const index_t row = sb * gs + r;
            if (row < I * g || row >= I * g + g || row >= rows) continue;
            for (index_t c2 = 0; c2 < gs; ++c2) {
              const index_t col = idx[p] * gs + c2;
              if (col < rows) ov[(sc.pos[col / g] * g + row % g) * g + col % g] = vals[p * sgs + r * gs + c2];
            }
          }
    }
  });
  return BsrMatrix<T>(BsrStructure::make(rows, rows, g, std::move(optr), std::move(oidx)), std::move(ov));
}

/// reblock for CSR input (gs = 1): the same result, with G (g at compile time for the
/// common sizes, 0: run time) so that the column divisions are multiplications.
template <int G, SolverValue T>
BsrMatrix<T> reblock_csr(const CsrMatrix<T>& A, index_t g_rt) {
  const index_t g = G > 0 ? G : g_rt, rows = A.rows(), nb = rows / g, gg = g * g;
  const auto ptr = A.row_ptr();
  const auto idx = A.col_indices();
  const auto vals = A.values();
  const index_t chunk = 1024;
  const index_t chunks = detail::ceil_div(nb, chunk);
  const int parts = detail::parts_for(chunks, detail::work_ns(detail::Work::stream, 2.0 * static_cast<double>(vals.size())));
  struct Scratch {
    std::vector<index_t> mark, pos;
    List<index_t> list;
  };
  std::vector<Scratch> scratch(static_cast<std::size_t>(parts));
  const auto columns = [&](Scratch& sc, index_t I) {
    if (sc.mark.empty()) {
      sc.mark.assign(static_cast<std::size_t>(nb), -1);
      sc.pos.resize(static_cast<std::size_t>(nb));
      sc.list.reserve(nb);
    }
    sc.list.clear();
    for (index_t p = ptr[I * g]; p < ptr[I * g + g]; ++p) {
      const index_t J = idx[p] / g;
      if (sc.mark[J] != I) {
        sc.mark[J] = I;
        sc.list.push_back(J);
      }
    }
    std::sort(sc.list.begin(), sc.list.end());
  };
  std::vector<index_t> optr = detail::make_vector<index_t>(nb + 1, "amg: level 0 blocks");
  detail::UnitRanges ranges;
  detail::parallel_for(parts, chunks, ranges, [&](int t, index_t c) {
    for (index_t I = c * chunk; I < std::min(nb, (c + 1) * chunk); ++I) {
      columns(scratch[t], I);
      optr[I + 1] = static_cast<index_t>(scratch[t].list.size());
    }
  });
  for (index_t I = 0; I < nb; ++I) optr[I + 1] += optr[I];
  std::vector<index_t> oidx = detail::make_vector<index_t>(optr[nb], "amg: level 0 blocks");
  std::vector<T> ov = detail::make_vector<T>(optr[nb] * gg, "amg: level 0 blocks");
  for (auto& sc : scratch) std::fill(sc.mark.begin(), sc.mark.end(), -1);
  detail::parallel_for(parts, chunks, ranges, [&](int t, index_t c) {
    Scratch& sc = scratch[t];
    for (index_t I = c * chunk; I < std::min(nb, (c + 1) * chunk); ++I) {
      columns(sc, I);
      for (std::size_t q = 0; q < sc.list.size(); ++q) {
        oidx[optr[I] + static_cast<index_t>(q)] = sc.list[q];
        sc.pos[sc.list[q]] = optr[I] + static_cast<index_t>(q);
      }
      for (index_t r = 0; r < g; ++r)
        for (index_t p = ptr[I * g + r]; p < ptr[I * g + r + 1]; ++p) {
          const index_t col = idx[p], J = col / g;
          ov[(sc.pos[J] * g + r) * g + (col - J * g)] = vals[p];
        }
    }
  });
  return BsrMatrix<T>(BsrStructure::make(rows, rows, g, std::move(optr), std::move(oidx)), std::move(ov));
}

/// The diagonal a_ii of a level's operator (0 where no stored block covers it).
template <SolverValue T>
std::vector<T> diagonal(const Mat<T>& A) {
  const index_t g = A.g(), n = A.rows(), br = n / g;
  std::vector<T> d = detail::make_vector<T>(n, "amg: diagonal");
  const auto ptr = A.ptr();
  const auto idx = A.idx();
  const auto v = A.vals();
  for_chunks(br, kChunkRows, detail::work_ns(detail::Work::stream, static_cast<double>(A.nnz()) / static_cast<double>(g)),
             [&](index_t i0, index_t i1) {
               for (index_t I = i0; I < i1; ++I) {
                 const auto first = idx.begin() + ptr[I], last = idx.begin() + ptr[I + 1];
                 const auto it = std::lower_bound(first, last, I);
                 if (it == last || *it != I) continue;
                 const index_t p = it - idx.begin();
                 for (index_t r = 0; r < g; ++r) d[I * g + r] = v[(p * g + r) * g + r];
               }
             });
  return d;
}

/// a_ii of block row I's diagonal block (0 where no stored block covers it).
template <SolverValue T>
T diagonal_entry(const Mat<T>& A, index_t i) {
  const index_t g = A.g(), I = i / g, r = i % g;
  const auto ptr = A.ptr();
  const auto idx = A.idx();
  const auto first = idx.begin() + ptr[I], last = idx.begin() + ptr[I + 1];
  const auto it = std::lower_bound(first, last, I);
  if (it == last || *it != I) return T(0);
  return A.vals()[((it - idx.begin()) * g + r) * g + r];
}

/// Finite values and a positive diagonal, checked by chunks on the library's threads
/// without storing the diagonal; the error names the first offender (the first of the
/// chunks' first ones: the same for any thread count).
template <SolverValue T>
void check_fine(const Mat<T>& A, const char* who) {
  const auto v = A.vals();
  const auto nv = static_cast<index_t>(v.size());
  const index_t chunk = index_t{1} << 16;
  std::vector<index_t> bad(static_cast<std::size_t>(detail::ceil_div(nv, chunk)), nv);
  for_chunks(nv, chunk, detail::work_ns(detail::Work::stream, static_cast<double>(nv)), [&](index_t p0, index_t p1) {
    for (index_t p = p0; p < p1; ++p)
      if (!std::isfinite(v[p])) {
        bad[p0 / chunk] = p;
        return;
      }
  });
  const index_t p = bad.empty() ? nv : *std::min_element(bad.begin(), bad.end());
  if (p < nv)
    throw InvalidArgument(concat(who, ": A has a non-finite value ", v[p], " (stored value ", static_cast<std::size_t>(p), ")"));
  const index_t n = A.rows(), g = A.g(), br = n / g;
  std::vector<index_t> row(static_cast<std::size_t>(detail::ceil_div(br, kChunkRows)), n);
  for_chunks(br, kChunkRows, detail::work_ns(detail::Work::stream, static_cast<double>(A.nnz()) / static_cast<double>(g)),
             [&](index_t i0, index_t i1) {
               for (index_t i = i0 * g; i < i1 * g; ++i)
                 if (!(diagonal_entry(A, i) > T(0))) {
                   row[i0 / kChunkRows] = i;
                   return;
                 }
             });
  const index_t i = row.empty() ? n : *std::min_element(row.begin(), row.end());
  if (i < n)
    throw InvalidArgument(concat(who, ": A(", i, ", ", i, ") = ", diagonal_entry(A, i),
                                 ", expected a positive diagonal (A symmetric positive definite)"));
}

// ---- strength of connection and aggregation --------------------------------------------

/// The strong connections of each node (itself excluded), node I's at
/// s_idx[start[I] .. start[I] + count[I]): starts are those of the node's first block row
/// in A, which has room for every node it reaches.
struct Graph {
  std::vector<index_t> start;
  std::vector<std::int32_t> count, idx;

  [[nodiscard]] index_t nodes() const noexcept { return static_cast<index_t>(start.size()); }
  [[nodiscard]] index_t max_degree() const noexcept {
    std::int32_t m = 0;
    for (const auto c : count) m = std::max(m, c);
    return m;
  }
  [[nodiscard]] double edges() const noexcept {
    double e = 0.0;
    for (const auto c : count) e += c;
    return e;
  }
  /// f(j) for the strong neighbours j of i while f returns true; false if one returned false.
  template <class F>
  bool each(index_t i, F&& f) const {
    const std::int32_t* p = idx.data() + start[i];
    for (std::int32_t q = 0; q < count[i]; ++q)
      if (!f(static_cast<index_t>(p[q]))) return false;
    return true;
  }
};

/// The strong graph of θ = 0 with one block row a node, read in place from A's pattern:
/// every stored block but the diagonal one and all-zero ones (which θ = 0 drops).
template <SolverValue T>
struct PatternGraph {
  std::span<const index_t> ptr, idx;
  std::span<const T> v;
  index_t gg;

  [[nodiscard]] index_t nodes() const noexcept { return static_cast<index_t>(ptr.size()) - 1; }
  [[nodiscard]] double edges() const noexcept { return static_cast<double>(ptr.back() - nodes()); }
  /// At least the largest degree (the stored blocks of a row).
  [[nodiscard]] index_t max_degree() const noexcept {
    index_t m = 0;
    for (index_t i = 0; i < nodes(); ++i) m = std::max(m, ptr[i + 1] - ptr[i]);
    return m;
  }
  template <class F>
  bool each(index_t i, F&& f) const {
    for (index_t p = ptr[i]; p < ptr[i + 1]; ++p) {
      const index_t j = idx[p];
      if (j == i) continue;
      bool zero = true;
      for (index_t e = 0; e < gg && zero; ++e) zero = v[p * gg + e] == T(0);
      if (!zero && !f(j)) return false;
    }
    return true;
  }
};

template <SolverValue T>
Graph strength(const Mat<T>& A, index_t node, double theta) {
  const index_t g = A.g(), m = node / g, nodes = A.rows() / node, gg = g * g;
  const auto ptr = A.ptr();
  const auto idx = A.idx();
  const auto v = A.vals();
  const double ns = detail::work_ns(detail::Work::stream, static_cast<double>(A.nnz()));
  const auto block_norm2 = [&](index_t p) {
    double s = 0.0;
    for (index_t e = 0; e < gg; ++e) s += static_cast<double>(v[p * gg + e]) * static_cast<double>(v[p * gg + e]);
    return s;
  };
  // Node diagonals ||A_II||_F.
  std::vector<double> dn = detail::make_vector<double>(nodes, "amg: strength");
  for_chunks(nodes, kChunkRows, ns, [&](index_t i0, index_t i1) {
    for (index_t I = i0; I < i1; ++I) {
      double s = 0.0;
      for (index_t br = I * m; br < I * m + m; ++br)
        for (index_t p = ptr[br]; p < ptr[br + 1]; ++p)
          if ((m == 1 ? idx[p] : idx[p] / m) == I) s += block_norm2(p);
      dn[I] = std::sqrt(s);
    }
  });
  Graph G;
  G.start = detail::make_vector<index_t>(nodes, "amg: strength");
  G.count = detail::make_vector<std::int32_t>(nodes, "amg: strength");
  G.idx = detail::make_vector<std::int32_t>(ptr.back(), "amg: strength");
  for (index_t I = 0; I < nodes; ++I) G.start[I] = ptr[I * m];
  const double t2 = theta * theta;
  if (m == 1) {
    for_chunks(nodes, kChunkRows, ns, [&](index_t i0, index_t i1) {
      for (index_t I = i0; I < i1; ++I) {
        std::int32_t c = 0;
        for (index_t p = ptr[I]; p < ptr[I + 1]; ++p) {
          const index_t J = idx[p];
          if (J != I && block_norm2(p) > t2 * dn[I] * dn[J]) G.idx[G.start[I] + c++] = static_cast<std::int32_t>(J);
        }
        G.count[I] = c;
      }
    });
    return G;
  }
  // A node spans m block rows: its blocks with each other node are summed first, through
  // a thread's marker array over nodes (chunks of a few nodes each reuse it).
  const index_t chunk = 256;
  const index_t chunks = detail::ceil_div(nodes, chunk);
  const int parts = detail::parts_for(chunks, ns);
  std::vector<std::vector<index_t>> marks(static_cast<std::size_t>(parts));
  std::vector<std::vector<double>> acc(static_cast<std::size_t>(parts));
  detail::parallel_for(parts, chunks, [&](int slot, index_t c) {
    auto& mark = marks[slot];
    auto& sum = acc[slot];
    if (mark.empty()) {
      mark.assign(static_cast<std::size_t>(nodes), -1);
      sum.assign(static_cast<std::size_t>(nodes), 0.0);
    }
    for (index_t I = c * chunk; I < std::min(nodes, (c + 1) * chunk); ++I) {
      std::int32_t* out = G.idx.data() + G.start[I];
      std::int32_t n = 0;
      for (index_t br = I * m; br < I * m + m; ++br)
        for (index_t p = ptr[br]; p < ptr[br + 1]; ++p) {
          const index_t J = idx[p] / m;
          if (J == I) continue;
          if (mark[J] != I) {
            mark[J] = I;
            sum[J] = 0.0;
            out[n++] = static_cast<std::int32_t>(J);
          }
          sum[J] += block_norm2(p);
        }
      std::sort(out, out + n);
      std::int32_t kept = 0;
      for (std::int32_t q = 0; q < n; ++q)
        if (sum[out[q]] > t2 * dn[I] * dn[out[q]]) out[kept++] = out[q];
      G.count[I] = kept;
    }
  });
  return G;
}

/// Greedy aggregation (the "standard" aggregation of Vaněk et al., as in PyAMG), over
/// distance 1 of the strong graph S or, on sparse graphs, over distance 1 plus the nodes
/// at distance 2 that two paths reach (the aggressive coarsening of Stüben's "A2"
/// rule: on a 7-point stencil, the 12 edge diagonals but not the 6 straight steps of
/// two, so aggregates are compact 19-node balls instead of 7-node crosses, and the coarse
/// level has about 5 % of the rows instead of 14 %). Pass 1 makes a node whose
/// neighbourhood is free the root of an aggregate of itself and its neighbourhood; pass 2
/// joins each node left to the aggregate of pass 1 of a neighbour (at distance 1 first,
/// then 2); pass 3 groups what is still left with its free neighbours. Node order,
/// sequential, O(Σ degree²) for distance 2. Returns the aggregate count.
template <class Nbrs>
std::int32_t aggregate(const Nbrs& G, int distance, std::vector<std::int32_t>& agg) {
  const index_t nodes = G.nodes();
  constexpr std::int32_t kFree = -1;
  agg = detail::make_vector<std::int32_t>(nodes, "amg: aggregates");
  std::fill(agg.begin(), agg.end(), kFree);
  // Paths of length 2 from the current candidate (distance 2 only), reset after it.
  constexpr std::int32_t kMember = -(1 << 20);
  std::vector<std::int32_t> paths;
  List<index_t> reached;
  if (distance == 2) {
    paths = detail::make_vector<std::int32_t>(nodes, "amg: aggregates");
    // A candidate reaches at most (largest degree)² nodes over two steps.
    const index_t deg = G.max_degree();
    reached.reserve(deg > 0 && deg < nodes / deg ? deg * deg : nodes);
  }
  std::int32_t count = 0;
  for (index_t i = 0; i < nodes; ++i) {
    if (agg[i] != kFree) continue;
    if (!G.each(i, [&](index_t j) { return agg[j] == kFree; })) continue;
    if (distance == 2) {
      reached.clear();
      paths[i] = kMember;  // i and its neighbours are members already
      G.each(i, [&](index_t j) { return (paths[j] = kMember) != 0; });
      G.each(i, [&](index_t j) {
        return G.each(j, [&](index_t j2) {
          if (++paths[j2] == 1) reached.push_back(j2);
          return true;
        });
      });
      bool free = true;
      for (const index_t j2 : reached) free = free && (paths[j2] < 2 || agg[j2] == kFree);
      if (free)
        for (const index_t j2 : reached)
          if (paths[j2] >= 2) agg[j2] = count;
      for (const index_t j2 : reached) paths[j2] = 0;
      paths[i] = 0;
      G.each(i, [&](index_t j) { return (paths[j] = 0) == 0; });
      if (!free) continue;
    }
    agg[i] = count;
    G.each(i, [&](index_t j) { return (agg[j] = count) >= 0; });
    ++count;
  }
  // Pass 2 marks its joins as -2 - a, so that a node joins only aggregates of pass 1.
  for (index_t i = 0; i < nodes; ++i) {
    if (agg[i] != kFree) continue;
    const auto join = [&](index_t j) {
      if (agg[j] < 0) return true;
      agg[i] = -2 - agg[j];
      return false;
    };
    if (!G.each(i, join) || distance == 1) continue;
    G.each(i, [&](index_t j) { return G.each(j, join); });
  }
  for (index_t i = 0; i < nodes; ++i) {
    if (agg[i] != kFree) continue;
    agg[i] = count;
    G.each(i, [&](index_t j) {
      if (agg[j] == kFree) agg[j] = count;
      return true;
    });
    ++count;
  }
  for (auto& a : agg)
    if (a < 0) a = -2 - a;
  return count;
}

/// Strong neighbours per node below which a level aggregates over distance 2 (the
/// 7-point stencil's 6; not elasticity's 26, whose distance-1 aggregates already hold
/// 27 nodes).
constexpr double kSparseDegree = 10.0;

// ---- the tentative prolongator ---------------------------------------------------------

/// P_tent (rows x aggregates * k) with, per aggregate, Q of the thin QR of the
/// aggregate's rows of B (modified Gram–Schmidt, applied twice, in fp64); returns R of
/// every aggregate stacked as the coarse near-nullspace (aggregates * k x k). A column of
/// B that the aggregate cannot represent (fewer rows than k, or dependent) gets a zero
/// column of Q and R: its coarse unknown is then decoupled (zero row and column of the
/// coarse operator), which the smoother and the coarse solve treat as absent.
template <SolverValue T>
Mat<T> tentative(const std::vector<std::int32_t>& agg, std::int32_t n_agg, index_t node, index_t g,
                 const std::vector<double>& B, index_t k, std::vector<double>& Bc) {
  const auto nodes = static_cast<index_t>(agg.size());
  const index_t rows = nodes * node, kb = k / g;
  if (k == 1) {  // then g = 1: Q = B_a / ||B_a||, R = ||B_a|| (the QR below, without its lists)
    Bc.assign(static_cast<std::size_t>(n_agg), 0.0);
    const auto agg_of = [&](index_t i) { return agg[node == 1 ? i : i / node]; };
    for (index_t i = 0; i < rows; ++i) Bc[agg_of(i)] += B[i] * B[i];
    for (double& r : Bc) r = std::sqrt(r);
    std::vector<index_t> ptr = detail::make_vector<index_t>(rows + 1, "amg: tentative prolongator"),
                         idx = detail::make_vector<index_t>(rows, "amg: tentative prolongator");
    std::vector<T> vals = detail::make_vector<T>(rows, "amg: tentative prolongator");
    for_chunks(rows, kChunkRows, detail::work_ns(detail::Work::stream, 4.0 * static_cast<double>(rows)),
               [&](index_t i0, index_t i1) {
                 for (index_t i = i0; i < i1; ++i) {
                   const std::int32_t a = agg_of(i);
                   ptr[i + 1] = i + 1;
                   idx[i] = a;
                   vals[i] = Bc[a] > 0.0 ? static_cast<T>(B[i] / Bc[a]) : T(0);
                 }
               });
    return Mat<T>::own(CsrMatrix<T>(rows, n_agg, std::move(ptr), std::move(idx), std::move(vals)));
  }
  // Nodes of each aggregate in node order (a counting sort).
  std::vector<index_t> aptr = detail::make_vector<index_t>(n_agg + 1, "amg: aggregates"),
                       anodes = detail::make_vector<index_t>(nodes, "amg: aggregates");
  for (const auto a : agg) ++aptr[a + 1];
  std::partial_sum(aptr.begin(), aptr.end(), aptr.begin());
  {
    std::vector<index_t> fill = detail::huge_copy<index_t>(std::span<const index_t>(aptr).first(n_agg), "amg: aggregates");
    for (index_t i = 0; i < nodes; ++i) anodes[fill[agg[i]]++] = i;
  }
  index_t largest = 0;
  for (std::int32_t a = 0; a < n_agg; ++a) largest = std::max(largest, aptr[a + 1] - aptr[a]);
  std::vector<index_t> ptr = detail::make_vector<index_t>(rows / g + 1, "amg: tentative prolongator"),
                       idx = detail::make_vector<index_t>(rows / g * kb, "amg: tentative prolongator");
  for (index_t br = 0; br <= rows / g; ++br) ptr[br] = br * kb;
  std::vector<T> vals = detail::make_vector<T>(rows * k, "amg: tentative prolongator");
  Bc.assign(static_cast<std::size_t>(n_agg * k * k), 0.0);
  const double ns = detail::work_ns(detail::Work::stream, 4.0 * static_cast<double>(rows * k * k));
  const index_t chunk = 64;
  const index_t chunks = detail::ceil_div(n_agg, chunk);
  const int parts = detail::parts_for(chunks, ns);
  std::vector<std::vector<double>> scratch(static_cast<std::size_t>(parts));
  detail::parallel_for(parts, chunks, [&](int slot, index_t c) {
    auto& Q = scratch[slot];  // the aggregate's rows x k, column-major
    if (Q.empty()) Q.resize(static_cast<std::size_t>(largest * node * k));
    for (index_t a = c * chunk; a < std::min<index_t>(n_agg, (c + 1) * chunk); ++a) {
      const index_t na = aptr[a + 1] - aptr[a], m = na * node;
      for (index_t j = 0; j < k; ++j)
        for (index_t q = 0; q < na; ++q)
          for (index_t u = 0; u < node; ++u) Q[j * m + q * node + u] = B[(anodes[aptr[a] + q] * node + u) * k + j];
      double* R = Bc.data() + a * k * k;
      for (index_t j = 0; j < k; ++j) {
        double* qj = Q.data() + j * m;
        double n0 = 0.0;
        for (index_t e = 0; e < m; ++e) n0 += qj[e] * qj[e];
        for (int pass = 0; pass < 2; ++pass)
          for (index_t i = 0; i < j; ++i) {
            const double* qi = Q.data() + i * m;
            double dot = 0.0;
            for (index_t e = 0; e < m; ++e) dot += qi[e] * qj[e];
            for (index_t e = 0; e < m; ++e) qj[e] -= dot * qi[e];
            R[i * k + j] += dot;
          }
        double nj = 0.0;
        for (index_t e = 0; e < m; ++e) nj += qj[e] * qj[e];
        nj = std::sqrt(nj);
        if (!(nj > 1e-10 * std::sqrt(n0))) {
          std::fill(qj, qj + m, 0.0);
          continue;
        }
        R[j * k + j] = nj;
        for (index_t e = 0; e < m; ++e) qj[e] /= nj;
      }
      for (index_t q = 0; q < na; ++q)
        for (index_t u = 0; u < node; ++u) {
          const index_t row = anodes[aptr[a] + q] * node + u, br = row / g;
          for (index_t j = 0; j < k; ++j)
            vals[((br * kb + j / g) * g + row % g) * g + j % g] = static_cast<T>(Q[j * m + q * node + u]);
          if (row % g == 0)
            for (index_t q2 = 0; q2 < kb; ++q2) idx[br * kb + q2] = a * kb + q2;
        }
    }
  });
  if (g == 1) return Mat<T>::own(CsrMatrix<T>(rows, n_agg * k, std::move(ptr), std::move(idx), std::move(vals)));
  return Mat<T>::own(BsrMatrix<T>(BsrStructure::make(rows, n_agg * k, g, std::move(ptr), std::move(idx)), std::move(vals)));
}

// ---- values: λmax, prolongator smoothing, Galerkin -------------------------------------

/// The largest eigenvalue of the symmetric tridiagonal matrix (alpha, beta) by bisection
/// on Sturm counts.
double tridiagonal_max(const std::vector<double>& alpha, const std::vector<double>& beta) {
  const auto m = alpha.size();
  double lo = std::numeric_limits<double>::max(), hi = -lo;
  for (std::size_t i = 0; i < m; ++i) {
    const double r = (i > 0 ? std::fabs(beta[i - 1]) : 0.0) + (i + 1 < m ? std::fabs(beta[i]) : 0.0);
    lo = std::min(lo, alpha[i] - r);
    hi = std::max(hi, alpha[i] + r);
  }
  const auto below = [&](double x) {  // eigenvalues < x
    std::size_t c = 0;
    double q = 1.0;
    for (std::size_t i = 0; i < m; ++i) {
      q = alpha[i] - x - (i > 0 ? beta[i - 1] * beta[i - 1] / q : 0.0);
      if (q == 0.0) q = -1e-300;
      if (q < 0.0) ++c;
    }
    return c;
  };
  for (int it = 0; it < 200 && hi - lo > 1e-12 * std::max(1.0, std::fabs(hi)); ++it) {
    const double mid = 0.5 * (lo + hi);
    if (below(mid) == m) hi = mid;
    else lo = mid;
  }
  return hi;
}

/// Gershgorin's bound on λmax(D⁻¹A): max_i Σ_j |a_ij| / a_ii (a maximum: the same for
/// any order of the rows).
template <SolverValue T>
double gershgorin(const Mat<T>& A, const std::vector<T>& dinv) {
  const index_t g = A.g(), gg = g * g, brows = A.rows() / g;
  const auto ptr = A.ptr();
  const auto v = A.vals();
  const index_t chunk = std::max<index_t>(1, kChunkRows / g);
  std::vector<double> best(static_cast<std::size_t>(detail::ceil_div(brows, chunk)), 0.0);
  for_chunks(brows, chunk, detail::work_ns(detail::Work::stream, static_cast<double>(A.nnz())),
             [&](index_t i0, index_t i1) {
               double m = 0.0;
               for (index_t I = i0; I < i1; ++I)
                 for (index_t r = 0; r < g; ++r) {
                   double sum = 0.0;
                   for (index_t p = ptr[I]; p < ptr[I + 1]; ++p)
                     for (index_t c = 0; c < g; ++c) sum += std::fabs(static_cast<double>(v[p * gg + r * g + c]));
                   m = std::max(m, sum * static_cast<double>(dinv[I * g + r]));
                 }
               best[i0 / chunk] = m;
             });
  double m = 0.0;
  for (const double b : best) m = std::max(m, b);
  return m;
}

/// λmax(D⁻¹A) by Lanczos in the D inner product (in which D⁻¹A is self-adjoint): the
/// largest Ritz value λ_L of kLanczosSteps steps from a fixed pseudo-random start (a
/// lower bound). Lanczos stops early when 1.1 λ_L reaches Gershgorin's bound γ (an upper
/// bound), returning max(λ_L, γ / 1.1) so that the smoother's 1.1 λ is γ: on Poisson-like
/// M-matrices, where γ is tight, after 4 or 5 products instead of 10.
template <SolverValue T>
double lanczos_lmax(const Mat<T>& A, const std::vector<T>& d, const std::vector<T>& dinv) {
  const index_t n = A.rows();
  if (n == 0) return 1.0;
  const double gamma = gershgorin(A, dinv);
  std::vector<T> v = detail::make_vector<T>(n, "amg: Lanczos"), vprev = detail::make_vector<T>(n, "amg: Lanczos"),
                 y = detail::make_vector<T>(n, "amg: Lanczos");
  detail::SplitMix64 rng{0x5eed};
  double vv = 0.0;
  for (index_t i = 0; i < n; ++i) {
    const double x = rng.symmetric();
    v[i] = dinv[i] != T(0) ? static_cast<T>(x) : T(0);
    vv += static_cast<double>(d[i]) * static_cast<double>(v[i]) * static_cast<double>(v[i]);
  }
  if (!(vv > 0.0)) return 1.0;
  for (index_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<double>(v[i]) / std::sqrt(vv));
  std::vector<double> alpha, beta;
  ChunkedSums sums(n, 1);
  const double ns = detail::work_ns(detail::Work::stream, 4.0 * static_cast<double>(n));
  // vprev holds w = β_{j-1} v_j after step j - 1: the product reads it unscaled, and the
  // first pass of step j scales y and w by 1/β_{j-1} and shifts v into vprev (two passes
  // a step besides the product).
  double b_prev = 0.0;
  const index_t steps = std::min(kLanczosSteps, n);
  for (index_t j = 0; j < steps; ++j) {
    A.spmv(T(1), j == 0 ? v : vprev, T(0), y);
    const double inv = j == 0 ? 1.0 : 1.0 / b_prev;
    sums.run(ns, [&](index_t r0, index_t r1, double* lanes) {
      for_rows(r0, r1, [&](index_t i, index_t l) {
        if (j > 0) {
          const T t = static_cast<T>(static_cast<double>(vprev[i]) * inv);
          vprev[i] = v[i];
          v[i] = t;
          y[i] = static_cast<T>(static_cast<double>(y[i]) * inv);
        }
        lanes[l] += static_cast<double>(y[i]) * static_cast<double>(v[i]);
      });
    });
    sums.reduce(Local{});
    const double a = sums.sum(0);
    alpha.push_back(a);
    // w = D⁻¹ y - a v - b_prev vprev, stored in vprev; ||w||_D².
    sums.run(ns, [&](index_t r0, index_t r1, double* lanes) {
      for_rows(r0, r1, [&](index_t i, index_t l) {
        const double w = static_cast<double>(dinv[i]) * static_cast<double>(y[i]) - a * static_cast<double>(v[i]) -
                         b_prev * static_cast<double>(vprev[i]);
        vprev[i] = static_cast<T>(w);
        lanes[l] += static_cast<double>(d[i]) * w * w;
      });
    });
    sums.reduce(Local{});
    const double b = std::sqrt(sums.sum(0));
    if (!std::isfinite(a) || !std::isfinite(b) || !(b > 1e-10 * std::fabs(a)) || j + 1 == steps) break;
    if (j >= 2) {
      std::vector<double> off(beta);
      off.push_back(0.0);
      const double l = tridiagonal_max(alpha, off);
      if (std::isfinite(l) && 1.1 * l >= gamma) return std::max(l, gamma / 1.1);
    }
    beta.push_back(b);
    b_prev = b;
  }
  beta.resize(alpha.size());
  const double l = tridiagonal_max(alpha, beta);
  return std::isfinite(l) && l > 0.0 ? l : 1.0;
}

/// A block-row matrix as plain arrays: `rows` x `cols` blocks of g x g (row-major each),
/// columns in any order within a row (an intermediate product, never a CsrMatrix).
template <SolverValue T, class I = index_t>
struct Blocks {
  index_t rows = 0, cols = 0, g = 1;
  std::vector<index_t> ptr;
  std::vector<I> idx;
  std::vector<T> vals;
};

/// C += A B for g x g blocks (G: g at compile time for the common sizes, 0: run time).
template <int G, class T>
inline void block_madd(index_t g_rt, const T* a, const T* b, T* c) {
  const index_t g = G > 0 ? G : g_rt;
  if constexpr (G == 1) {
    c[0] += a[0] * b[0];
  } else {
    for (index_t r = 0; r < g; ++r)
      for (index_t e = 0; e < g; ++e) {
        const T are = a[r * g + e];
        for (index_t c2 = 0; c2 < g; ++c2) c[r * g + c2] += are * b[e * g + c2];
      }
  }
}

/// P = (I - s D⁻¹A) P_tent, s = ω / λmax, computed directly from the aggregates rather
/// than by a general SpGEMM (no symbolic phase, no plan): block row I of A·P_tent has,
/// for each distinct aggregate a among the nodes of its blocks' columns, the k / g
/// blocks a·kb .. a·kb + kb - 1, the sum over A's blocks (I, J) with J in a of
/// A_IJ · P_tent[J, q]. Two passes over A (count, then fill), one writer per block row,
/// sums in A's storage order: the same bits for any thread count. A thread finds a
/// row's aggregates through a marker array over aggregates (a row of any length is
/// O(its blocks)).
template <int G, SolverValue T>
Mat<T> smooth_g(const Mat<T>& A, const std::vector<T>& dinv, const Mat<T>& Pt, const std::vector<std::int32_t>& agg,
                index_t node, double s) {
  const index_t g = G > 0 ? G : A.g(), gg = g * g, brows = A.rows() / g, m = node / g;
  const auto node_of = [m](index_t J) { return m == 1 ? J : J / m; };
  const index_t kb = Pt.rows() > 0 ? (Pt.ptr()[1] - Pt.ptr()[0]) : 1;
  const index_t n_agg = Pt.cols() / (kb * g);
  const auto ptr = A.ptr();
  const auto idx = A.idx();
  const auto av = A.vals();
  const auto tv = Pt.vals();
  const double ns = detail::work_ns(detail::Work::stream, 3.0 * static_cast<double>(A.nnz() * kb));
  const index_t chunk = std::max<index_t>(1, kChunkRows / g);
  const index_t chunks = detail::ceil_div(brows, chunk);
  const int parts = detail::parts_for(chunks, ns);
  struct Scratch {
    std::vector<index_t> mark;
    std::vector<std::int32_t> slot;
    List<std::int32_t> list;
  };
  std::vector<Scratch> scratch(static_cast<std::size_t>(parts));
  const auto prepare = [&](Scratch& sc) {
    if (sc.mark.empty()) {
      sc.mark.assign(static_cast<std::size_t>(n_agg), -1);
      sc.slot.resize(static_cast<std::size_t>(n_agg));
      sc.list.reserve(n_agg);
    }
  };
  // The sorted distinct aggregates of block row I's columns, in sc.list.
  const auto row_aggregates = [&](Scratch& sc, index_t I) {
    sc.list.clear();
    for (index_t p = ptr[I]; p < ptr[I + 1]; ++p) {
      const std::int32_t a = agg[node_of(idx[p])];
      if (sc.mark[a] != I) {
        sc.mark[a] = I;
        sc.list.push_back(a);
      }
    }
    std::sort(sc.list.begin(), sc.list.end());
  };
  std::vector<index_t> pptr = detail::make_vector<index_t>(brows + 1, "amg: prolongator");
  detail::parallel_for(parts, chunks, [&](int t, index_t c) {
    Scratch& sc = scratch[t];
    prepare(sc);
    for (index_t I = c * chunk; I < std::min(brows, (c + 1) * chunk); ++I) {
      row_aggregates(sc, I);
      pptr[I + 1] = static_cast<index_t>(sc.list.size()) * kb;
    }
  });
  for (index_t I = 0; I < brows; ++I) pptr[I + 1] += pptr[I];
  std::vector<index_t> pidx = detail::make_vector<index_t>(pptr[brows], "amg: prolongator");
  std::vector<T> pv = detail::make_vector<T>(pptr[brows] * gg, "amg: prolongator");
  for (auto& sc : scratch) std::fill(sc.mark.begin(), sc.mark.end(), -1);
  detail::parallel_for(parts, chunks, [&](int t, index_t c) {
    Scratch& sc = scratch[t];
    prepare(sc);
    for (index_t I = c * chunk; I < std::min(brows, (c + 1) * chunk); ++I) {
      row_aggregates(sc, I);
      const index_t base = pptr[I];
      for (std::size_t q = 0; q < sc.list.size(); ++q) {
        sc.slot[sc.list[q]] = static_cast<std::int32_t>(q);
        for (index_t b = 0; b < kb; ++b) pidx[base + static_cast<index_t>(q) * kb + b] = sc.list[q] * kb + b;
      }
      T* out = pv.data() + base * gg;  // A·P_tent, then P
      for (index_t p = ptr[I]; p < ptr[I + 1]; ++p) {
        const index_t J = idx[p];
        T al[G > 0 ? G * G : 1];
        const T* a = av.data() + p * gg;
        if constexpr (G > 0) {
          std::copy(a, a + G * G, al);
          a = al;
        }
        T* o = out + static_cast<index_t>(sc.slot[agg[node_of(J)]]) * kb * gg;
        const T* t0 = tv.data() + J * kb * gg;  // P_tent's block row J: kb blocks
        for (index_t b = 0; b < kb; ++b) block_madd<G>(g, a, t0 + b * gg, o + b * gg);
      }
      const index_t own = sc.slot[agg[node_of(I)]];
      const T* ti = tv.data() + I * kb * gg;
      for (index_t q = 0; q < static_cast<index_t>(sc.list.size()) * kb; ++q)
        for (index_t r = 0; r < g; ++r) {
          const T f = static_cast<T>(s) * dinv[I * g + r];
          for (index_t c2 = 0; c2 < g; ++c2) {
            T& e = out[q * gg + r * g + c2];
            e = (q / kb == own ? ti[(q % kb) * gg + r * g + c2] : T(0)) - f * e;
          }
        }
    }
  });
  if (g == 1) return Mat<T>::own(CsrMatrix<T>(A.rows(), Pt.cols(), std::move(pptr), std::move(pidx), std::move(pv)));
  return Mat<T>::own(
      BsrMatrix<T>(BsrStructure::make(A.rows(), Pt.cols(), g, std::move(pptr), std::move(pidx)), std::move(pv)));
}

template <SolverValue T>
Mat<T> smooth(const Mat<T>& A, const std::vector<T>& dinv, const Mat<T>& Pt, const std::vector<std::int32_t>& agg,
              index_t node, double s) {
  if (A.g() == 1) return smooth_g<1>(A, dinv, Pt, agg, node, s);
  if (A.g() == 3) return smooth_g<3>(A, dinv, Pt, agg, node, s);
  return smooth_g<0>(A, dinv, Pt, agg, node, s);
}

/// A thread's scratch of the Galerkin products, over C's block columns: the stamp of the
/// row that last listed each column, the row's column list and the dense accumulator.
/// Sized once per level and shared by every band and both products (their C has the
/// coarse block columns); stamps only grow, so no pass resets the marks.
template <class T, class I>
struct ProductScratch {
  std::vector<index_t> mark;
  List<I> list;
  std::vector<T> acc;
};

/// Row-wise C = A B (Gustavson) over C's rows i = 0 .. rows - 1: A's row of C's row i is
/// a_row(i), its blocks p in aptr[a_row(i)] .. aptr[a_row(i) + 1] (block column a_col(p),
/// values av + p g²); B's row j is bptr[j] .. bptr[j + 1] (columns bidx, values bv).
/// Columns below skip_below(i) are left out (the upper triangle of a symmetric C). A
/// counting pass (`values` false: C's row lengths into cptr[i + 1]) and a value pass
/// (columns and blocks at cptr[i]: each row summed in A's storage order, then B's,
/// listed in order of first appearance or, `sorted`, in column order): the same bits
/// for any thread count.
template <int G, class T, class I, class ARow, class ACol, class Skip, class BI>
void product_pass(bool values, index_t rows, index_t g_rt, ARow a_row, const index_t* aptr, ACol a_col, const T* av,
                  const index_t* bptr, const BI* bidx, const T* bv, Skip skip_below, bool sorted, index_t* cptr,
                  I* cidx, T* cv, index_t b_cols, std::vector<ProductScratch<T, I>>& scratch, index_t& stamp,
                  double ns) {
  const index_t g = G > 0 ? G : g_rt, gg = g * g;
  const index_t chunk = 512;
  const index_t chunks = detail::ceil_div(rows, chunk);
  const int parts = detail::parts_for(chunks, ns);
  if (scratch.size() < static_cast<std::size_t>(parts)) scratch.resize(static_cast<std::size_t>(parts));
  const index_t base = stamp;
  stamp += rows;
  detail::parallel_for(parts, chunks, [&](int t, index_t c) {
    ProductScratch<T, I>& sc = scratch[t];
    if (sc.mark.empty()) sc.mark.assign(static_cast<std::size_t>(b_cols), -1);
    if (values && sc.acc.empty()) {
      sc.acc.assign(static_cast<std::size_t>(b_cols * gg), T(0));
      sc.list.reserve(b_cols);
    }
    for (index_t i = c * chunk; i < std::min(rows, (c + 1) * chunk); ++i) {
      const index_t ar = a_row(i), s = base + i, lo = skip_below(i);
      if (!values) {
        index_t n = 0;
        for (index_t p = aptr[ar]; p < aptr[ar + 1]; ++p) {
          const index_t b = a_col(p);
          for (index_t q = bptr[b]; q < bptr[b + 1]; ++q) {
            const index_t j = bidx[q];
            if (j >= lo && sc.mark[j] != s) {
              sc.mark[j] = s;
              ++n;
            }
          }
        }
        cptr[i + 1] = n;
        continue;
      }
      sc.list.clear();
      for (index_t p = aptr[ar]; p < aptr[ar + 1]; ++p) {
        // A's block in locals: the stores into acc could alias it for the compiler.
        T al[G > 0 ? G * G : 1];
        const T* a = av + p * gg;
        if constexpr (G > 0) {
          std::copy(a, a + G * G, al);
          a = al;
        }
        const index_t b = a_col(p);
        for (index_t q = bptr[b]; q < bptr[b + 1]; ++q) {
          const index_t j = bidx[q];
          if (j < lo) continue;
          if (sc.mark[j] != s) {
            sc.mark[j] = s;
            sc.list.push_back(static_cast<I>(j));
          }
          block_madd<G>(g, a, bv + q * gg, sc.acc.data() + j * gg);
        }
      }
      if (sorted) std::sort(sc.list.begin(), sc.list.end());
      index_t o = cptr[i];
      for (const I j : sc.list) {
        cidx[o] = j;
        T* acc = sc.acc.data() + static_cast<index_t>(j) * gg;
        std::copy(acc, acc + gg, cv + o * gg);
        std::fill(acc, acc + gg, T(0));
        ++o;
      }
    }
  });
}

/// v with at least n elements (contents unspecified): a buffer reused across bands, so
/// it grows (with a margin) rather than being reallocated per band.
template <class V>
void ensure(V& v, index_t n, const char* what) {
  if (static_cast<index_t>(v.size()) >= n) return;
  if (static_cast<index_t>(v.capacity()) < n) v = detail::make_vector<typename V::value_type>(n + n / 4, what);
  else v.resize(static_cast<std::size_t>(n));
}

/// U = the upper block triangle of R (A P) (diagonal blocks whole), R = Pᵀ stored, rows
/// sorted, with block column indices of type I (C's block columns and A's block rows
/// fit in I). A·P is never stored whole: R's rows are cut into bands (by A·P's estimated
/// size, a fixed cut of the data), and each band computes the rows of A·P its R rows
/// read, into buffers every band reuses, then its rows of U. A row of A·P is the same
/// bits in any band (the same row-wise product), and U's rows are what one product over
/// a stored A·P gives.
template <int G, SolverValue T, class I>
Blocks<T, I> galerkin_upper(const Mat<T>& P, const Mat<T>& R, const Mat<T>& A) {
  const index_t g = G > 0 ? G : A.g(), gg = g * g, nf = A.rows() / g, nc = R.rows() / g, cols = P.cols() / g;
  const auto aptr = A.ptr();
  const auto aidx = A.idx();
  const auto av = A.vals();
  const auto pptr = P.ptr();
  const auto pidx = P.idx();
  const auto pv = P.vals();
  const auto rptr = R.ptr();
  const auto ridx = R.idx();
  const auto rv = R.vals();
  // The block products of A·P, counted by chunks of rows (an exact integer sum).
  std::vector<index_t> counts(static_cast<std::size_t>(detail::ceil_div(nf, kChunkRows)), 0);
  for_chunks(nf, kChunkRows, detail::work_ns(detail::Work::stream, 2.0 * static_cast<double>(aptr[nf])),
             [&](index_t i0, index_t i1) {
               index_t c = 0;
               for (index_t p = aptr[i0]; p < aptr[i1]; ++p) c += pptr[aidx[p] + 1] - pptr[aidx[p]];
               counts[i0 / kChunkRows] = c;
             });
  const auto madds = static_cast<double>(std::accumulate(counts.begin(), counts.end(), index_t{0}));
  // A·P has about a third of the block products as blocks (rows of P overlap); a band's
  // buffers hold about 32 MiB of it.
  constexpr double kBandBytes = 32.0 * (1 << 20);
  const double ap_bytes = madds / 3.0 * static_cast<double>(gg * sizeof(T) + sizeof(I));
  const index_t bands = std::clamp<index_t>(static_cast<index_t>(std::ceil(ap_bytes / kBandBytes)), 1, std::max<index_t>(nc, 1));
  const double ap_ns = detail::work_ns(detail::Work::stream, 2.0 * madds * static_cast<double>(gg * g)) /
                       static_cast<double>(bands);

  std::vector<ProductScratch<T, I>> scratch;
  index_t stamp = 0;
  std::vector<I> loc = detail::make_vector<I>(nf, "amg: Galerkin product");  // fine row -> band row of A·P
  std::fill(loc.begin(), loc.end(), I(-1));
  std::vector<I> rows, rcol;      // the band's rows of A·P (fine rows); R's columns as band rows
  std::vector<index_t> ap_ptr;    // the band's A·P
  std::vector<I> ap_idx;
  std::vector<T> ap_v;
  Blocks<T, I> U;
  U.rows = U.cols = nc;
  U.g = g;
  U.ptr = detail::make_vector<index_t>(nc + 1, "amg: coarse operator");
  for (index_t band = 0; band < bands; ++band) {
    const index_t c0 = nc * band / bands, c1 = nc * (band + 1) / bands;
    const index_t r0 = rptr[c0], r1 = rptr[c1];
    // The fine rows the band's R rows read, in row order (A and P are then read in
    // order, as by a product over all rows): marked, then numbered by a scan.
    index_t lo = nf, hi = -1;
    for (index_t p = r0; p < r1; ++p) {
      const index_t f = ridx[p];
      loc[f] = I(-2);
      lo = std::min(lo, f);
      hi = std::max(hi, f);
    }
    ensure(rows, std::min(nf, r1 - r0), "amg: Galerkin product");
    index_t nr = 0;
    for (index_t f = lo; f <= hi; ++f)
      if (loc[f] == I(-2)) {
        rows[nr] = static_cast<I>(f);
        loc[f] = static_cast<I>(nr++);
      }
    ensure(rcol, r1 - r0, "amg: Galerkin product");
    for (index_t p = r0; p < r1; ++p) rcol[p - r0] = loc[ridx[p]];
    // A·P's rows for them.
    ensure(ap_ptr, nr + 1, "amg: Galerkin product");
    ap_ptr[0] = 0;
    const auto fine_row = [&](index_t i) { return static_cast<index_t>(rows[i]); };
    const auto a_col = [&](index_t p) { return aidx[p]; };
    const auto all = [](index_t) { return index_t{0}; };
    product_pass<G, T, I>(false, nr, g, fine_row, aptr.data(), a_col, av.data(), pptr.data(), pidx.data(), pv.data(),
                          all, false, ap_ptr.data(), static_cast<I*>(nullptr), static_cast<T*>(nullptr), cols, scratch,
                          stamp, ap_ns);
    for (index_t i = 0; i < nr; ++i) ap_ptr[i + 1] += ap_ptr[i];
    ensure(ap_idx, ap_ptr[nr], "amg: Galerkin product");
    ensure(ap_v, ap_ptr[nr] * gg, "amg: Galerkin product");
    product_pass<G, T, I>(true, nr, g, fine_row, aptr.data(), a_col, av.data(), pptr.data(), pidx.data(), pv.data(),
                          all, false, ap_ptr.data(), ap_idx.data(), ap_v.data(), cols, scratch, stamp, ap_ns);
    // The band's rows of U = R (A·P), upper triangle, rows sorted.
    // R's blocks times A·P's mean row length: the pass's work, for its thread count only.
    const double u_madds = nr > 0 ? static_cast<double>(r1 - r0) * static_cast<double>(ap_ptr[nr]) / static_cast<double>(nr) : 0.0;
    const double u_ns = detail::work_ns(detail::Work::stream, 2.0 * u_madds * static_cast<double>(gg * g));
    const auto coarse_row = [&](index_t i) { return c0 + i; };
    const auto r_col = [&](index_t p) { return static_cast<index_t>(rcol[p - r0]); };
    const auto upper = [&](index_t i) { return c0 + i; };
    index_t* uptr = U.ptr.data() + c0;
    const index_t u0 = uptr[0];
    product_pass<G, T, I>(false, c1 - c0, g, coarse_row, rptr.data(), r_col, rv.data(), ap_ptr.data(), ap_idx.data(),
                          ap_v.data(), upper, true, uptr, static_cast<I*>(nullptr), static_cast<T*>(nullptr), cols,
                          scratch, stamp, u_ns);
    uptr[0] = 0;  // band-relative offsets while the band's rows are filled
    for (index_t i = c0; i < c1; ++i) uptr[i - c0 + 1] += uptr[i - c0];
    if (static_cast<index_t>(U.idx.capacity()) < u0 + uptr[c1 - c0]) {  // grown on huge pages
      // Room for all bands at the blocks per band so far, with a margin.
      const index_t need = u0 + uptr[c1 - c0], cap = std::max(need, need / (band + 1) * bands * 9 / 8);
      std::vector<I> idx = detail::huge_reserved<I>(cap, "amg: coarse operator");
      std::vector<T> vals = detail::huge_reserved<T>(cap * gg, "amg: coarse operator");
      idx.assign(U.idx.begin(), U.idx.end());
      vals.assign(U.vals.begin(), U.vals.end());
      U.idx = std::move(idx);
      U.vals = std::move(vals);
    }
    U.idx.resize(static_cast<std::size_t>(u0 + uptr[c1 - c0]));
    U.vals.resize(static_cast<std::size_t>((u0 + uptr[c1 - c0]) * gg));
    product_pass<G, T, I>(true, c1 - c0, g, coarse_row, rptr.data(), r_col, rv.data(), ap_ptr.data(), ap_idx.data(),
                          ap_v.data(), upper, true, uptr, U.idx.data() + u0, U.vals.data() + u0 * gg, cols, scratch,
                          stamp, u_ns);
    for (index_t i = c0; i <= c1; ++i) uptr[i - c0] += u0;
    for (index_t i = 0; i < nr; ++i) loc[rows[i]] = I(-1);
  }
  return U;
}

/// The symmetric matrix whose upper block triangle (diagonal blocks whole) U holds, rows
/// sorted: row I is the transposed blocks U(r, I), r < I, in row order, then U's row I.
/// Ranges of U's rows scatter their lower blocks as transpose_of does (every row's
/// lower part in row order whatever the cut).
template <SolverValue T, class I>
Blocks<T> symmetric_from_upper(const Blocks<T, I>& U) {
  const index_t n = U.rows, g = U.g, gg = g * g;
  const int parts = detail::parts_for(n, detail::work_ns(detail::Work::stream, 4.0 * static_cast<double>(U.vals.size())));
  const auto first = [&](int t) { return n * t / parts; };
  std::vector<std::vector<index_t>> at(static_cast<std::size_t>(parts));
  detail::parallel_parts(parts, [&](int t) {
    at[t] = detail::make_vector<index_t>(n, "amg: coarse operator");
    for (index_t p = U.ptr[first(t)]; p < U.ptr[first(t + 1)]; ++p) ++at[t][U.idx[p]];
  });
  // at[t][c] counts U's blocks (r, c) of range t, the diagonal ones too: those are not
  // mirrored, so each row's count loses its one diagonal block (U holds every diagonal
  // block, A_c having A's diagonal) below.
  Blocks<T> C;
  C.rows = C.cols = n;
  C.g = g;
  C.ptr = detail::make_vector<index_t>(n + 1, "amg: coarse operator");
  std::vector<index_t> lower_start(static_cast<std::size_t>(n));
  index_t o = 0;
  for (index_t c = 0; c < n; ++c) {
    C.ptr[c] = o;
    const bool diag = U.ptr[c + 1] > U.ptr[c] && U.idx[U.ptr[c]] == c;
    for (int t = 0; t < parts; ++t) {
      index_t cnt = at[t][c];
      if (diag && c >= first(t) && c < first(t + 1)) --cnt;  // row c's own diagonal block
      at[t][c] = o;
      o += cnt;
    }
    lower_start[c] = o;  // U's row c follows its lower part
    o += U.ptr[c + 1] - U.ptr[c];
  }
  C.ptr[n] = o;
  C.idx = detail::make_vector<index_t>(o, "amg: coarse operator");
  C.vals = detail::make_vector<T>(o * gg, "amg: coarse operator");
  detail::parallel_parts(parts, [&](int t) {
    std::vector<index_t>& fill = at[t];
    for (index_t r = first(t); r < first(t + 1); ++r) {
      index_t u = lower_start[r];
      for (index_t p = U.ptr[r]; p < U.ptr[r + 1]; ++p, ++u) {
        const index_t c = U.idx[p];
        C.idx[u] = c;
        std::copy(U.vals.data() + p * gg, U.vals.data() + (p + 1) * gg, C.vals.data() + u * gg);
        if (c == r) continue;
        const index_t q = fill[c]++;
        C.idx[q] = r;
        for (index_t a = 0; a < g; ++a)
          for (index_t b = 0; b < g; ++b) C.vals[q * gg + b * g + a] = U.vals[p * gg + a * g + b];
      }
    }
  });
  return C;
}

template <SolverValue T>
Mat<T> to_mat(Blocks<T>&& C) {
  if (C.g == 1) return Mat<T>::own(CsrMatrix<T>(C.rows, C.cols, std::move(C.ptr), std::move(C.idx), std::move(C.vals)));
  return Mat<T>::own(BsrMatrix<T>(BsrStructure::make(C.rows * C.g, C.cols * C.g, C.g, std::move(C.ptr), std::move(C.idx)),
                                  std::move(C.vals)));
}

/// A_c = R (A P) with R = Pᵀ stored (see `galerkin_upper`), A symmetric: only its upper
/// block triangle is summed (half the block products), then mirrored, which also makes
/// A_c exactly symmetric. Intermediate column indices are 32-bit where the block counts
/// allow.
template <SolverValue T>
Mat<T> galerkin_of(const Mat<T>& P, const Mat<T>& R, const Mat<T>& A) {
  const index_t g = A.g();
  const auto run = [&]<class I>(I) {
    if (g == 1) return to_mat(symmetric_from_upper(galerkin_upper<1, T, I>(P, R, A)));
    if (g == 3) return to_mat(symmetric_from_upper(galerkin_upper<3, T, I>(P, R, A)));
    return to_mat(symmetric_from_upper(galerkin_upper<0, T, I>(P, R, A)));
  };
  if (std::max(A.rows() / g, P.cols() / g) < (index_t{1} << 31)) return run(std::int32_t{});
  return run(index_t{});
}

/// Pᵀ by a counting sort of P's blocks by column (each block transposed): P's rows are
/// cut into `parts` ranges, each range counts its columns, and the offsets put range t's
/// blocks of a column after those of ranges before it, so every column lists its rows in
/// order whatever the cut (the same bits for any thread count).
template <SolverValue T>
Mat<T> transpose_of(const Mat<T>& P) {
  const index_t g = P.g(), gg = g * g, rows = P.rows() / g, cols = P.cols() / g;
  const auto ptr = P.ptr();
  const auto idx = P.idx();
  const auto v = P.vals();
  const int parts = detail::parts_for(rows, detail::work_ns(detail::Work::stream, 3.0 * static_cast<double>(P.nnz())));
  const auto first = [&](int t) { return rows * t / parts; };
  std::vector<std::vector<index_t>> at(static_cast<std::size_t>(parts));
  detail::parallel_parts(parts, [&](int t) {
    at[t] = detail::make_vector<index_t>(cols, "amg: restriction");
    for (index_t p = ptr[first(t)]; p < ptr[first(t + 1)]; ++p) ++at[t][idx[p]];
  });
  Blocks<T> R;
  R.rows = cols;
  R.cols = rows;
  R.g = g;
  R.ptr = detail::make_vector<index_t>(cols + 1, "amg: restriction");
  index_t o = 0;
  for (index_t c = 0; c < cols; ++c) {
    R.ptr[c] = o;
    for (int t = 0; t < parts; ++t) {
      const index_t n = at[t][c];
      at[t][c] = o;
      o += n;
    }
  }
  R.ptr[cols] = o;
  R.idx = detail::make_vector<index_t>(o, "amg: restriction");
  R.vals = detail::make_vector<T>(o * gg, "amg: restriction");
  detail::parallel_parts(parts, [&](int t) {
    std::vector<index_t>& fill = at[t];
    for (index_t i = first(t); i < first(t + 1); ++i)
      for (index_t p = ptr[i]; p < ptr[i + 1]; ++p) {
        const index_t q = fill[idx[p]]++;
        R.idx[q] = i;
        for (index_t r = 0; r < g; ++r)
          for (index_t c = 0; c < g; ++c) R.vals[q * gg + c * g + r] = v[p * gg + r * g + c];
      }
  });
  return to_mat(std::move(R));
}

/// The last level's dense Cholesky factor in fp64, row by row (L[i][j] from the dot
/// product of rows i and j: contiguous, vectorised). A pivot at or below 1e-12 of its
/// diagonal entry is a decoupled unknown (a zero row of a degenerate aggregate, or
/// rounding on a singular direction): its column is left zero and it is solved as 0.
template <SolverValue T>
void factor(const Mat<T>& A, Coarse& co, index_t level) {
  const index_t n = A.rows(), g = A.g(), gg = g * g;
  co.n = n;
  co.L.assign(static_cast<std::size_t>(n * n), 0.0);
  co.skip.assign(static_cast<std::size_t>(n), 0);
  const auto ptr = A.ptr();
  const auto idx = A.idx();
  const auto v = A.vals();
  for (index_t I = 0; I < n / g; ++I)
    for (index_t p = ptr[I]; p < ptr[I + 1]; ++p)
      for (index_t r = 0; r < g; ++r)
        for (index_t c = 0; c < g; ++c) co.L[(I * g + r) * n + idx[p] * g + c] = static_cast<double>(v[p * gg + r * g + c]);
  std::vector<double> diag(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) diag[i] = co.L[i * n + i];
  for (index_t i = 0; i < n; ++i) {
    double* Li = co.L.data() + i * n;
    for (index_t j = 0; j < i; ++j) {
      if (co.skip[j]) {
        Li[j] = 0.0;
        continue;
      }
      const double* Lj = co.L.data() + j * n;
      double s = Li[j];
      for (index_t e = 0; e < j; ++e) s -= Li[e] * Lj[e];
      Li[j] = s / Lj[j];
    }
    double s = Li[i];
    for (index_t e = 0; e < i; ++e) s -= Li[e] * Li[e];
    if (!std::isfinite(s) || s < -1e-8 * std::fabs(diag[i]))
      throw InvalidArgument(concat("amg: the coarse operator of level ", level, " is not positive definite (pivot ", i,
                                   " = ", s, "): A is not symmetric positive definite"));
    if (!(s > 1e-12 * diag[i])) {
      co.skip[i] = 1;
      std::fill(Li, Li + i + 1, 0.0);
      continue;
    }
    Li[i] = std::sqrt(s);
    std::fill(Li + i + 1, Li + n, 0.0);
  }
  co.factored = true;
}

}  // namespace

/// A's values rounded to fp32 for the cycle (AmgOptions::mixed_precision) on a CSR level
/// of a double hierarchy, or null: for float, BSR levels, without the option, and when a
/// non-zero value leaves fp32's normal range (it would round to infinity or lose bits).
template <SolverValue T>
detail::Block<float> values32(const Mat<T>& A, const AmgOptions<T>& options) {
  if constexpr (std::is_same_v<T, double>) {
    if (!options.mixed_precision || A.g() != 1) return nullptr;
    const index_t nnz = A.nnz();
    detail::Block<float> v = detail::huge_untouched<float>(nnz, "amg: fp32 values");
    const double* a = A.vals().data();
    std::atomic<bool> in_range = true;
    for_chunks(nnz, 16 * kChunkRows, detail::work_ns(detail::Work::stream, 1.5 * static_cast<double>(nnz)),
               [&](index_t p0, index_t p1) {
                 bool ok = true;
                 for (index_t p = p0; p < p1; ++p) {
                   const double m = std::abs(a[p]);
                   ok &= m == 0.0 || (m >= std::numeric_limits<float>::min() && m <= std::numeric_limits<float>::max());
                   v[p] = static_cast<float>(a[p]);
                 }
                 if (!ok) in_range = false;
               });
    if (in_range) return v;
  }
  return nullptr;
}

template <SolverValue T>
void Mat<T>::spmv(T alpha, std::span<const T> x, T beta, std::span<T> y) const {
  if (bsr) trnsparse::spmv(alpha, *bsr, x, beta, y);
  else trnsparse::spmv(alpha, *csr, x, beta, y);
}

template <SolverValue T>
void Level<T>::cycle_spmv(T alpha, std::span<const T> x, T beta, std::span<T> y) const {
  if constexpr (std::is_same_v<T, double>)
    if (values32)
      return detail::spmv_fp32_values(alpha, *A.csr, {values32.get(), static_cast<std::size_t>(A.nnz())}, x, beta, y);
  A.spmv(alpha, x, beta, y);
}

template <SolverValue T>
Mat<T> fine_operator(const CsrMatrix<T>& A, index_t g, const char* who) {
  Mat<T> M;
  if (g == 1) M = Mat<T>::view(A);
  else if (g == 3) M = Mat<T>::own(reblock_csr<3>(A, g));
  else if (g == 2) M = Mat<T>::own(reblock_csr<2>(A, g));
  else M = Mat<T>::own(reblock_csr<0>(A, g));
  check_fine(M, who);
  return M;
}
template <SolverValue T>
Mat<T> fine_operator(const BsrMatrix<T>& A, index_t g, const char* who) {
  Mat<T> M;
  if (g == A.block_size() && A.rows() % g == 0) {
    M = Mat<T>::view(A);
  } else {
    const auto& s = A.structure();
    BsrMatrix<T> B = reblock<T>(s.block_row_ptr(), s.block_col_indices(), A.blocks(), A.block_size(), A.rows(), g);
    if (g == 1) {  // the same arrays as CSR, explicit zeros kept (to_csr would drop them)
      const auto& t = B.structure();
      M = Mat<T>::own(CsrMatrix<T>(A.rows(), A.rows(),
                                   std::vector<index_t>(t.block_row_ptr().begin(), t.block_row_ptr().end()),
                                   std::vector<index_t>(t.block_col_indices().begin(), t.block_col_indices().end()),
                                   std::vector<T>(B.blocks().begin(), B.blocks().end())));
    } else {
      M = Mat<T>::own(std::move(B));
    }
  }
  check_fine(M, who);
  return M;
}

template <SolverValue T>
void build(std::vector<Level<T>>& levels, Coarse& coarse, std::vector<double> B, index_t k,
           const AmgOptions<T>& options, bool fresh) {
  const index_t max_levels = fresh ? options.max_levels : static_cast<index_t>(levels.size());
  for (index_t l = 0;; ++l) {
    Level<T>& L = levels[l];
    const index_t n = L.A.rows();
    const std::vector<T> d = diagonal(L.A);
    L.dinv = detail::make_vector<T>(n, "amg: inverse diagonal");
    for (index_t i = 0; i < n; ++i) {
      if (d[i] == T(0)) continue;  // a decoupled coarse unknown (see tentative)
      if (!(d[i] > T(0)) || !std::isfinite(d[i]))
        throw InvalidArgument(concat("amg: the coarse operator of level ", l, " has a(", i, ", ", i, ") = ", d[i],
                                     ": A is not symmetric positive definite"));
      L.dinv[i] = T(1) / d[i];
    }
    L.lmax = lanczos_lmax(L.A, d, L.dinv);
    const ChebyshevCoefficients co = chebyshev_coeffs(L.lmax / kSmootherRatio, 1.1 * L.lmax, options.smoother_degree);
    L.cheb_a = co.a;
    L.cheb_c = co.c;
    bool last = fresh ? (n <= options.max_coarse || l + 1 >= max_levels) : l + 1 == max_levels;
    if (fresh && !last) {
      // Aggregation over the strong graph: A's own pattern for θ = 0 with one block row a
      // node (no copy of it), else the graph `strength` builds.
      std::int32_t n_agg = 0;
      const auto run = [&](const auto& G) {
        const int distance = G.edges() < kSparseDegree * static_cast<double>(G.nodes()) ? 2 : 1;
        n_agg = aggregate(G, distance, L.aggregate);
      };
      if (options.strength_threshold == 0.0 && L.node == L.A.g())
        run(PatternGraph<T>{L.A.ptr(), L.A.idx(), L.A.vals(), L.A.g() * L.A.g()});
      else
        run(strength(L.A, L.node, options.strength_threshold));
      if (static_cast<index_t>(n_agg) * k >= n) {  // coarsening stalls
        last = true;
        L.aggregate.clear();
      } else {
        std::vector<double> Bc;
        L.P_tent = tentative<T>(L.aggregate, n_agg, L.node, L.A.g(), B, k, Bc);
        B = std::move(Bc);
      }
    }
    const bool factored = last && n <= options.max_coarse;  // the last level's factor replaces A
    L.values32 = factored ? nullptr : values32(L.A, options);
    if (last) {
      levels.resize(static_cast<std::size_t>(l) + 1);
      coarse = Coarse{};
      if (factored) {
        factor(L.A, coarse, l);
      } else {  // no factor: the last level is smoothed with twice the degree
        const ChebyshevCoefficients last_co =
            chebyshev_coeffs(L.lmax / kSmootherRatio, 1.1 * L.lmax, 2 * options.smoother_degree);
        L.cheb_a = last_co.a;
        L.cheb_c = last_co.c;
      }
      return;
    }
    L.P = smooth(L.A, L.dinv, L.P_tent, L.aggregate, L.node, options.prolongator_omega / L.lmax);
    L.R = transpose_of(L.P);
    if (fresh) {
      levels.emplace_back();
      levels.back().node = k;
    }
    Level<T>& next = levels[l + 1];  // (emplace_back may have moved L)
    const Level<T>& cur = levels[l];
    next.A = galerkin_of(cur.P, cur.R, cur.A);
  }
}

#define TRNSPARSE_INSTANTIATE(T)                                                                                \
  template struct Mat<T>;                                                                                      \
  template struct Level<T>;                                                                                    \
  template Mat<T> fine_operator(const CsrMatrix<T>&, index_t, const char*);                                    \
  template Mat<T> fine_operator(const BsrMatrix<T>&, index_t, const char*);                                    \
  template void build(std::vector<Level<T>>&, Coarse&, std::vector<double>, index_t, const AmgOptions<T>&, bool);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse::amg
