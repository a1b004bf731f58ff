// estimate_fill: exact on every block row, close on a sample, the same for a seed.
#include "support.hpp"
#include "trnsparse/advisor.hpp"

namespace trnsparse::test {
namespace {

double exact_fill(const CsrMatrix<double>& A, index_t b) {
  const auto B = to_bsr(A, b);
  return A.nnz() == 0 ? 1.0
                      : static_cast<double>(B.n_blocks()) * static_cast<double>(b * b) / static_cast<double>(A.nnz());
}

TEST(Advisor, FillIsExactOverEveryBlockRow) {
  const CsrMatrix<double> poisson = poisson3d<double>(9), random = random_csr<double>(101, 77, 0.05, 3);
  for (index_t b : {1, 2, 3, 4, 5, 8, 16, 128}) {
    SCOPED_TRACE("block " + std::to_string(b));
    EXPECT_DOUBLE_EQ(estimate_fill(poisson, b), exact_fill(poisson, b));
    EXPECT_DOUBLE_EQ(estimate_fill(random, b), exact_fill(random, b));
  }
  EXPECT_DOUBLE_EQ(estimate_fill(elasticity3d<double>(3), 3), 1.0);  // natural 3 x 3 blocks
  EXPECT_DOUBLE_EQ(estimate_fill(block_stencil3d<double>(4), 5), 1.0);
  EXPECT_DOUBLE_EQ(estimate_fill(CsrMatrix<double>(10, 10), 4), 1.0);
}

TEST(Advisor, SampledFillIsCloseAndReproducible) {
  const CsrMatrix<double> A = poisson3d<double>(24);
  for (index_t b : {2, 4, 8}) {
    SCOPED_TRACE("block " + std::to_string(b));
    const double exact = exact_fill(A, b), sampled = estimate_fill(A, b, 0.1, 7);
    EXPECT_NEAR(sampled, exact, 0.1 * exact);
    EXPECT_EQ(sampled, estimate_fill(A, b, 0.1, 7));
  }
  // A sample too small to hold a block row falls back to the first one with entries.
  EXPECT_GT(estimate_fill(A, 4, 1e-9, 1), 1.0);
  EXPECT_THROW(estimate_fill(A, 0), InvalidArgument);
  EXPECT_THROW(estimate_fill(A, 4, 0.0), InvalidArgument);
  EXPECT_THROW(estimate_fill(A, 4, 1.5), InvalidArgument);
}

}  // namespace
}  // namespace trnsparse::test
