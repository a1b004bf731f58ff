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
#include <memory>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "runtime/huge_pages.hpp"
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
  /// Runs body(r0, r1) on every chunk [r0, r1) of rows: an update without reductions.
  template <class Body>
  void chunk_update(double touched, Body&& body) {
    sums_.run(detail::work_ns(detail::Work::stream, touched * static_cast<double>(n_)),
              [&](index_t r0, index_t r1, double*) { body(r0, r1); });
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
  Workspace<T> ws(A, opt.M, 2 * (m + 1));
  const index_t n = ws.n();
  SolveResult<T> res{ws.vector("gmres: x"), 0, 0.0, SolveStatus::max_iterations};
  T* x = res.x.data();
  std::copy(opt.x0.begin(), opt.x0.end(), x);
  const bool has_x0 = A.any(!opt.x0.empty());
  // The basis V (m + 1 vectors of n, one after another; on huge pages and faulted in by
  // the threaded passes that first write each vector: a serial fill of fresh memory
  // takes longer than a cycle), M⁻¹ v's scratch, the Hessenberg matrix as computed (R,
  // (m + 1) x m, column-major) and rotated (H), the rotations and the right-hand side g.
  const detail::Block<T> V =
      detail::huge_untouched<T>(detail::checked_mul(m + 1, n, "gmres: (restart + 1) n"), "gmres: basis");
  std::vector<T> z = ws.vector("gmres: preconditioned vector");
  const auto basis = [&](index_t j) { return V.get() + j * n; };
  const kernels::BasisKernels<T>& sweeps = dispatch::basis_kernels<T>();
  const auto size = [](index_t k) { return static_cast<std::size_t>(k); };
  std::vector<double> R(size((m + 1) * m)), H(size((m + 1) * m)), cs(size(m)), sn(size(m)), g(size(m + 1)),
      h(size(m + 1)), s(size(m + 1)), t(size(m + 1)), f(size(m + 1)), y(size(m));
  std::vector<T> su(size(m + 1)), sy(size(m + 1)), yt(size(m));  // coefficients in T for the sweeps
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
    // Delayed CGS2 (Świrydowicz et al. 2020): two sweeps over the basis per iteration
    // where CGS2 takes three, with CGS2's orthogonality. Column p of the Hessenberg
    // matrix is finished one iteration late: with v_0..v_p final, w_p = A M⁻¹ v_p
    // projected once gives the candidate u = w_p - V h (in v_{p+1}'s slot), whose
    // reorthogonalisation coefficients come with the next iteration's inner products.
    // That iteration applies the operator to u itself, y = A M⁻¹ u, and one sweep gives
    // s = Vᵀu, uᵀu, Vᵀy and uᵀy; then v_{p+1} = (u - V s) / ρ, and since A M⁻¹ V = V R,
    // w_{p+1} = (y - V R s) / ρ, whose projection on v_0..v_{p+1} follows from those sums.
    // A second sweep writes v_{p+1} and the next candidate.
    index_t cols = 0;      // final columns of the Hessenberg matrix this cycle
    bool pending = false;  // column `cols` projected once, its candidate in basis(cols + 1)
    bool stop = false;     // the solve ends after this cycle
    bool ends = false;     // this cycle ends (converged, invariant, stopped, or out of room)
    // Finishes column p = cols from its reorthogonalisation s (p + 1 values) and the
    // squared norm uu of its candidate: ρ = ||u - V s||, rotations, the residual estimate.
    const auto finish_column = [&](double uu) -> double {
      const index_t p = cols;
      double ss = 0.0;
      for (index_t q = 0; q <= p; ++q) ss += s[q] * s[q];
      const double rho = std::sqrt(std::max(uu - ss, 0.0));
      double* raw = R.data() + p * (m + 1);
      for (index_t q = 0; q <= p; ++q) raw[q] = h[q] + s[q];
      raw[p + 1] = rho;
      ++res.iterations;
      if (!std::all_of(raw, raw + p + 2, [](double v) { return std::isfinite(v); })) {
        res.status = SolveStatus::breakdown;  // the column stays out of the update
        stop = ends = true;
        return 0.0;
      }
      double* col = H.data() + p * (m + 1);
      std::copy(raw, raw + p + 2, col);
      for (index_t q = 0; q < p; ++q) {
        const double a = col[q], c = col[q + 1];
        col[q] = cs[q] * a + sn[q] * c;
        col[q + 1] = -sn[q] * a + cs[q] * c;
      }
      givens(col[p], col[p + 1], cs[p], sn[p]);
      col[p] = cs[p] * col[p] + sn[p] * col[p + 1];
      col[p + 1] = 0.0;
      g[p + 1] = -sn[p] * g[p];
      g[p] = cs[p] * g[p];
      ++cols;
      const double estimate = std::abs(g[cols]) / std::sqrt(bb);
      res.rel_residual = estimate;
      if (opt.callback && solvers::stop_requested(A, opt.callback, res.iterations, estimate)) {
        res.status = SolveStatus::stopped;
        stop = ends = true;
      } else if (estimate <= opt.tol || rho == 0.0) {
        ends = true;  // converged, or the Krylov space is invariant
      }
      return rho;
    };
    while (!ends) {
      // The operator goes on the candidate (or on v_0 at a cycle's start) when the column
      // it starts fits in the basis and within max_iter.
      const index_t next = cols + (pending ? 1 : 0);
      const bool apply = next < m && res.iterations + (pending ? 1 : 0) < opt.max_iter;
      T* u = basis(next);  // v_0 at a cycle's start
      if (!apply) {  // (pending: a cycle's first column always fits)
        // The last column: s = Vᵀu and uᵀu only.
        const index_t k = cols + 1;
        ws.chunk_pass(static_cast<double>(k + 1), [&](index_t r0, index_t r1, double* lanes) {
          sweeps.dots(V.get(), n, k, u, u, r0, r1, lanes);
        });
        for (index_t q = 0; q < k; ++q) s[q] = ws.sum(2 * q);
        (void)finish_column(ws.sum(2 * k));
        break;
      }
      T* w = basis(next + 1);
      ws.precondition(u, z.data());
      ws.product(z.data(), w);
      if (!pending) {
        // A cycle's first column: h = v_0ᵀw, u = w - v_0 h.
        ws.chunk_pass(2.0, [&](index_t r0, index_t r1, double* lanes) { sweeps.dots(u, n, 1, w, w, r0, r1, lanes); });
        h[0] = ws.sum(0);
        const T h0 = static_cast<T>(h[0]);
        ws.chunk_update(3.0, [&](index_t r0, index_t r1) {
          sweeps.update(u, n, 1, &h0, nullptr, T(1), T(0), w, nullptr, r0, r1);
        });
        pending = true;
        continue;
      }
      // One sweep: s = Vᵀu, t = Vᵀy over v_0..v_p, then uᵀu and uᵀy (y in w).
      const index_t k = cols + 1;
      ws.chunk_pass(static_cast<double>(k + 2), [&](index_t r0, index_t r1, double* lanes) {
        sweeps.dots(V.get(), n, k, u, w, r0, r1, lanes);
      });
      for (index_t q = 0; q < k; ++q) {
        s[q] = ws.sum(2 * q);
        t[q] = ws.sum(2 * q + 1);
      }
      const double uu = ws.sum(2 * k), uy = ws.sum(2 * k + 1);
      const double rho = finish_column(uu);
      if (ends) break;
      // f = R s over the k finished columns (k + 1 values, along v_0..v_k): V R s = A M⁻¹ V s.
      std::fill(f.begin(), f.begin() + k + 1, 0.0);
      for (index_t c = 0; c < k; ++c)
        for (index_t q = 0; q <= c + 1; ++q) f[q] += R[c * (m + 1) + q] * s[c];
      // w_{k} = (y - V f) / ρ; its projection h on v_0..v_k (v_k = (u - V s) / ρ):
      // Vᵀw = (t - f) / ρ, v_kᵀw = ((uᵀy - sᵀt) / ρ - f_k) / ρ.
      double st = 0.0;
      for (index_t q = 0; q < k; ++q) {
        h[q] = (t[q] - f[q]) / rho;
        st += s[q] * t[q];
      }
      h[k] = ((uy - st) / rho - f[k]) / rho;
      // The second sweep: v_k = (u - V s) / ρ into u; the next candidate
      // w_k - V h = (y - V (f + ρ h)) / ρ - h_k v_k into w.
      for (index_t q = 0; q < k; ++q) {
        su[q] = static_cast<T>(s[q]);
        sy[q] = static_cast<T>(f[q] + rho * h[q]);
      }
      const T inv = static_cast<T>(1.0 / rho), last = static_cast<T>(f[k] / rho + h[k]);
      ws.chunk_update(static_cast<double>(k + 4), [&](index_t r0, index_t r1) {
        sweeps.update(V.get(), n, k, su.data(), sy.data(), inv, last, u, w, r0, r1);
      });
    }
    if (cols > 0) {
      // y = H⁻¹ g (upper triangular), then x += M⁻¹ (V y).
      const index_t j = cols;
      for (index_t q = j - 1; q >= 0; --q) {
        double sum = g[q];
        for (index_t c = q + 1; c < j; ++c) sum -= H[c * (m + 1) + q] * y[c];
        y[q] = sum / H[q * (m + 1) + q];
      }
      if (!std::all_of(y.begin(), y.begin() + j, [](double v) { return std::isfinite(v); })) {
        res.status = SolveStatus::breakdown;
        break;
      }
      T* acc = basis(m);  // at most j <= m vectors are read, and no candidate is needed any more
      for (index_t q = 0; q < j; ++q) yt[q] = static_cast<T>(y[q]);
      ws.chunk_update(static_cast<double>(j + 1), [&](index_t r0, index_t r1) {
        sweeps.combine(V.get(), n, j, yt.data(), acc, r0, r1);
      });
      ws.precondition(acc, z.data());
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
