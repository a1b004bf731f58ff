// The out-of-line part of storage.hpp: copies into untouched memory on the threads.
#include <trnsparse/storage.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "runtime/parallel.hpp"

namespace trnsparse::detail {

void copy_to_untouched(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  // Units of a huge page's size: far more work than a unit's scheduling costs.
  constexpr std::size_t kPage = std::size_t{2} << 20;
  const auto pages = static_cast<index_t>((bytes + kPage - 1) / kPage);
  const int parts = parts_for(pages, work_ns(Work::stream, static_cast<double>(bytes) / 8));
  parallel_for(parts, pages, [&](int, index_t p) {
    const std::size_t first = static_cast<std::size_t>(p) * kPage;
    std::memcpy(static_cast<std::byte*>(dst) + first, static_cast<const std::byte*>(src) + first,
                std::min(kPage, bytes - first));
  });
}

}  // namespace trnsparse::detail
