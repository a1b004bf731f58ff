#include "trnsparse/csr.hpp"

#include "formats/compressed.hpp"
#include "plan/csr_analysis.hpp"
#include "runtime/checks.hpp"

namespace trnsparse {

template <Value T>
CsrMatrix<T>::CsrMatrix(index_t rows, index_t cols) : rows_(rows), cols_(cols) {
  detail::check_nonnegative(rows, "csr: rows");
  detail::check_nonnegative(cols, "csr: cols");
  row_ptr_ = detail::make_vector<index_t>(detail::checked_add(rows, 1, "csr: rows + 1"), "csr: row_ptr");
  analyses_ = std::make_shared<detail::CsrAnalyses>();
}

template <Value T>
CsrMatrix<T>::CsrMatrix(index_t rows, index_t cols, std::vector<index_t> row_ptr, std::vector<index_t> col_idx,
                        std::vector<T> values, Canonicalize canonicalize)
    : rows_(rows), cols_(cols), row_ptr_(std::move(row_ptr)), col_idx_(std::move(col_idx)), values_(std::move(values)) {
  detail::check_nonnegative(rows, "csr: rows");
  detail::check_nonnegative(cols, "csr: cols");
  if (values_.size() != col_idx_.size())
    throw IndexError(detail::concat("csr: values has ", values_.size(), " entries but col_idx has ", col_idx_.size()));
  const bool sorted = detail::validate_compressed("csr", row_ptr_, rows_, col_idx_, cols_,
                                                  canonicalize == Canonicalize::no, "row_ptr", "col_idx", "row");
  if (!sorted) detail::canonicalize_compressed(row_ptr_, col_idx_, values_, 1);
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
