// The iterative solvers on BSR operators (float32 and float64 only).

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

/// (x, iterations, relative residual, status name) of a solve.
template <class T>
py::tuple solve_tuple(SolveResult<T>&& res) {
  return py::make_tuple(vector_array(std::move(res.x)), res.iterations, res.rel_residual,
                        std::string(to_string(res.status)));
}

}  // namespace

/// Binds the solvers on BSR operators. Each releases the GIL while it runs.
void bind_solvers(py::module_& m) {
  using Opt = std::optional<DenseArg>;
  m.def("cg", [](const Bsr& h, const DenseArg& b, const Opt& x0, double tol, index_t max_iter, const Opt& minv) {
    return on_real(h, "cg_bsr", [&](const auto& A) -> py::object {
      using T = matrix_value_t<decltype(A)>;
      auto res = [&] {
        py::gil_scoped_release nogil;
        const CgOptions<T> opt{.tol = tol, .max_iter = max_iter, .preconditioner = span_of<T>(minv), .x0 = span_of<T>(x0)};
        return cg(LinearOperator<T>(A), span_of<T>(b), opt);
      }();
      return solve_tuple(std::move(res));
    });
  });
  // k right-hand sides at once: (X, iterations, relative residuals, status names) per column;
  // x0, when given, is a contiguous n x k buffer.
  m.def("cg_block", [](const Bsr& h, const DenseArg& B, const Opt& x0, double tol, index_t max_iter,
                       const Opt& minv) {
    return on_real(h, "cg_bsr", [&](const auto& A) -> py::object {
      using T = matrix_value_t<decltype(A)>;
      const DenseView<const T> Bv = view_of<const T>(B);
      const std::span<const T> x0v =
          x0 ? std::span<const T>(view_of<const T>(*x0).data, static_cast<std::size_t>(Bv.rows * Bv.cols))
             : std::span<const T>{};
      auto res = [&] {
        py::gil_scoped_release nogil;
        const CgOptions<T> opt{.tol = tol, .max_iter = max_iter, .preconditioner = span_of<T>(minv), .x0 = x0v};
        return cg(LinearOperator<T>(A), Bv, opt);
      }();
      py::list status;
      for (const SolveStatus st : res.status) status.append(std::string(to_string(st)));
      return py::make_tuple(dense_array(std::move(res.X)), vector_array(std::move(res.iterations)),
                            vector_array(std::move(res.rel_residual)), status);
    });
  });
  m.def("chebyshev", [](const Bsr& h, const DenseArg& b, double lmin, double lmax, index_t steps, const Opt& x0) {
    return on_real(h, "chebyshev_bsr", [&](const auto& A) -> py::object {
      using T = matrix_value_t<decltype(A)>;
      auto res = [&] {
        py::gil_scoped_release nogil;
        return chebyshev(LinearOperator<T>(A), span_of<T>(b), lmin, lmax, steps, span_of<T>(x0));
      }();
      return solve_tuple(std::move(res));
    });
  });
  m.def("richardson", [](const Bsr& h, const DenseArg& b, double omega, index_t steps, const Opt& x0) {
    return on_real(h, "richardson_bsr", [&](const auto& A) -> py::object {
      using T = matrix_value_t<decltype(A)>;
      auto res = [&] {
        py::gil_scoped_release nogil;
        return richardson(LinearOperator<T>(A), span_of<T>(b), omega, steps, span_of<T>(x0));
      }();
      return solve_tuple(std::move(res));
    });
  });
  // (eigenvalue, unit eigenvector, iterations, converged) from the core's fixed start.
  m.def("power_iteration", [](const Bsr& h, index_t max_iter, double tol) {
    return on_real(h, "power_iteration_bsr", [&](const auto& A) -> py::object {
      using T = matrix_value_t<decltype(A)>;
      auto res = [&] {
        py::gil_scoped_release nogil;
        return power_iteration(LinearOperator<T>(A), max_iter, tol);
      }();
      return py::make_tuple(res.eigenvalue, vector_array(std::move(res.eigenvector)), res.iterations, res.converged);
    });
  });
  m.def("jacobi_preconditioner", [](const Bsr& h) {
    return on_real(h, "jacobi_preconditioner_bsr", [&](const auto& A) -> py::object {
      auto d = [&] {
        py::gil_scoped_release nogil;
        return jacobi_preconditioner(A);
      }();
      return vector_array(std::move(d));
    });
  });
  // The core's recurrence coefficients (a, c), float64.
  m.def("chebyshev_coeffs", [](double lmin, double lmax, index_t steps) {
    ChebyshevCoefficients co = chebyshev_coeffs(lmin, lmax, steps);
    return py::make_tuple(vector_array(std::move(co.a)), vector_array(std::move(co.c)));
  });
}

}  // namespace trnsparse::python
