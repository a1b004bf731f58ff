// Internal to trnsparse._core: the functions that register each concept's bindings on
// the module, one per file of python/src. module.cpp calls them in the order below; the
// order is the one pybind11 sees, so a handle class comes before the functions that
// take it and their docstrings name it.
#pragma once

#include <pybind11/pybind11.h>

namespace trnsparse::python {

void bind_errors(pybind11::module_& m);      // errors.cpp: ShapeError and the exception translator
void bind_formats(pybind11::module_& m);     // formats.cpp: Csr and Bsr handles, construction, conversions
void bind_generators(pybind11::module_& m);  // generators.cpp: poisson3d, random_blocks, named problems
void bind_products(pybind11::module_& m);    // products.cpp: spmv, spmm, algebra, bsr_spmm
void bind_spgemm(pybind11::module_& m);      // spgemm.cpp: sparse × sparse products and their gradients
void bind_solvers(pybind11::module_& m);     // solvers.cpp: CG, Chebyshev, Richardson, power iteration
void bind_preconditioners(pybind11::module_& m);  // preconditioners.cpp: preconditioners, cg/gmres/bicgstab
void bind_linear(pybind11::module_& m);      // linear.cpp: the block-sparse linear layer's kernels
void bind_screening(pybind11::module_& m);   // screening.cpp: screened_spmm and its backward
void bind_attention(pybind11::module_& m);   // attention.cpp: AttentionMask, builders, forward, backward
void bind_advisor(pybind11::module_& m);     // advisor.cpp: choose_format
void bind_io(pybind11::module_& m);          // io.cpp: Matrix Market reading and writing
void bind_runtime(pybind11::module_& m);     // runtime.cpp: instruction set, threads
void bind_buffers(pybind11::module_& m);     // buffers.cpp: pooled memory for large outputs

}  // namespace trnsparse::python
