// Column indices at and beyond 2^31: the products read 32-bit copies of a CSR matrix's
// column indices when its columns fit (CsrAnalyses::compact), and must never do so when
// they do not, where a copy would wrap to negative offsets. The long dense operand (2^31 +
// 16 floats, 8 GiB of address space) is an anonymous MAP_NORESERVE mapping: a product reads
// x only at the columns A names, so only those few pages are ever touched.
#include <sys/mman.h>

#include <cstddef>
#include <vector>

#include "support.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::test {
namespace {

constexpr index_t kTwo31 = index_t{1} << 31;
constexpr index_t kCols = kTwo31 + 16;

/// `n` zero floats of address space, touched only where written.
class SparseMapping {
public:
  explicit SparseMapping(index_t n) : bytes_(static_cast<std::size_t>(n) * sizeof(float)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<float*>(p);
  }
  SparseMapping(const SparseMapping&) = delete;
  SparseMapping& operator=(const SparseMapping&) = delete;
  ~SparseMapping() {
    if (data_ != nullptr) munmap(data_, bytes_);
  }
  [[nodiscard]] float* data() const noexcept { return data_; }

private:
  std::size_t bytes_;
  float* data_;
};

/// 3 x (2^31 + 16), entries on both sides of 2^31.
CsrMatrix<float> wide() {
  return CsrMatrix<float>(3, kCols, {0, 2, 4, 5}, {0, kTwo31 + 3, kTwo31 - 1, kTwo31 + 15, 7},
                          {1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
}

TEST(LargeIndices, ProductsReadColumnsBeyond32Bits) {
  const SparseMapping x(kCols);
  if (x.data() == nullptr) GTEST_SKIP() << "no 8 GiB of address space for x (overcommit disabled?)";
  x.data()[0] = 1;
  x.data()[kTwo31 + 3] = 10;
  x.data()[kTwo31 - 1] = 100;
  x.data()[kTwo31 + 15] = 1000;
  x.data()[7] = 10000;
  const CsrMatrix<float> A = wide();
  const std::vector<float> want{1 + 20, 300 + 4000, 50000};
  std::vector<float> y(3, -1.0f);
  spmv(1.0f, A, std::span<const float>(x.data(), static_cast<std::size_t>(kCols)), 0.0f, std::span<float>(y));
  EXPECT_EQ(y, want);
  Dense<float> C(3, 1);
  spmm(1.0f, A, DenseView<const float>(x.data(), kCols, 1, 1), 0.0f, C.view());
  EXPECT_EQ(std::vector<float>(C.values().begin(), C.values().end()), want);
}

TEST(LargeIndices, AlgebraAndConversionsKeepColumnsBeyond32Bits) {
  const CsrMatrix<float> A = wide();
  const CsrMatrix<float> back = to_csr(to_coo(A));
  EXPECT_EQ(std::vector<index_t>(back.col_indices().begin(), back.col_indices().end()),
            std::vector<index_t>(A.col_indices().begin(), A.col_indices().end()));
  const CsrMatrix<float> twice = sparse_add(1.0f, A, 1.0f, sparse_scale(A, 1.0f));
  EXPECT_EQ(twice.cols(), kCols);
  EXPECT_EQ(std::vector<index_t>(twice.col_indices().begin(), twice.col_indices().end()),
            std::vector<index_t>(A.col_indices().begin(), A.col_indices().end()));
  EXPECT_EQ(std::vector<float>(twice.values().begin(), twice.values().end()),
            (std::vector<float>{2, 4, 6, 8, 10}));
  EXPECT_EQ(nnz_per_row(A), (std::vector<index_t>{2, 2, 1}));
}

}  // namespace
}  // namespace trnsparse::test
