// Krylov methods with a general preconditioner: CG (z = M⁻¹ r stored), restarted
// GMRES(m) and BiCGStab, both preconditioned on the right so that the residual they
// stop on is b - A x itself.
//
// Every vector pass runs over ChunkedSums' fixed row chunks and sums its reductions in
// fixed order (solvers/chunked.hpp): the same bits for any thread count, and, through
// the operator's `sum`, the same code over a distributed operator (M then applies to a
// process's own rows). Before a solve reports convergence from a recurred or estimated
// residual, it computes b - A x: a solve never reports converged on a residual it has not
// measured.
#include <algorithm>
#include <cmath>
#include <vector>

#include "solvers/chunked.hpp"
#include "solvers/krylov.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse {

namespace solvers {
namespace {

/// Vectors of n values and the operations every method needs on them.
template <SolverValue T>
class Workspace {
public:
  /// `reductions` >= 2 (pass's bodies have two).
  Workspace(const LinearOperator<T>& A, const Preconditioner<T>* M, index_t reductions)
      : A_(A), M_(M), n_(A.size()), sums_(n_, std::max<index_t>(reductions, 2)) {}

  [[nodiscard]] index_t n() const noexcept { return n_; }
  [[nodiscard]] std::vector<T> vector(const char* what) const { return detail::make_vector<T>(n_, what); }

  /// y = A x.
  void product(const T* x, T* y) const {
    A_.apply(DenseView<const T>(x, n_, 1, 1), DenseView<T>(y, n_, 1, 1));
  }
  /// z = M⁻¹ r, or z = r without a preconditioner.
  void precondition(const T* r, T* z) const {
    const auto m = static_cast<std::size_t>(n_);
    if (M_) M_->apply(std::span<const T>(r, m), std::span<T>(z, m));
    else std::copy(r, r + n_, z);
  }

  /// Runs body(i, lane, lanes) for every row (lanes[j * kLanes + lane] being reduction
  /// j's lane, j < 2) over `touched` values per row, then totals the reductions. The
  /// body adds into the chunk's lanes held in locals, which the compiler keeps in
  /// registers, and they join the chunk's slots once at its end.
  template <class Body>
  void pass(double touched, Body&& body) {
    sums_.run(detail::work_ns(detail::Work::stream, touched * static_cast<double>(n_)),
              [&](index_t r0, index_t r1, double* lanes) {
                double acc[2 * kLanes] = {};
                for_rows(r0, r1, [&](index_t i, index_t l) { body(i, l, acc); });
                for (index_t k = 0; k < 2 * kLanes; ++k) lanes[k] += acc[k];
              });
    sums_.reduce(A_);
  }
  /// As pass, with the body given a whole chunk [r0, r1).
  template <class Body>
  void chunk_pass(double touched, Body&& body) {
    sums_.run(detail::work_ns(detail::Work::stream, touched * static_cast<double>(n_)), body);
    sums_.reduce(A_);
  }
  [[nodiscard]] double sum(index_t j) const { return sums_.sum(j); }

  /// r = b - A x (x null: r = b) with ||r||² in sum(0) and ||b||² in sum(1); `scratch`
  /// holds A x.
  void residual(std::span<const T> b, const T* x, T* r, T* scratch) {
    if (x) product(x, scratch);
    pass(3.0, [&](index_t i, index_t l, double* lanes) {
      const T v = x ? b[i] - scratch[i] : b[i];
      r[i] = v;
      lanes[l] += static_cast<double>(v) * static_cast<double>(v);
      lanes[kLanes + l] += static_cast<double>(b[i]) * static_cast<double>(b[i]);
    });
  }

  const LinearOperator<T>& op() const noexcept { return A_; }

private:
  const LinearOperator<T>& A_;
  const Preconditioner<T>* M_;
  index_t n_;
  ChunkedSums sums_;
};

/// The argument checks every method shares, agreed on over the processes.
template <SolverValue T>
void check_arguments(const LinearOperator<T>& A, std::span<const T> b, std::span<const T> x0, double tol,
                     index_t max_iter, const Preconditioner<T>* M, const char* who) {
  const index_t n = A.size();
  A.agree([&] {
    check_vector(b, n, false, who, "b", "A.size()");
    check_vector(x0, n, true, who, "x0", "A.size()");
    if (!(tol >= 0.0)) throw InvalidArgument(detail::concat(who, ": tol = ", tol, " must be >= 0"));
    detail::check_nonnegative(max_iter, detail::concat(who, ": max_iter").c_str());
    if (M && M->size() != n)
      throw InvalidArgument(detail::concat(who, ": the preconditioner M (", M->name(), ") is for ", M->size(),
                                           " rows, A has ", n));
  });
}

/// Adds a[i] b[i] over rows [r0, r1) to the kLanes lanes at `lanes` (row r0 + k to lane
/// k % kLanes), through locals the compiler keeps in registers.
template <class T>
void dot_lanes(index_t r0, index_t r1, const T* a, const T* b, double* lanes) {
  double acc[kLanes] = {};
  for_rows(r0, r1, [&](index_t i, index_t l) { acc[l] += static_cast<double>(a[i]) * static_cast<double>(b[i]); });
  for (index_t l = 0; l < kLanes; ++l) lanes[l] += acc[l];
}

/// The relative residual ||r|| / ||b|| from squared norms (||r|| when b = 0).
double relative(double rr, double bb) { return bb > 0.0 ? std::sqrt(rr / bb) : std::sqrt(rr); }

/// Starts a solve from r = b - A x (x = res.x, read only when `has_x0`; `scratch` holds
/// A x): ||b||² in `bb`, and true when the solve ends here: b = 0 gives x = 0 exactly,
/// and a start within tol is converged. ws.sum(0) keeps ||r||².
template <SolverValue T>
bool start(Workspace<T>& ws, std::span<const T> b, bool has_x0, SolveResult<T>& res, double tol, T* r, T* scratch,
           double& bb) {
  ws.residual(b, has_x0 ? res.x.data() : nullptr, r, scratch);
  bb = ws.sum(1);
  if (bb == 0.0) {
    std::fill(res.x.begin(), res.x.end(), T(0));
    res.status = SolveStatus::converged;
    return true;
  }
  res.rel_residual = relative(ws.sum(0), bb);
  if (res.rel_residual <= tol) res.status = SolveStatus::converged;
  return res.status == SolveStatus::converged;
}

}  // namespace

template <SolverValue T>
SolveResult<T> preconditioned_cg(const LinearOperator<T>& A, std::span<const T> b, std::span<const T> x0,
                                 const CgOptions<T>& opt) {
  const char* who = "cg";
  check_arguments(A, b, x0, opt.tol, opt.max_iter, opt.M, who);
  Workspace<T> ws(A, opt.M, 2);
  SolveResult<T> res{ws.vector("cg: x"), 0, 0.0, SolveStatus::max_iterations};
  T* x = res.x.data();
  std::vector<T> r = ws.vector("cg: residual"), z = ws.vector("cg: preconditioned residual"),
                 p = ws.vector("cg: direction"), q = ws.vector("cg: product");
  const bool has_x0 = A.any(!x0.empty());
  std::copy(x0.begin(), x0.end(), x);
  double bb = 0.0;
  if (start(ws, b, has_x0, res, opt.tol, r.data(), q.data(), bb)) return res;
  ws.precondition(r.data(), z.data());
  ws.pass(3.0, [&](index_t i, index_t l, double* lanes) {
    p[i] = z[i];
    lanes[l] += static_cast<double>(r[i]) * static_cast<double>(z[i]);
  });
  double rz = ws.sum(0);
  for (index_t it = 1; it <= opt.max_iter; ++it) {
    if (!(rz > 0.0 && std::isfinite(rz))) {  // M not SPD
      res.status = SolveStatus::breakdown;
      break;
    }
    const double pq = product_dot(A, p.data(), q.data()), alpha = rz / pq;
    if (!(pq > 0.0 && std::isfinite(alpha))) {  // A not SPD, or a non-finite A p
      res.status = SolveStatus::breakdown;
      break;
    }
    const T a = static_cast<T>(alpha);
    ws.pass(5.0, [&](index_t i, index_t l, double* lanes) {
      x[i] += a * p[i];
      r[i] -= a * q[i];
      lanes[l] += static_cast<double>(r[i]) * static_cast<double>(r[i]);
    });
    res.iterations = it;
    res.rel_residual = relative(ws.sum(0), bb);
    if (!std::isfinite(res.rel_residual)) {
      res.status = SolveStatus::breakdown;
      break;
    }
    if (res.rel_residual <= opt.tol) {
      res.status = SolveStatus::converged;
      break;
    }
    if (opt.callback && stop_requested(A, opt.callback, it, res.rel_residual)) {
      res.status = SolveStatus::stopped;
      break;
    }
    ws.precondition(r.data(), z.data());
    ws.pass(2.0, [&](index_t i, index_t l, double* lanes) {
      lanes[l] += static_cast<double>(r[i]) * static_cast<double>(z[i]);
    });
    const double rz_new = ws.sum(0);
    const T beta = static_cast<T>(rz_new / rz);
    rz = rz_new;
    ws.pass(3.0, [&](index_t i, index_t, double*) { p[i] = z[i] + beta * p[i]; });
  }
  return res;
}

}  // namespace solvers

namespace {

using solvers::kLanes;
using solvers::relative;
using solvers::Workspace;

/// Ends a solve whose recurred or estimated residual reached tol: measures b - A x and
/// says whether it is within tol too (into res), leaving the true residual in r.
template <SolverValue T>
bool confirm(Workspace<T>& ws, std::span<const T> b, SolveResult<T>& res, double tol, T* r, T* scratch) {
  ws.residual(b, res.x.data(), r, scratch);
  res.rel_residual = relative(ws.sum(0), ws.sum(1));
  if (res.rel_residual <= tol) res.status = SolveStatus::converged;
  return res.status == SolveStatus::converged;
}

/// The Givens rotation (c, s) taking (a, b) to (r, 0).
void givens(double a, double b, double& c, double& s) {
  if (b == 0.0) {
    c = 1.0;
    s = 0.0;
  } else {
    const double r = std::hypot(a, b);
    c = a / r;
    s = b / r;
  }
}

}  // namespace

template <SolverValue T>
SolveResult<T> gmres(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b, const KrylovOptions<T>& opt) {
  const char* who = "gmres";
  solvers::check_arguments(A, b, opt.x0, opt.tol, opt.max_iter, opt.M, who);
  A.agree([&] {
    if (opt.restart < 1) throw InvalidArgument(detail::concat(who, ": restart = ", opt.restart, " must be >= 1"));
  });
  const index_t m = opt.restart;
  Workspace<T> ws(A, opt.M, m + 1);
  const index_t n = ws.n();
  SolveResult<T> res{ws.vector("gmres: x"), 0, 0.0, SolveStatus::max_iterations};
  T* x = res.x.data();
  std::copy(opt.x0.begin(), opt.x0.end(), x);
  const bool has_x0 = A.any(!opt.x0.empty());
  // The basis V (m + 1 vectors of n, one after another), M⁻¹ v_j's scratch, and the
  // Hessenberg matrix H ((m + 1) x m, column-major), rotations and right-hand side g.
  std::vector<T> V = detail::make_vector<T>(detail::checked_mul(m + 1, n, "gmres: (restart + 1) n"), "gmres: basis");
  std::vector<T> z = ws.vector("gmres: preconditioned vector");
  const auto basis = [&](index_t j) { return V.data() + j * n; };
  std::vector<double> H(static_cast<std::size_t>((m + 1) * m)), cs(static_cast<std::size_t>(m)),
      sn(static_cast<std::size_t>(m)), g(static_cast<std::size_t>(m + 1)), h(static_cast<std::size_t>(m + 1)),
      y(static_cast<std::size_t>(m));
  double bb = 0.0;
  if (solvers::start(ws, b, has_x0, res, opt.tol, basis(0), z.data(), bb)) return res;
  double beta = std::sqrt(ws.sum(0));
  while (res.iterations < opt.max_iter && res.status == SolveStatus::max_iterations) {
    if (!std::isfinite(beta)) {
      res.status = SolveStatus::breakdown;
      break;
    }
    {
      const T scale = static_cast<T>(1.0 / beta);
      T* v0 = basis(0);
      ws.pass(2.0, [&](index_t i, index_t, double*) { v0[i] *= scale; });
    }
    std::fill(g.begin(), g.end(), 0.0);
    g[0] = beta;
    index_t j = 0;  // columns of H built this cycle
    bool stop = false;
    while (j < m && res.iterations < opt.max_iter) {
      ws.precondition(basis(j), z.data());
      T* w = basis(j + 1);
      ws.product(z.data(), w);
      ++res.iterations;
      // CGS2: h = Vᵀw; w -= V h; h2 = Vᵀw; w -= V h2; h += h2. The first subtraction and
      // the second inner products share one sweep (both work row by row), the second
      // subtraction and ||w||² another.
      const index_t k = j + 1;
      ws.chunk_pass(static_cast<double>(k + 1), [&](index_t r0, index_t r1, double* lanes) {
        for (index_t q = 0; q < k; ++q) solvers::dot_lanes(r0, r1, basis(q), w, lanes + q * kLanes);
      });
      for (index_t q = 0; q < k; ++q) h[q] = ws.sum(q);
      ws.chunk_pass(static_cast<double>(2 * k + 2), [&](index_t r0, index_t r1, double* lanes) {
        for (index_t q = 0; q < k; ++q) {
          const T* vq = basis(q);
          const T hq = static_cast<T>(h[q]);
          for (index_t i = r0; i < r1; ++i) w[i] -= hq * vq[i];
        }
        for (index_t q = 0; q < k; ++q) solvers::dot_lanes(r0, r1, basis(q), w, lanes + q * kLanes);
      });
      std::vector<double> h2(static_cast<std::size_t>(k));
      for (index_t q = 0; q < k; ++q) {
        h2[q] = ws.sum(q);
        h[q] += h2[q];
      }
      ws.chunk_pass(static_cast<double>(k + 2), [&](index_t r0, index_t r1, double* lanes) {
        for (index_t q = 0; q < k; ++q) {
          const T* vq = basis(q);
          const T hq = static_cast<T>(h2[q]);
          for (index_t i = r0; i < r1; ++i) w[i] -= hq * vq[i];
        }
        solvers::dot_lanes(r0, r1, w, w, lanes);
      });
      const double hnext = std::sqrt(ws.sum(0));
      if (!std::isfinite(hnext) || !std::all_of(h.begin(), h.begin() + k, [](double v) { return std::isfinite(v); })) {
        res.status = SolveStatus::breakdown;
        stop = true;
        break;
      }
      // The new column of H, rotated by the earlier rotations, and its own rotation.
      double* col = H.data() + j * (m + 1);
      for (index_t q = 0; q < k; ++q) col[q] = h[q];
      col[k] = hnext;
      for (index_t q = 0; q < j; ++q) {
        const double a = col[q], c = col[q + 1];
        col[q] = cs[q] * a + sn[q] * c;
        col[q + 1] = -sn[q] * a + cs[q] * c;
      }
      givens(col[j], col[j + 1], cs[j], sn[j]);
      col[j] = cs[j] * col[j] + sn[j] * col[j + 1];
      col[j + 1] = 0.0;
      g[j + 1] = -sn[j] * g[j];
      g[j] = cs[j] * g[j];
      ++j;
      const double estimate = std::abs(g[j]) / std::sqrt(bb);
      res.rel_residual = estimate;
      if (opt.callback && solvers::stop_requested(A, opt.callback, res.iterations, estimate)) {
        res.status = SolveStatus::stopped;
        stop = true;
        break;
      }
      if (estimate <= opt.tol || hnext == 0.0) break;  // converged, or the Krylov space is invariant
      const T scale = static_cast<T>(1.0 / hnext);
      ws.pass(2.0, [&](index_t i, index_t, double*) { w[i] *= scale; });
    }
    if (j > 0) {
      // y = H⁻¹ g (upper triangular), then x += M⁻¹ (V y).
      for (index_t q = j - 1; q >= 0; --q) {
        double s = g[q];
        for (index_t c = q + 1; c < j; ++c) s -= H[c * (m + 1) + q] * y[c];
        y[q] = s / H[q * (m + 1) + q];
      }
      if (!std::all_of(y.begin(), y.begin() + j, [](double v) { return std::isfinite(v); })) {
        res.status = SolveStatus::breakdown;
        break;
      }
      T* u = basis(m);  // v_m is not needed once y is known (at most j <= m vectors are read)
      std::vector<T> yt(static_cast<std::size_t>(j));
      for (index_t q = 0; q < j; ++q) yt[q] = static_cast<T>(y[q]);
      ws.chunk_pass(static_cast<double>(j + 1), [&](index_t r0, index_t r1, double*) {
        for (index_t i = r0; i < r1; ++i) u[i] = yt[0] * V[static_cast<std::size_t>(i)];
        for (index_t q = 1; q < j; ++q) {
          const T* vq = basis(q);
          for (index_t i = r0; i < r1; ++i) u[i] += yt[q] * vq[i];
        }
      });
      ws.precondition(u, z.data());
      ws.pass(3.0, [&](index_t i, index_t, double*) { x[i] += z[i]; });
    }
    if (stop) {
      // Report the true residual of the iterate returned.
      ws.residual(b, x, basis(0), z.data());
      res.rel_residual = relative(ws.sum(0), ws.sum(1));
      break;
    }
    // The true residual: the next cycle's start, and the test that ends the solve.
    if (confirm(ws, b, res, opt.tol, basis(0), z.data())) break;
    beta = std::sqrt(ws.sum(0));
  }
  return res;
}

template <SolverValue T>
SolveResult<T> bicgstab(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b,
                        const KrylovOptions<T>& opt) {
  const char* who = "bicgstab";
  solvers::check_arguments(A, b, opt.x0, opt.tol, opt.max_iter, opt.M, who);
  Workspace<T> ws(A, opt.M, 2);
  SolveResult<T> res{ws.vector("bicgstab: x"), 0, 0.0, SolveStatus::max_iterations};
  T* x = res.x.data();
  std::copy(opt.x0.begin(), opt.x0.end(), x);
  const bool has_x0 = A.any(!opt.x0.empty());
  std::vector<T> r = ws.vector("bicgstab: residual"), rhat = ws.vector("bicgstab: shadow residual"),
                 p = ws.vector("bicgstab: direction"), v = ws.vector("bicgstab: A p"), t = ws.vector("bicgstab: A s"),
                 ph = ws.vector("bicgstab: M⁻¹ p"), sh = ws.vector("bicgstab: M⁻¹ s");
  double bb = 0.0;
  if (solvers::start(ws, b, has_x0, res, opt.tol, r.data(), t.data(), bb)) return res;
  // (Re)starts from the residual in r: r̂ = r, p = v = 0, ρ = α = ω = 1; returns r̂ᵀr.
  double rho_prev = 1.0, alpha = 1.0, omega = 1.0;
  const auto restart = [&] {
    ws.pass(5.0, [&](index_t i, index_t l, double* lanes) {
      rhat[i] = r[i];
      p[i] = T(0);
      v[i] = T(0);
      lanes[l] += static_cast<double>(r[i]) * static_cast<double>(r[i]);
    });
    rho_prev = alpha = omega = 1.0;
    return ws.sum(0);
  };
  double rho = restart();
  for (index_t it = 1; it <= opt.max_iter; ++it) {
    if (!(rho != 0.0 && std::isfinite(rho))) {
      res.status = SolveStatus::breakdown;
      break;
    }
    const T beta = static_cast<T>((rho / rho_prev) * (alpha / omega)), w_prev = static_cast<T>(omega);
    ws.pass(4.0, [&](index_t i, index_t, double*) { p[i] = r[i] + beta * (p[i] - w_prev * v[i]); });
    ws.precondition(p.data(), ph.data());
    ws.product(ph.data(), v.data());
    ws.pass(2.0, [&](index_t i, index_t l, double* lanes) {
      lanes[l] += static_cast<double>(rhat[i]) * static_cast<double>(v[i]);
    });
    const double rv = ws.sum(0);
    alpha = rho / rv;
    if (!(rv != 0.0 && std::isfinite(alpha))) {
      res.status = SolveStatus::breakdown;
      break;
    }
    const T a = static_cast<T>(alpha);
    // s = r - α v, in r.
    ws.pass(3.0, [&](index_t i, index_t l, double* lanes) {
      r[i] -= a * v[i];
      lanes[l] += static_cast<double>(r[i]) * static_cast<double>(r[i]);
    });
    res.iterations = it;
    if (relative(ws.sum(0), bb) <= opt.tol) {
      ws.pass(3.0, [&](index_t i, index_t, double*) { x[i] += a * ph[i]; });
      if (confirm(ws, b, res, opt.tol, r.data(), t.data())) break;
      rho = restart();
      continue;
    }
    ws.precondition(r.data(), sh.data());
    ws.product(sh.data(), t.data());
    ws.pass(2.0, [&](index_t i, index_t l, double* lanes) {
      lanes[l] += static_cast<double>(t[i]) * static_cast<double>(r[i]);
      lanes[kLanes + l] += static_cast<double>(t[i]) * static_cast<double>(t[i]);
    });
    omega = ws.sum(0) / ws.sum(1);
    if (!(omega != 0.0 && std::isfinite(omega))) {
      ws.pass(3.0, [&](index_t i, index_t, double*) { x[i] += a * ph[i]; });  // the half step is still good
      res.status = SolveStatus::breakdown;
      break;
    }
    const T w = static_cast<T>(omega);
    rho_prev = rho;
    ws.pass(8.0, [&](index_t i, index_t l, double* lanes) {
      x[i] += a * ph[i] + w * sh[i];
      r[i] -= w * t[i];
      lanes[l] += static_cast<double>(r[i]) * static_cast<double>(r[i]);
      lanes[kLanes + l] += static_cast<double>(rhat[i]) * static_cast<double>(r[i]);
    });
    rho = ws.sum(1);
    res.rel_residual = relative(ws.sum(0), bb);
    if (!std::isfinite(res.rel_residual)) {
      res.status = SolveStatus::breakdown;
      break;
    }
    if (opt.callback && solvers::stop_requested(A, opt.callback, it, res.rel_residual)) {
      res.status = SolveStatus::stopped;
      break;
    }
    if (res.rel_residual <= opt.tol) {
      if (confirm(ws, b, res, opt.tol, r.data(), t.data())) break;
      rho = restart();
    }
  }
  if (res.status != SolveStatus::converged) {
    // Report the true residual of the iterate returned.
    ws.residual(b, x, r.data(), t.data());
    res.rel_residual = relative(ws.sum(0), ws.sum(1));
  }
  return res;
}

#define TRNSPARSE_INSTANTIATE(T)                                                                                      \
  template SolveResult<T> solvers::preconditioned_cg<T>(const LinearOperator<T>&, std::span<const T>,                \
                                                        std::span<const T>, const CgOptions<T>&);                    \
  template SolveResult<T> gmres<T>(const LinearOperator<T>&, std::span<const T>, const KrylovOptions<T>&);           \
  template SolveResult<T> bicgstab<T>(const LinearOperator<T>&, std::span<const T>, const KrylovOptions<T>&);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
