/// @file storage.hpp
/// Internal: the arrays structures and matrices hold. A vector the caller gives is kept
/// as it is. An array a product fills on several threads is allocated untouched instead:
/// a std::vector writes every element on one thread before anyone fills it, and on fresh
/// memory that serial pass costs as much as the product (each first touch of a page
/// faults it in). Such arrays come from acquire_block, which keeps recently released
/// large blocks for the next array of their size: a loop of products of one structure
/// then writes into pages already faulted in.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace trnsparse::detail {

/// Copies `bytes` bytes from `src` to `dst`, memory nothing has written yet (from
/// acquire_block, which advised fresh memory huge pages): a large copy runs on the
/// library's threads, each faulting in the pages it writes.
void copy_to_untouched(void* dst, const void* src, std::size_t bytes);

/// Asks the kernel to back the whole 2 MiB pages of `bytes` at `data` with huge pages
/// (advisory: ignored where unsupported). Before the first touch, so that a large array
/// the library copies or fills is born on them: the products stream matrices faster from
/// huge pages, and a fresh one faults once where 512 small ones would.
void advise_huge_pages(const void* data, std::size_t bytes) noexcept;

/// The same for a vector's reserved storage.
template <class T, class A>
void advise_huge_pages(const std::vector<T, A>& v) noexcept {
  advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

/// Tags the constructors of matrices that take values the library wrote (a Storage).
struct Written {};

/// `bytes` of 64-byte aligned memory for an array the caller fills (a product's result,
/// a solver's basis): a block released recently to release_block when one of its size
/// class is there (its pages already faulted in), else fresh memory advised huge pages.
/// @throw std::bad_alloc
void* acquire_block(std::size_t bytes);
/// Gives back `p` (null: nothing), acquired with the same `bytes`.
void release_block(void* p, std::size_t bytes) noexcept;

/// Releases an array of `bytes` from acquire_block.
template <class T>
struct BlockRelease {
  std::size_t bytes = 0;
  void operator()(T* p) const noexcept { release_block(p, bytes); }
};

/// An array from acquire_block, its elements uninitialised.
template <class T>
using Block = std::unique_ptr<T[], BlockRelease<T>>;

/// A Block of n elements of T.
/// @throw std::bad_alloc (std::bad_array_new_length when n * sizeof(T) overflows).
template <class T>
Block<T> acquire_array(std::size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
  const std::size_t bytes = n * sizeof(T);
  return Block<T>(static_cast<T*>(acquire_block(bytes)), BlockRelease<T>{bytes});
}

template <class T>
class Storage {
  static_assert(std::is_trivially_copyable_v<T>);

public:
  Storage() = default;
  /// Keeps `v`'s elements where they are.
  Storage(std::vector<T> v) noexcept  // NOLINT(google-explicit-constructor): a vector is storage
      : vec_(std::move(v)), data_(vec_.data()), size_(vec_.size()) {}
  /// Adopts `n` elements at `array`, every one of them written by the caller.
  Storage(Block<T> array, std::size_t n) noexcept
      : array_(std::move(array)), data_(array_.get()), size_(n) {}
  /// A copy is an array the library writes (see copy_to_untouched).
  Storage(const Storage& other) : Storage(copy_of(other)) {}
  Storage(Storage&& other) noexcept
      : vec_(std::move(other.vec_)),
        array_(std::move(other.array_)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  Storage& operator=(Storage other) noexcept {
    vec_.swap(other.vec_);
    array_.swap(other.array_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~Storage() = default;

  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] T* begin() noexcept { return data_; }
  [[nodiscard]] T* end() noexcept { return data_ + size_; }
  [[nodiscard]] const T* begin() const noexcept { return data_; }
  [[nodiscard]] const T* end() const noexcept { return data_ + size_; }
  operator std::span<T>() noexcept { return {data_, size_}; }  // NOLINT(google-explicit-constructor)
  operator std::span<const T>() const noexcept { return {data_, size_}; }  // NOLINT(google-explicit-constructor)

private:
  static Storage copy_of(const Storage& other) {
    Block<T> array = acquire_array<T>(other.size_);
    copy_to_untouched(array.get(), other.data_, other.size_ * sizeof(T));
    return {std::move(array), other.size_};
  }

  std::vector<T> vec_;
  Block<T> array_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace trnsparse::detail
