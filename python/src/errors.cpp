// trnsparse's exceptions as Python exceptions (ShapeError, ValueError, IndexError, ...).

#include <exception>

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {

void bind_errors(py::module_& m) {
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

}  // namespace trnsparse::python
