// Products and sparse algebra on CSR and BSR handles; dense operands are read and written
// in the caller's buffers.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

/// Products and algebra shared by CSR and BSR handles, bound once per handle type.
template <class H, template <class> class M>
void bind_ops(py::module_& m) {
  m.def("to_dense", [](const H& h) {
    return std::visit(
        [](const auto& A) {
          auto d = [&] {
            py::gil_scoped_release nogil;
            return to_dense(A);
          }();
          return dense_array(std::move(d));
        },
        h.m);
  });
  m.def("transpose", [](const H& h) { return run(h, [](const auto& A) { return H{transpose(A)}; }); });
  m.def("triangle", [](const H& h, bool upper) {
    return run(h, [&](const auto& A) { return H{triangle(A, upper ? Triangle::upper : Triangle::lower)}; });
  });
  m.def("spmv_symmetric", [](double alpha, const H& h, bool upper, const DenseArg& x, double beta, const DenseArg& y) {
    run(h, [&](const auto& A) {
      using T = matrix_value_t<decltype(A)>;
      const DenseView<const T> xv = view_of<const T>(x);
      const DenseView<T> yv = view_of<T>(y);
      spmv_symmetric(static_cast<acc_t<T>>(alpha), A, upper ? Triangle::upper : Triangle::lower,
                     std::span<const T>(xv.data, static_cast<std::size_t>(xv.rows)), static_cast<acc_t<T>>(beta),
                     std::span<T>(yv.data, static_cast<std::size_t>(yv.rows)));
      return 0;
    });
  });
  m.def("nnz_per_row", [](const H& h) {
    auto v = run(h, [](const auto& A) { return nnz_per_row(A); });
    return vector_array(std::move(v));
  });
  m.def("scale", [](const H& h, double alpha) {
    return run(h, [&](const auto& A) {
      using T = matrix_value_t<decltype(A)>;
      return H{sparse_scale(A, static_cast<acc_t<T>>(alpha))};
    });
  });
  m.def("add", [](double alpha, const H& a, double beta, const H& b) {
    return std::visit(
        [&](const auto& A) {
          using T = matrix_value_t<decltype(A)>;
          const M<T>& B = as<M, T>(b, "sparse_add");
          py::gil_scoped_release nogil;
          return H{sparse_add(static_cast<acc_t<T>>(alpha), A, static_cast<acc_t<T>>(beta), B)};
        },
        a.m);
  });
  // y = alpha A x + beta y and C = alpha A B + beta C, in place in the caller's buffers.
  m.def("spmv", [](double alpha, const H& h, const DenseArg& x, double beta, const DenseArg& y) {
    run(h, [&](const auto& A) {
      using T = matrix_value_t<decltype(A)>;
      const DenseView<const T> xv = view_of<const T>(x);
      const DenseView<T> yv = view_of<T>(y);
      spmv(static_cast<acc_t<T>>(alpha), A, std::span<const T>(xv.data, static_cast<std::size_t>(xv.rows)),
           static_cast<acc_t<T>>(beta), std::span<T>(yv.data, static_cast<std::size_t>(yv.rows)));
      return 0;
    });
  });
  m.def("spmm", [](double alpha, const H& h, const DenseArg& B, double beta, const DenseArg& C) {
    run(h, [&](const auto& A) {
      using T = matrix_value_t<decltype(A)>;
      spmm(static_cast<acc_t<T>>(alpha), A, view_of<const T>(B), static_cast<acc_t<T>>(beta), view_of<T>(C));
      return 0;
    });
  });
  // alpha X Yᵀ sampled on A's stored positions (SDDMM), as a matrix of A's structure.
  m.def("sampled_matmul", [](double alpha, const H& h, const DenseArg& X, const DenseArg& Y) {
    return std::visit(
        [&](const auto& A) {
          using T = matrix_value_t<decltype(A)>;
          auto out = A;  // the structure (and, for BSR, its plan) is shared; the values are overwritten
          py::gil_scoped_release nogil;
          sampled_matmul(static_cast<acc_t<T>>(alpha), view_of<const T>(X), view_of<const T>(Y), acc_t<T>(0), out);
          return H{std::move(out)};
        },
        h.m);
  });
  // (dA on A's structure, dB) of C = alpha A B for the output gradient dC.
  m.def("spmm_backward", [](double alpha, const H& h, const DenseArg& B, const DenseArg& dC) {
    return std::visit(
        [&](const auto& A) {
          using T = matrix_value_t<decltype(A)>;
          auto g = [&] {
            py::gil_scoped_release nogil;
            return spmm_backward(static_cast<acc_t<T>>(alpha), A, view_of<const T>(B), view_of<const T>(dC));
          }();
          return py::make_tuple(H{std::move(g.dA)}, dense_array(std::move(g.dB)));
        },
        h.m);
  });
}

}  // namespace

void bind_products(py::module_& m) {
  bind_ops<Csr, CsrMatrix>(m);
  bind_ops<Bsr, BsrMatrix>(m);
  m.def("bsr_spmm", [](const Bsr& h, const DenseArg& B) {
    return std::visit(
        [&](const auto& A) {
          using T = matrix_value_t<decltype(A)>;
          auto C = [&] {
            py::gil_scoped_release nogil;
            return bsr_spmm(A, view_of<const T>(B));
          }();
          return dense_array(std::move(C));
        },
        h.m);
  });
  m.def("bsr_diagonal", [](const Bsr& h) {
    return std::visit(
        [](const auto& A) {
          auto d = [&] {
            py::gil_scoped_release nogil;
            return bsr_diagonal(A);
          }();
          return vector_array(std::move(d));
        },
        h.m);
  });
}

}  // namespace trnsparse::python
