// Output buffers for the large tensors the package returns (attention's outputs and
// gradients), handed to torch through DLPack with a deleter that keeps their memory for
// the next output of the same size.
//
// Why: torch takes a tensor's memory from glibc, which maps an allocation of 32 MiB and
// more afresh every time and unmaps it when freed, so each call's output faults in all
// its pages again. One (2, 8, 8192, 64) fp32 attention output is 8192 fresh 4 KiB pages;
// their first touch costs about as long as a local-window forward's kernels, and a
// forward + backward pays it four times (docs/attention.md, "Benchmark"). A buffer kept
// here is already faulted in; a new one is mapped on 2 MiB boundaries and advised huge
// pages, so its first touch faults 512 times less often.
#include <sys/mman.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {

namespace {

// The DLPack ABI (dlpack.h, v0.x, as torch 1.13 reads it), declared here rather than
// taken from torch's headers, which the module does not build against.
struct DLDevice {
  std::int32_t device_type;  // 1: kDLCPU
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;  // 2: kDLFloat, 4: kDLBfloat
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

constexpr std::size_t kHugePage = std::size_t{2} << 20;

/// Freed buffers by mapped size, at most kMaxKept bytes of them; the rest is unmapped.
class BufferPool {
 public:
  static constexpr std::size_t kMaxKept = std::size_t{1} << 30;

  /// A buffer of at least `bytes` (its mapped size in `mapped`), a kept one when one of
  /// that size is free: the one freed last, whose lines are likeliest still in cache.
  void* take(std::size_t bytes, std::size_t& mapped) {
    mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    {
      const std::lock_guard lock(mutex_);
      auto it = free_.upper_bound(mapped);  // equal keys keep their order of insertion
      if (it != free_.begin() && (--it)->first == mapped) {
        void* p = it->second;
        free_.erase(it);
        kept_ -= mapped;
        return p;
      }
    }
    // Over-map by a huge page so that the buffer starts on a 2 MiB boundary.
    const std::size_t span = mapped + kHugePage;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const std::uintptr_t end = start + span, used_end = aligned + mapped;
    if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
    detail::advise_huge_pages(reinterpret_cast<void*>(aligned), mapped);
    return reinterpret_cast<void*>(aligned);
  }

  /// Takes back a buffer from take(): kept while the kept bytes stay under kMaxKept.
  void give(void* p, std::size_t mapped) noexcept {
    {
      const std::lock_guard lock(mutex_);
      if (kept_ + mapped <= kMaxKept) {
        free_.emplace(mapped, p);
        kept_ += mapped;
        return;
      }
    }
    munmap(p, mapped);
  }

 private:
  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
  std::size_t kept_ = 0;
};

/// Never destroyed: torch may free a tensor from it after the module's statics are gone.
BufferPool& pool() {
  static auto* p = new BufferPool;
  return *p;
}

/// A DLManagedTensor with its shape and strides; manager_ctx points to it.
struct Managed {
  DLManagedTensor tensor{};
  std::vector<std::int64_t> shape, strides;
  std::size_t mapped = 0;
};

void release(DLManagedTensor* t) {
  auto* m = static_cast<Managed*>(t->manager_ctx);
  pool().give(m->tensor.dl_tensor.data, m->mapped);
  delete m;
}

/// A capsule torch.utils.dlpack.from_dlpack turns into an uninitialised tensor of `shape`
/// and `strides` (elements) of `dtype` on pooled memory.
py::capsule pooled_empty(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                         const std::string& dtype) {
  if (shape.size() != strides.size())
    throw InvalidArgument("pooled_empty: " + std::to_string(shape.size()) + " sizes but " + std::to_string(strides.size()) +
                          " strides");
  DLDataType type{};
  if (dtype == "float32") type = {2, 32, 1};
  else if (dtype == "float64") type = {2, 64, 1};
  else if (dtype == "bfloat16") type = {4, 16, 1};
  else throw InvalidArgument("pooled_empty: dtype " + dtype + " is not one of float32, float64, bfloat16");
  std::int64_t span = 1;  // elements from the first to one past the last
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0 || strides[d] < 0)
      throw InvalidArgument("pooled_empty: sizes and strides must not be negative");
    if (shape[d] == 0) span = 0;
    else if (span > 0) span += (shape[d] - 1) * strides[d];
  }
  auto m = std::make_unique<Managed>();
  m->shape = shape;
  m->strides = strides;
  const std::size_t bytes = static_cast<std::size_t>(span > 0 ? span : 1) * type.bits / 8;
  void* data = pool().take(bytes, m->mapped);
  DLTensor& t = m->tensor.dl_tensor;
  t.data = data;
  t.device = {1, 0};
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.dtype = type;
  t.shape = m->shape.data();
  t.strides = m->strides.data();
  t.byte_offset = 0;
  m->tensor.manager_ctx = m.get();
  m->tensor.deleter = &release;
  // A capsule torch never consumed (still named "dltensor") gives its memory back.
  py::capsule capsule(&m->tensor, "dltensor", [](PyObject* o) {
    if (PyCapsule_IsValid(o, "dltensor")) {
      auto* unused = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(o, "dltensor"));
      unused->deleter(unused);
    }
  });
  m.release();
  return capsule;
}

}  // namespace

void bind_buffers(py::module_& m) {
  m.def("pooled_empty", &pooled_empty, py::arg("shape"), py::arg("strides"), py::arg("dtype"));
}

}  // namespace trnsparse::python
