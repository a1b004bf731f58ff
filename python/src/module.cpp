// trnsparse._core: the C++ library seen from Python. The Python package (python/trnsparse)
// owns the API; this module takes raw addresses, shapes and dtype names from it.
//
// Memory: dense operands and outputs are never copied: the Python side passes the
// address of a CPU tensor's buffer with its shape and row stride (`DenseArg`) and the
// kernel reads or writes it in place. Sparse operands are copied into the C++ formats
// (which own their arrays and validate them) once per content: `csr`/`bsr` take the
// handle an earlier call returned for the same matrix and reuse it (or its validated
// structure) when the arrays still hold the same bits. Sparse and dense results are
// moved into heap objects that the returned numpy arrays keep alive (no copy out),
// except a BSR result's two index arrays, which are copied: its structure may be shared
// with other handles (a cached one among them), and must stay immutable.
// bf16 values cross as int16 arrays (numpy has no bf16); Python views them as bf16.
// Every call that runs a kernel releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <trnsparse/trnsparse.hpp>

namespace py = pybind11;

namespace trnsparse::python {
namespace {

// ---- dtypes ---------------------------------------------------------------------------
template <class T> constexpr const char* dtype_name();
template <> constexpr const char* dtype_name<float>() { return "float32"; }
template <> constexpr const char* dtype_name<double>() { return "float64"; }
template <> constexpr const char* dtype_name<bf16>() { return "bfloat16"; }

/// The numpy element type carrying T's bits (int16 for bf16).
template <class T> using numpy_t = std::conditional_t<std::is_same_v<T, bf16>, std::int16_t, T>;

/// Calls f.template operator()<T>() for the value type named `dtype`.
template <class F>
decltype(auto) with_dtype(const std::string& dtype, F&& f) {
  if (dtype == "float32") return f.template operator()<float>();
  if (dtype == "float64") return f.template operator()<double>();
  if (dtype == "bfloat16") return f.template operator()<bf16>();
  throw NotSupported("dtype " + dtype + " is not one of float32, float64, bfloat16");
}

// ---- arrays in and out ------------------------------------------------------------------
/// A dense row-major CPU buffer handed over by Python: (address, rows, cols, row stride).
using DenseArg = std::tuple<std::uintptr_t, index_t, index_t, index_t>;

template <class T>
DenseView<T> view_of(const DenseArg& a) {
  const auto& [addr, rows, cols, ld] = a;
  return DenseView<T>(reinterpret_cast<T*>(addr), rows, cols, std::max<index_t>(ld, 1));
}

template <class T>
std::vector<T> copy_of(std::uintptr_t addr, index_t n) {
  detail::check_nonnegative(n, "array length");
  const T* p = reinterpret_cast<const T*>(addr);
  return std::vector<T>(p, p + n);
}

/// Whether the `n` elements at `addr` hold the bits of `a` (same length, same bytes).
template <class T>
bool same_bits(std::span<const T> a, std::uintptr_t addr, index_t n) {
  return n >= 0 && static_cast<std::size_t>(n) == a.size() &&
         (a.empty() || std::memcmp(a.data(), reinterpret_cast<const void*>(addr), a.size_bytes()) == 0);
}

/// A numpy array over `data` (shape `shape`, C order) that keeps `owner` alive.
template <class T>
py::array array_over(const T* data, std::vector<py::ssize_t> shape, py::handle owner) {
  using N = numpy_t<std::remove_const_t<T>>;
  return py::array_t<N>(std::move(shape), reinterpret_cast<const N*>(data), owner);
}

/// Moves `obj` to the heap and returns a capsule that deletes it: the owner of arrays
/// over its memory.
template <class O>
std::pair<O*, py::capsule> adopt(O&& obj) {
  auto* p = new O(std::forward<O>(obj));
  return {p, py::capsule(p, [](void* q) { delete static_cast<O*>(q); })};
}

template <class T>
py::array vector_array(std::vector<T>&& v) {
  auto [p, owner] = adopt(std::move(v));
  return array_over<T>(p->data(), {static_cast<py::ssize_t>(p->size())}, owner);
}

template <class T>
py::array dense_array(Dense<T>&& d) {
  auto [p, owner] = adopt(std::move(d));
  return array_over<T>(p->values().data(), {static_cast<py::ssize_t>(p->rows()), static_cast<py::ssize_t>(p->cols())},
                       owner);
}

// ---- sparse handles ---------------------------------------------------------------------
/// A CSR matrix of one of the three value types. Immutable once built.
struct Csr {
  std::variant<CsrMatrix<float>, CsrMatrix<double>, CsrMatrix<bf16>> m;
};
/// A BSR matrix of one of the three value types. Immutable once built.
struct Bsr {
  std::variant<BsrMatrix<float>, BsrMatrix<double>, BsrMatrix<bf16>> m;
};

template <class M>
struct ValueOfMatrix;
template <Value T>
struct ValueOfMatrix<CsrMatrix<T>> {
  using type = T;
};
template <Value T>
struct ValueOfMatrix<BsrMatrix<T>> {
  using type = T;
};
template <class M> using matrix_value_t = typename ValueOfMatrix<std::remove_cvref_t<M>>::type;

/// The matrix of `h` as M<T>, or a TypeError naming both dtypes.
template <template <class> class M, Value T, class H>
const M<T>& as(const H& h, const char* who) {
  if (const auto* p = std::get_if<M<T>>(&h.m)) return *p;
  const char* have = std::visit([](const auto& a) { return dtype_name<matrix_value_t<decltype(a)>>(); }, h.m);
  throw py::type_error(std::string(who) + ": operands have different dtypes (" + have + " and " + dtype_name<T>() +
                       ")");
}

template <class H>
std::string dtype_of(const H& h) {
  return std::visit([](const auto& a) -> std::string { return dtype_name<matrix_value_t<decltype(a)>>(); }, h.m);
}

/// Runs f(A) on a handle's matrix without the GIL and wraps a sparse result in a handle.
template <class H, class F>
auto run(const H& h, F&& f) {
  return std::visit(
      [&](const auto& A) {
        py::gil_scoped_release nogil;
        return f(A);
      },
      h.m);
}

py::tuple csr_arrays(py::object self) {
  const Csr& h = self.cast<const Csr&>();
  return std::visit(
      [&](const auto& A) {
        using T = matrix_value_t<decltype(A)>;
        return py::make_tuple(array_over<index_t>(A.row_ptr().data(), {static_cast<py::ssize_t>(A.rows()) + 1}, self),
                              array_over<index_t>(A.col_indices().data(), {static_cast<py::ssize_t>(A.nnz())}, self),
                              array_over<T>(A.values().data(), {static_cast<py::ssize_t>(A.nnz())}, self));
      },
      h.m);
}

py::tuple bsr_arrays(py::object self) {
  const Bsr& h = self.cast<const Bsr&>();
  return std::visit(
      [&](const auto& A) {
        using T = matrix_value_t<decltype(A)>;
        const BsrStructure& s = A.structure();
        const auto b = static_cast<py::ssize_t>(s.block_size());
        // Copies of the index arrays: Python may write into what it gets, and the
        // structure is shared (handles, plans) and immutable.
        const auto copy = [](std::span<const index_t> a) {
          return vector_array(std::vector<index_t>(a.begin(), a.end()));
        };
        return py::make_tuple(copy(s.block_row_ptr()), copy(s.block_col_indices()),
                              array_over<T>(A.blocks().data(), {static_cast<py::ssize_t>(s.n_blocks()), b, b}, self));
      },
      h.m);
}

// `csr` and `bsr` take `cached`, None or the handle an earlier call returned for the
// same Python matrix. When it has the dtype, shape and index arrays given (compared bit
// for bit), the arrays are neither copied nor validated again: `cached` itself comes back
// if its values are the same bits too, else a new handle with its structure (shared
// BSR structure and plan; copied CSR indices sharing their analyses) and these values.
// A cached handle's memory is never handed to Python (results are new handles), so its
// arrays are the ones it was validated with.
py::object make_csr(const std::string& dtype, index_t rows, index_t cols, std::uintptr_t row_ptr,
                    std::uintptr_t col_idx, std::uintptr_t values, index_t nnz, bool canonicalize,
                    const py::object& cached) {
  return with_dtype(dtype, [&]<class T>() -> py::object {
    detail::check_nonnegative(rows, "rows");
    if (!cached.is_none()) {
      const auto* c = std::get_if<CsrMatrix<T>>(&cached.cast<const Csr&>().m);
      if (c != nullptr && c->rows() == rows && c->cols() == cols && same_bits(c->row_ptr(), row_ptr, rows + 1) &&
          same_bits(c->col_indices(), col_idx, nnz)) {
        if (same_bits(c->values(), values, nnz)) return cached;
        CsrMatrix<T> A = *c;
        const std::span<T> v = A.values();
        if (!v.empty()) std::memcpy(v.data(), reinterpret_cast<const void*>(values), v.size_bytes());
        return py::cast(Csr{std::move(A)});
      }
    }
    auto ptr = copy_of<index_t>(row_ptr, rows + 1);
    auto cols_v = copy_of<index_t>(col_idx, nnz);
    auto vals = copy_of<T>(values, nnz);
    Csr h = [&] {
      py::gil_scoped_release nogil;
      return Csr{CsrMatrix<T>(rows, cols, std::move(ptr), std::move(cols_v), std::move(vals),
                              canonicalize ? Canonicalize::yes : Canonicalize::no)};
    }();
    return py::cast(std::move(h));
  });
}

Csr make_csr_from_coo(const std::string& dtype, index_t rows, index_t cols, std::uintptr_t row_idx,
                      std::uintptr_t col_idx, std::uintptr_t values, index_t nnz) {
  return with_dtype(dtype, [&]<class T>() {
    auto r = copy_of<index_t>(row_idx, nnz);
    auto c = copy_of<index_t>(col_idx, nnz);
    auto v = copy_of<T>(values, nnz);
    py::gil_scoped_release nogil;
    return Csr{to_csr(CooMatrix<T>(rows, cols, std::move(r), std::move(c), std::move(v)))};
  });
}

py::object make_bsr(const std::string& dtype, index_t rows, index_t cols, index_t block_size,
                    std::uintptr_t block_row_ptr, index_t n_block_row_ptr, std::uintptr_t block_col_idx,
                    std::uintptr_t blocks, index_t n_blocks, const py::object& cached) {
  return with_dtype(dtype, [&]<class T>() -> py::object {
    if (!cached.is_none()) {
      const auto* c = std::get_if<BsrMatrix<T>>(&cached.cast<const Bsr&>().m);
      if (c != nullptr && c->rows() == rows && c->cols() == cols && c->block_size() == block_size &&
          same_bits(c->structure().block_row_ptr(), block_row_ptr, n_block_row_ptr) &&
          same_bits(c->structure().block_col_indices(), block_col_idx, n_blocks)) {
        const auto n_values = static_cast<index_t>(c->blocks().size());
        if (same_bits(c->blocks(), blocks, n_values)) return cached;
        auto vals = copy_of<T>(blocks, n_values);
        Bsr h = [&] {
          py::gil_scoped_release nogil;
          return Bsr{BsrMatrix<T>(c->structure_ptr(), std::move(vals))};
        }();
        return py::cast(std::move(h));
      }
    }
    auto ptr = copy_of<index_t>(block_row_ptr, n_block_row_ptr);
    auto cols_v = copy_of<index_t>(block_col_idx, n_blocks);
    auto vals = copy_of<T>(blocks, detail::checked_mul(n_blocks, detail::checked_mul(block_size, block_size, "b * b"),
                                                       "n_blocks * b * b"));
    Bsr h = [&] {
      py::gil_scoped_release nogil;
      return Bsr{BsrMatrix<T>(rows, cols, block_size, std::move(ptr), std::move(cols_v), std::move(vals))};
    }();
    return py::cast(std::move(h));
  });
}

// ---- the bindings of one sparse format ---------------------------------------------------
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

// ---- solvers and screening (float32 and float64 only) -----------------------------------
/// Runs f(A) on a float or double BSR handle; a TypeError for bf16.
template <class F>
py::object on_real_bsr(const Bsr& h, const char* who, F&& f) {
  return std::visit(
      [&](const auto& A) -> py::object {
        using T = matrix_value_t<decltype(A)>;
        if constexpr (SolverValue<T>) return f(A);
        else throw py::type_error(std::string(who) + ": dtype bfloat16 is not supported (float32 or float64)");
      },
      h.m);
}

/// The elements of a one-column buffer, or an empty span for None.
template <class T>
std::span<const T> span_of(const std::optional<DenseArg>& a) {
  if (!a) return {};
  const DenseView<const T> v = view_of<const T>(*a);
  return {v.data, static_cast<std::size_t>(v.rows)};
}

/// (x, iterations, relative residual, status name) of a solve.
template <class T>
py::tuple solve_tuple(SolveResult<T>&& res) {
  return py::make_tuple(vector_array(std::move(res.x)), res.iterations, res.rel_residual,
                        std::string(to_string(res.status)));
}

/// Binds the solvers on BSR operators. Each releases the GIL while it runs.
void bind_solvers(py::module_& m) {
  using Opt = std::optional<DenseArg>;
  m.def("cg", [](const Bsr& h, const DenseArg& b, const Opt& x0, double tol, index_t max_iter, const Opt& minv) {
    return on_real_bsr(h, "cg_bsr", [&](const auto& A) -> py::object {
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
    return on_real_bsr(h, "cg_bsr", [&](const auto& A) -> py::object {
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
    return on_real_bsr(h, "chebyshev_bsr", [&](const auto& A) -> py::object {
      using T = matrix_value_t<decltype(A)>;
      auto res = [&] {
        py::gil_scoped_release nogil;
        return chebyshev(LinearOperator<T>(A), span_of<T>(b), lmin, lmax, steps, span_of<T>(x0));
      }();
      return solve_tuple(std::move(res));
    });
  });
  m.def("richardson", [](const Bsr& h, const DenseArg& b, double omega, index_t steps, const Opt& x0) {
    return on_real_bsr(h, "richardson_bsr", [&](const auto& A) -> py::object {
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
    return on_real_bsr(h, "power_iteration_bsr", [&](const auto& A) -> py::object {
      using T = matrix_value_t<decltype(A)>;
      auto res = [&] {
        py::gil_scoped_release nogil;
        return power_iteration(LinearOperator<T>(A), max_iter, tol);
      }();
      return py::make_tuple(res.eigenvalue, vector_array(std::move(res.eigenvector)), res.iterations, res.converged);
    });
  });
  m.def("jacobi_preconditioner", [](const Bsr& h) {
    return on_real_bsr(h, "jacobi_preconditioner_bsr", [&](const auto& A) -> py::object {
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

/// Binds screened_spmm (square A, one diagonal for rows and columns) and its backward.
void bind_screening(py::module_& m) {
  m.def("screened_spmm", [](const Bsr& h, const DenseArg& diag, const DenseArg& B, double threshold) {
    return on_real_bsr(h, "screened_spmm", [&](const auto& A) -> py::object {
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
          return on_real_bsr(h, "screened_spmm", [&](const auto& A) -> py::object {
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

// ---- block-sparse attention (fp32, bf16 and float64 operands) --------------------------
/// A (batch, heads, seq, dim) CPU buffer, the last dimension contiguous: (address, batch,
/// heads, seq, dim, batch stride, head stride, seq stride), strides in elements.
using HeadsArg = std::tuple<std::uintptr_t, index_t, index_t, index_t, index_t, index_t, index_t, index_t>;

template <class T>
HeadsView<T> heads_of(const HeadsArg& a) {
  const auto& [addr, batch, heads, seq, dim, bs, hs, ss] = a;
  return HeadsView<T>(reinterpret_cast<T*>(addr), batch, heads, seq, dim, bs, hs, ss);
}

/// `n` row statistics of type A at `addr` (n = 0: none).
template <class A>
std::span<A> stats_of(std::uintptr_t addr, index_t n) {
  detail::check_nonnegative(n, "lse length");
  return {reinterpret_cast<A*>(addr), static_cast<std::size_t>(n)};
}

/// Binds AttentionMask (immutable handle), its builders, and the batched forward and
/// backward kernels over caller-owned buffers.
void bind_attention(py::module_& m) {
  py::class_<AttentionMask>(m, "AttentionMask")
      .def_property_readonly("batch", &AttentionMask::batch)
      .def_property_readonly("heads", &AttentionMask::heads)
      .def_property_readonly("queries", &AttentionMask::queries)
      .def_property_readonly("keys", &AttentionMask::keys)
      .def_property_readonly("block_size", &AttentionMask::block_size)
      .def_property_readonly("n_blocks", &AttentionMask::n_blocks)
      .def_property_readonly("n_partial", &AttentionMask::n_partial)
      .def(
          "block_arrays",
          [](py::object self) {
            const auto& mk = self.cast<const AttentionMask&>();
            const BsrStructure& s = mk.structure();
            const auto over = [&](std::span<const index_t> a) {
              return array_over<index_t>(a.data(), {static_cast<py::ssize_t>(a.size())}, self);
            };
            const auto masks = mk.partial_masks();
            return py::make_tuple(over(s.block_row_ptr()), over(s.block_col_indices()), over(mk.partial_index()),
                                  array_over<std::uint8_t>(masks.data(), {static_cast<py::ssize_t>(masks.size())}, self));
          },
          "(block_row_ptr, block_col_indices, partial_index, partial_masks) of the stacked structure, as arrays "
          "over this handle's memory")
      .def(
          "allowed",
          [](const AttentionMask& mk) {
            const index_t q = mk.queries(), k = mk.keys(), n = mk.slices();
            std::vector<std::uint8_t> a(static_cast<std::size_t>(
                detail::checked_mul(n, detail::checked_mul(q, k, "queries * keys"), "slices * queries * keys")));
            {
              py::gil_scoped_release nogil;
              for (index_t s = 0; s < n; ++s)
                for (index_t i = 0; i < q; ++i)
                  for (index_t j = 0; j < k; ++j)
                    a[static_cast<std::size_t>((s * q + i) * k + j)] =
                        mk.allows(s / mk.heads(), s % mk.heads(), i, j) ? 1 : 0;
            }
            auto [p, owner] = adopt(std::move(a));
            return array_over<std::uint8_t>(p->data(),
                                            {static_cast<py::ssize_t>(mk.batch()), static_cast<py::ssize_t>(mk.heads()),
                                             static_cast<py::ssize_t>(q), static_cast<py::ssize_t>(k)},
                                            owner);
          },
          "batch x heads x queries x keys uint8 array: 1 where the pair is allowed (O(queries * keys) per slice, "
          "for inspection)");

  using Guard = py::call_guard<py::gil_scoped_release>;
  m.def("mask_local_window", py::overload_cast<index_t, index_t, index_t, index_t>(&mask::local_window), Guard());
  m.def("mask_dilated", &mask::dilated, Guard());
  m.def("mask_global_tokens", &mask::global_tokens, Guard());
  m.def("mask_causal", py::overload_cast<index_t, index_t, index_t>(&mask::causal), Guard());
  m.def("mask_document", [](std::uintptr_t lengths, index_t n, index_t block, bool causal) {
    const auto l = copy_of<index_t>(lengths, n);
    py::gil_scoped_release nogil;
    return mask::document(l, block, causal);
  });
  m.def("mask_unite", &mask::unite, Guard());
  m.def("mask_intersect", &mask::intersect, Guard());
  m.def("mask_stack", [](const py::list& masks, index_t batch, index_t heads) {
    std::vector<AttentionMask> v;
    v.reserve(masks.size());
    for (const auto& x : masks) v.push_back(x.cast<const AttentionMask&>());
    py::gil_scoped_release nogil;
    return mask::stack(v, batch, heads);
  });
  // Every stored block of a BSR pattern full (its values are not read).
  m.def("mask_from_pattern", [](index_t rows, index_t cols, index_t block_size, std::uintptr_t block_row_ptr,
                                index_t n_block_row_ptr, std::uintptr_t block_col_idx, index_t n_blocks) {
    auto ptr = copy_of<index_t>(block_row_ptr, n_block_row_ptr);
    auto cols_v = copy_of<index_t>(block_col_idx, n_blocks);
    py::gil_scoped_release nogil;
    return AttentionMask(BsrStructure::make(rows, cols, block_size, std::move(ptr), std::move(cols_v)));
  });
  // Classified blocks of batch x heads slices (AttentionMask::from_blocks).
  m.def("mask_from_blocks", [](index_t batch, index_t heads, index_t queries, index_t keys, index_t block,
                               std::uintptr_t ptr, index_t n_ptr, std::uintptr_t cols, index_t n_blocks,
                               std::uintptr_t partial, std::uintptr_t masks, index_t n_mask_bytes) {
    auto p = copy_of<index_t>(ptr, n_ptr);
    auto c = copy_of<index_t>(cols, n_blocks);
    auto k = copy_of<index_t>(partial, n_blocks);
    auto e = copy_of<std::uint8_t>(masks, n_mask_bytes);
    py::gil_scoped_release nogil;
    return AttentionMask::from_blocks(batch, heads, queries, keys, block, std::move(p), std::move(c), std::move(k),
                                      std::move(e));
  });
  // O and lse (float32; float64 for float64 operands; lse_n = 0: none) in place; scale 0
  // means 1 / sqrt(d); alibi: one slope per query head or empty; softcap 0: none.
  m.def("attention_forward", [](const AttentionMask& mk, const std::string& dtype, const HeadsArg& Q,
                                const HeadsArg& K, const HeadsArg& V, const HeadsArg& O, std::uintptr_t lse,
                                index_t lse_n, double scale, const std::vector<double>& alibi, double softcap) {
    with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      attention_forward<T>(mk, heads_of<const T>(Q), heads_of<const T>(K), heads_of<const T>(V), heads_of<T>(O),
                           stats_of<acc_t<T>>(lse, lse_n), static_cast<acc_t<T>>(scale), ScoreMod{alibi, softcap});
    });
  });
  // dQ, dK, dV in place from the forward's O and lse.
  m.def("attention_backward",
        [](const AttentionMask& mk, const std::string& dtype, const HeadsArg& Q, const HeadsArg& K, const HeadsArg& V,
           const HeadsArg& O, const HeadsArg& dO, std::uintptr_t lse, index_t lse_n, const HeadsArg& dQ,
           const HeadsArg& dK, const HeadsArg& dV, double scale, const std::vector<double>& alibi, double softcap) {
          with_dtype(dtype, [&]<class T>() {
            py::gil_scoped_release nogil;
            attention_backward<T>(mk, heads_of<const T>(Q), heads_of<const T>(K), heads_of<const T>(V),
                                  heads_of<const T>(O), heads_of<const T>(dO), stats_of<const acc_t<T>>(lse, lse_n),
                                  heads_of<T>(dQ), heads_of<T>(dK), heads_of<T>(dV), static_cast<acc_t<T>>(scale),
                                  ScoreMod{alibi, softcap});
          });
        });
}

// ---- the format advisor ------------------------------------------------------------------
const char* format_name(Format f) { return f == Format::csr ? "csr" : "bsr"; }

/// Binds choose_format with the calibration file, refresh and measurement the CLI's
/// `advise` offers. It returns tuples; the package builds the CLI's JSON shape from them.
void bind_advisor(py::module_& m) {
  // ([(format, block size, fill, predicted ms, measured ms or None)], (format, block size),
  // predicted speedup over CSR, calibration status) for A's products of `width` columns;
  // an empty `calibration` is Calibration::default_path().
  m.def("choose_format", [](const Csr& h, index_t width, const std::filesystem::path& calibration, bool recalibrate,
                            bool measure) {
    return std::visit(
        [&](const auto& A) {
          using T = matrix_value_t<decltype(A)>;
          const Workload workload{.width = width};
          std::string status;
          Advice advice;
          std::vector<double> measured;
          {
            py::gil_scoped_release nogil;
            const Calibration c =
                load_calibration(trnsparse::dtype_name<T>(), width, calibration, recalibrate, &status);
            advice = advise(A, workload, c);
            if (measure)
              for (const Candidate& k : advice.candidates)
                measured.push_back(measure_product_ms(A, k.format, k.block_size, workload));
          }
          py::list candidates;
          for (std::size_t i = 0; i < advice.candidates.size(); ++i) {
            const Candidate& k = advice.candidates[i];
            candidates.append(py::make_tuple(format_name(k.format), k.block_size, k.fill, k.predicted_ms,
                                             measure ? py::object(py::float_(measured[i])) : py::object(py::none())));
          }
          return py::make_tuple(candidates, py::make_tuple(format_name(advice.format), advice.block_size),
                                advice.predicted_speedup_vs_csr, status);
        },
        h.m);
  });
}

void translate_errors(py::module_& m) {
  // Shape errors are AssertionErrors too: code written for trnsparse 0.6 catches those.
  static py::exception<DimensionMismatch> shape_error(
      m, "ShapeError", py::make_tuple(py::handle(PyExc_AssertionError), py::handle(PyExc_ValueError)));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const DimensionMismatch& e) {
      shape_error(e.what());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const ParseError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const OverflowError& e) {
      PyErr_SetString(PyExc_OverflowError, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const NotSupported& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace
}  // namespace trnsparse::python

PYBIND11_MODULE(_core, m) {
  using namespace trnsparse;
  using namespace trnsparse::python;
  m.doc() = "trnsparse C++ core (use the trnsparse package, not this module)";
  m.attr("__version__") = version_string;
  translate_errors(m);

  py::class_<Csr>(m, "Csr")
      .def_property_readonly("rows", [](const Csr& h) { return std::visit([](const auto& A) { return A.rows(); }, h.m); })
      .def_property_readonly("cols", [](const Csr& h) { return std::visit([](const auto& A) { return A.cols(); }, h.m); })
      .def_property_readonly("dtype", &dtype_of<Csr>)
      .def("arrays", &csr_arrays, "(row_ptr, col_indices, values) as arrays over this handle's memory");
  py::class_<Bsr>(m, "Bsr")
      .def_property_readonly("rows", [](const Bsr& h) { return std::visit([](const auto& A) { return A.rows(); }, h.m); })
      .def_property_readonly("cols", [](const Bsr& h) { return std::visit([](const auto& A) { return A.cols(); }, h.m); })
      .def_property_readonly("block_size",
                             [](const Bsr& h) { return std::visit([](const auto& A) { return A.block_size(); }, h.m); })
      .def_property_readonly("dtype", &dtype_of<Bsr>)
      .def("arrays", &bsr_arrays,
           "(block_row_ptr, block_col_indices, blocks): copies of the indices, blocks over this handle's memory");

  // ---- construction and conversion ----
  m.def("csr", &make_csr, "CSR from raw arrays (copied, validated), or `cached` reused when its arrays are equal");
  m.def("csr_from_coo", &make_csr_from_coo, "CSR from COO triplets (sorted, duplicates summed)");
  m.def("bsr", &make_bsr, "BSR from raw arrays (copied, validated), or `cached` reused when its arrays are equal");
  m.def("csr_from_dense", [](const std::string& dtype, const DenseArg& a, double threshold) {
    return with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      return Csr{to_csr(view_of<const T>(a), threshold)};
    });
  });
  m.def("bsr_from_dense", [](const std::string& dtype, const DenseArg& a, index_t block_size, double threshold) {
    return with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      return Bsr{to_bsr(view_of<const T>(a), block_size, threshold)};
    });
  });
  m.def("csr_to_bsr", [](const Csr& h, index_t block_size, double threshold) {
    return run(h, [&](const auto& A) { return Bsr{to_bsr(A, block_size, threshold)}; });
  });
  // The block size choose_format picks for products of `width` columns; a threshold other
  // than 0 converts again at that block size, as to_bsr(A, BlockSize::automatic) takes none.
  m.def("csr_to_bsr_auto", [](const Csr& h, index_t width, double threshold) {
    return run(h, [&](const auto& A) {
      auto B = to_bsr(A, BlockSize::automatic, {.width = width});
      return Bsr{threshold == 0.0 ? std::move(B) : to_bsr(A, B.block_size(), threshold)};
    });
  });
  m.def("bsr_to_csr", [](const Bsr& h) { return run(h, [](const auto& A) { return Csr{to_csr(A)}; }); });
  m.def("eye_csr", [](const std::string& dtype, index_t n) {
    return with_dtype(dtype, [&]<class T>() { return Csr{eye_csr<T>(n)}; });
  });
  // The generators of generators.hpp by name: "poisson3d", "elasticity3d", "block_stencil3d".
  m.def("generate", [](const std::string& name, index_t n, index_t fields, const std::string& dtype) {
    return with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      if (name == "poisson3d") return Csr{poisson3d<T>(n)};
      if (name == "elasticity3d") return Csr{elasticity3d<T>(n)};
      if (name == "block_stencil3d") return Csr{block_stencil3d<T>(n, fields)};
      throw InvalidArgument("generate: unknown problem " + name);
    });
  });
  m.def("random_blocks", [](index_t n, index_t block_size, double block_density, std::uint64_t seed,
                            const std::string& dtype) {
    return with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      return Csr{random_blocks<T>(n, block_size, block_density, seed)};
    });
  });
  // A problem specification as the CLI's --problem takes it ("elasticity3d:8", ...).
  m.def("named_problem", [](const std::string& spec, const std::string& dtype) {
    return with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      return Csr{named_problem<T>(spec)};
    });
  });

  // ---- operations ----
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

  bind_solvers(m);
  bind_screening(m);
  bind_attention(m);
  bind_advisor(m);

  // ---- runtime ----
  m.def("set_isa", [](const std::string& name) {
    if (name == "scalar") return set_isa(Isa::scalar);
    if (name == "avx2") return set_isa(Isa::avx2);
    if (name == "avx512") return set_isa(Isa::avx512);
    throw InvalidArgument("isa " + name + " is not one of scalar, avx2, avx512");
  });
  m.def("active_isa", [] { return std::string(to_string(active_isa())); });
  m.def("best_isa", [] {
    return std::string(to_string(isa_supported(Isa::avx512) ? Isa::avx512
                                 : isa_supported(Isa::avx2) ? Isa::avx2
                                                            : Isa::scalar));
  });
  m.def("set_num_threads", &set_num_threads);
  m.def("num_threads", &num_threads);
}
