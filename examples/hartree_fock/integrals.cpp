#include "integrals.hpp"

#include <libint2.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>

#include "lapack.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/screening.hpp"

namespace trnsparse::hf {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// libint2 is initialised once per process, on first use, and finalised at exit.
void ensure_libint() {
  struct Runtime {
    Runtime() { libint2::initialize(); }
    ~Runtime() { libint2::finalize(); }
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;
  };
  static const Runtime runtime;
}

std::vector<libint2::Shell> libint_shells(const Basis& basis) {
  if (basis.max_l() > LIBINT_MAX_AM)
    throw NotSupported("basis has angular momentum l = " + std::to_string(basis.max_l()) +
                       ", this libint2 build supports l <= " + std::to_string(LIBINT_MAX_AM));
  ensure_libint();
  std::vector<libint2::Shell> shells;
  shells.reserve(basis.shells.size());
  for (const Shell& s : basis.shells)
    shells.emplace_back(libint2::svector<double>(s.exponents.begin(), s.exponents.end()),
                        libint2::svector<libint2::Shell::Contraction>{
                            {s.l, s.pure, libint2::svector<double>(s.coefficients.begin(), s.coefficients.end())}},
                        s.center);
  return shells;
}

/// The symmetric matrix of a one-body operator.
Dense<double> one_body(const Basis& basis, const std::vector<libint2::Shell>& shells, libint2::Engine& engine) {
  Dense<double> M(basis.nbf(), basis.nbf());
  for (std::size_t P = 0; P < shells.size(); ++P)
    for (std::size_t Q = 0; Q <= P; ++Q) {
      engine.compute(shells[P], shells[Q]);
      const double* buf = engine.results()[0];
      if (buf == nullptr) continue;  // screened by libint2: all zero
      const index_t fP = basis.first[P], nP = basis.shells[P].size();
      const index_t fQ = basis.first[Q], nQ = basis.shells[Q].size();
      for (index_t a = 0; a < nP; ++a)
        for (index_t b = 0; b < nQ; ++b) M(fP + a, fQ + b) = M(fQ + b, fP + a) = buf[a * nQ + b];
    }
  return M;
}

/// The 8 index permutations of (ab|cd) that leave a real ERI unchanged: image t of the
/// quartet is (x[t[0]] x[t[1]] | x[t[2]] x[t[3]]).
constexpr std::array<std::array<int, 4>, 8> eri_permutations{{{0, 1, 2, 3},
                                                              {1, 0, 2, 3},
                                                              {0, 1, 3, 2},
                                                              {1, 0, 3, 2},
                                                              {2, 3, 0, 1},
                                                              {3, 2, 0, 1},
                                                              {2, 3, 1, 0},
                                                              {3, 2, 1, 0}}};

using Quartet = std::array<index_t, 4>;

/// Calls f(permutation, shells of the image) once per distinct shell-level image of the
/// quartet `s`. Images with equal shells are one image: iterating over all functions of
/// the shells covers the function-level permutations between them.
template <class F>
void for_each_image(const Quartet& s, F&& f) {
  std::array<Quartet, 8> seen{};
  std::size_t n_seen = 0;
  for (const std::array<int, 4>& p : eri_permutations) {
    const Quartet t{s[p[0]], s[p[1]], s[p[2]], s[p[3]]};
    if (std::find(seen.begin(), seen.begin() + n_seen, t) != seen.begin() + n_seen) continue;
    seen[n_seen++] = t;
    f(p, t);
  }
}

/// Stored-block bookkeeping of one supermatrix: which blocks of the uniform grid a
/// computed quartet touches, then where each block lives.
class BlockGrid {
public:
  BlockGrid(index_t dim, index_t block_size)
      : shift_(std::countr_zero(static_cast<std::uint64_t>(block_size))),
        mask_(block_size - 1),
        n_((dim + block_size - 1) / block_size),
        slot_(static_cast<std::size_t>(n_ * n_), -1) {}

  /// Marks the blocks that rows [r0, r0 + nr) x columns [c0, c0 + nc) overlap.
  void mark(index_t r0, index_t nr, index_t c0, index_t nc) noexcept {
    for (index_t bi = r0 >> shift_; bi <= (r0 + nr - 1) >> shift_; ++bi)
      for (index_t bj = c0 >> shift_; bj <= (c0 + nc - 1) >> shift_; ++bj) slot_[static_cast<std::size_t>(bi * n_ + bj)] = 0;
  }

  /// The zero matrix with the marked blocks; afterwards `at` finds entries in it.
  BsrMatrix<double> matrix(index_t dim) {
    std::vector<index_t> row_ptr{0};
    std::vector<index_t> col_idx;
    for (index_t bi = 0; bi < n_; ++bi) {
      for (index_t bj = 0; bj < n_; ++bj) {
        index_t& slot = slot_[static_cast<std::size_t>(bi * n_ + bj)];
        if (slot < 0) continue;
        slot = static_cast<index_t>(col_idx.size()) << (2 * shift_);  // offset of the block's values
        col_idx.push_back(bj);
      }
      row_ptr.push_back(static_cast<index_t>(col_idx.size()));
    }
    return BsrMatrix<double>(BsrStructure::make(dim, dim, index_t{1} << shift_, std::move(row_ptr), std::move(col_idx)));
  }

  /// The offset of entry (row, col) in the values of `matrix()`; the block must be stored.
  [[nodiscard]] index_t at(index_t row, index_t col) const noexcept {
    return slot_[static_cast<std::size_t>((row >> shift_) * n_ + (col >> shift_))] + ((row & mask_) << shift_) +
           (col & mask_);
  }
  [[nodiscard]] index_t blocks() const noexcept { return n_ * n_; }

private:
  int shift_;
  index_t mask_;
  index_t n_;                  // block rows = block columns
  std::vector<index_t> slot_;  // per grid block: -1 absent; 0 marked; then value offset
};

}  // namespace

OneElectron one_electron_integrals(const Basis& basis, const Molecule& molecule) {
  const std::vector<libint2::Shell> shells = libint_shells(basis);
  const int max_l = basis.max_l();
  const std::size_t max_nprim = basis.max_primitives();
  libint2::Engine overlap(libint2::Operator::overlap, max_nprim, max_l);
  libint2::Engine kinetic(libint2::Operator::kinetic, max_nprim, max_l);
  libint2::Engine nuclear(libint2::Operator::nuclear, max_nprim, max_l);
  std::vector<std::pair<double, std::array<double, 3>>> charges;
  for (const Atom& a : molecule.atoms) charges.emplace_back(static_cast<double>(a.Z), a.xyz);
  nuclear.set_params(charges);
  return {one_body(basis, shells, overlap), one_body(basis, shells, kinetic), one_body(basis, shells, nuclear)};
}

std::vector<index_t> spatial_shell_order(const Basis& basis) {
  const index_t n = basis.n_shells();
  std::array<double, 3> mean{};
  for (const Shell& s : basis.shells)
    for (int d = 0; d < 3; ++d) mean[d] += s.center[d] / static_cast<double>(n);
  Dense<double> cov(3, 3);
  for (const Shell& s : basis.shells)
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) cov(a, b) += (s.center[a] - mean[a]) * (s.center[b] - mean[b]);
  const lapack::SymmetricEigen e = lapack::eigh(cov);
  const std::array<double, 3> axis{e.vectors(0, 2), e.vectors(1, 2), e.vectors(2, 2)};  // largest eigenvalue
  std::vector<double> key(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    const Shell& s = basis.shells[static_cast<std::size_t>(i)];
    key[static_cast<std::size_t>(i)] = s.center[0] * axis[0] + s.center[1] * axis[1] + s.center[2] * axis[2];
  }
  std::vector<index_t> order(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&key](index_t a, index_t b) {
    return key[static_cast<std::size_t>(a)] < key[static_cast<std::size_t>(b)];
  });
  return order;
}

Dense<double> eri_reference(const Basis& basis) {
  const std::vector<libint2::Shell> shells = libint_shells(basis);
  libint2::Engine engine(libint2::Operator::coulomb, basis.max_primitives(), basis.max_l());
  engine.set_precision(0.0);
  const index_t n = basis.nbf();
  Dense<double> eri(n * n, n * n);
  const auto ns = static_cast<std::size_t>(basis.n_shells());
  for (std::size_t P = 0; P < ns; ++P)
    for (std::size_t Q = 0; Q < ns; ++Q)
      for (std::size_t R = 0; R < ns; ++R)
        for (std::size_t S = 0; S < ns; ++S) {
          engine.compute(shells[P], shells[Q], shells[R], shells[S]);
          const double* v = engine.results()[0];
          if (v == nullptr) continue;
          for (index_t p = basis.first[P]; p < basis.first[P + 1]; ++p)
            for (index_t q = basis.first[Q]; q < basis.first[Q + 1]; ++q)
              for (index_t r = basis.first[R]; r < basis.first[R + 1]; ++r)
                for (index_t s = basis.first[S]; s < basis.first[S + 1]; ++s) eri(p * n + q, r * n + s) = *v++;
        }
  return eri;
}

std::vector<ShellPair> rank_pairs(index_t n_shells) {
  std::vector<ShellPair> pairs;
  for (index_t i = 0; i < n_shells; ++i)
    for (index_t j = 0; j <= i; ++j) pairs.emplace_back(i, j);
  return pairs;
}

PairLayout::PairLayout(const Basis& basis, std::vector<index_t> shell_order, const std::vector<ShellPair>& pairs)
    : nbf_(basis.nbf()), shell_(std::move(shell_order)), offset_{0} {
  const index_t n = basis.n_shells();
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  bool permutation = static_cast<index_t>(shell_.size()) == n;
  for (std::size_t r = 0; permutation && r < shell_.size(); ++r) {
    permutation = shell_[r] >= 0 && shell_[r] < n && !seen[static_cast<std::size_t>(shell_[r])];
    if (permutation) seen[static_cast<std::size_t>(shell_[r])] = true;
  }
  if (!permutation)
    throw InvalidArgument("PairLayout: shell_order is not a permutation of the " + std::to_string(n) + " shells");
  for (const index_t P : shell_) {
    first_.push_back(basis.first[static_cast<std::size_t>(P)]);
    size_.push_back(basis.shells[static_cast<std::size_t>(P)].size());
  }
  if (static_cast<index_t>(pairs.size()) != n * (n + 1) / 2)
    throw InvalidArgument("PairLayout: pairs has " + std::to_string(pairs.size()) + " entries, expected " +
                          std::to_string(n * (n + 1) / 2) + " shell pairs");
  id_.assign(static_cast<std::size_t>(n * n), -1);
  for (const auto& [i, j] : pairs) {
    if (i < 0 || i >= n || j < 0 || j > i || id_[static_cast<std::size_t>(i * n + j)] >= 0)
      throw InvalidArgument("PairLayout: pairs[" + std::to_string(ranks_.size()) + "] = (" + std::to_string(i) + ", " +
                            std::to_string(j) + ") is not a new pair (i, j) with n > i >= j >= 0");
    id_[static_cast<std::size_t>(i * n + j)] = static_cast<index_t>(ranks_.size());
    ranks_.emplace_back(i, j);
    offset_.push_back(offset_.back() + size(i) * size(j));
  }
}

void PairLayout::gather(DenseView<const double> D, double off_diagonal_weight, std::span<double> x) const {
  for (index_t pq = 0; pq < n_pairs(); ++pq) {
    const auto [i, j] = ranks(pq);
    const double w = i > j ? off_diagonal_weight : 1.0;
    double* out = x.data() + offset(pq);
    for (index_t p = first(i); p < first(i) + size(i); ++p)
      for (index_t q = first(j); q < first(j) + size(j); ++q) *out++ = w * D(p, q);
  }
}

void PairLayout::scatter(std::span<const double> y, DenseView<double> M) const {
  for (index_t pq = 0; pq < n_pairs(); ++pq) {
    const auto [i, j] = ranks(pq);
    const double* in = y.data() + offset(pq);
    for (index_t p = first(i); p < first(i) + size(i); ++p)
      for (index_t q = first(j); q < first(j) + size(j); ++q) M(p, q) = M(q, p) = *in++;
  }
}

EriSupermatrices::EriSupermatrices(PairLayout coulomb_layout, BsrMatrix<double> coulomb, PairLayout exchange_layout,
                                   BsrMatrix<double> exchange, EriStats stats)
    : coulomb_layout_(std::move(coulomb_layout)),
      exchange_layout_(std::move(exchange_layout)),
      coulomb_(std::move(coulomb)),
      exchange_(std::move(exchange)),
      stats_(stats),
      x_(static_cast<std::size_t>(coulomb_layout_.dim())),
      y_(static_cast<std::size_t>(coulomb_layout_.dim())) {
  if (coulomb_layout_.nbf() != exchange_layout_.nbf() || coulomb_.rows() != coulomb_layout_.dim() ||
      exchange_.rows() != exchange_layout_.dim() || coulomb_.cols() != coulomb_.rows() ||
      exchange_.cols() != exchange_.rows())
    throw DimensionMismatch("EriSupermatrices: the supermatrices (" + std::to_string(coulomb_.rows()) + " x " +
                            std::to_string(coulomb_.cols()) + ", " + std::to_string(exchange_.rows()) + " x " +
                            std::to_string(exchange_.cols()) + ") do not match their pair layouts (" +
                            std::to_string(coulomb_layout_.dim()) + ", " + std::to_string(exchange_layout_.dim()) +
                            ")");
}

void EriSupermatrices::coulomb_exchange(DenseView<const double> D, DenseView<double> J, DenseView<double> K) const {
  const index_t n = coulomb_layout_.nbf();
  for (const auto& [name, rows, cols] : {std::tuple{"D", D.rows, D.cols}, std::tuple{"J", J.rows, J.cols},
                                         std::tuple{"K", K.rows, K.cols}})
    if (rows != n || cols != n)
      throw DimensionMismatch(std::string("coulomb_exchange: ") + name + " is " + std::to_string(rows) + " x " +
                              std::to_string(cols) + ", expected nbf x nbf = " + std::to_string(n) + " x " +
                              std::to_string(n));
  coulomb_layout_.gather(D, 2.0, x_);
  spmv(1.0, coulomb_, x_, 0.0, std::span<double>(y_));
  coulomb_layout_.scatter(y_, J);
  exchange_layout_.gather(D, 1.0, x_);
  spmv(1.0, exchange_, x_, 0.0, std::span<double>(y_));
  exchange_layout_.scatter(y_, K);
}

EriSupermatrices build_eri(const Basis& basis, const EriOptions& options) {
  if (!(options.threshold >= 0.0) || !std::isfinite(options.threshold))
    throw InvalidArgument("build_eri: threshold = " + std::to_string(options.threshold) +
                          " must be finite and >= 0");
  const index_t b = options.block_size;
  if (b < 1 || b > 1024 || !std::has_single_bit(static_cast<std::uint64_t>(b)))
    throw InvalidArgument("build_eri: block_size = " + std::to_string(b) + " must be a power of two in [1, 1024]");
  const std::vector<index_t> order = spatial_shell_order(basis);
  const std::vector<libint2::Shell> by_number = libint_shells(basis);
  std::vector<libint2::Shell> shells;  // by rank: from here on, shells are named by rank
  for (const index_t P : order) shells.push_back(by_number[static_cast<std::size_t>(P)]);
  const auto size = [&basis, &order](index_t r) { return basis.shells[static_cast<std::size_t>(order[r])].size(); };
  // No primitive screening in libint2: its estimates are not bounds. With its default
  // precision (machine epsilon) it returns (PQ|PQ) = 0 for a diffuse C p / H s pair 7 Å apart
  // in decane/6-31G, where (PQ|PQ) = 1.2e-12 and (PQ|RS) reaches 8.5e-7: Q_PQ = 0 would drop
  // them all (1.1e-6 Eh in the energy). The Schwarz threshold is the only screening.
  libint2::Engine engine(libint2::Operator::coulomb, basis.max_primitives(), basis.max_l());
  engine.set_precision(0.0);
  EriStats stats;

  // The Schwarz diagonal: max |(pq|pq)| over each shell pair, in rank order.
  auto start = Clock::now();
  const std::vector<ShellPair> by_rank = rank_pairs(static_cast<index_t>(order.size()));
  std::vector<double> diag(by_rank.size(), 0.0);
  for (std::size_t pq = 0; pq < by_rank.size(); ++pq) {
    const auto [i, j] = by_rank[pq];
    engine.compute(shells[i], shells[j], shells[i], shells[j]);
    const double* buf = engine.results()[0];
    if (buf == nullptr) continue;
    const index_t ni = size(i), nj = size(j);
    for (index_t a = 0; a < ni; ++a)
      for (index_t c = 0; c < nj; ++c)
        diag[pq] = std::max(diag[pq], std::abs(buf[((a * nj + c) * ni + a) * nj + c]));
  }
  const std::vector<double> rank_Q = schwarz_bounds(std::span<const double>(diag));
  stats.schwarz_seconds = seconds_since(start);

  // Jsup's pairs by decreasing bound; Q in that order.
  std::vector<std::size_t> by_bound(by_rank.size());
  for (std::size_t k = 0; k < by_bound.size(); ++k) by_bound[k] = k;
  std::stable_sort(by_bound.begin(), by_bound.end(),
                   [&rank_Q](std::size_t x, std::size_t y) { return rank_Q[x] > rank_Q[y]; });
  std::vector<ShellPair> coulomb_pairs;
  std::vector<double> Q;
  for (const std::size_t k : by_bound) {
    coulomb_pairs.push_back(by_rank[k]);
    Q.push_back(rank_Q[k]);
  }
  PairLayout layout(basis, order, coulomb_pairs);  // of Jsup, and the quartets' numbering
  PairLayout exchange_layout(basis, order, by_rank);
  const index_t n_pairs = layout.n_pairs();
  stats.shell_pairs = n_pairs;
  stats.quartets = n_pairs * (n_pairs + 1) / 2;

  // The computed quartets (PQ|RS), PQ >= RS in Jsup's pair numbering, are the lower
  // triangle of screen_quartets; every image of one lands in a rectangle of Jsup (when
  // it is in pair order) or of Ksup. Marking the rectangles gives both block patterns.
  start = Clock::now();
  const CsrMatrix<double> kept = screen_quartets(Q, options.threshold);
  stats.kept_quartet_fraction = sparsity_stats(kept).density;
  const std::span<const index_t> row_ptr = kept.row_ptr();
  const std::span<const index_t> cols = kept.col_indices();
  const auto for_each_quartet = [&](auto&& f) {
    for (index_t pq = 0; pq < n_pairs; ++pq) {
      const auto [i, j] = layout.ranks(pq);
      for (index_t at = row_ptr[pq]; at < row_ptr[pq + 1] && cols[at] <= pq; ++at) {
        const auto [k, l] = layout.ranks(cols[at]);
        f(Quartet{i, j, k, l});
      }
    }
  };
  const auto pair_offset = [&layout](index_t I, index_t J) { return layout.offset(layout.pair(I, J)); };
  const auto exchange_offset = [&exchange_layout](index_t I, index_t J) {
    return exchange_layout.offset(exchange_layout.pair(I, J));
  };
  const index_t dim = layout.dim();
  BlockGrid coulomb_grid(dim, b), exchange_grid(dim, b);
  for_each_quartet([&](const Quartet& s) {
    ++stats.quartets_computed;
    for_each_image(s, [&](const std::array<int, 4>&, const Quartet& t) {
      const auto [I, J, K, L] = t;
      if (I >= J && K >= L) coulomb_grid.mark(pair_offset(I, J), size(I) * size(J), pair_offset(K, L), size(K) * size(L));
      if (I >= K)
        exchange_grid.mark(exchange_offset(I, K), size(I) * size(K), exchange_offset(std::max(J, L), std::min(J, L)),
                           size(J) * size(L));
    });
  });
  BsrMatrix<double> coulomb = coulomb_grid.matrix(dim);
  BsrMatrix<double> exchange = exchange_grid.matrix(dim);
  stats.blocks = coulomb_grid.blocks();
  stats.coulomb_blocks = coulomb.n_blocks();
  stats.exchange_blocks = exchange.n_blocks();
  stats.kept_block_fraction = static_cast<double>(stats.coulomb_blocks + stats.exchange_blocks) /
                              (2.0 * static_cast<double>(stats.blocks));
  stats.structure_seconds = seconds_since(start);

  // The integrals: (ij|kl) goes to Jsup[(ij), (kl)] when I >= J and K >= L, and to
  // Ksup[(ik), (jl) or (lj)] when I >= K (as its (pr|qs) or its (ps|qr) term).
  start = Clock::now();
  const std::span<double> jv = coulomb.blocks();
  const std::span<double> kv = exchange.blocks();
  for_each_quartet([&](const Quartet& s) {
    engine.compute(shells[s[0]], shells[s[1]], shells[s[2]], shells[s[3]]);
    const double* buf = engine.results()[0];
    if (buf == nullptr) return;  // screened by libint2: all zero
    const std::array<index_t, 4> n{size(s[0]), size(s[1]), size(s[2]), size(s[3])};
    for_each_image(s, [&](const std::array<int, 4>& perm, const Quartet& t) {
      const auto [I, J, K, L] = t;
      const bool to_j = I >= J && K >= L;
      const bool to_k = I >= K;
      if (!to_j && !to_k) return;
      const index_t nJ = size(J), nK = size(K), nL = size(L);
      const index_t oIJ = I >= J ? pair_offset(I, J) : 0, oKL = K >= L ? pair_offset(K, L) : 0;
      const index_t oIK = to_k ? exchange_offset(I, K) : 0;
      const index_t oJL = exchange_offset(std::max(J, L), std::min(J, L));
      std::array<index_t, 4> f{};  // (a, b, c, d) of the computed quartet
      const double* v = buf;
      for (f[0] = 0; f[0] < n[0]; ++f[0])
        for (f[1] = 0; f[1] < n[1]; ++f[1])
          for (f[2] = 0; f[2] < n[2]; ++f[2])
            for (f[3] = 0; f[3] < n[3]; ++f[3], ++v) {
              const index_t i = f[perm[0]], j = f[perm[1]], k = f[perm[2]], l = f[perm[3]];
              if (to_j) jv[coulomb_grid.at(oIJ + i * nJ + j, oKL + k * nL + l)] = *v;
              if (to_k) kv[exchange_grid.at(oIK + i * nK + k, J >= L ? oJL + j * nL + l : oJL + l * nJ + j)] += *v;
            }
    });
  });
  stats.eri_seconds = seconds_since(start);
  return {std::move(layout), std::move(coulomb), std::move(exchange_layout), std::move(exchange), stats};
}

}  // namespace trnsparse::hf
