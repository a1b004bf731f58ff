// SpGEMM plans: the symbolic phase (C's structure from the operands' structures) and the
// cache of plans by the pair of structures.
#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <limits>
#include <list>
#include <mutex>

#include "plan/csr_analysis.hpp"
#include "plan/spgemm_symbolic.hpp"
#include "runtime/checks.hpp"
#include "runtime/huge_pages.hpp"
#include "runtime/parallel.hpp"
#include "trnsparse/spgemm.hpp"

namespace trnsparse {

namespace detail {

FormViews form_views(const BsrPlan& a, const BsrPlan& b, SpgemmForm form) {
  const BsrStructure& sa = a.structure();
  const BsrStructure& sb = b.structure();
  const auto rows_of = [](const BsrStructure& s) {
    return RowsView{s.block_rows(), s.block_row_ptr().data(), s.block_col_indices().data()};
  };
  const auto columns_of = [](const BsrPlan& p) {
    const BscView& v = p.transposed();
    return RowsView{p.structure().block_cols(), v.col_ptr.data(), v.row_idx.data()};
  };
  switch (form) {
    case SpgemmForm::a_b: return {rows_of(sa), rows_of(sb), sa.rows(), sb.cols(), sa.block_rows(), sb.block_cols()};
    case SpgemmForm::at_b:
      return {columns_of(a), rows_of(sb), sa.cols(), sb.cols(), sa.block_cols(), sb.block_cols()};
    case SpgemmForm::a_bt:
      return {rows_of(sa), columns_of(b), sa.rows(), sb.rows(), sa.block_rows(), sb.block_rows()};
  }
  throw InvalidArgument("spgemm: unknown form");
}

std::vector<index_t> spgemm_cost(const RowsView& L, const RowsView& R) {
  std::vector<index_t> cost = make_vector<index_t>(L.rows + 1, "spgemm: row costs");
  for (index_t i = 0; i < L.rows; ++i) {
    index_t c = 0;
    for (index_t q = L.ptr[i]; q < L.ptr[i + 1]; ++q) c += R.ptr[L.idx[q] + 1] - R.ptr[L.idx[q]];
    cost[i + 1] = checked_add(cost[i], c, "spgemm: block products");
  }
  return cost;
}

std::string describe_operands(const BsrStructure& a, const BsrStructure& b) {
  return concat("A is ", a.rows(), " x ", a.cols(), " (block size ", a.block_size(), "), B is ", b.rows(), " x ",
                b.cols(), " (block size ", b.block_size(), ")");
}

void check_spgemm_operands(const char* who, const BsrStructure& a, const BsrStructure& b, SpgemmForm form,
                           const std::string& operands) {
  if (a.block_size() != b.block_size())
    throw InvalidArgument(concat(who, ": block sizes differ: ", operands));
  switch (form) {
    case SpgemmForm::a_b:
      if (a.cols() != b.rows())
        throw DimensionMismatch(concat(who, ": A.cols() = ", a.cols(), " != B.rows() = ", b.rows(), ": ", operands));
      break;
    case SpgemmForm::at_b:
      if (a.rows() != b.rows())
        throw DimensionMismatch(concat(who, ": Aᵀ·B needs A.rows() = ", a.rows(), " == B.rows() = ", b.rows(), ": ",
                                       operands));
      break;
    case SpgemmForm::a_bt:
      if (a.cols() != b.cols())
        throw DimensionMismatch(concat(who, ": A·Bᵀ needs A.cols() = ", a.cols(), " == B.cols() = ", b.cols(), ": ",
                                       operands));
      break;
  }
  // The kernels number a row's entries in 32 bits (the column → position map).
  const index_t c_block_cols = form == SpgemmForm::a_bt ? b.block_rows() : b.block_cols();
  if (c_block_cols > index_t{INT32_MAX})
    throw OverflowError(concat(who, ": C would have ", c_block_cols,
                               " (block) columns; SpGEMM numbers a row's entries in 32 bits: ", operands));
}

namespace {

/// Writes row i's sorted, distinct columns to `out` (cleared first). `bits` (one bit per
/// column of C) is all zero on entry and on return. A row's columns are first collected
/// in arrival order, each once (its bit set); then, when they span few words, read back
/// in order by scanning the bits (about span/64 + n steps), else sorted (n log n). The
/// scan serves banded and mesh matrices, the sort scattered ones.
void symbolic_row(const RowsView& L, const RowsView& R, index_t i, std::uint64_t* bits, std::vector<index_t>& out) {
  out.clear();
  index_t lo = INT64_MAX, hi = -1;
  for (index_t q = L.ptr[i]; q < L.ptr[i + 1]; ++q) {
    const index_t k = L.idx[q];
    for (index_t s = R.ptr[k]; s < R.ptr[k + 1]; ++s) {
      const index_t j = R.idx[s];
      const std::uint64_t bit = std::uint64_t{1} << (j & 63);
      if (bits[j >> 6] & bit) continue;
      bits[j >> 6] |= bit;
      out.push_back(j);
      lo = std::min(lo, j);
      hi = std::max(hi, j);
    }
  }
  const auto n = static_cast<index_t>(out.size());
  if (n == 0) return;
  const index_t w0 = lo >> 6, w1 = hi >> 6;
  if (w1 - w0 + 1 <= 8 * n) {
    index_t* dst = out.data();
    for (index_t w = w0; w <= w1; ++w) {
      for (std::uint64_t word = bits[w]; word != 0; word &= word - 1) *dst++ = w * 64 + std::countr_zero(word);
      bits[w] = 0;
    }
  } else {
    std::sort(out.begin(), out.end());
    for (const index_t j : out) bits[j >> 6] = 0;
  }
}

/// The number of distinct columns row i reaches. `bits` and `seen` as symbolic_row's
/// (`seen` holds the row's columns in arrival order on return).
index_t count_row(const RowsView& L, const RowsView& R, index_t i, std::uint64_t* bits, std::vector<index_t>& seen) {
  seen.clear();
  for (index_t q = L.ptr[i]; q < L.ptr[i + 1]; ++q) {
    const index_t k = L.idx[q];
    for (index_t s = R.ptr[k]; s < R.ptr[k + 1]; ++s) {
      const index_t j = R.idx[s];
      const std::uint64_t bit = std::uint64_t{1} << (j & 63);
      if (bits[j >> 6] & bit) continue;
      bits[j >> 6] |= bit;
      seen.push_back(j);
    }
  }
  for (const index_t j : seen) bits[j >> 6] = 0;
  return static_cast<index_t>(seen.size());
}

}  // namespace

}  // namespace detail

SpgemmPlan::SpgemmPlan(std::shared_ptr<const BsrStructure> a, std::shared_ptr<const BsrStructure> b,
                       SpgemmForm form)
    : form_(form) {
  if (!a || !b) throw InvalidArgument("spgemm_plan: a structure is null");
  const std::string operands = detail::describe_operands(*a, *b);
  detail::check_spgemm_operands("spgemm_plan", *a, *b, form, operands);
  a_ = plan(a);
  b_ = plan(b);
  const detail::FormViews v = detail::form_views(*a_, *b_, form);
  cost_ = detail::spgemm_cost(v.L, v.R);
  const index_t rows = v.block_rows;

  // Rows are split by block products (the symbolic work is one bit test per product).
  const int parts = detail::parts_for(rows, detail::work_ns(detail::Work::csr, static_cast<double>(cost_.back())));
  const std::vector<index_t> pieces = detail::balanced_split(cost_, detail::pieces_for(parts));
  const auto n_pieces = static_cast<index_t>(pieces.size()) - 1;
  // Two passes, counting then filling C's arrays in place: no buffer as large as C
  // beside them (fresh memory costs more to fault in than a pass over the rows).
  std::vector<index_t> ptr = detail::huge_vector<index_t>(rows + 1, "spgemm_plan: C's row pointers");
  const index_t words = v.block_cols / 64 + 1;
  std::vector<std::vector<std::uint64_t>> bits(static_cast<std::size_t>(parts));
  std::vector<std::vector<index_t>> row(static_cast<std::size_t>(parts));
  for (auto& w : bits) w = detail::make_vector<std::uint64_t>(words, "spgemm_plan: column bits");
  detail::UnitRanges ranges;
  detail::parallel_for(parts, n_pieces, ranges, [&](int slot, index_t p) {
    for (index_t i = pieces[p]; i < pieces[p + 1]; ++i)
      ptr[i + 1] = detail::count_row(v.L, v.R, i, bits[slot].data(), row[slot]);
  });
  for (index_t i = 0; i < rows; ++i) {
    if (ptr[i + 1] > std::numeric_limits<index_t>::max() - ptr[i])
      throw OverflowError(detail::concat("spgemm_plan: C would have more than 2^63 - 1 stored entries: ", operands));
    ptr[i + 1] += ptr[i];
  }
  const index_t stored = ptr[rows];
  const index_t bb = a->block_size() * a->block_size();
  if (stored > std::numeric_limits<index_t>::max() / bb)
    throw OverflowError(detail::concat("spgemm_plan: C's ", stored, " blocks of ", a->block_size(), " x ",
                                       a->block_size(), " values would overflow index_t: ", operands));
  std::vector<index_t> idx = detail::huge_vector<index_t>(stored, "spgemm_plan: C's column indices");
  detail::parallel_for(parts, n_pieces, ranges, [&](int slot, index_t p) {
    for (index_t i = pieces[p]; i < pieces[p + 1]; ++i) {
      detail::symbolic_row(v.L, v.R, i, bits[slot].data(), row[slot]);
      std::copy(row[slot].begin(), row[slot].end(), idx.begin() + static_cast<std::ptrdiff_t>(ptr[i]));
    }
  });
  c_ = detail::trusted_structure(v.rows, v.cols, a->block_size(), std::move(ptr), std::move(idx));
}

double SpgemmPlan::multiply_adds() const noexcept {
  const auto b = static_cast<double>(c_->block_size());
  return static_cast<double>(cost_.back()) * b * b * b;
}

// ---- the cache ------------------------------------------------------------------------

namespace {

/// Plans by (left operand's BsrPlan, right operand's BsrPlan, form). The structure plans
/// come from plan(), which returns one plan object for equal structures, so their
/// addresses identify the structures; a SpgemmPlan holds both, so an address cannot be
/// reused while its entry lives.
class SpgemmCache {
public:
  std::shared_ptr<const SpgemmPlan> get(const std::shared_ptr<const BsrStructure>& a,
                                        const std::shared_ptr<const BsrStructure>& b, SpgemmForm form) {
    const std::shared_ptr<const BsrPlan> pa = plan(a), pb = plan(b);
    {
      std::lock_guard lock(mutex_);
      if (auto hit = find(pa.get(), pb.get(), form)) {
        ++hits_;
        return hit;
      }
      ++misses_;
    }
    // Built outside the lock: a symbolic phase takes as long as a product. Two threads
    // missing at once both build; the first to finish is kept.
    auto built = std::make_shared<const SpgemmPlan>(pa->structure_ptr(), pb->structure_ptr(), form);
    std::lock_guard lock(mutex_);
    if (auto hit = find(pa.get(), pb.get(), form)) return hit;
    lru_.push_front(built);
    while (lru_.size() > capacity_) lru_.pop_back();
    return built;
  }

  SpgemmCacheStats stats() {
    std::lock_guard lock(mutex_);
    return {hits_, misses_, lru_.size(), capacity_};
  }
  void clear() {
    std::lock_guard lock(mutex_);
    lru_.clear();
    hits_ = misses_ = 0;
  }
  void set_capacity(std::size_t capacity) {
    std::lock_guard lock(mutex_);
    capacity_ = capacity;
    while (lru_.size() > capacity_) lru_.pop_back();
  }

private:
  std::shared_ptr<const SpgemmPlan> find(const BsrPlan* a, const BsrPlan* b, SpgemmForm form) {
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (&(*it)->left() == a && &(*it)->right() == b && (*it)->form() == form) {
        lru_.splice(lru_.begin(), lru_, it);
        return lru_.front();
      }
    return nullptr;
  }

  std::mutex mutex_;
  std::list<std::shared_ptr<const SpgemmPlan>> lru_;
  std::size_t capacity_ = 16;
  std::uint64_t hits_ = 0, misses_ = 0;
};

SpgemmCache& spgemm_cache() {
  static SpgemmCache c;
  return c;
}

}  // namespace

namespace detail {

std::shared_ptr<const SpgemmPlan> cached_spgemm_plan(const std::shared_ptr<const BsrStructure>& a,
                                                     const std::shared_ptr<const BsrStructure>& b, SpgemmForm form) {
  return spgemm_cache().get(a, b, form);
}

}  // namespace detail

SpgemmCacheStats spgemm_plan_cache_stats() { return spgemm_cache().stats(); }
void clear_spgemm_plan_cache() { spgemm_cache().clear(); }
void set_spgemm_plan_cache_capacity(std::size_t capacity) { spgemm_cache().set_capacity(capacity); }

}  // namespace trnsparse
