// The runtime: instruction set and thread count of the C++ kernels.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {

void bind_runtime(py::module_& m) {
  m.def("set_isa", [](const std::string& name) {
    if (name == "scalar") return set_isa(Isa::scalar);
    if (name == "avx2") return set_isa(Isa::avx2);
    if (name == "avx512") return set_isa(Isa::avx512);
    if (name == "avx512_bf16") return set_isa(Isa::avx512_bf16);
    throw InvalidArgument("isa " + name + " is not one of scalar, avx2, avx512, avx512_bf16");
  });
  m.def("active_isa", [] { return std::string(to_string(active_isa())); });
  m.def("best_isa", [] {
    for (const Isa isa : {Isa::avx512_bf16, Isa::avx512, Isa::avx2})
      if (isa_supported(isa)) return std::string(to_string(isa));
    return std::string(to_string(Isa::scalar));
  });
  m.def("set_num_threads", &set_num_threads);
  m.def("num_threads", &num_threads);
}

}  // namespace trnsparse::python
