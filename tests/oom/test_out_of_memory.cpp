// An allocation the machine cannot give, inside the library, throws (OverflowError naming
// the array where the library sizes it itself, std::bad_alloc elsewhere; the CLI maps
// both to exit 1, Python to MemoryError or OverflowError), and the library works after.
// The requests are tens of terabytes: no machine grants them, with or without overcommit.
// This binary replaces operator new (throwing_new.cpp), so the tests run under
// AddressSanitizer too, where LeakSanitizer checks at exit that every unwinding freed what
// it had allocated.
#include <gtest/gtest.h>

#include <new>
#include <vector>

#include "trnsparse/convert.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/ops.hpp"
#include "runtime/workspace.hpp"

namespace trnsparse::test {
namespace {

/// An n x n matrix with two entries, at its corners.
CsrMatrix<double> corners(index_t n) {
  std::vector<index_t> ptr(static_cast<std::size_t>(n) + 1, 0);
  for (index_t i = 1; i < n; ++i) ptr[i] = 1;
  ptr[n] = 2;
  return CsrMatrix<double>(n, n, std::move(ptr), {0, n - 1}, {1.0, 2.0});
}

TEST(OutOfMemory, ConversionThrowsAfterBuildingItsStructure) {
  // Two blocks of (2^21)² doubles: 2^46 bytes of values, requested after the block
  // structure (small) is built, so the unwinding frees it.
  const CsrMatrix<double> A = corners(index_t{1} << 22);
  EXPECT_THROW((void)to_bsr(A, index_t{1} << 21), OverflowError);
  // The library still works afterwards.
  const BsrMatrix<double> B = to_bsr(corners(64), 8);
  EXPECT_EQ(B.n_blocks(), 2);
}

TEST(OutOfMemory, DenseResultThrowsBadAlloc) {
  // A (2^22 x 2^22) dense copy: 2^47 bytes.
  const CsrMatrix<double> A = corners(index_t{1} << 22);
  EXPECT_THROW((void)to_dense(A), std::bad_alloc);
}

TEST(OutOfMemory, WorkspaceThrowsAndKeepsItsBuffer) {
  // The per-thread workspace (aligned_alloc, not operator new): a failed growth throws and
  // leaves the buffer it had, which the next request reuses.
  std::byte* small = detail::thread_workspace(4096, detail::Workspace::kernel);
  EXPECT_THROW((void)detail::thread_workspace(std::size_t{1} << 46, detail::Workspace::kernel), OverflowError);
  EXPECT_EQ(detail::thread_workspace(4096, detail::Workspace::kernel), small);
}

}  // namespace
}  // namespace trnsparse::test
