// Schwarz-screened products on BSR operators (float32 and float64 only).

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {

/// Binds screened_spmm (square A, one diagonal for rows and columns) and its backward.
void bind_screening(py::module_& m) {
  m.def("screened_spmm", [](const Bsr& h, const DenseArg& diag, const DenseArg& B, double threshold) {
    return on_real(h, "screened_spmm", [&](const auto& A) -> py::object {
      using T = matrix_value_t<decltype(A)>;
      auto C = [&] {
        py::gil_scoped_release nogil;
        return screened_spmm(A, span_of<T>(diag), view_of<const T>(B), threshold);
      }();
      return dense_array(std::move(C));
    });
  });
  // (dA on A's structure, dB) of C = (A ∘ M) B for the output gradient dC.
  m.def("screened_spmm_backward",
        [](const Bsr& h, const DenseArg& diag, const DenseArg& B, const DenseArg& dC, double threshold) {
          return on_real(h, "screened_spmm", [&](const auto& A) -> py::object {
            using T = matrix_value_t<decltype(A)>;
            const std::span<const T> d = span_of<T>(diag);
            auto g = [&] {
              py::gil_scoped_release nogil;
              return screened_spmm_backward(A, d, d, view_of<const T>(B), view_of<const T>(dC), threshold);
            }();
            return py::make_tuple(Bsr{std::move(g.dA)}, dense_array(std::move(g.dB)));
          });
        });
}

}  // namespace trnsparse::python
