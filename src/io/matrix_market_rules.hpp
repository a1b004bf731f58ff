// Internal: the Matrix Market rules that reading and writing share.
#pragma once

#include "trnsparse/io.hpp"

namespace trnsparse::detail::mm {

/// Why the banner combination is invalid (the Matrix Market rules), or nullptr.
inline const char* invalid_combination(MmFormat format, MmField field, MmSymmetry symmetry) noexcept {
  if (field == MmField::pattern && format == MmFormat::array) return "the 'pattern' field requires the 'coordinate' format";
  if (field == MmField::pattern && symmetry == MmSymmetry::skew_symmetric)
    return "the 'pattern' field cannot be 'skew-symmetric'";
  return nullptr;
}

/// The first row of column j that a file stores: every row for general, the lower
/// triangle with the diagonal for symmetric, the strict lower triangle for
/// skew-symmetric (whose diagonal is zero).
inline index_t first_stored_row(index_t j, MmSymmetry symmetry) noexcept {
  switch (symmetry) {
    case MmSymmetry::general: return 0;
    case MmSymmetry::symmetric: return j;
    case MmSymmetry::skew_symmetric: return j + 1;
  }
  return 0;
}

}  // namespace trnsparse::detail::mm
