// Smoothed-aggregation AMG: argument checks, the V-cycle, rigid-body modes. The
// hierarchy is built by amg_setup.cpp.
//
// The V-cycle solves A_l x = b_l from x = 0 on every level: Chebyshev smoothing of
// degree K on D⁻¹A (K products; the last one leaves the residual), restriction r_c = R r
// with R = Pᵀ stored, the next level, x += P x_c, then K Chebyshev steps again from the
// residual of the corrected x. Pre- and post-smoother are the same polynomial in D⁻¹A,
// which is self-adjoint in the A inner product, and the coarse correction is an
// A-orthogonal projection: the cycle's error propagation is A-self-adjoint, so M⁻¹ is
// symmetric (and positive definite while the smoother contracts), as CG needs. No inner
// product is taken; every pass writes each row from one thread and the products are the
// library's deterministic ones, so z is the same bits for any thread count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <numeric>

#include "ops/run.hpp"
#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
#include "solvers/amg.hpp"
#include "solvers/chunked.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse {

namespace {

using detail::concat;

/// The near-nullspace and block sizes checked options give.
struct Setup {
  index_t b = 1, k = 1, g = 1;
  std::vector<double> B;
};

template <SolverValue T>
Setup check_options(index_t rows, index_t cols, index_t input_block, const AmgOptions<T>& o) {
  if (rows != cols) throw InvalidArgument(concat("amg: A is ", rows, " x ", cols, ", expected a square matrix"));
  if (o.block_size < 0)
    throw InvalidArgument(concat("amg: options.block_size = ", o.block_size, ", expected >= 0 (0: A's block size)"));
  Setup s;
  s.b = o.block_size > 0 ? o.block_size : input_block;
  if (rows % s.b != 0)
    throw InvalidArgument(concat("amg: options.block_size = ", s.b, " does not divide A's ", rows, " rows"));
  if (rows / s.b >= index_t{1} << 31)
    throw OverflowError(concat("amg: A has ", rows / s.b, " nodes, at most 2^31 - 1"));
  if (!(o.strength_threshold >= 0.0) || !std::isfinite(o.strength_threshold))
    throw InvalidArgument(concat("amg: options.strength_threshold = ", o.strength_threshold,
                                 ", expected a finite value >= 0"));
  if (o.max_coarse < 1) throw InvalidArgument(concat("amg: options.max_coarse = ", o.max_coarse, ", expected >= 1"));
  if (o.max_levels < 1) throw InvalidArgument(concat("amg: options.max_levels = ", o.max_levels, ", expected >= 1"));
  if (o.smoother_degree < 1)
    throw InvalidArgument(concat("amg: options.smoother_degree = ", o.smoother_degree, ", expected >= 1"));
  if (!(o.prolongator_omega > 0.0) || !std::isfinite(o.prolongator_omega))
    throw InvalidArgument(concat("amg: options.prolongator_omega = ", o.prolongator_omega,
                                 ", expected a finite value > 0"));
  const DenseView<const T>& ns = o.near_nullspace;
  if (ns.rows == 0 && ns.cols == 0) {  // one constant per unknown of a node
    s.k = s.b;
    s.B = detail::make_vector<double>(rows * s.k, "amg: near-nullspace");
    for (index_t i = 0; i < rows; ++i) s.B[i * s.k + i % s.b] = 1.0;
  } else {
    if (ns.rows != rows)
      throw DimensionMismatch(
          concat("amg: options.near_nullspace has ", ns.rows, " rows, expected A.rows() = ", rows));
    if (ns.cols < 1)
      throw InvalidArgument("amg: options.near_nullspace has 0 columns, expected k >= 1 near-nullspace vectors");
    if (ns.data == nullptr && rows > 0) throw InvalidArgument("amg: options.near_nullspace has no data");
    s.k = ns.cols;
    s.B = detail::make_vector<double>(rows * s.k, "amg: near-nullspace");
    for (index_t i = 0; i < rows; ++i)
      for (index_t j = 0; j < s.k; ++j) {
        const T v = ns(i, j);
        if (!std::isfinite(v))
          throw InvalidArgument(concat("amg: options.near_nullspace(", i, ", ", j, ") = ", v,
                                       ", expected a finite value"));
        s.B[i * s.k + j] = static_cast<double>(v);
      }
  }
  s.g = std::gcd(s.b, s.k);
  return s;
}

}  // namespace

template <SolverValue T>
struct Amg<T>::Impl {
  index_t rows = 0, k = 1, g = 1;
  AmgOptions<T> options;
  amg::InputShape input;
  std::vector<amg::Level<T>> levels;
  amg::Coarse coarse;
  std::vector<typename Amg<T>::Level> info;
  double seconds = 0.0;
  mutable std::mutex mutex;  // guards work: a concurrent apply allocates its own
  mutable amg::Work<T> work;

  void setup(amg::Mat<T> A0, Setup s) {
    const auto t0 = std::chrono::steady_clock::now();
    k = s.k;
    g = s.g;
    levels.clear();
    levels.emplace_back();
    levels[0].node = s.b;
    levels[0].A = std::move(A0);
    amg::build(levels, coarse, std::move(s.B), k, options, true);
    finish(t0);
  }

  void refresh(amg::Mat<T> A0) {
    const auto t0 = std::chrono::steady_clock::now();
    levels[0].A = std::move(A0);
    amg::build(levels, coarse, {}, k, options, false);
    finish(t0);
  }

  void finish(std::chrono::steady_clock::time_point t0) {
    info.clear();
    for (const auto& L : levels) info.push_back({L.A.rows(), L.A.nnz(), L.node});
    const std::lock_guard lock(mutex);
    work = {};
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void allocate(amg::Work<T>& w) const {
    if (!w.r.empty() || levels.empty()) return;
    const std::size_t nl = levels.size();
    for (auto* v : {&w.b, &w.x, &w.r, &w.d}) v->resize(nl);
    for (std::size_t l = 0; l < nl; ++l) {
      const index_t nl_rows = levels[l].A.rows();
      for (auto* v : {&w.b, &w.x, &w.r, &w.d}) (*v)[l] = detail::make_vector<T>(nl_rows, "amg: cycle vectors");
    }
    w.dense.resize(static_cast<std::size_t>(coarse.n));
  }

  /// f(i0, i1) over chunks of [0, n) on the threads a streaming pass of `values` reads
  /// and writes is worth.
  template <class F>
  static void pass(index_t n, double values, detail::UnitRanges& ranges, F&& f) {
    const index_t chunk = solvers::kChunkRows;
    const index_t chunks = detail::ceil_div(n, chunk);
    detail::parallel_for(detail::parts_for(chunks, detail::work_ns(detail::Work::stream, values)), chunks, ranges,
                         [&](int, index_t c) { f(c * chunk, std::min(n, (c + 1) * chunk)); });
  }

  /// `steps` Chebyshev steps on L.A x = b from x = 0: r = b - A x after every step but
  /// the last, and after the last too when `residual`.
  void smooth_from_zero(const amg::Level<T>& L, const T* b, T* x, T* r, T* d, std::size_t steps, bool residual,
                        detail::UnitRanges& ranges) const {
    const index_t n = L.A.rows();
    const T* dinv = L.dinv.data();
    const double vals = static_cast<double>(n);
    const auto c0 = static_cast<T>(L.cheb_c[0]);
    pass(n, 5 * vals, ranges, [&](index_t i0, index_t i1) {
      for (index_t i = i0; i < i1; ++i) {
        r[i] = b[i];
        d[i] = c0 * dinv[i] * b[i];
        x[i] = d[i];
      }
    });
    const std::span<T> rs(r, static_cast<std::size_t>(n));
    const std::span<const T> ds(d, static_cast<std::size_t>(n));
    for (std::size_t s = 1; s < steps; ++s) {
      L.cycle_spmv(T(-1), ds, T(1), rs);
      const auto a = static_cast<T>(L.cheb_a[s]), c = static_cast<T>(L.cheb_c[s]);
      pass(n, 5 * vals, ranges, [&](index_t i0, index_t i1) {
        for (index_t i = i0; i < i1; ++i) {
          d[i] = a * d[i] + c * dinv[i] * r[i];
          x[i] += d[i];
        }
      });
    }
    if (residual) L.cycle_spmv(T(-1), ds, T(1), rs);
  }

  void cycle(std::size_t l, const T* b, T* x, amg::Work<T>& w) const {
    const amg::Level<T>& L = levels[l];
    const index_t n = L.A.rows();
    if (l + 1 == levels.size()) return solve_last(L, b, x, w);
    T* r = w.r[l].data();
    T* d = w.d[l].data();
    const std::size_t K = L.cheb_a.size();
    smooth_from_zero(L, b, x, r, d, K, true, w.ranges);
    L.R.spmv(T(1), w.r[l], T(0), w.b[l + 1]);
    cycle(l + 1, w.b[l + 1].data(), w.x[l + 1].data(), w);
    const std::span<T> xs(x, static_cast<std::size_t>(n)), rs(r, static_cast<std::size_t>(n));
    L.P.spmv(T(1), w.x[l + 1], T(1), xs);
    L.cycle_spmv(T(-1), xs, T(0), rs);
    const T* dinv = L.dinv.data();
    const double vals = static_cast<double>(n);
    const auto c0 = static_cast<T>(L.cheb_c[0]);
    pass(n, 6 * vals, w.ranges, [&](index_t i0, index_t i1) {
      for (index_t i = i0; i < i1; ++i) {
        r[i] += b[i];
        d[i] = c0 * dinv[i] * r[i];
        x[i] += d[i];
      }
    });
    const std::span<const T> ds(d, static_cast<std::size_t>(n));
    for (std::size_t s = 1; s < K; ++s) {
      L.cycle_spmv(T(-1), ds, T(1), rs);
      const auto a = static_cast<T>(L.cheb_a[s]), c = static_cast<T>(L.cheb_c[s]);
      pass(n, 5 * vals, w.ranges, [&](index_t i0, index_t i1) {
        for (index_t i = i0; i < i1; ++i) {
          d[i] = a * d[i] + c * dinv[i] * r[i];
          x[i] += d[i];
        }
      });
    }
  }

  /// The last level: L Lᵀ x = b in fp64 (rows of L are contiguous: the forward solve takes
  /// dot products of rows, the backward one subtracts x_i times row i), or, without a
  /// factor, Chebyshev smoothing of twice the degree.
  void solve_last(const amg::Level<T>& L, const T* b, T* x, amg::Work<T>& w) const {
    const index_t n = coarse.n;
    if (!coarse.factored) {
      const std::size_t l = levels.size() - 1;
      return smooth_from_zero(L, b, x, w.r[l].data(), w.d[l].data(), L.cheb_a.size(), false, w.ranges);
    }
    double* y = w.dense.data();
    const double* Lm = coarse.L.data();
    for (index_t i = 0; i < n; ++i) {
      if (coarse.skip[i]) {
        y[i] = 0.0;
        continue;
      }
      const double* Li = Lm + i * n;
      double s = static_cast<double>(b[i]);
      for (index_t j = 0; j < i; ++j) s -= Li[j] * y[j];
      y[i] = s / Li[i];
    }
    for (index_t i = n - 1; i >= 0; --i) {
      const double* Li = Lm + i * n;
      const double xi = coarse.skip[i] ? 0.0 : y[i] / Li[i];
      y[i] = xi;
      for (index_t j = 0; j < i; ++j) y[j] -= Li[j] * xi;
    }
    for (index_t i = 0; i < n; ++i) x[i] = static_cast<T>(y[i]);
  }
};

namespace {

template <SolverValue T>
amg::InputShape shape_of(const CsrMatrix<T>& A) {
  return {.bsr = false, .structure = A.structure_ptr()};
}
template <SolverValue T>
amg::InputShape shape_of(const BsrMatrix<T>& A) {
  return {.bsr = true, .structure = A.structure_ptr()};
}

}  // namespace

template <SolverValue T>
Amg<T>::Amg(const CsrMatrix<T>& A, const AmgOptions<T>& options) : impl_(std::make_unique<Impl>()) {
  Setup s = check_options(A.rows(), A.cols(), 1, options);
  impl_->rows = A.rows();
  impl_->options = options;
  impl_->options.near_nullspace = {};
  impl_->input = shape_of(A);
  impl_->setup(amg::fine_operator(A, s.g, "amg"), std::move(s));
}

template <SolverValue T>
Amg<T>::Amg(const BsrMatrix<T>& A, const AmgOptions<T>& options) : impl_(std::make_unique<Impl>()) {
  Setup s = check_options(A.rows(), A.cols(), A.block_size(), options);
  impl_->rows = A.rows();
  impl_->options = options;
  impl_->options.near_nullspace = {};
  impl_->input = shape_of(A);
  impl_->setup(amg::fine_operator(A, s.g, "amg"), std::move(s));
}

template <SolverValue T> Amg<T>::Amg(Amg&&) noexcept = default;
template <SolverValue T> Amg<T>::~Amg() = default;

template <SolverValue T>
index_t Amg<T>::size() const noexcept {
  return impl_->rows;
}

template <SolverValue T>
void Amg<T>::apply(std::span<const T> r, std::span<T> z) const {
  const Impl& m = *impl_;
  detail::check_dim(static_cast<index_t>(r.size()), m.rows, "amg: apply", "r", "elements", "size()");
  detail::check_dim(static_cast<index_t>(z.size()), m.rows, "amg: apply", "z", "elements", "size()");
  if (m.rows == 0) return;
  std::unique_lock lock(m.mutex, std::try_to_lock);
  amg::Work<T> own;
  amg::Work<T>& w = lock.owns_lock() ? m.work : own;
  m.allocate(w);
  const T* b = r.data();
  // z may alias r: the cycle reads b after writing x.
  const auto* rb = reinterpret_cast<const std::byte*>(r.data());
  const auto* zb = reinterpret_cast<const std::byte*>(z.data());
  if (rb < zb + z.size_bytes() && zb < rb + r.size_bytes()) {
    std::copy(r.begin(), r.end(), w.b[0].begin());
    b = w.b[0].data();
  }
  m.cycle(0, b, z.data(), w);
}

template <SolverValue T>
void Amg<T>::update(const CsrMatrix<T>& A) {
  Impl& m = *impl_;
  const amg::InputShape& s = m.input;
  const bool same = !s.bsr && s.is(A.structure_ptr());
  if (!same)
    throw InvalidArgument(concat("amg: update: A (CSR, ", A.rows(), " x ", A.cols(), ", ", A.nnz(),
                                 " entries) does not have the structure M was built from"));
  m.refresh(amg::fine_operator(A, m.g, "amg: update"));
}

template <SolverValue T>
void Amg<T>::update(const BsrMatrix<T>& A) {
  Impl& m = *impl_;
  const amg::InputShape& s = m.input;
  const bool same = s.bsr && s.is(A.structure_ptr());
  if (!same)
    throw InvalidArgument(concat("amg: update: A (BSR, ", A.rows(), " x ", A.cols(), ", block size ", A.block_size(),
                                 ") does not have the structure M was built from"));
  m.refresh(amg::fine_operator(A, m.g, "amg: update"));
}

template <SolverValue T>
std::span<const typename Amg<T>::Level> Amg<T>::levels() const noexcept {
  return impl_->info;
}

template <SolverValue T>
double Amg<T>::setup_seconds() const noexcept {
  return impl_->seconds;
}

template <SolverValue T>
Dense<T> rigid_body_modes(DenseView<const double> coords) {
  if (coords.cols != 3)
    throw DimensionMismatch(concat("rigid_body_modes: coords has ", coords.cols, " columns, expected 3 (x, y, z)"));
  const index_t nodes = coords.rows;
  double c[3] = {0.0, 0.0, 0.0};
  for (index_t i = 0; i < nodes; ++i)
    for (index_t j = 0; j < 3; ++j) {
      if (!std::isfinite(coords(i, j)))
        throw InvalidArgument(
            concat("rigid_body_modes: coords(", i, ", ", j, ") = ", coords(i, j), ", expected a finite value"));
      c[j] += coords(i, j);
    }
  for (double& cj : c) cj /= static_cast<double>(std::max<index_t>(nodes, 1));
  Dense<T> B(3 * nodes, 6);
  for (index_t i = 0; i < nodes; ++i) {
    const double x = coords(i, 0) - c[0], y = coords(i, 1) - c[1], z = coords(i, 2) - c[2];
    for (index_t u = 0; u < 3; ++u) B(3 * i + u, u) = T(1);  // translations
    // Rotations about the x, y and z axes through the centroid: ω × (x, y, z).
    B(3 * i + 1, 3) = static_cast<T>(-z);
    B(3 * i + 2, 3) = static_cast<T>(y);
    B(3 * i + 0, 4) = static_cast<T>(z);
    B(3 * i + 2, 4) = static_cast<T>(-x);
    B(3 * i + 0, 5) = static_cast<T>(-y);
    B(3 * i + 1, 5) = static_cast<T>(x);
  }
  return B;
}

template class Amg<float>;
template class Amg<double>;
template Dense<float> rigid_body_modes<float>(DenseView<const double>);
template Dense<double> rigid_body_modes<double>(DenseView<const double>);

}  // namespace trnsparse
