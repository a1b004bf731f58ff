// storage.hpp's advise_huge_pages (arrays advised before their first touch) and
// huge_pages.hpp's collapse_streamed (memory already touched, moved onto huge pages once
// it has been streamed often enough to repay the move).
#include "runtime/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace trnsparse::detail {

namespace {

#ifndef MADV_COLLAPSE
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1's value; older headers lack the name
#endif

constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
/// Ranges counted before the counts start afresh (a range then waits kCollapseAfter
/// streams more).
constexpr std::size_t kCounted = 4096;
/// The count of a range the kernel would not collapse.
constexpr unsigned kRefused = std::numeric_limits<unsigned>::max();

/// The whole huge pages of `bytes` at `first`: [aligned_first, aligned_last).
struct WholePages {
  std::uintptr_t first, aligned_first, aligned_last;
  WholePages(const void* data, std::size_t bytes)
      : first(reinterpret_cast<std::uintptr_t>(data)),
        aligned_first((first + kHugePage - 1) / kHugePage * kHugePage),
        aligned_last((first + bytes) / kHugePage * kHugePage) {}
  [[nodiscard]] bool empty() const { return aligned_first >= aligned_last; }
};

}  // namespace

void advise_huge_pages(const void* data, std::size_t bytes) noexcept {
  const WholePages w(data, bytes);
  if (!w.empty()) madvise(reinterpret_cast<void*>(w.aligned_first), w.aligned_last - w.aligned_first, MADV_HUGEPAGE);
}

void collapse_streamed(const void* data, std::size_t bytes) noexcept {
  const WholePages w(data, bytes);
  if (w.empty()) return;
  const auto [first, aligned_first, aligned_last] = w;
  // The start's low 21 bits are zero, so they hold the page count (below 2^21: 4 TiB).
  const std::uintptr_t key = aligned_first | ((aligned_last - aligned_first) / kHugePage);
  static std::mutex mutex;
  static auto* counts = new std::unordered_map<std::uintptr_t, unsigned>;  // never destroyed: callable at exit
  {
    const std::lock_guard lock(mutex);
    try {
      if (counts->size() >= kCounted) counts->clear();
      unsigned& count = (*counts)[key];
      if (count == kRefused) return;
      count = count % kCollapseAfter + 1;
      if (count != kCollapseAfter) return;
    } catch (...) {  // no room to count: leave the range as it is
      return;
    }
  }
  const auto collapse = [](std::uintptr_t from, std::uintptr_t to) {
    return madvise(reinterpret_cast<void*>(from), to - from, MADV_COLLAPSE) == 0;
  };
  if (!collapse(aligned_first, aligned_last)) {
    const std::lock_guard lock(mutex);
    if (auto it = counts->find(key); it != counts->end()) it->second = kRefused;
    return;
  }
  // The huge pages the range's ends lie in, which hold other memory too: collapsed where
  // they belong to one mapping (the contents of that memory do not change either), left
  // where they do not.
  if (aligned_first > first) collapse(aligned_first - kHugePage, aligned_first);
  if (aligned_last < first + bytes) collapse(aligned_last, aligned_last + kHugePage);
}

}  // namespace trnsparse::detail
