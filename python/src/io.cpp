// Matrix Market files (io.hpp) read into and written from CSR handles.

#include <pybind11/stl/filesystem.h>

#include <array>
#include <filesystem>
#include <string>
#include <type_traits>

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

constexpr std::array formats{MmFormat::coordinate, MmFormat::array};
constexpr std::array fields{MmField::real, MmField::integer, MmField::pattern};
constexpr std::array symmetries{MmSymmetry::general, MmSymmetry::symmetric, MmSymmetry::skew_symmetric};

/// The value whose banner word is `word`. The package checks the words first, so the
/// InvalidArgument is for a direct caller of _core.
template <class E, std::size_t N>
E banner_value(const std::string& word, const std::array<E, N>& values, const char* what) {
  for (const E v : values)
    if (to_string(v) == word) return v;
  throw InvalidArgument(std::string("write_matrix_market: unknown ") + what + " '" + word + "'");
}

}  // namespace

void bind_io(py::module_& m) {
  // The full matrix of a file (symmetric kinds expanded, duplicates summed) as a CSR
  // handle of `dtype`; the values are read as float64 and rounded once to the dtype.
  m.def("read_matrix_market", [](const std::filesystem::path& path, const std::string& dtype) {
    return with_dtype(dtype, [&]<class T>() {
      py::gil_scoped_release nogil;
      CsrMatrix<double> A = to_csr(read_matrix_market(path).entries);
      if constexpr (std::is_same_v<T, double>) return Csr{std::move(A)};
      else return Csr{cast<T>(A)};
    });
  });
  // Writes A (widened to float64, which is exact for every dtype) with the banner words
  // given; the C++ writer checks that A fits them and replaces `path` atomically.
  m.def("write_matrix_market", [](const std::filesystem::path& path, const Csr& h, const std::string& format,
                                  const std::string& field, const std::string& symmetry, int precision) {
    const MmWriteOptions options{.format = banner_value(format, formats, "format"),
                                 .field = banner_value(field, fields, "field"),
                                 .symmetry = banner_value(symmetry, symmetries, "symmetry"),
                                 .precision = precision};
    run(h, [&](const auto& A) {
      using T = matrix_value_t<decltype(A)>;
      if constexpr (std::is_same_v<T, double>) write_matrix_market(path, to_coo(A), options);
      else write_matrix_market(path, to_coo(cast<double>(A)), options);
      return 0;
    });
  });
}

}  // namespace trnsparse::python
