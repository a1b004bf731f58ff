// trnsparse._core: the C++ library seen from Python. The Python package (python/trnsparse)
// owns the API; this module takes raw addresses, shapes and dtype names from it.
// common.hpp describes how arrays and matrices cross the boundary; each concept's
// bindings live in their own file and register through bindings.hpp.
#include <pybind11/pybind11.h>

#include <trnsparse/version.hpp>

#include "bindings.hpp"

PYBIND11_MODULE(_core, m) {
  using namespace trnsparse::python;
  m.doc() = "trnsparse C++ core (use the trnsparse package, not this module)";
  m.attr("__version__") = trnsparse::version_string;
  bind_errors(m);
  bind_formats(m);
  bind_generators(m);
  bind_products(m);
  bind_spgemm(m);
  bind_linear(m);
  bind_solvers(m);
  bind_preconditioners(m);
  bind_screening(m);
  bind_attention(m);
  bind_advisor(m);
  bind_io(m);
  bind_runtime(m);
  bind_buffers(m);
}
