/// @file storage.hpp
/// Internal: the arrays structures and matrices hold. A vector the caller gives is kept
/// as it is. An array a product fills on several threads is allocated untouched instead:
/// a std::vector writes every element on one thread before anyone fills it, and on fresh
/// memory that serial pass costs as much as the product (each first touch of a page
/// faults it in).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace trnsparse::detail {

/// Copies `bytes` bytes from `src` to `dst`, memory nothing has written yet: a large
/// copy runs on the library's threads, each faulting in the pages it writes.
void copy_to_untouched(void* dst, const void* src, std::size_t bytes);

/// Tags the constructors of matrices that take values the library wrote (a Storage).
struct Written {};

template <class T>
class Storage {
  static_assert(std::is_trivially_copyable_v<T>);

public:
  Storage() = default;
  /// Keeps `v`'s elements where they are.
  Storage(std::vector<T> v) noexcept  // NOLINT(google-explicit-constructor): a vector is storage
      : vec_(std::move(v)), data_(vec_.data()), size_(vec_.size()) {}
  /// Adopts `n` elements at `array`, every one of them written by the caller.
  Storage(std::unique_ptr<T[]> array, std::size_t n) noexcept
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
    auto array = std::make_unique_for_overwrite<T[]>(other.size_);
    copy_to_untouched(array.get(), other.data_, other.size_ * sizeof(T));
    return {std::move(array), other.size_};
  }

  std::vector<T> vec_;
  std::unique_ptr<T[]> array_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace trnsparse::detail
