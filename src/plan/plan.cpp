#include "trnsparse/plan.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <list>
#include <unordered_map>

#include "kernels/products.hpp"
#include "plan/csr_analysis.hpp"
#include "plan/pattern.hpp"
#include "runtime/parallel.hpp"
#include "runtime/checks.hpp"

namespace trnsparse {


namespace {

/// Whether the small-block kernels read 32-bit copies of a structure's indices.
bool wants_compact(const BsrStructure& s) {
  return kernels::small_block_size(s.block_size()) && std::max(s.block_rows(), s.block_cols()) <= index_t{INT32_MAX};
}

std::vector<std::int32_t> narrowed(std::span<const index_t> idx) {
  return {idx.begin(), idx.end()};  // each fits (wants_compact)
}

}  // namespace

BsrPlan::BsrPlan(std::shared_ptr<const BsrStructure> structure) : structure_(std::move(structure)) {
  if (!structure_) throw InvalidArgument("plan: structure is null");
  if (wants_compact(*structure_)) compact_ = narrowed(structure_->block_col_indices());
}

const std::int32_t* BsrPlan::compact_indices(bool transposed_view) const {
  if (!wants_compact(*structure_)) return nullptr;
  if (!transposed_view) return compact_.data();
  (void)transposed();  // builds compact_transposed_ with the view
  return compact_transposed_.data();
}

namespace {
std::atomic<std::uint64_t> structure_comparisons{0};  // PlanCacheStats::comparisons
}  // namespace

bool BsrPlan::same_structure(const std::shared_ptr<const BsrStructure>& s) const {
  if (s == structure_) return true;
  if (!s) return false;
  std::lock_guard lock(equal_mutex_);
  std::erase_if(equal_, [](const std::weak_ptr<const BsrStructure>& w) { return w.expired(); });
  // A live weak_ptr to s's object is s itself: two live objects never share an address.
  if (std::ranges::any_of(equal_, [&](const std::weak_ptr<const BsrStructure>& w) { return w.lock() == s; })) return true;
  structure_comparisons.fetch_add(1, std::memory_order_relaxed);
  if (!(*s == *structure_)) return false;
  equal_.push_back(s);
  return true;
}

std::span<const index_t> BsrPlan::cached_split(std::vector<std::pair<int, std::vector<index_t>>>& cache, int parts,
                                               bool columns) const {
  if (parts < 1) throw InvalidArgument(detail::concat("plan: parts = ", parts, " must be >= 1"));
  std::lock_guard lock(split_mutex_);
  for (const auto& [p, s] : cache)
    if (p == parts) return s;
  const std::span<const index_t> ptr = columns ? std::span<const index_t>(transposed().col_ptr) : structure_->block_row_ptr();
  cache.emplace_back(parts, detail::balanced_split(ptr, parts));
  return cache.back().second;
}

std::span<const index_t> BsrPlan::row_split(int parts) const { return cached_split(row_splits_, parts, false); }
std::span<const index_t> BsrPlan::col_split(int parts) const { return cached_split(col_splits_, parts, true); }

const BscView& BsrPlan::transposed() const {
  std::call_once(transposed_once_, [this] {
    const BsrStructure& s = *structure_;
    transposed_ = detail::transposed_pattern(s.block_rows(), s.block_cols(), s.block_row_ptr(), s.block_col_indices());
    if (wants_compact(s)) compact_transposed_ = narrowed(transposed_.row_idx);
  });
  return transposed_;
}

const detail::SymmetricChunks& BsrPlan::symmetric_chunks(Triangle uplo) const {
  const int t = uplo == Triangle::upper ? 0 : 1;
  std::call_once(symmetric_once_[t], [&] {
    const BsrStructure& s = *structure_;
    // Chunks of about as many entries as a CSR triangle's: kSymmetricChunkEntries / b²
    // blocks, so that a matrix spreads over as many threads in either format.
    const index_t b2 = s.block_size() * s.block_size();
    const index_t chunk_blocks = std::max<index_t>(1, detail::kSymmetricChunkEntries / b2);
    symmetric_[t] = std::make_shared<const detail::SymmetricChunks>(
        detail::symmetric_chunks(s.block_rows(), s.block_row_ptr(), s.block_col_indices(), uplo, chunk_blocks));
  });
  return *symmetric_[t];
}

// ---- the cache ------------------------------------------------------------------------

namespace {

class PlanCache {
public:
  std::shared_ptr<const BsrPlan> get(const std::shared_ptr<const BsrStructure>& s) {
    std::lock_guard lock(mutex_);
    const auto range = index_.equal_range(s->fingerprint());
    for (auto it = range.first; it != range.second; ++it) {
      const auto& cached = *it->second;
      if (cached->same_structure(s)) {
        lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
        ++hits_;
        return cached;
      }
    }
    ++misses_;
    auto p = std::make_shared<const BsrPlan>(s);
    lru_.push_front(p);
    index_.emplace(s->fingerprint(), lru_.begin());
    evict();
    return p;
  }

  PlanCacheStats stats() {
    std::lock_guard lock(mutex_);
    return {hits_, misses_, lru_.size(), capacity_, structure_comparisons.load(std::memory_order_relaxed)};
  }

  void clear() {
    std::lock_guard lock(mutex_);
    lru_.clear();
    index_.clear();
    hits_ = misses_ = 0;
    structure_comparisons.store(0, std::memory_order_relaxed);
  }

  void set_capacity(std::size_t capacity) {
    std::lock_guard lock(mutex_);
    capacity_ = capacity;
    evict();
  }

private:
  using Lru = std::list<std::shared_ptr<const BsrPlan>>;

  void evict() {
    while (lru_.size() > capacity_) {
      const auto last = std::prev(lru_.end());
      const auto range = index_.equal_range((*last)->structure().fingerprint());
      for (auto it = range.first; it != range.second; ++it)
        if (it->second == last) {
          index_.erase(it);
          break;
        }
      lru_.pop_back();
    }
  }

  std::mutex mutex_;
  Lru lru_;
  std::unordered_multimap<std::uint64_t, Lru::iterator> index_;
  std::size_t capacity_ = 64;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

PlanCache& cache() {
  static PlanCache c;
  return c;
}

}  // namespace

std::shared_ptr<const BsrPlan> plan(const std::shared_ptr<const BsrStructure>& structure) {
  if (!structure) throw InvalidArgument("plan: structure is null");
  return cache().get(structure);
}

PlanCacheStats plan_cache_stats() { return cache().stats(); }
void clear_plan_cache() { cache().clear(); }
void set_plan_cache_capacity(std::size_t capacity) { cache().set_capacity(capacity); }

}  // namespace trnsparse
