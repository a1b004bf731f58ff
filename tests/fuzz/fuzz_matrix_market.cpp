// libFuzzer target: the Matrix Market reader, and the writer on whatever it accepts.
//
// The input is a Matrix Market file. Rejecting it with a trnsparse::Error is fine; anything
// else (a crash, a sanitizer report, another exception) is a finding. An accepted matrix is
// written back and re-read, which must give the same entries: once as general real
// coordinate (always possible), once with the file's own header (which the writer may
// refuse with a trnsparse::Error, e.g. a symmetric file holding a NaN).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include <trnsparse/convert.hpp>
#include <trnsparse/error.hpp>
#include <trnsparse/io.hpp>

namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_matrix_market: %s\n", what);
    std::abort();
  }
}

// A and B hold the same matrix: shape, and after summing duplicates the same positions
// and (unless only the pattern counts) the same values, NaN matching NaN.
void require_same(trnsparse::CooMatrix<double> a, trnsparse::CooMatrix<double> b, bool compare_values) {
  require(a.rows() == b.rows() && a.cols() == b.cols(), "round trip changed the shape");
  a.canonicalize();
  b.canonicalize();
  require(a.nnz() == b.nnz(), "round trip changed the number of entries");
  for (trnsparse::index_t k = 0; k < a.nnz(); ++k) {
    require(a.row_indices()[k] == b.row_indices()[k] && a.col_indices()[k] == b.col_indices()[k],
            "round trip moved an entry");
    const double x = a.values()[k];
    const double y = b.values()[k];
    require(!compare_values || x == y || (std::isnan(x) && std::isnan(y)), "round trip changed a value");
  }
}

trnsparse::MmMatrix reread(const trnsparse::CooMatrix<double>& A, const trnsparse::MmWriteOptions& options) {
  std::stringstream file;
  trnsparse::write_matrix_market(file, A, options);
  return trnsparse::read_matrix_market(file, "fuzz round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream file(std::string(reinterpret_cast<const char*>(data), size));
  trnsparse::MmMatrix mm;
  try {
    mm = trnsparse::read_matrix_market(file, "fuzz");
  } catch (const trnsparse::Error&) {
    return 0;
  }

  require_same(mm.entries, reread(mm.entries, {}).entries, true);

  const trnsparse::MmWriteOptions own{mm.header.format, mm.header.field, mm.header.symmetry};
  trnsparse::MmMatrix again;
  try {
    again = reread(mm.entries, own);
  } catch (const trnsparse::Error&) {
    return 0;
  }
  require(again.header.format == own.format && again.header.field == own.field &&
              again.header.symmetry == own.symmetry,
          "round trip changed the header");
  require_same(mm.entries, again.entries, own.field != trnsparse::MmField::pattern);
  return 0;
}
