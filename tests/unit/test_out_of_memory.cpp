// An allocation the machine cannot give, inside the library, throws (OverflowError naming
// the array where the library sizes it itself, std::bad_alloc elsewhere; the CLI maps
// both to exit 1, Python to MemoryError or OverflowError), and the library works after.
// The requests are tens of terabytes: no machine grants them, with or without overcommit.
// Under AddressSanitizer these tests skip: ASan's operator new ends the process when an
// allocation fails instead of throwing (whatever allocator_may_return_null says), so a
// failed allocation cannot be survived there, and leaks after one are not checked by a
// sanitizer.
#include <gtest/gtest.h>

#include <new>
#include <vector>

#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/ops.hpp"

namespace trnsparse::test {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

#define SKIP_UNDER_ASAN() \
  if (kAsan) GTEST_SKIP() << "ASan's operator new ends the process on a failed allocation"

/// An n x n matrix with two entries, at its corners.
CsrMatrix<double> corners(index_t n) {
  std::vector<index_t> ptr(static_cast<std::size_t>(n) + 1, 0);
  for (index_t i = 1; i < n; ++i) ptr[i] = 1;
  ptr[n] = 2;
  return CsrMatrix<double>(n, n, std::move(ptr), {0, n - 1}, {1.0, 2.0});
}

TEST(OutOfMemory, ConversionThrowsAfterBuildingItsStructure) {
  SKIP_UNDER_ASAN();
  // Two blocks of (2^21)² doubles: 2^46 bytes of values, requested after the block
  // structure (small) is built, so the unwinding frees it.
  const CsrMatrix<double> A = corners(index_t{1} << 22);
  EXPECT_THROW((void)to_bsr(A, index_t{1} << 21), OverflowError);
  // The library still works afterwards.
  const BsrMatrix<double> B = to_bsr(corners(64), 8);
  EXPECT_EQ(B.n_blocks(), 2);
}

TEST(OutOfMemory, DenseResultThrowsBadAlloc) {
  SKIP_UNDER_ASAN();
  // A (2^22 x 2^22) dense copy: 2^47 bytes.
  const CsrMatrix<double> A = corners(index_t{1} << 22);
  EXPECT_THROW((void)to_dense(A), std::bad_alloc);
}

}  // namespace
}  // namespace trnsparse::test
