// Fixed-step polynomial iterations (Chebyshev, Richardson: one recurrence, two sets of
// coefficients) and power iteration. No inner product inside the fixed-step loop.
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/rng.hpp"
#include "solvers/chunked.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse {

namespace {

using solvers::ChunkedSums;
using solvers::for_rows;
using solvers::kLanes;

/// Step s: d = a[s] d + c[s] r, x += d, r -= A d. Each step is one product and one pass
/// (the r update of step s is fused into the pass of step s + 1). The residual norm is
/// summed once, after the loop.
template <SolverValue T>
SolveResult<T> polynomial_steps(const LinearOperator<T>& A, std::span<const T> b, std::span<const T> x0,
                                const std::vector<double>& a, const std::vector<double>& c, const char* who) {
  const index_t n = A.size();
  A.agree([&] {
    solvers::check_vector(b, n, false, who, "b", "A.size()");
    solvers::check_vector(x0, n, true, who, "x0", "A.size()");
  });
  SolveResult<T> res{std::vector<T>(static_cast<std::size_t>(n)), 0, 0.0, SolveStatus::completed};
  T* x = res.x.data();
  std::vector<T> r(b.begin(), b.end()), d = detail::make_vector<T>(n, "solver: direction"),
                                        w = detail::make_vector<T>(n, "solver: product");
  const auto column = [n](auto* p) { return DenseView<std::remove_pointer_t<decltype(p)>>(p, n, 1, 1); };
  if (A.any(!x0.empty())) {  // a process without rows has an empty x0 but joins the product
    std::copy(x0.begin(), x0.end(), x);
    A.apply(column(static_cast<const T*>(x)), column(w.data()));
    for (index_t i = 0; i < n; ++i) r[i] -= w[i];
  }
  ChunkedSums sums(n, 3);
  const double elements = static_cast<double>(n);
  for (std::size_t s = 0; s < a.size(); ++s) {
    const T as = static_cast<T>(a[s]), cs = static_cast<T>(c[s]);
    const bool fold = s > 0;
    sums.run(detail::work_ns(detail::Work::stream, 4.0 * elements), [&](index_t r0, index_t r1, double*) {
      for (index_t i = r0; i < r1; ++i) {
        if (fold) r[i] -= w[i];
        d[i] = as * d[i] + cs * r[i];
        x[i] += d[i];
      }
    });
    A.apply(column(static_cast<const T*>(d.data())), column(w.data()));
  }
  const bool fold = !a.empty();
  sums.run(detail::work_ns(detail::Work::stream, 3.0 * elements), [&](index_t r0, index_t r1, double* lanes) {
    for_rows(r0, r1, [&](index_t i, index_t l) {
      if (fold) r[i] -= w[i];
      lanes[l] += static_cast<double>(r[i]) * static_cast<double>(r[i]);
      lanes[kLanes + l] += static_cast<double>(b[i]) * static_cast<double>(b[i]);
      lanes[2 * kLanes + l] += std::isfinite(x[i]) ? 0.0 : 1.0;
    });
  });
  sums.reduce(A);
  const double rr = sums.sum(0), bb = sums.sum(1);
  res.iterations = static_cast<index_t>(a.size());
  res.rel_residual = bb > 0.0 ? std::sqrt(rr / bb) : std::sqrt(rr);
  if (sums.sum(2) != 0.0 || !std::isfinite(res.rel_residual)) res.status = SolveStatus::breakdown;
  return res;
}

}  // namespace

ChebyshevCoefficients chebyshev_coeffs(double lmin, double lmax, index_t steps) {
  if (!(lmin > 0.0 && lmin < lmax && std::isfinite(lmax)))
    throw InvalidArgument(detail::concat("chebyshev_coeffs: [lmin, lmax] = [", lmin, ", ", lmax,
                                         "], expected 0 < lmin < lmax, finite"));
  detail::check_nonnegative(steps, "chebyshev_coeffs: steps");
  const double theta = 0.5 * (lmax + lmin), delta = 0.5 * (lmax - lmin), sigma = theta / delta;
  ChebyshevCoefficients co{std::vector<double>(static_cast<std::size_t>(steps)),
                           std::vector<double>(static_cast<std::size_t>(steps))};
  double rho = 1.0 / sigma;
  for (std::size_t s = 0; s < co.a.size(); ++s) {
    if (s == 0) {
      co.a[0] = 0.0;
      co.c[0] = 1.0 / theta;
      continue;
    }
    const double rho_next = 1.0 / (2.0 * sigma - rho);
    co.a[s] = rho_next * rho;
    co.c[s] = 2.0 * rho_next / delta;
    rho = rho_next;
  }
  return co;
}

template <SolverValue T>
SolveResult<T> chebyshev(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b, double lmin, double lmax, index_t steps,
                         std::span<const std::type_identity_t<T>> x0) {
  ChebyshevCoefficients co;
  A.agree([&] { co = chebyshev_coeffs(lmin, lmax, steps); });
  return polynomial_steps(A, b, x0, co.a, co.c, "chebyshev");
}

template <SolverValue T>
SolveResult<T> richardson(const LinearOperator<T>& A, std::span<const std::type_identity_t<T>> b, double omega, index_t steps,
                          std::span<const std::type_identity_t<T>> x0) {
  A.agree([&] {
    if (!std::isfinite(omega))
      throw InvalidArgument(detail::concat("richardson: omega = ", omega, ", expected a finite value"));
    detail::check_nonnegative(steps, "richardson: steps");
  });
  const std::vector<double> a(static_cast<std::size_t>(steps), 0.0), c(static_cast<std::size_t>(steps), omega);
  return polynomial_steps(A, b, x0, a, c, "richardson");
}

template <SolverValue T>
EigenResult<T> power_iteration(const LinearOperator<T>& A, index_t max_iter, double tol) {
  A.agree([&] {
    detail::check_nonnegative(max_iter, "power_iteration: max_iter");
    if (!(tol >= 0.0)) throw InvalidArgument(detail::concat("power_iteration: tol = ", tol, " must be >= 0"));
  });
  const index_t n = A.size();
  EigenResult<T> res{0.0, std::vector<T>(static_cast<std::size_t>(n)), 0, A.global_size() == 0};
  if (A.global_size() == 0) return res;
  std::vector<T>& v = res.eigenvector;
  std::vector<T> y = detail::make_vector<T>(n, "power_iteration: product");
  // A fixed start, the same for every run, thread count and process count: entry i is
  // draw i of one stream (a process skips the draws of the rows before its own).
  detail::SplitMix64 rng{0x5eed};
  rng.skip(static_cast<std::uint64_t>(A.offset()));
  double vv = 0.0;
  for (T& vi : v) {
    vi = static_cast<T>(rng.symmetric());
    vv += static_cast<double>(vi) * static_cast<double>(vi);
  }
  A.sum(std::span<double>(&vv, 1));
  for (T& vi : v) vi = static_cast<T>(static_cast<double>(vi) / std::sqrt(vv));
  ChunkedSums sums(n, 2);
  const double elements = static_cast<double>(n);
  for (index_t it = 1; it <= max_iter; ++it) {
    A.apply(DenseView<const T>(v.data(), n, 1, 1), DenseView<T>(y.data(), n, 1, 1));
    sums.run(detail::work_ns(detail::Work::stream, 2.0 * elements), [&](index_t r0, index_t r1, double* lanes) {
      for_rows(r0, r1, [&](index_t i, index_t l) {
        lanes[l] += static_cast<double>(v[i]) * static_cast<double>(y[i]);
        lanes[kLanes + l] += static_cast<double>(y[i]) * static_cast<double>(y[i]);
      });
    });
    sums.reduce(A);
    const double lambda = sums.sum(0), yy = sums.sum(1);
    if (!std::isfinite(yy)) break;  // keep the last finite iterate
    res.iterations = it;
    res.eigenvalue = lambda;
    if (yy == 0.0) {  // A v = 0: v is an eigenvector for 0
      res.converged = true;
      break;
    }
    // ||A v - λ v||, and v ← A v / ||A v|| in the same pass.
    const double scale = 1.0 / std::sqrt(yy);
    sums.run(detail::work_ns(detail::Work::stream, 2.0 * elements), [&](index_t r0, index_t r1, double* lanes) {
      for_rows(r0, r1, [&](index_t i, index_t l) {
        const double e = static_cast<double>(y[i]) - lambda * static_cast<double>(v[i]);
        lanes[l] += e * e;
        v[i] = static_cast<T>(static_cast<double>(y[i]) * scale);
      });
    });
    sums.reduce(A);
    if (std::sqrt(sums.sum(0)) <= tol * std::fabs(lambda)) {
      res.converged = true;
      break;
    }
  }
  return res;
}

#define TRNSPARSE_INSTANTIATE(T)                                                                                   \
  template SolveResult<T> chebyshev<T>(const LinearOperator<T>&, std::span<const T>, double, double, index_t,    \
                                       std::span<const T>);                                                      \
  template SolveResult<T> richardson<T>(const LinearOperator<T>&, std::span<const T>, double, index_t,           \
                                        std::span<const T>);                                                     \
  template EigenResult<T> power_iteration<T>(const LinearOperator<T>&, index_t, double);
TRNSPARSE_INSTANTIATE(float)
TRNSPARSE_INSTANTIATE(double)
#undef TRNSPARSE_INSTANTIATE

}  // namespace trnsparse
