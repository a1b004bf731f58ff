// Internal: large arrays backed by huge pages. The first touch of a fresh 4 KiB page
// costs tens of microseconds on the virtual machines we run on, so a 100 MB array takes
// longer to fault in than a product takes to fill it; 2 MiB pages cut the faults 512-fold,
// and a stream over them runs faster. The library's vectors are advised before their
// first touch (make_vector, huge_reserved in runtime/checks.hpp; Dense's allocator);
// here: untouched storage and copies on huge pages, and memory that others allocated,
// moved onto huge pages once it has been streamed often (collapse_streamed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <vector>

#include "runtime/checks.hpp"
#include "trnsparse/storage.hpp"

namespace trnsparse::detail {

/// Counts a stream over `bytes` at `data`, memory the library reads but did not allocate
/// (a linear layer's weight in a decode, an SpMV's x and y: a torch tensor or a
/// std::vector, on 4 KiB pages unless its allocator advised otherwise), and on every
/// kCollapseAfter-th stream of the range moves its whole 2 MiB pages onto huge pages
/// (MADV_COLLAPSE, Linux 6.1). A stream over 4 KiB pages is slower, and a kernel that
/// computes while it streams then leaves memory idle (docs/sparse_weights.md, "Huge
/// pages"). Collapsing copies each page once, which costs about as long as a few hundred
/// streams, so a range streamed a few times is left as it is; the later calls find the
/// pages huge (about a microsecond), or collapse new memory that took the freed range's
/// address. A range the kernel cannot collapse (older kernels, file mappings) is not
/// asked again. The contents never change.
void collapse_streamed(const void* data, std::size_t bytes) noexcept;

/// Streams of a range after which collapse_streamed moves it onto huge pages.
inline constexpr unsigned kCollapseAfter = 64;

/// Storage for n elements on huge pages, left unwritten (acquire_array): the caller's
/// first writes fault in what is fresh, on the threads that make them rather than in one
/// serial fill. OverflowError naming `what` when they do not fit in memory.
template <class T>
Block<T> huge_untouched(index_t n, const char* what) {
  return allocating(n, what, [&] { return acquire_array<T>(static_cast<std::size_t>(n)); });
}

/// A copy of `src` on huge pages.
template <class T>
std::vector<T> huge_copy(std::span<const T> src, const char* what) {
  std::vector<T> v = huge_reserved<T>(static_cast<index_t>(src.size()), what);
  v.assign(src.begin(), src.end());
  return v;
}

}  // namespace trnsparse::detail
