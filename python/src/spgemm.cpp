// Sparse × sparse products on CSR and BSR handles (spgemm.hpp): A·B, A·Bᵀ, Pᵀ·A·P and
// the gradients of A·B. Results are new handles; bf16 operands give float32 results.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

/// The float32 copy of a bf16 matrix, or the matrix itself: the gradients run in the
/// operands' own type for float and double, in float32 for bf16.
template <class M>
decltype(auto) real(const M& A) {
  if constexpr (std::is_same_v<matrix_value_t<M>, bf16>) return cast<float>(A);
  else return (A);
}

/// A matrix's stored values: a CSR's entries, a BSR's blocks.
template <class M>
auto stored(M& A) {
  if constexpr (requires { A.blocks(); }) return A.blocks();
  else return A.values();
}

template <class H, template <class> class M>
void bind_pair(py::module_& m) {
  // A·B, or A·Bᵀ with `transposed`, keeping entries (blocks) above drop_tolerance.
  m.def("spgemm", [](const H& a, const H& b, double drop_tolerance, bool transposed) {
    return std::visit(
        [&](const auto& A) {
          using T = matrix_value_t<decltype(A)>;
          const M<T>& B = as<M, T>(b, transposed ? "matmul_transposed" : "matmul");
          py::gil_scoped_release nogil;
          return H{transposed ? multiply_transposed(A, B, drop_tolerance) : multiply(A, B, drop_tolerance)};
        },
        a.m);
  });
  m.def("galerkin", [](const H& p, const H& a, double drop_tolerance) {
    return std::visit(
        [&](const auto& P) {
          using T = matrix_value_t<decltype(P)>;
          const M<T>& A = as<M, T>(a, "galerkin");
          py::gil_scoped_release nogil;
          return H{galerkin(P, A, drop_tolerance)};
        },
        p.m);
  });
  // (dA, dB) of C = A·B for C's gradient `dvals` on the structure of handle c (each None
  // unless wanted), as arrays of the stored values of A and B.
  m.def("spgemm_backward", [](const H& a, const H& b, const H& c, std::uintptr_t dvals, index_t n, bool need_a,
                              bool need_b) {
    return std::visit(
        [&](const auto& A) -> py::tuple {
          using T = matrix_value_t<decltype(A)>;
          using R = acc_t<T>;
          const M<T>& B = as<M, T>(b, "matmul backward");
          const M<R>& C = as<M, R>(c, "matmul backward");
          std::vector<R> dA, dB;
          {
            py::gil_scoped_release nogil;
            M<R> dC = C;  // shares C's structure; the values are the gradient's
            const std::span<R> vals = stored(dC);
            if (n != static_cast<index_t>(vals.size()))
              throw DimensionMismatch("matmul backward: dC has " + std::to_string(n) + " values, C stores " +
                                      std::to_string(vals.size()));
            std::memcpy(vals.data(), reinterpret_cast<const R*>(dvals), vals.size_bytes());
            // The gradient of C's padding is no gradient: those entries are zero whatever
            // the operands hold.
            if constexpr (requires { dC.zero_padding(); }) dC.zero_padding();
            const auto& Ar = real(A);
            const auto& Br = real(B);
            if (need_a) dA.resize(stored(Ar).size());
            if (need_b) dB.resize(stored(Br).size());
            multiply_backward(Ar, Br, dC, std::span<R>(dA), std::span<R>(dB));
          }
          return py::make_tuple(need_a ? py::object(vector_array(std::move(dA))) : py::none(),
                                need_b ? py::object(vector_array(std::move(dB))) : py::none());
        },
        a.m);
  });
}

}  // namespace

void bind_spgemm(py::module_& m) {
  bind_pair<Csr, CsrMatrix>(m);
  bind_pair<Bsr, BsrMatrix>(m);
  m.def("clear_spgemm_plan_cache", &clear_spgemm_plan_cache);
}

}  // namespace trnsparse::python
