// The runtime: instruction set and thread count of the C++ kernels.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {

void bind_runtime(py::module_& m) {
  m.def("set_isa", [](const std::string& name) { set_isa(isa_named(name)); });
  m.def("active_isa", [] { return std::string(to_string(active_isa())); });
  m.def("best_isa", [] { return std::string(to_string(best_isa())); });
  m.def("set_num_threads", &set_num_threads);
  m.def("num_threads", &num_threads);
}

}  // namespace trnsparse::python
