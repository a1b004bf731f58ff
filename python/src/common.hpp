// Internal to trnsparse._core: what the binding files share, and the conventions of
// the C++/Python boundary:
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
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
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

namespace trnsparse::python {

namespace py = pybind11;

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

/// A copy of the n elements at `addr`, on huge pages where it is large (a matrix's arrays
/// stream faster from them).
template <class T>
std::vector<T> copy_of(std::uintptr_t addr, index_t n) {
  detail::check_nonnegative(n, "array length");
  const T* p = reinterpret_cast<const T*>(addr);
  std::vector<T> v;
  v.reserve(static_cast<std::size_t>(n));
  detail::advise_huge_pages(v);  // before the copy's first touch
  v.assign(p, p + n);
  return v;
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
// In a named namespace, not an anonymous one: pybind11 identifies a bound class by its
// type_info, so every file must see the same Csr and Bsr.
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

// ---- solvers and screening (float32 and float64 only) -----------------------------------
/// Runs f(A) on a float or double handle's matrix (CSR or BSR); a TypeError for bf16.
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

/// The elements of a one-column buffer, or an empty span for None.
template <class T>
std::span<const T> span_of(const std::optional<DenseArg>& a) {
  if (!a) return {};
  const DenseView<const T> v = view_of<const T>(*a);
  return {v.data, static_cast<std::size_t>(v.rows)};
}

}  // namespace trnsparse::python
