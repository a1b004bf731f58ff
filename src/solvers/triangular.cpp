// Sparse triangular solves, level-scheduled.
//
// The schedule. Row (block row, for BSR) i of a lower solve needs the x of the rows its
// entries left of the diagonal name, so its level is one more than theirs (0 for a row
// with none); rows of one level depend only on earlier levels and are solved side by
// side. An upper solve is the mirror image. Each row sums its entries in stored order
// whichever thread runs it, so the results are the same bits for any thread count. A
// level too small to pay for waking a team runs on the calling thread.
//
// For BSR the unit is the block row: its blocks off the diagonal are subtracted whole,
// then its diagonal block's own triangle is solved row by row (the triangle is taken
// element by element, as for CSR).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
#include "runtime/parallel.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse {

namespace {

/// Rows of a level per unit of its parallel loop: enough work to amortise the unit's
/// dealing, few enough that a level of a few thousand rows still splits.
constexpr index_t kRowsPerUnit = 128;
/// Levels of fewer rows than this on average are solved as one sweep in matrix order: a
/// level-synchronised solve reads A and x out of order and waits at every level's end
/// (for a thread another process may have taken off its core), which costs more than
/// the second thread gains on a 7-point stencil's wavefronts of a few thousand rows
/// (docs/solvers.md, "Triangular solves").
constexpr double kMinRowsPerLevel = 64.0 * kRowsPerUnit;
/// Rows of a unit of independent rows (at least): a sweep long enough to amortise
/// claiming it, short enough that a few blocks still split over the threads.
constexpr index_t kSegmentRows = 4096;

}  // namespace

template <SolverValue T>
struct TriangularSolver<T>::Impl {
  const char* who;
  index_t n = 0;   // rows
  index_t b = 1;   // block size (1: CSR)
  index_t nb = 0;  // block rows
  const index_t* ptr = nullptr;
  const index_t* idx = nullptr;
  const T* values = nullptr;  // entries, or blocks of b * b
  bool lower = true;
  bool unit = false;
  std::vector<index_t> diagonal;  // per (block) row: the stored position of its diagonal, or -1
  // Per (block) row, where its triangle's entries (off the diagonal) start and end among
  // its sorted stored entries: [ptr[i], edge[i]) below the diagonal for a lower solve,
  // [edge[i], ptr[i + 1]) above it for an upper one.
  std::vector<index_t> edge;
  // Units of independent (block) rows: [segment[u], segment[u + 1]) reads no x outside
  // itself. Empty unless T splits into at least two such units.
  std::vector<index_t> segment;
  std::vector<index_t> level_ptr{0};
  std::vector<index_t> order;        // (block) rows by level, ascending within a level
  std::vector<double> level_cost;    // stored values a level reads
  // A CSR triangle stored alone, each row's diagonal at its edge (last for a lower
  // solve, first for an upper one; the factors of ilu0/ic0): A's columns in 32 bits,
  // read with A's row pointers only (`diagonal` and `edge` are then not kept). Empty
  // otherwise. The solves are bound by the bytes they stream.
  std::vector<std::int32_t> split_columns;

  void schedule() {
    diagonal = detail::make_vector<index_t>(nb, "sptrsv: diagonal");
    std::fill(diagonal.begin(), diagonal.end(), index_t{-1});
    edge = detail::make_vector<index_t>(nb, "sptrsv: triangle bounds");
    std::vector<index_t> level = detail::make_vector<index_t>(nb, "sptrsv: levels");
    index_t depth = 0;
    const auto visit = [&](index_t i) {
      index_t l = 0, below = ptr[i];
      for (index_t e = ptr[i]; e < ptr[i + 1]; ++e) {
        const index_t j = idx[e];
        below += j < i;
        if (j == i) diagonal[static_cast<std::size_t>(i)] = e;
        else if ((j < i) == lower) l = std::max(l, level[static_cast<std::size_t>(j)] + 1);
      }
      edge[static_cast<std::size_t>(i)] = lower ? below : below + (diagonal[static_cast<std::size_t>(i)] >= 0);
      level[static_cast<std::size_t>(i)] = l;
      depth = std::max(depth, l + 1);
    };
    if (lower)
      for (index_t i = 0; i < nb; ++i) visit(i);
    else
      for (index_t i = nb - 1; i >= 0; --i) visit(i);
    // Counting sort of the rows by level.
    level_ptr.assign(static_cast<std::size_t>(depth) + 1, 0);
    level_cost.assign(static_cast<std::size_t>(depth), 0.0);
    for (index_t i = 0; i < nb; ++i) {
      ++level_ptr[static_cast<std::size_t>(level[static_cast<std::size_t>(i)]) + 1];
      level_cost[static_cast<std::size_t>(level[static_cast<std::size_t>(i)])] +=
          static_cast<double>((ptr[i + 1] - ptr[i]) * b * b + b);
    }
    for (index_t l = 0; l < depth; ++l) level_ptr[l + 1] += level_ptr[l];
    order = detail::make_vector<index_t>(nb, "sptrsv: schedule");
    std::vector<index_t> at(level_ptr.begin(), level_ptr.end() - 1);
    for (index_t i = 0; i < nb; ++i) order[static_cast<std::size_t>(at[static_cast<std::size_t>(level[i])]++)] = i;
    find_segments();
    bool split = b == 1 && n <= INT32_MAX;
    for (index_t i = 0; split && i < nb; ++i)
      split = diagonal[static_cast<std::size_t>(i)] == (lower ? ptr[i + 1] - 1 : ptr[i]);
    if (split) {
      split_columns = detail::huge_reserved<std::int32_t>(ptr[nb], "sptrsv: columns");
      for (index_t e = 0; e < ptr[nb]; ++e) split_columns.push_back(static_cast<std::int32_t>(idx[e]));
      std::vector<index_t>().swap(diagonal);  // the row pointers place both
      std::vector<index_t>().swap(edge);
    }
  }

  /// Cuts the rows where T decouples: a lower solve may cut before row c when no row from
  /// c on reads a column below c (the suffix minimum of the rows' first triangle column
  /// is >= c); an upper solve after the rows before c read no column from c on. Pieces
  /// between cuts are merged in row order into units of at least kSegmentRows rows: the
  /// units depend only on the pattern, never on the thread count.
  void find_segments() {
    std::vector<index_t> cut(static_cast<std::size_t>(nb) + 1, 0);  // 1 where a cut may go
    if (lower) {
      index_t reach = nb;  // the smallest column read by rows i and after
      for (index_t i = nb - 1; i >= 0; --i) {
        if (ptr[i] < edge[static_cast<std::size_t>(i)]) reach = std::min(reach, idx[ptr[i]]);
        cut[static_cast<std::size_t>(i)] = reach >= i;
      }
    } else {
      index_t reach = -1;  // the largest column read by rows before i
      for (index_t i = 0; i < nb; ++i) {
        cut[static_cast<std::size_t>(i)] = reach < i;
        if (edge[static_cast<std::size_t>(i)] < ptr[i + 1]) reach = std::max(reach, idx[ptr[i + 1] - 1]);
      }
    }
    segment.assign(1, 0);
    const index_t rows_per_block = b;
    for (index_t i = 1; i < nb; ++i)
      if (cut[static_cast<std::size_t>(i)] && (i - segment.back()) * rows_per_block >= kSegmentRows) segment.push_back(i);
    segment.push_back(nb);
    if (segment.size() < 3) segment.clear();
  }

  /// The stored entries of (block) row i's triangle, off the diagonal.
  [[nodiscard]] std::pair<index_t, index_t> triangle(index_t i) const {
    return lower ? std::pair{ptr[i], edge[static_cast<std::size_t>(i)]} : std::pair{edge[static_cast<std::size_t>(i)], ptr[i + 1]};
  }

  /// Solves row i of a CSR triangle (b = 1) into x, specialised on the triangle, the
  /// diagonal and the layout (Split: split_columns), so that a row tests none of them.
  /// False as solve_block_row.
  template <bool Lower, bool Unit, bool Split>
  bool solve_point_row(index_t i, const T* rhs, T* x) const {
    // The chain from one row's x to the next runs through the entry nearest the diagonal
    // (row i - 1 or i + 1 in a stencil): it is subtracted last, the others (rows solved
    // long before) first, and the diagonal's reciprocal, which does not wait for x,
    // replaces a division on the chain.
    const auto triangle_edge = [&] {
      if constexpr (Split) return Lower ? ptr[i + 1] - 1 : ptr[i] + 1;
      else return edge[static_cast<std::size_t>(i)];
    };
    double d = 1.0;
    if constexpr (!Unit) {
      const index_t at = Split ? (Lower ? ptr[i + 1] - 1 : ptr[i]) : diagonal[static_cast<std::size_t>(i)];
      d = at < 0 ? 0.0 : static_cast<double>(values[at]);
    }
    const double inv = 1.0 / d;
    const auto column = [&](index_t e) {
      if constexpr (Split) return static_cast<index_t>(split_columns[static_cast<std::size_t>(e)]);
      else return idx[e];
    };
    double s = static_cast<double>(rhs[i]);
    if constexpr (Lower)
      for (index_t e = ptr[i], last = triangle_edge(); e < last; ++e)
        s -= static_cast<double>(values[e]) * static_cast<double>(x[column(e)]);
    else
      for (index_t e = ptr[i + 1] - 1, first = triangle_edge(); e >= first; --e)
        s -= static_cast<double>(values[e]) * static_cast<double>(x[column(e)]);
    x[i] = static_cast<T>(Unit ? s : s * inv);
    return d != 0.0;
  }

  /// Calls body(row) with row(i, acc) solving (block) row i (`acc`: b values of
  /// scratch), picked once per solve: solve_point_row's specialisation for a CSR
  /// triangle, solve_block_row for blocks.
  template <class Body>
  void with_rows(const T* rhs, T* x, Body&& body) const {
    const auto point = [&]<bool Lower, bool Unit>() {
      if (split_columns.empty())
        body([this, rhs, x](index_t i, double*) { return solve_point_row<Lower, Unit, false>(i, rhs, x); });
      else
        body([this, rhs, x](index_t i, double*) { return solve_point_row<Lower, Unit, true>(i, rhs, x); });
    };
    if (b > 1) body([this, rhs, x](index_t i, double* acc) { return solve_block_row(i, rhs, x, acc); });
    else if (lower && unit) point.template operator()<true, true>();
    else if (lower) point.template operator()<true, false>();
    else if (unit) point.template operator()<false, true>();
    else point.template operator()<false, false>();
  }

  /// Solves block row i (rows [i b, i b + rows)) of T x = rhs into x; `acc` is b values
  /// of scratch. False when a non-unit solve meets a zero (or missing) diagonal entry:
  /// the row then holds a non-finite value and the solve reports the row.
  bool solve_block_row(index_t i, const T* rhs, T* x, double* acc) const {
    const index_t r0 = i * b, rows = std::min(b, n - r0);
    const auto [first, last] = triangle(i);
    for (index_t r = 0; r < rows; ++r) acc[r] = static_cast<double>(rhs[r0 + r]);
    for (index_t e = first; e < last; ++e) {
      const index_t J = idx[e];
      const T* blk = values + e * b * b;
      const index_t c0 = J * b, cols = std::min(b, n - c0);
      for (index_t r = 0; r < rows; ++r) {
        double t = 0.0;
        for (index_t c = 0; c < cols; ++c) t += static_cast<double>(blk[r * b + c]) * static_cast<double>(x[c0 + c]);
        acc[r] -= t;
      }
    }
    const T* d = values + diagonal[static_cast<std::size_t>(i)] * b * b;  // present: checked at construction
    bool ok = true;
    const auto row = [&](index_t r) {
      double t = acc[r];
      if (lower)
        for (index_t c = 0; c < r; ++c) t -= static_cast<double>(d[r * b + c]) * static_cast<double>(x[r0 + c]);
      else
        for (index_t c = r + 1; c < rows; ++c) t -= static_cast<double>(d[r * b + c]) * static_cast<double>(x[r0 + c]);
      ok = ok && (unit || d[r * b + r] != T(0));
      x[r0 + r] = static_cast<T>(unit ? t : t / static_cast<double>(d[r * b + r]));
    };
    if (lower)
      for (index_t r = 0; r < rows; ++r) row(r);
    else
      for (index_t r = rows - 1; r >= 0; --r) row(r);
    return ok;
  }

};


template <SolverValue T>
TriangularSolver<T>::TriangularSolver(const CsrMatrix<T>& A, Triangle uplo, Diagonal diag)
    : impl_(std::make_unique<Impl>()) {
  if (A.rows() != A.cols())
    throw InvalidArgument(detail::concat("sptrsv: A is ", A.rows(), " x ", A.cols(), ", expected a square matrix"));
  auto& s = *impl_;
  s.who = "sptrsv";
  s.n = s.nb = A.rows();
  s.ptr = A.row_ptr().data();
  s.idx = A.col_indices().data();
  s.values = A.values().data();
  s.lower = uplo == Triangle::lower;
  s.unit = diag == Diagonal::unit;
  s.schedule();
}

template <SolverValue T>
TriangularSolver<T>::TriangularSolver(const BsrMatrix<T>& A, Triangle uplo, Diagonal diag)
    : impl_(std::make_unique<Impl>()) {
  if (A.rows() != A.cols())
    throw InvalidArgument(detail::concat("sptrsv: A is ", A.rows(), " x ", A.cols(), ", expected a square matrix"));
  auto& s = *impl_;
  s.who = "sptrsv";
  s.n = A.rows();
  s.b = A.block_size();
  s.nb = A.structure().block_rows();
  s.ptr = A.structure().block_row_ptr().data();
  s.idx = A.structure().block_col_indices().data();
  s.values = A.blocks().data();
  s.lower = uplo == Triangle::lower;
  s.unit = diag == Diagonal::unit;
  s.schedule();
  if (s.b > 1)
    for (index_t i = 0; i < s.nb; ++i)
      if (s.diagonal[static_cast<std::size_t>(i)] < 0)
        throw InvalidArgument(detail::concat("sptrsv: block row ", i, " of A stores no diagonal block"));
}

template <SolverValue T> TriangularSolver<T>::TriangularSolver(TriangularSolver&&) noexcept = default;
template <SolverValue T> TriangularSolver<T>& TriangularSolver<T>::operator=(TriangularSolver&&) noexcept = default;
template <SolverValue T> TriangularSolver<T>::~TriangularSolver() = default;

template <SolverValue T>
index_t TriangularSolver<T>::levels() const noexcept {
  return static_cast<index_t>(impl_->level_ptr.size()) - 1;
}

template <SolverValue T>
void TriangularSolver<T>::solve(std::span<const T> b, std::span<T> x) const {
  const auto& s = *impl_;
  detail::check_dim(static_cast<index_t>(b.size()), s.n, s.who, "b", "elements", "A.rows()");
  detail::check_dim(static_cast<index_t>(x.size()), s.n, s.who, "x", "elements", "A.rows()");
  if (s.nb == 0) return;
  // The first (block) row that met a zero diagonal, reported once the solve is done.
  std::atomic<index_t> singular{s.nb};
  const auto fail = [&singular](index_t i) {
    for (index_t seen = singular.load(std::memory_order_relaxed);
         i < seen && !singular.compare_exchange_weak(seen, i, std::memory_order_relaxed);) {
    }
  };
  const auto report = [&] {
    if (const index_t i = singular.load(); i < s.nb)
      throw InvalidArgument(detail::concat(s.who, ": the diagonal entry of ", s.b == 1 ? "row " : "block row ", i,
                                           " is zero or not stored; a non-unit triangular solve divides by it"));
  };
  const T* rhs = b.data();
  T* out = x.data();
  const auto sweep = [&](index_t first, index_t last, double* acc) {
    s.with_rows(rhs, out, [&](auto row) {
      if (s.lower) {
        for (index_t i = first; i < last; ++i)
          if (!row(i, acc)) fail(i);
      } else {
        for (index_t i = last - 1; i >= first; --i)
          if (!row(i, acc)) fail(i);
      }
    });
  };
  if (!s.segment.empty()) {
    // Independent units: each swept in matrix order by one thread.
    const index_t units = static_cast<index_t>(s.segment.size()) - 1;
    double cost = 0.0;
    for (const double c : s.level_cost) cost += c;
    const int parts = detail::parts_for(units, detail::work_ns(detail::Work::csr, cost));
    std::vector<double> acc(static_cast<std::size_t>(parts * s.b));
    detail::parallel_for(parts, units, [&](int slot, index_t u) {
      sweep(s.segment[static_cast<std::size_t>(u)], s.segment[static_cast<std::size_t>(u) + 1], acc.data() + slot * s.b);
    });
    return report();
  }
  const std::size_t depth = s.level_ptr.size() - 1;
  std::vector<int> parts(depth);
  for (std::size_t l = 0; l < depth; ++l)
    parts[l] = detail::parts_for(detail::ceil_div(s.level_ptr[l + 1] - s.level_ptr[l], kRowsPerUnit),
                                 detail::work_ns(detail::Work::csr, s.level_cost[l]));
  std::vector<double> scratch(static_cast<std::size_t>(std::ranges::max(parts, {}, [](int p) { return p; }) * s.b));
  if (static_cast<double>(s.nb) < kMinRowsPerLevel * static_cast<double>(depth) ||
      std::ranges::all_of(parts, [](int p) { return p == 1; })) {
    // Narrow levels (a stencil in natural order), or none worth a team: one sweep in the
    // matrix's own order, which reads A and x front to back (level order jumps across
    // them) and never waits at a level's end for a thread another process has taken off
    // its core; the same sums per row.
    sweep(0, s.nb, scratch.data());
    return report();
  }
  detail::UnitRanges ranges;
  s.with_rows(rhs, out, [&](auto row) {
    for (std::size_t l = 0; l < depth; ++l) {
      const index_t first = s.level_ptr[l], count = s.level_ptr[l + 1] - first;
      detail::parallel_for(parts[l], detail::ceil_div(count, kRowsPerUnit), ranges, [&](int slot, index_t u) {
        const index_t lo = first + u * kRowsPerUnit, hi = std::min(first + count, lo + kRowsPerUnit);
        for (index_t k = lo; k < hi; ++k) {
          const index_t i = s.order[static_cast<std::size_t>(k)];
          if (!row(i, scratch.data() + slot * s.b)) fail(i);
        }
      });
    }
  });
  report();
}

template <SolverValue T>
void sptrsv(const CsrMatrix<T>& A, Triangle uplo, Diagonal diag, std::span<const std::type_identity_t<T>> b,
            std::span<T> x) {
  TriangularSolver<T>(A, uplo, diag).solve(b, x);
}

template <SolverValue T>
void sptrsv(const BsrMatrix<T>& A, Triangle uplo, Diagonal diag, std::span<const std::type_identity_t<T>> b,
            std::span<T> x) {
  TriangularSolver<T>(A, uplo, diag).solve(b, x);
}

template class TriangularSolver<float>;
template class TriangularSolver<double>;
template void sptrsv<float>(const CsrMatrix<float>&, Triangle, Diagonal, std::span<const float>, std::span<float>);
template void sptrsv<double>(const CsrMatrix<double>&, Triangle, Diagonal, std::span<const double>, std::span<double>);
template void sptrsv<float>(const BsrMatrix<float>&, Triangle, Diagonal, std::span<const float>, std::span<float>);
template void sptrsv<double>(const BsrMatrix<double>&, Triangle, Diagonal, std::span<const double>, std::span<double>);

}  // namespace trnsparse
