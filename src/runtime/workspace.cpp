#include "runtime/workspace.hpp"

#include <cstdlib>
#include <memory>

#include "runtime/checks.hpp"

namespace trnsparse::detail {

namespace {

struct FreeDeleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

std::byte* thread_workspace(std::size_t bytes, Workspace slot) {
  thread_local std::unique_ptr<std::byte, FreeDeleter> buffers[2];
  thread_local std::size_t capacities[2] = {0, 0};
  std::unique_ptr<std::byte, FreeDeleter>& buffer = buffers[static_cast<int>(slot)];
  std::size_t& capacity = capacities[static_cast<int>(slot)];
  if (bytes <= capacity) return buffer.get();
  // Grow geometrically so a sequence of growing calls allocates O(log) times.
  std::size_t want = round_to_line(bytes > 2 * capacity ? bytes : 2 * capacity);
  const bool huge = want >= kHugePage;
  if (huge) want = (want + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(huge ? kHugePage : 64, want);
  if (!p) throw OverflowError(concat("workspace: ", want, " bytes do not fit in memory"));
  if (huge) advise_huge_pages(p, want);
  buffer.reset(static_cast<std::byte*>(p));
  capacity = want;
  return buffer.get();
}

}  // namespace trnsparse::detail
