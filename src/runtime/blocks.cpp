// storage.hpp's acquire_block / release_block: large arrays the library fills, kept for
// reuse when released.
//
// A fresh page costs a fault on its first write (tens of µs per 4 KiB page on the VMs
// measured; docs/benchmarks.md, "Hosts and baselines"), and memory the allocator gives
// back to the system comes back fresh: glibc unmaps a large block on free and trims the
// top of its heap once more than 128 KiB there is free, so a loop of products, each
// freeing the last one's result, faults in every page of every result again. Blocks of
// at least kRecycledBytes are mapped here instead, and a released block waits, up to a
// limit in all (`TRNSPARSE_KEPT_MB`, 256 MiB by default), for the next request of its
// size class (whole pages rounded up to m 2^k pages, m in 4..8: at most a quarter more
// than asked for), the oldest unmapped first. Smaller blocks, and every block under
// AddressSanitizer (which must see each array's bounds and lifetime), go to the C++
// allocator.
#include "runtime/blocks.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <new>

#include "runtime/env.hpp"
#include "runtime/huge_pages.hpp"
#include "trnsparse/storage.hpp"

namespace trnsparse::detail {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRecycle = false;
#else
constexpr bool kRecycle = true;
#endif

constexpr std::size_t kPage = 4096;
/// Blocks from this size on are mapped and recycled.
constexpr std::size_t kRecycledBytes = std::size_t{64} << 10;
/// Released blocks kept at most by default, in bytes: room for the result of a product
/// of a few million entries (values and indices), without holding much of a machine's
/// memory.
constexpr std::size_t kKeptBytes = std::size_t{256} << 20;
/// The most `TRNSPARSE_KEPT_MB` may keep.
constexpr std::size_t kMaxKeptBytes = std::size_t{1} << 30;

/// `TRNSPARSE_KEPT_MB` in bytes, else kKeptBytes.
/// @throw InvalidArgument for anything but a whole number of MiB up to kMaxKeptBytes.
std::size_t kept_limit_from_environment() {
  const char* text = std::getenv("TRNSPARSE_KEPT_MB");
  if (text == nullptr) return kKeptBytes;
  const long mib = env_integer("TRNSPARSE_KEPT_MB", text, 0, static_cast<long>(kMaxKeptBytes >> 20));
  return static_cast<std::size_t>(mib) << 20;
}
constexpr std::align_val_t kAlign{64};

/// `bytes` rounded up to whole pages, then to m 2^k pages with m in 4..8.
std::size_t size_class(std::size_t bytes) noexcept {
  const std::size_t pages = (bytes + kPage - 1) / kPage;
  if (pages < 8) return pages * kPage;
  const std::size_t unit = std::size_t{1} << (std::bit_width(pages) - 3);
  return (pages + unit - 1) / unit * unit * kPage;
}

void unmap(void* p, std::size_t bytes) noexcept { munmap(p, bytes); }

/// Released blocks, oldest first: at most kMaxKeptBytes / kRecycledBytes of them, in a
/// fixed array, so that keeping one never allocates.
class Kept {
public:
  Kept() : limit_(kept_limit_from_environment()) {
    // fork() while another thread holds the lock would leave it held in the child.
    pthread_atfork([] { kept().mutex_.lock(); }, [] { kept().mutex_.unlock(); }, [] { kept().mutex_.unlock(); });
  }

  /// A kept block of size class `size` (the newest), or null.
  void* take(std::size_t size) noexcept {
    std::lock_guard lock(mutex_);
    for (std::size_t i = n_; i-- > 0;)
      if (blocks_[i].size == size) {
        void* p = blocks_[i].p;
        std::move(blocks_.begin() + static_cast<std::ptrdiff_t>(i) + 1, blocks_.begin() + static_cast<std::ptrdiff_t>(n_),
                  blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        --n_;
        bytes_ -= size;
        return p;
      }
    return nullptr;
  }

  /// Keeps `p` (of size class `size`), unmapping the oldest blocks beyond the limit; or
  /// unmaps `p` when it is above half the limit (it would push out all the others).
  void put(void* p, std::size_t size) noexcept {
    std::lock_guard lock(mutex_);
    if (size > limit_ / 2) return unmap(p, size);
    evict(limit_ - size);
    blocks_[n_++] = {size, p};
    bytes_ += size;
  }

  /// Keeps at most `bytes` from now on (at most kMaxKeptBytes).
  void set_limit(std::size_t bytes) noexcept {
    std::lock_guard lock(mutex_);
    limit_ = std::min(bytes, kMaxKeptBytes);
    evict(limit_);
  }

  std::size_t bytes() noexcept {
    std::lock_guard lock(mutex_);
    return bytes_;
  }

  static Kept& kept() {
    static Kept* const k = new Kept;  // never destroyed: arrays are released at exit too
    return *k;
  }

private:
  /// Unmaps the oldest blocks until at most `bytes` are kept (under mutex_).
  void evict(std::size_t bytes) noexcept {
    std::size_t old = 0;
    for (; bytes_ > bytes; ++old) {
      unmap(blocks_[old].p, blocks_[old].size);
      bytes_ -= blocks_[old].size;
    }
    std::move(blocks_.begin() + static_cast<std::ptrdiff_t>(old), blocks_.begin() + static_cast<std::ptrdiff_t>(n_),
              blocks_.begin());
    n_ -= old;
  }

  struct Entry {
    std::size_t size = 0;
    void* p = nullptr;
  };
  std::mutex mutex_;
  std::array<Entry, kMaxKeptBytes / kRecycledBytes> blocks_{};
  std::size_t n_ = 0, bytes_ = 0, limit_;
};

}  // namespace

void* acquire_block(std::size_t bytes) {
  if (!kRecycle || bytes < kRecycledBytes) {
    void* p = ::operator new(bytes == 0 ? 1 : bytes, kAlign);
    advise_huge_pages(p, bytes);
    return p;
  }
  const std::size_t size = size_class(bytes);
  if (void* p = Kept::kept().take(size)) return p;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  advise_huge_pages(p, size);
  return p;
}

void release_block(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (!kRecycle || bytes < kRecycledBytes) return ::operator delete(p, kAlign);
  Kept::kept().put(p, size_class(bytes));
}

std::size_t kept_block_bytes() noexcept { return kRecycle ? Kept::kept().bytes() : 0; }

void set_kept_block_limit(std::size_t bytes) {
  if (kRecycle) Kept::kept().set_limit(bytes);
}

}  // namespace trnsparse::detail
