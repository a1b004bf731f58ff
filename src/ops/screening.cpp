// Screening: Schwarz bounds, quartet and density screening, sparsity statistics and the
// screened product C = (A ∘ M) B.
//
// The screened product classifies A's stored blocks by their bound products (per block
// row and block column, the smallest and largest q over the logical extent; q >= 0, so
// the products of the extremes bound every element's product):
//   skip    max_r · max_c <= √t   no element kept: never read
//   full    min_r · min_c >  √t   every element kept: the plain tile kernel on A's block
//   partial otherwise             copied once per call with the mask applied
// and runs the ISA's BSR tile kernel once over the kept blocks in A's order, full ones
// read in place and partial ones from their masked copies (a table of block addresses),
// packing only the block rows of B that a kept block reads. The mask itself is never
// stored.
#include <algorithm>
#include <cmath>
#include <limits>

#include "dispatch/dispatch.hpp"
#include "ops/run.hpp"
#include "runtime/parallel.hpp"
#include "runtime/checks.hpp"
#include "runtime/workspace.hpp"
#include "trnsparse/screening.hpp"

namespace trnsparse {

namespace {

template <ScreenValue T>
std::vector<double> bounds_of(std::span<const T> diag, const char* who, const char* what) {
  std::vector<double> q(diag.size());
  for (std::size_t i = 0; i < diag.size(); ++i) {
    const double d = static_cast<double>(diag[i]);
    if (!std::isfinite(d))
      throw InvalidArgument(detail::concat(who, ": ", what, "[", i, "] = ", d, ", expected a finite value"));
    q[i] = std::sqrt(std::fabs(d));
  }
  return q;
}

void check_bounds(std::span<const double> Q, const char* who) {
  for (std::size_t i = 0; i < Q.size(); ++i)
    if (!(Q[i] >= 0.0 && std::isfinite(Q[i])))
      throw InvalidArgument(detail::concat(who, ": Q[", i, "] = ", Q[i], ", expected a finite bound >= 0"));
}

/// Smallest and largest bound of each block of b consecutive indices.
struct BlockRange {
  std::vector<double> lo, hi;
};
BlockRange block_range(const std::vector<double>& q, index_t b) {
  const index_t n = static_cast<index_t>(q.size()), blocks = detail::ceil_div(n, b);
  BlockRange r{std::vector<double>(static_cast<std::size_t>(blocks), std::numeric_limits<double>::infinity()),
               std::vector<double>(static_cast<std::size_t>(blocks), 0.0)};
  for (index_t i = 0; i < n; ++i) {
    r.lo[i / b] = std::min(r.lo[i / b], q[i]);
    r.hi[i / b] = std::max(r.hi[i / b], q[i]);
  }
  return r;
}

enum class Tile : unsigned char { skip, full, partial };

/// The screening of A's stored blocks: the bounds, each block's class, and the kept
/// (full or partial) blocks as block-row lists, in A's order, of positions in A.
struct Screen {
  std::vector<double> qr, qc;
  double s = 0.0;  // √threshold
  std::vector<Tile> tile;
  std::vector<index_t> kept_ptr{0}, kept_idx, kept_pos;
  index_t partials = 0;
};

template <ScreenValue T>
Screen screen_blocks(const BsrMatrix<T>& A, std::span<const T> row_diag, std::span<const T> col_diag,
                     double threshold, const char* who) {
  detail::check_threshold(threshold, who);
  detail::check_dim(static_cast<index_t>(row_diag.size()), A.rows(), who, "row_diag", "elements", "A.rows()");
  detail::check_dim(static_cast<index_t>(col_diag.size()), A.cols(), who, "col_diag", "elements", "A.cols()");
  const BsrStructure& st = A.structure();
  Screen sc;
  sc.qr = bounds_of(row_diag, who, "row_diag");
  sc.qc = bounds_of(col_diag, who, "col_diag");
  sc.s = std::sqrt(threshold);
  const BlockRange r = block_range(sc.qr, st.block_size()), c = block_range(sc.qc, st.block_size());
  sc.tile.resize(static_cast<std::size_t>(st.n_blocks()));
  for (index_t bi = 0; bi < st.block_rows(); ++bi) {
    for (index_t q = st.block_row_ptr()[bi]; q < st.block_row_ptr()[bi + 1]; ++q) {
      const index_t bj = st.block_col_indices()[q];
      Tile& t = sc.tile[static_cast<std::size_t>(q)];
      t = r.hi[bi] * c.hi[bj] <= sc.s ? Tile::skip : r.lo[bi] * c.lo[bj] > sc.s ? Tile::full : Tile::partial;
      if (t == Tile::skip) continue;
      sc.kept_idx.push_back(bj);
      sc.kept_pos.push_back(q);
      sc.partials += t == Tile::partial ? 1 : 0;
    }
    sc.kept_ptr.push_back(static_cast<index_t>(sc.kept_idx.size()));
  }
  return sc;
}

/// dst = block (bi, bj) `src` (row-major b x b) with the elements whose mask is not set
/// zeroed, in one pass: a select per element, no branch (vector code). The padding
/// beyond the matrix's edge is copied as it is.
template <ScreenValue T>
void masked_copy(const T* src, T* dst, index_t b, index_t bi, index_t bj, const Screen& sc) {
  const index_t rows = std::min(b, static_cast<index_t>(sc.qr.size()) - bi * b);
  const index_t cols = std::min(b, static_cast<index_t>(sc.qc.size()) - bj * b);
  const double* qc = sc.qc.data() + bj * b;
  for (index_t r = 0; r < b; ++r) {
    const T* in = src + r * b;
    T* out = dst + r * b;
    index_t c = 0;
    if (r < rows) {
      const double qr = sc.qr[static_cast<std::size_t>(bi * b + r)], s = sc.s;
      for (; c < cols; ++c) out[c] = qr * qc[c] > s ? in[c] : T(0);
    }
    for (; c < b; ++c) out[c] = in[c];
  }
}

/// C = (A ∘ M) B: one product over the kept blocks, partial ones copied with the mask
/// applied, B packed only where a kept block reads it.
template <ScreenValue T>
void screened_product(const BsrMatrix<T>& A, const Screen& sc, DenseView<const T> B, DenseView<T> C) {
  const BsrStructure& st = A.structure();
  const index_t b = st.block_size(), kept = static_cast<index_t>(sc.kept_pos.size());
  // The masked copies live in this thread's operand workspace: no fresh pages per call.
  const index_t masked_values = detail::checked_mul(sc.partials, b * b, "screened_spmm: partial blocks");
  T* masked = reinterpret_cast<T*>(detail::thread_workspace(
      detail::checked_mul(masked_values, static_cast<index_t>(sizeof(T)), "screened_spmm: partial blocks"),
      detail::Workspace::operands));
  std::vector<const T*> at(static_cast<std::size_t>(kept));
  std::vector<unsigned char> packs(static_cast<std::size_t>(st.block_cols()), 0);
  struct Partial {
    index_t k, bi;  // masked copy i at masked + i * b * b
  };
  std::vector<Partial> partials;
  partials.reserve(static_cast<std::size_t>(sc.partials));
  for (index_t bi = 0; bi < st.block_rows(); ++bi)
    for (index_t k = sc.kept_ptr[bi]; k < sc.kept_ptr[bi + 1]; ++k) {
      const index_t q = sc.kept_pos[k];
      packs[sc.kept_idx[k]] = 1;
      at[k] = A.block(q).data();
      if (sc.tile[static_cast<std::size_t>(q)] != Tile::partial) continue;
      at[k] = masked + static_cast<index_t>(partials.size()) * b * b;
      partials.push_back({k, bi});
    }
  // The masked copies, in parallel (each writes its own block).
  const auto n_partial = static_cast<index_t>(partials.size());
  const int copy_parts = detail::parts_for(n_partial, detail::work_ns(detail::Work::stream, static_cast<double>(masked_values)));
  detail::parallel_parts(copy_parts, [&](int t) {
    for (index_t i = n_partial * t / copy_parts; i < n_partial * (t + 1) / copy_parts; ++i) {
      const Partial& m = partials[static_cast<std::size_t>(i)];
      masked_copy(A.block(sc.kept_pos[m.k]).data(), masked + i * b * b, b, m.bi, sc.kept_idx[m.k], sc);
    }
  });
  const kernels::BsrProduct<T, T> prod{.b = b,
                                       .out_rows = st.rows(),
                                       .in_rows = st.cols(),
                                       .in_block_rows = st.block_cols(),
                                       .width = B.cols,
                                       .ptr = sc.kept_ptr.data(),
                                       .idx = sc.kept_idx.data(),
                                       .idx32 = nullptr,
                                       .perm = nullptr,
                                       .trans_a = false,
                                       .blocks = nullptr,
                                       .stored = 0,
                                       .block_at = at.data(),
                                       .packs = packs.data(),
                                       .alpha = T(1),
                                       .beta = T(0),
                                       .B = B.data,
                                       .ldb = B.ld,
                                       .C = C.data,
                                       .ldc = C.ld};
  const double work = static_cast<double>(kept) * static_cast<double>(b * b) * static_cast<double>(B.cols);
  const int parts = detail::parts_for(st.block_rows(), detail::work_ns(detail::Work::tiles, work, B.cols));
  detail::run_bsr_product(dispatch::bsr_kernels<T, T>(), prod, st.block_cols(), detail::balanced_split(sc.kept_ptr, parts),
                          detail::balanced_split(sc.kept_ptr, detail::pieces_for(parts)));
}

}  // namespace

template <ScreenValue T>
std::vector<double> schwarz_bounds(std::span<const T> diag) {
  return bounds_of(diag, "schwarz_bounds", "diag");
}

CsrMatrix<double> screen_quartets(std::span<const double> Q, double threshold) {
  detail::check_threshold(threshold, "screen_quartets");
  check_bounds(Q, "screen_quartets");
  const auto n = static_cast<index_t>(Q.size());
  std::vector<index_t> ptr{0}, col;
  std::vector<double> val;
  for (index_t i = 0; i < n; ++i) {
    for (index_t j = 0; j < n; ++j)
      if (Q[i] * Q[j] > threshold) {
        col.push_back(j);
        val.push_back(Q[i] * Q[j]);
      }
    ptr.push_back(static_cast<index_t>(col.size()));
  }
  return {n, n, std::move(ptr), std::move(col), std::move(val)};
}

template <ScreenValue T>
CsrMatrix<T> density_screen(std::span<const double> Q, const CsrMatrix<T>& P, double threshold) {
  detail::check_threshold(threshold, "density_screen");
  check_bounds(Q, "density_screen");
  detail::check_dim(static_cast<index_t>(Q.size()), P.rows(), "density_screen", "Q", "elements", "P.rows()");
  detail::check_dim(P.cols(), P.rows(), "density_screen", "P", "columns", "P.rows()");
  std::vector<index_t> ptr{0}, col;
  std::vector<T> val;
  for (index_t i = 0; i < P.rows(); ++i) {
    for (index_t p = P.row_ptr()[i]; p < P.row_ptr()[i + 1]; ++p) {
      const index_t j = P.col_indices()[p];
      if (Q[i] * Q[j] * std::fabs(static_cast<double>(P.values()[p])) > threshold) {
        col.push_back(j);
        val.push_back(P.values()[p]);
      }
    }
    ptr.push_back(static_cast<index_t>(col.size()));
  }
  return {P.rows(), P.cols(), std::move(ptr), std::move(col), std::move(val)};
}

template <ScreenValue T>
SparsityStats sparsity_stats(const CsrMatrix<T>& A) {
  SparsityStats st{A.rows(), A.cols(), A.nnz()};
  const double cells = static_cast<double>(A.rows()) * static_cast<double>(A.cols());
  st.density = cells > 0 ? static_cast<double>(A.nnz()) / cells : 0.0;
  st.screened_fraction = cells > 0 ? 1.0 - st.density : 0.0;
  if (A.rows() == 0) return st;
  st.row_min = std::numeric_limits<index_t>::max();
  for (index_t i = 0; i < A.rows(); ++i) {
    const index_t len = A.row_ptr()[i + 1] - A.row_ptr()[i];
    st.row_min = std::min(st.row_min, len);
    st.row_max = std::max(st.row_max, len);
  }
  st.row_mean = static_cast<double>(A.nnz()) / static_cast<double>(A.rows());
  return st;
}

template <ScreenValue T>
void screened_spmm(const BsrMatrix<T>& A, std::span<const std::type_identity_t<T>> row_diag,
                   std::span<const std::type_identity_t<T>> col_diag, DenseView<const std::type_identity_t<T>> B,
                   double threshold, DenseView<T> C) {
  const char* who = "screened_spmm";
  const Screen sc = screen_blocks(A, row_diag, col_diag, threshold, who);
  detail::check_spmm(who, A.rows(), A.cols(), B, C);
  detail::check_no_alias(A.blocks().data(), A.blocks().size_bytes(), C.data, detail::span_bytes(C), who, "A", "C");
  if (C.rows == 0 || C.cols == 0) return;
  screened_product(A, sc, B, C);
}

template <ScreenValue T>
Dense<T> screened_spmm(const BsrMatrix<T>& A, std::span<const std::type_identity_t<T>> row_diag,
                       std::span<const std::type_identity_t<T>> col_diag, DenseView<const std::type_identity_t<T>> B,
                       double threshold) {
  Dense<T> C(A.rows(), B.cols);
  screened_spmm<T>(A, row_diag, col_diag, B, threshold, C.view());
  return C;
}

template <ScreenValue T>
Dense<T> screened_spmm(const BsrMatrix<T>& A, std::span<const std::type_identity_t<T>> diag,
                       DenseView<const std::type_identity_t<T>> B, double threshold) {
  return screened_spmm<T>(A, diag, diag, B, threshold);
}

template <ScreenValue T>
SpmmGradients<BsrMatrix<T>, T> screened_spmm_backward(const BsrMatrix<T>& A,
                                                      std::span<const std::type_identity_t<T>> row_diag,
                                                      std::span<const std::type_identity_t<T>> col_diag,
                                                      DenseView<const std::type_identity_t<T>> B,
                                                      DenseView<const std::type_identity_t<T>> dC, double threshold) {
  const char* who = "screened_spmm_backward";
  const Screen sc = screen_blocks(A, row_diag, col_diag, threshold, who);
  detail::check_dim(B.rows, A.cols(), who, "B", "rows", "A.cols()");
  detail::check_dim(dC.rows, A.rows(), who, "dC", "rows", "A.rows()");
  detail::check_dim(dC.cols, B.cols, who, "dC", "columns", "B.cols");
  const BsrStructure& st = A.structure();
  const index_t b = st.block_size();
  // The kept blocks (full and partial, in A's order) as a structure of their own.
  const auto kept = BsrStructure::make(st.rows(), st.cols(), b, sc.kept_ptr, sc.kept_idx);
  const std::vector<index_t>& pos = sc.kept_pos;
  // dA = (dC Bᵀ) ∘ M: SDDMM on the kept blocks only, then scattered and masked.
  BsrMatrix<T> g(kept);
  sampled_matmul(acc_t<T>(1), dC, B, acc_t<T>(0), g);
  SpmmGradients<BsrMatrix<T>, T> out{BsrMatrix<T>(A.structure_ptr()), Dense<T>(A.cols(), B.cols)};
  BsrMatrix<T> masked(kept);  // A ∘ M on the kept blocks
  for (index_t bi = 0; bi < kept->block_rows(); ++bi)
    for (index_t p = kept->block_row_ptr()[bi]; p < kept->block_row_ptr()[bi + 1]; ++p) {
      const index_t q = pos[p], bj = kept->block_col_indices()[p];
      T* da = out.dA.block(q).data();
      T* m = masked.block(p).data();
      if (sc.tile[static_cast<std::size_t>(q)] == Tile::partial) {
        masked_copy(g.block(p).data(), da, b, bi, bj, sc);
        masked_copy(A.block(q).data(), m, b, bi, bj, sc);
      } else {
        std::copy_n(g.block(p).data(), b * b, da);
        std::copy_n(A.block(q).data(), b * b, m);
      }
    }
  // dB = (A ∘ M)ᵀ dC.
  spmm_transposed(acc_t<T>(1), masked, dC, acc_t<T>(0), out.dB.view());
  return out;
}

#define TRNSPARSE_INSTANTIATE(T)                                                                                     \
  template std::vector<double> schwarz_bounds<T>(std::span<const T>);                                              \
  template CsrMatrix<T> density_screen<T>(std::span<const double>, const CsrMatrix<T>&, double);                  \
  template SparsityStats sparsity_stats<T>(const CsrMatrix<T>&);                                                    \
  template Dense<T> screened_spmm<T>(const BsrMatrix<T>&, std::span<const T>, std::span<const T>,                  \
                                     DenseView<const T>, double);                                                   \
  template Dense<T> screened_spmm<T>(const BsrMatrix<T>&, std::span<const T>, DenseView<const T>, double);         \
  template void screened_spmm<T>(const BsrMatrix<T>&, std::span<const T>, std::span<const T>, DenseView<const T>,  \
                                 double, DenseView<T>);                                                             \
  template SpmmGradients<BsrMatrix<T>, T> screened_spmm_backward<T>(const BsrMatrix<T>&, std::span<const T>,       \
                                                                    std::span<const T>, DenseView<const T>,        \
                                                                    DenseView<const T>, double);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
