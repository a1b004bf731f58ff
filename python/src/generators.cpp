// The generated problems of generators.hpp, by name and by the CLI's --problem spec.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {

void bind_generators(py::module_& m) {
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
  // The free nodes' coordinates of elasticity3d(n), float64 (nodes x 3).
  m.def("elasticity3d_coordinates", [](index_t n) {
    Dense<double> xyz = [&] {
      py::gil_scoped_release nogil;
      return elasticity3d_coordinates(n);
    }();
    return dense_array(std::move(xyz));
  });
}

}  // namespace trnsparse::python
