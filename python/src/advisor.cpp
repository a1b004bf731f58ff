// The format advisor (choose_format) with the calibration file the CLI's `advise` uses.

#include <pybind11/stl/filesystem.h>
#include <filesystem>

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

const char* format_name(Format f) { return f == Format::csr ? "csr" : "bsr"; }

}  // namespace

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

}  // namespace trnsparse::python
