// Preconditioner objects (block Jacobi, IC(0), ILU(0), AMG) and the Krylov solves
// (cg, gmres, bicgstab) on CSR and BSR handles, float32 and float64.

#include "bindings.hpp"
#include "common.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse::python {

/// A preconditioner of either real value type, shared by the Python object and nothing
/// else (it views no matrix: each keeps what it needs).
struct Precond {
  std::variant<std::shared_ptr<Preconditioner<float>>, std::shared_ptr<Preconditioner<double>>> p;
};

namespace {

/// The preconditioner `kind` names for A. `block_size` (bjacobi, amg; 0 for the
/// matrix's own), `near_nullspace` (amg; rows x k, A's dtype).
template <class M>
Precond make(const std::string& kind, const M& A, index_t block_size,
             [[maybe_unused]] const std::optional<DenseArg>& nullspace) {
  using T = matrix_value_t<M>;
  py::gil_scoped_release nogil;
  constexpr bool csr = std::is_same_v<M, CsrMatrix<T>>;
  if (kind == "ilu0") return {std::make_shared<IncompleteFactorization<T>>(ilu0(A))};
  if (kind == "ic0") return {std::make_shared<IncompleteFactorization<T>>(ic0(A))};
  if (kind == "bjacobi") {
    if constexpr (csr) return {std::make_shared<BlockJacobi<T>>(A, block_size == 0 ? 1 : block_size)};
    else {
      if (block_size != 0 && block_size != A.block_size())
        throw InvalidArgument("block_jacobi: block_size = " + std::to_string(block_size) +
                              ", but the BSR matrix's blocks are " + std::to_string(A.block_size()) + " (leave it None)");
      return {std::make_shared<BlockJacobi<T>>(A)};
    }
  }
  throw InvalidArgument("unknown preconditioner \"" + kind + "\" (expected bjacobi, ic0 or ilu0)");
}

template <class H>
Precond make_for(const std::string& kind, const H& h, index_t block_size, const std::optional<DenseArg>& nullspace) {
  return std::visit(
      [&](const auto& A) -> Precond {
        using T = matrix_value_t<decltype(A)>;
        if constexpr (SolverValue<T>) return make(kind, A, block_size, nullspace);
        else throw py::type_error(kind + ": dtype bfloat16 is not supported (float32 or float64)");
      },
      h.m);
}

/// Runs f(A) for a real handle's matrix (TypeError for bf16).
template <class H, class F>
py::object on_real(const H& h, const char* who, F&& f) {
  return std::visit(
      [&](const auto& A) -> py::object {
        using T = matrix_value_t<decltype(A)>;
        if constexpr (SolverValue<T>) return f(A);
        else throw py::type_error(std::string(who) + ": dtype bfloat16 is not supported (float32 or float64)");
      },
      h.m);
}

/// The preconditioner of value type T in `M`, or a TypeError naming both dtypes.
template <class T>
const Preconditioner<T>* typed(const Precond* M, const char* who) {
  if (!M) return nullptr;
  if (const auto* p = std::get_if<std::shared_ptr<Preconditioner<T>>>(&M->p)) return p->get();
  throw py::type_error(std::string(who) + ": the preconditioner's dtype differs from A's (" + dtype_name<T>() + ")");
}

/// (x, iterations, relative residual, status) of `method` on A.
template <class H>
py::object krylov(const std::string& method, const H& h, const DenseArg& b, const std::optional<DenseArg>& x0, double tol,
                  index_t max_iter, index_t restart, const Precond* M, const std::optional<DenseArg>& minv) {
  const char* who = method.c_str();
  return on_real(h, who, [&](const auto& A) -> py::object {
    using T = matrix_value_t<decltype(A)>;
    const Preconditioner<T>* pre = typed<T>(M, who);
    auto res = [&] {
      py::gil_scoped_release nogil;
      const LinearOperator<T> op(A);
      if (method == "cg")
        return cg(op, span_of<T>(b),
                  {.tol = tol, .max_iter = max_iter, .preconditioner = span_of<T>(minv), .x0 = span_of<T>(x0), .M = pre});
      const KrylovOptions<T> opt{.tol = tol, .max_iter = max_iter, .restart = restart, .M = pre, .x0 = span_of<T>(x0)};
      if (method == "gmres") return gmres(op, span_of<T>(b), opt);
      if (method == "bicgstab") return bicgstab(op, span_of<T>(b), opt);
      throw InvalidArgument("unknown method \"" + method + "\" (expected cg, gmres or bicgstab)");
    }();
    return py::make_tuple(vector_array(std::move(res.x)), res.iterations, res.rel_residual,
                          std::string(to_string(res.status)));
  });
}

/// P.update(A): a TypeError when A's dtype is not P's.
template <class H>
void update(Precond& P, const H& h) {
  std::visit(
      [&](auto& p) {
        using T = typename std::remove_cvref_t<decltype(*p)>::value_type;
        std::visit(
            [&](const auto& A) {
              if constexpr (std::is_same_v<T, matrix_value_t<decltype(A)>>) {
                py::gil_scoped_release nogil;
                p->update(A);
              } else {
                throw py::type_error(std::string(p->name()) + ".update: A's dtype differs from the preconditioner's (" +
                                     dtype_name<T>() + ")");
              }
            },
            h.m);
      },
      P.p);
}

}  // namespace

/// Binds the Preconditioner handle, its factory and the Krylov solves.
void bind_preconditioners(py::module_& m) {
  py::class_<Precond>(m, "Preconditioner")
      .def_property_readonly("name", [](const Precond& P) {
        return std::visit([](const auto& p) { return std::string(p->name()); }, P.p);
      })
      .def_property_readonly("size", [](const Precond& P) {
        return std::visit([](const auto& p) { return p->size(); }, P.p);
      })
      .def_property_readonly("dtype", [](const Precond& P) {
        return std::visit(
            [](const auto& p) -> std::string {
              using T = typename std::remove_cvref_t<decltype(*p)>::value_type;
              return dtype_name<T>();
            },
            P.p);
      })
      // z = M⁻¹ r into the caller's buffer z (both contiguous vectors of M's dtype).
      .def("apply", [](const Precond& P, const DenseArg& r, const DenseArg& z) {
        std::visit(
            [&](const auto& p) {
              using T = typename std::remove_cvref_t<decltype(*p)>::value_type;
              const DenseView<const T> rv = view_of<const T>(r);
              const DenseView<T> zv = view_of<T>(z);
              py::gil_scoped_release nogil;
              p->apply(std::span<const T>(rv.data, static_cast<std::size_t>(rv.rows)),
                       std::span<T>(zv.data, static_cast<std::size_t>(zv.rows)));
            },
            P.p);
      })
      .def("update", [](Precond& P, const Csr& h) { update(P, h); })
      .def("update", [](Precond& P, const Bsr& h) { update(P, h); });
  m.def("make_preconditioner", &make_for<Csr>);
  m.def("make_preconditioner", &make_for<Bsr>);
  m.def("krylov", &krylov<Csr>);
  m.def("krylov", &krylov<Bsr>);
}

}  // namespace trnsparse::python
