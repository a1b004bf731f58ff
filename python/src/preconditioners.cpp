// Preconditioner objects (block Jacobi, IC(0), ILU(0), AMG) and the Krylov solves
// (cg, gmres, bicgstab) on CSR and BSR handles, float32 and float64.

#include "bindings.hpp"
#include "common.hpp"
#include "trnsparse/preconditioners.hpp"

namespace trnsparse::python {

/// A preconditioner of either real value type, and the matrix handle it was built (or
/// last updated) from: AMG views its finest level in place, so the handle lives as long.
struct Precond {
  std::variant<std::shared_ptr<Preconditioner<float>>, std::shared_ptr<Preconditioner<double>>> p;
  py::object matrix;
};

namespace {

/// AMG's tuning from Python: each unset field keeps AmgOptions' default.
struct AmgTuning {
  std::optional<double> strength_threshold;
  std::optional<index_t> max_coarse, max_levels, smoother_degree;
  std::optional<double> prolongator_omega;
  std::optional<bool> mixed_precision;

  template <class T>
  void apply(AmgOptions<T>& o) const {
    if (strength_threshold) o.strength_threshold = *strength_threshold;
    if (max_coarse) o.max_coarse = *max_coarse;
    if (max_levels) o.max_levels = *max_levels;
    if (smoother_degree) o.smoother_degree = *smoother_degree;
    if (prolongator_omega) o.prolongator_omega = *prolongator_omega;
    if (mixed_precision) o.mixed_precision = *mixed_precision;
  }
};

/// The preconditioner `kind` names for A. `block_size` (bjacobi, amg; 0 for the
/// matrix's own), `blocks` (ic0, ilu0: independent row blocks), `near_nullspace` and
/// `tuning` (amg; the near-nullspace rows x k, A's dtype).
template <class M>
decltype(Precond::p) make(const std::string& kind, const M& A, index_t block_size, index_t blocks,
             const std::optional<DenseArg>& nullspace, const AmgTuning& tuning) {
  using T = matrix_value_t<M>;
  py::gil_scoped_release nogil;
  constexpr bool csr = std::is_same_v<M, CsrMatrix<T>>;
  if (kind == "ilu0") return std::make_shared<IncompleteFactorization<T>>(ilu0(A, blocks));
  if (kind == "ic0") return std::make_shared<IncompleteFactorization<T>>(ic0(A, blocks));
  if (kind == "amg") {
    AmgOptions<T> options{.block_size = block_size};
    if (nullspace) options.near_nullspace = view_of<const T>(*nullspace);
    tuning.apply(options);
    return std::make_shared<Amg<T>>(A, options);
  }
  if (kind == "bjacobi") {
    if constexpr (csr) return std::make_shared<BlockJacobi<T>>(A, block_size == 0 ? 1 : block_size);
    else {
      if (block_size != 0 && block_size != A.block_size())
        throw InvalidArgument("block_jacobi: block_size = " + std::to_string(block_size) +
                              ", but the BSR matrix's blocks are " + std::to_string(A.block_size()) + " (leave it None)");
      return std::make_shared<BlockJacobi<T>>(A);
    }
  }
  throw InvalidArgument("unknown preconditioner \"" + kind + "\" (expected amg, bjacobi, ic0 or ilu0)");
}

template <class H>
Precond make_for(const std::string& kind, const py::object& handle, index_t block_size, index_t blocks,
                 const std::optional<DenseArg>& nullspace, const AmgTuning& tuning) {
  return Precond{std::visit(
                     [&](const auto& A) -> decltype(Precond::p) {
                       using T = matrix_value_t<decltype(A)>;
                       if constexpr (SolverValue<T>) return make(kind, A, block_size, blocks, nullspace, tuning);
                       else throw py::type_error(kind + ": dtype bfloat16 is not supported (float32 or float64)");
                     },
                     handle.cast<const H&>().m),
                 handle};
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

/// The AMG preconditioner behind p, or null.
template <class T>
const Amg<T>* as_amg(const std::shared_ptr<Preconditioner<T>>& p) {
  return dynamic_cast<const Amg<T>*>(p.get());
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
      .def("update",
           [](Precond& P, const py::object& h) {
             if (py::isinstance<Csr>(h)) update(P, h.cast<const Csr&>());
             else update(P, h.cast<const Bsr&>());
             P.matrix = h;
           })
      // AMG's levels as (rows, stored values, block size) and its last setup time.
      .def_property_readonly("levels",
                             [](const Precond& P) {
                               py::list out;
                               std::visit(
                                   [&](const auto& p) {
                                     if (const auto* amg = as_amg(p))
                                       for (const auto& l : amg->levels())
                                         out.append(py::make_tuple(l.rows, l.nnz, l.block_size));
                                   },
                                   P.p);
                               return out;
                             })
      .def_property_readonly("setup_seconds", [](const Precond& P) {
        return std::visit(
            [](const auto& p) -> py::object {
              if (const auto* amg = as_amg(p)) return py::float_(amg->setup_seconds());
              return py::none();
            },
            P.p);
      });
  m.def(
      "make_preconditioner",
      [](const std::string& kind, const py::object& handle, index_t block_size, index_t blocks,
         const std::optional<DenseArg>& nullspace, std::optional<double> strength_threshold,
         std::optional<index_t> max_coarse, std::optional<index_t> max_levels, std::optional<index_t> smoother_degree,
         std::optional<double> prolongator_omega, std::optional<bool> mixed_precision) {
        const AmgTuning tuning{strength_threshold, max_coarse,        max_levels,
                               smoother_degree,    prolongator_omega, mixed_precision};
        if (py::isinstance<Csr>(handle)) return make_for<Csr>(kind, handle, block_size, blocks, nullspace, tuning);
        return make_for<Bsr>(kind, handle, block_size, blocks, nullspace, tuning);
      },
      py::arg("kind"), py::arg("handle"), py::arg("block_size"), py::arg("blocks"), py::arg("nullspace"),
      py::arg("strength_threshold") = py::none(), py::arg("max_coarse") = py::none(),
      py::arg("max_levels") = py::none(), py::arg("smoother_degree") = py::none(),
      py::arg("prolongator_omega") = py::none(), py::arg("mixed_precision") = py::none());
  // The six rigid-body modes at nodes (nodes x 3, float64) in dtype: (3 nodes) x 6.
  m.def("rigid_body_modes", [](const DenseArg& coords, const std::string& dtype) {
    return with_dtype(dtype, [&]<class T>() -> py::object {
      if constexpr (SolverValue<T>) return dense_array(rigid_body_modes<T>(view_of<const double>(coords)));
      else throw py::type_error("rigid_body_modes: dtype bfloat16 is not supported (float32 or float64)");
    });
  });
  m.def("krylov", &krylov<Csr>);
  m.def("krylov", &krylov<Bsr>);
}

}  // namespace trnsparse::python
