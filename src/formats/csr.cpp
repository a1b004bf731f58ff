#include "trnsparse/csr.hpp"

#include "formats/compressed.hpp"
#include "plan/csr_analysis.hpp"
#include "runtime/checks.hpp"

namespace trnsparse {

template <Value T>
CsrMatrix<T>::CsrMatrix(index_t rows, index_t cols) {
  detail::check_nonnegative(rows, "csr: rows");
  detail::check_nonnegative(cols, "csr: cols");
  structure_ = detail::trusted_structure(
      rows, cols, 1, detail::make_vector<index_t>(detail::checked_add(rows, 1, "csr: rows + 1"), "csr: row_ptr"), {});
  analyses_ = std::make_shared<detail::CsrAnalyses>();
}

template <Value T>
CsrMatrix<T>::CsrMatrix(index_t rows, index_t cols, std::vector<index_t> row_ptr, std::vector<index_t> col_idx,
                        std::vector<T> values, Canonicalize canonicalize) {
  detail::check_nonnegative(rows, "csr: rows");
  detail::check_nonnegative(cols, "csr: cols");
  if (values.size() != col_idx.size())
    throw IndexError(detail::concat("csr: values has ", values.size(), " entries but col_idx has ", col_idx.size()));
  const bool sorted = detail::validate_compressed("csr", row_ptr, rows, col_idx, cols,
                                                  canonicalize == Canonicalize::no, "row_ptr", "col_idx", "row");
  if (!sorted) detail::canonicalize_compressed(row_ptr, col_idx, values, 1);
  values_ = std::move(values);
  structure_ = detail::trusted_structure(rows, cols, 1, std::move(row_ptr), std::move(col_idx));
  analyses_ = std::make_shared<detail::CsrAnalyses>();
}

template <Value T>
CsrMatrix<T>::CsrMatrix(std::shared_ptr<const BsrStructure> structure, std::vector<T> values)
    : CsrMatrix(std::move(structure), detail::Storage<T>(std::move(values)), detail::Written{}) {}

template <Value T>
CsrMatrix<T>::CsrMatrix(std::shared_ptr<const BsrStructure> structure, detail::Storage<T> values, detail::Written)
    : structure_(std::move(structure)), values_(std::move(values)) {
  if (!structure_) throw InvalidArgument("csr: structure is null");
  if (structure_->block_size() != 1)
    throw InvalidArgument(detail::concat("csr: structure has block size ", structure_->block_size(),
                                         "; a CSR pattern has block size 1"));
  if (static_cast<index_t>(values_.size()) != structure_->n_blocks())
    throw DimensionMismatch(detail::concat("csr: values has ", values_.size(), " entries, the structure stores ",
                                           structure_->n_blocks()));
  analyses_ = std::make_shared<detail::CsrAnalyses>();
}

template <Value T>
detail::CsrAnalyses& detail::analyses(const CsrMatrix<T>& A) noexcept {
  return *A.analyses_;
}

template detail::CsrAnalyses& detail::analyses(const CsrMatrix<float>&) noexcept;
template detail::CsrAnalyses& detail::analyses(const CsrMatrix<double>&) noexcept;
template detail::CsrAnalyses& detail::analyses(const CsrMatrix<bf16>&) noexcept;
template class CsrMatrix<float>;
template class CsrMatrix<double>;
template class CsrMatrix<bf16>;

}  // namespace trnsparse
