// The whole operator new / delete family, replaced for the out-of-memory test binary.
//
// Why: AddressSanitizer's own operator new ends the process when an allocation fails
// (it reports "out of memory" instead of throwing, whatever allocator_may_return_null
// says), so a failed allocation could not be survived, nor its leaks checked, under ASan.
// These replacements allocate with malloc / aligned_alloc, which ASan still intercepts
// and which return null under allocator_may_return_null=1, and throw std::bad_alloc as
// the standard asks. Everything allocated stays in ASan's heap, so LeakSanitizer still
// checks at exit that the unwinding freed it.
//
// Every variant is replaced: ASan defines them all, and one left to ASan would hand out
// memory these deletes free with free(), a new/delete mismatch to ASan. The price is
// ASan's new/delete-mismatch check in this binary only. The new-handler is not called:
// the library installs none.
#include <cstdlib>
#include <new>

namespace {

void* allocate(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (!p) throw std::bad_alloc();
  return p;
}

void* allocate(std::size_t size, std::align_val_t alignment) {
  const auto align = static_cast<std::size_t>(alignment);
  // aligned_alloc wants a size that is a multiple of the alignment; a size so large that
  // rounding it up wraps cannot be had anyway.
  const std::size_t rounded = (size + align - 1) / align * align;
  void* p = rounded < size ? nullptr : std::aligned_alloc(align, rounded == 0 ? align : rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

template <class... Args>
void* allocate_nothrow(std::size_t size, Args... args) noexcept {
  try {
    return allocate(size, args...);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void* operator new(std::size_t size, std::align_val_t a) { return allocate(size, a); }
void* operator new[](std::size_t size, std::align_val_t a) { return allocate(size, a); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocate_nothrow(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocate_nothrow(size); }
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_nothrow(size, a);
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_nothrow(size, a);
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
