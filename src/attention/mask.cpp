// Attention masks: block structures whose stored blocks are classified full or partial.
// Builders emit stored blocks block row by block row in ascending block column, so the
// structure needs no sorting; only partial blocks cost per-element work (b² each).
#include <algorithm>

#include "runtime/checks.hpp"
#include "trnsparse/attention.hpp"

namespace trnsparse {

namespace detail {

/// Collects stored blocks row by row, over the block rows of every slice in order, and
/// classifies them. Block columns are given within the slice.
class AttentionMaskBuilder {
public:
  AttentionMaskBuilder(index_t queries, index_t keys, index_t block, const char* who, index_t batch = 1,
                       index_t heads = 1)
      : batch_(batch), heads_(heads), queries_(queries), keys_(keys), b_(block) {
    check_nonnegative(queries, concat(who, ": queries").c_str());
    check_nonnegative(keys, concat(who, ": keys").c_str());
    check_block_size(block, who);
    block_rows_ = ceil_div(queries, block);
    block_cols_ = ceil_div(keys, block);
    const index_t rows = checked_mul(checked_mul(batch, heads, concat(who, ": slices").c_str()), block_rows_,
                                     concat(who, ": block rows").c_str());
    ptr_.reserve(static_cast<std::size_t>(rows) + 1);
    ptr_.push_back(0);
  }

  [[nodiscard]] index_t block_rows() const noexcept { return block_rows_; }
  [[nodiscard]] index_t block_cols() const noexcept { return block_cols_; }
  [[nodiscard]] index_t block() const noexcept { return b_; }

  /// Stores block (current row, bj) with every element allowed.
  void add_full(index_t bj) {
    idx_.push_back(slice() * block_cols_ + bj);
    partial_.push_back(-1);
  }

  /// Stores block (current row I, bj) with elements allowed by mask(r, c) (local
  /// coordinates): dropped when no logical element is allowed, full when all are.
  template <class F>
  void add_masked(index_t bj, F&& mask) {
    const index_t bi = (static_cast<index_t>(ptr_.size()) - 1) % block_rows_;
    const index_t rows = std::min(b_, queries_ - bi * b_), cols = std::min(b_, keys_ - bj * b_);
    const std::size_t at = masks_.size();
    masks_.resize(at + static_cast<std::size_t>(b_ * b_), 0);
    index_t allowed = 0;
    for (index_t r = 0; r < rows; ++r)
      for (index_t c = 0; c < cols; ++c)
        if (mask(r, c)) {
          masks_[at + static_cast<std::size_t>(r * b_ + c)] = 1;
          ++allowed;
        }
    if (allowed < rows * cols) {
      if (allowed == 0) {
        masks_.resize(at);
        return;
      }
      idx_.push_back(slice() * block_cols_ + bj);
      partial_.push_back(static_cast<index_t>(at) / (b_ * b_));
      return;
    }
    masks_.resize(at);
    add_full(bj);
  }

  void end_row() { ptr_.push_back(static_cast<index_t>(idx_.size())); }

  AttentionMask finish() {
    // Slices stacked block-diagonally; only the last one's padding lies outside the shape.
    const index_t last = batch_ * heads_ - 1;
    auto s = BsrStructure::make(last * block_rows_ * b_ + queries_, last * block_cols_ * b_ + keys_, b_,
                                std::move(ptr_), std::move(idx_));
    return {std::move(s), batch_, heads_, queries_, keys_, std::move(partial_), std::move(masks_)};
  }

private:
  /// The slice of the current block row.
  [[nodiscard]] index_t slice() const noexcept {
    return block_rows_ == 0 ? 0 : (static_cast<index_t>(ptr_.size()) - 1) / block_rows_;
  }

  index_t batch_, heads_, queries_, keys_, b_, block_rows_ = 0, block_cols_ = 0;
  std::vector<index_t> ptr_, idx_, partial_;
  std::vector<std::uint8_t> masks_;
};

}  // namespace detail

AttentionMask::AttentionMask(std::shared_ptr<const BsrStructure> structure, index_t batch, index_t heads,
                             index_t queries, index_t keys, std::vector<index_t> partial_index,
                             std::vector<std::uint8_t> masks) noexcept
    : structure_(std::move(structure)), batch_(batch), heads_(heads), queries_(queries), keys_(keys),
      partial_index_(std::move(partial_index)), masks_(std::move(masks)) {}

AttentionMask::AttentionMask(std::shared_ptr<const BsrStructure> structure) : structure_(std::move(structure)) {
  if (!structure_) throw InvalidArgument("AttentionMask: structure is null");
  queries_ = structure_->rows();
  keys_ = structure_->cols();
  partial_index_.assign(static_cast<std::size_t>(structure_->n_blocks()), -1);
}

AttentionMask::AttentionMask(std::shared_ptr<const BsrStructure> structure,
                             std::span<const std::uint8_t> element_masks)
    : AttentionMask(std::move(structure)) {
  const BsrStructure& s = *structure_;
  const index_t b = s.block_size(), bb = b * b;
  detail::check_dim(static_cast<index_t>(element_masks.size()), s.n_blocks() * bb, "AttentionMask", "element_masks",
                    "bytes", "n_blocks * block_size^2");
  const auto ptr = s.block_row_ptr();
  const auto col = s.block_col_indices();
  index_t n_partial = 0;
  for (index_t bi = 0; bi < s.block_rows(); ++bi)
    for (index_t k = ptr[bi]; k < ptr[bi + 1]; ++k) {
      const std::uint8_t* m = element_masks.data() + k * bb;
      const index_t rows = s.row_extent(bi), cols = s.col_extent(col[k]);
      bool full = true;
      for (index_t r = 0; r < rows && full; ++r)
        for (index_t c = 0; c < cols && full; ++c) full = m[r * b + c] != 0;
      if (full) continue;
      partial_index_[static_cast<std::size_t>(k)] = n_partial++;
      const std::size_t at = masks_.size();
      masks_.resize(at + static_cast<std::size_t>(bb), 0);
      for (index_t r = 0; r < rows; ++r)
        for (index_t c = 0; c < cols; ++c) masks_[at + static_cast<std::size_t>(r * b + c)] = m[r * b + c] != 0;
    }
}

index_t AttentionMask::n_partial() const noexcept {
  const index_t bb = block_size() * block_size();
  return static_cast<index_t>(masks_.size()) / bb;
}

std::span<const std::uint8_t> AttentionMask::element_mask(index_t k) const noexcept {
  const index_t p = partial_index_[static_cast<std::size_t>(k)];
  if (p < 0) return {};
  const index_t bb = block_size() * block_size();
  return std::span<const std::uint8_t>(masks_).subspan(static_cast<std::size_t>(p * bb), static_cast<std::size_t>(bb));
}

bool AttentionMask::allows(index_t z, index_t h, index_t i, index_t j) const noexcept {
  if (z < 0 || h < 0 || i < 0 || j < 0 || i >= queries_ || j >= keys_) return false;
  const index_t m = slice(z, h);
  if (m >= slices()) return false;
  const BsrStructure& s = *structure_;
  const index_t b = s.block_size(), bi = m * block_rows() + i / b, bj = m * block_cols() + j / b;
  const auto ptr = s.block_row_ptr();
  const auto col = s.block_col_indices();
  const auto first = col.begin() + ptr[bi], last = col.begin() + ptr[bi + 1];
  const auto it = std::lower_bound(first, last, bj);
  if (it == last || *it != bj) return false;
  const auto e = element_mask(it - col.begin());
  return e.empty() || e[static_cast<std::size_t>((i % b) * b + j % b)] != 0;
}

AttentionMask AttentionMask::from_blocks(index_t batch, index_t heads, index_t queries, index_t keys, index_t block,
                                         std::vector<index_t> block_row_ptr, std::vector<index_t> block_col_idx,
                                         std::vector<index_t> partial_index, std::vector<std::uint8_t> element_masks) {
  const char* who = "AttentionMask::from_blocks";
  if (batch < 1 || heads < 1)
    throw InvalidArgument(detail::concat(who, ": batch = ", batch, " and heads = ", heads, " must be >= 1"));
  detail::AttentionMaskBuilder m(queries, keys, block, who, batch, heads);
  const index_t rows = batch * heads * m.block_rows(), bb = block * block;
  detail::check_dim(static_cast<index_t>(block_row_ptr.size()), rows + 1, who, "block_row_ptr", "entries",
                    "batch * heads * block_rows + 1");
  detail::check_dim(static_cast<index_t>(partial_index.size()), static_cast<index_t>(block_col_idx.size()), who,
                    "partial_index", "entries", "block_col_idx's");
  if (element_masks.size() % static_cast<std::size_t>(bb) != 0)
    throw DimensionMismatch(detail::concat(who, ": element_masks has ", element_masks.size(),
                                           " bytes, not a multiple of block_size^2 = ", bb));
  const auto n_partial = static_cast<index_t>(element_masks.size()) / bb;
  const auto n_blocks = static_cast<index_t>(block_col_idx.size());
  if (block_row_ptr.front() != 0 || block_row_ptr.back() != n_blocks)
    throw InvalidArgument(detail::concat(who, ": block_row_ptr must run from 0 to the ", n_blocks, " stored blocks"));
  for (index_t r = 0; r < rows; ++r) {
    const index_t k0 = block_row_ptr[static_cast<std::size_t>(r)], k1 = block_row_ptr[static_cast<std::size_t>(r + 1)];
    if (k1 < k0) throw InvalidArgument(detail::concat(who, ": block_row_ptr decreases at ", r + 1));
    for (index_t k = k0; k < k1; ++k) {
      const index_t j = block_col_idx[static_cast<std::size_t>(k)], p = partial_index[static_cast<std::size_t>(k)];
      if (j < 0 || j >= m.block_cols())
        throw IndexError(detail::concat(who, ": block_col_idx[", k, "] = ", j, " is out of range [0, ",
                                        m.block_cols(), ")"));
      if (k > k0 && j <= block_col_idx[static_cast<std::size_t>(k - 1)])
        throw InvalidArgument(detail::concat(who, ": block_col_idx[", k, "] = ", j,
                                             " does not increase within its block row"));
      if (p < -1 || p >= n_partial)
        throw IndexError(detail::concat(who, ": partial_index[", k, "] = ", p, " is out of range [-1, ", n_partial,
                                        ")"));
      if (p < 0) m.add_full(j);
      else m.add_masked(j, [&](index_t r_, index_t c_) {
        return element_masks[static_cast<std::size_t>(p * bb + r_ * block + c_)] != 0;
      });
    }
    m.end_row();
  }
  return m.finish();
}

namespace mask {

namespace {

void check_at_least(index_t v, index_t lo, const char* who, const char* what) {
  if (v < lo) throw InvalidArgument(detail::concat(who, ": ", what, " = ", v, " must be >= ", lo));
}

/// Block columns [lo, hi] clamped to the grid, all full.
void add_full_range(detail::AttentionMaskBuilder& m, index_t lo, index_t hi) {
  for (index_t j = std::max<index_t>(lo, 0); j <= std::min(hi, m.block_cols() - 1); ++j) m.add_full(j);
}

/// floor(n / b) for b >= 1 and any n.
index_t floor_div(index_t n, index_t b) { return n >= 0 ? n / b : -((-n + b - 1) / b); }

}  // namespace

AttentionMask local_window(index_t seq, index_t block, index_t window) {
  return local_window(seq, seq, block, window);
}

AttentionMask local_window(index_t queries, index_t keys, index_t block, index_t window) {
  detail::AttentionMaskBuilder m(queries, keys, block, "mask::local_window");
  check_at_least(window, 0, "mask::local_window", "window");
  // Every |j - p| of the grid is below this bound, so larger windows act alike (and the
  // arithmetic below cannot overflow).
  window = std::min(window, m.block_rows() + m.block_cols() + 2);
  const index_t off = keys - queries;  // query i stands at key position i + off
  for (index_t i = 0; i < m.block_rows(); ++i) {
    const index_t r0 = i * block, r1 = std::min(queries, r0 + block);
    const index_t p0 = floor_div(r0 + off, block), p1 = floor_div(r1 - 1 + off, block);  // p0 <= p1 <= p0 + 1
    // Columns every row of the block allows are full; those only some rows reach, masked.
    const index_t lo = std::max<index_t>(p0 - window, 0), hi = std::min(p1 + window, m.block_cols() - 1);
    for (index_t j = lo; j <= hi; ++j) {
      if (j >= p1 - window && j <= p0 + window) {
        m.add_full(j);
        continue;
      }
      m.add_masked(j, [&](index_t r, index_t) {
        const index_t pr = floor_div(r0 + r + off, block);
        return j >= pr - window && j <= pr + window;
      });
    }
    m.end_row();
  }
  return m.finish();
}

AttentionMask dilated(index_t seq, index_t block, index_t stride) {
  detail::AttentionMaskBuilder m(seq, seq, block, "mask::dilated");
  check_at_least(stride, 1, "mask::dilated", "stride");
  for (index_t i = 0; i < m.block_rows(); ++i) {
    for (index_t j = i % stride; j < m.block_cols(); j += stride) m.add_full(j);
    m.end_row();
  }
  return m.finish();
}

AttentionMask global_tokens(index_t seq, index_t block, index_t window, index_t n_global) {
  detail::AttentionMaskBuilder m(seq, seq, block, "mask::global_tokens");
  check_at_least(window, 0, "mask::global_tokens", "window");
  check_at_least(n_global, 0, "mask::global_tokens", "n_global");
  const index_t nb = m.block_cols();
  for (index_t i = 0; i < m.block_rows(); ++i) {
    if (i < n_global) {
      add_full_range(m, 0, nb - 1);
    } else {
      const index_t lo = i - std::min(window, i), hi = i + std::min(window, nb);
      add_full_range(m, 0, std::min(n_global, lo) - 1);  // global columns left of the window
      add_full_range(m, lo, hi);
    }
    m.end_row();
  }
  return m.finish();
}

AttentionMask causal(index_t seq, index_t block) { return causal(seq, seq, block); }

AttentionMask causal(index_t queries, index_t keys, index_t block) {
  detail::AttentionMaskBuilder m(queries, keys, block, "mask::causal");
  const index_t off = keys - queries;  // key j allowed for query i when j <= i + off
  for (index_t i = 0; i < m.block_rows(); ++i) {
    const index_t r0 = i * block, r1 = std::min(queries, r0 + block);
    const index_t last = r1 - 1 + off;  // the last key any row of the block reaches
    for (index_t j = 0; j * block <= last && j < m.block_cols(); ++j) {
      const index_t c0 = j * block, c1 = std::min(keys, c0 + block);
      if (c1 - 1 <= r0 + off) m.add_full(j);
      else m.add_masked(j, [&](index_t r, index_t c) { return c0 + c <= r0 + r + off; });
    }
    m.end_row();
  }
  return m.finish();
}

AttentionMask document(std::span<const index_t> lengths, index_t block, bool causal) {
  const char* who = "mask::document";
  std::vector<index_t> start(lengths.size() + 1, 0);  // start[d]: first token of document d
  for (std::size_t d = 0; d < lengths.size(); ++d) {
    if (lengths[d] < 0) throw InvalidArgument(detail::concat(who, ": lengths[", d, "] = ", lengths[d], " must be >= 0"));
    start[d + 1] = detail::checked_add(start[d], lengths[d], "mask::document: sum of lengths");
  }
  const index_t seq = start.back();
  detail::AttentionMaskBuilder m(seq, seq, block, who);
  // The document holding token t: the last d with start[d] <= t (skipping empty ones).
  auto doc_of = [&](index_t t) {
    return static_cast<index_t>(std::upper_bound(start.begin(), start.end(), t) - start.begin()) - 1;
  };
  const index_t b = block;
  for (index_t i = 0; i < m.block_rows(); ++i) {
    const index_t r0 = i * b, r1 = std::min(seq, r0 + b);  // query rows [r0, r1)
    const index_t d0 = doc_of(r0), d1 = doc_of(r1 - 1);
    const index_t k0 = start[d0], k1 = causal ? r1 : start[d1 + 1];  // keys [k0, k1) may be allowed
    for (index_t j = k0 / b; j * b < k1; ++j) {
      const index_t c0 = j * b, c1 = std::min(seq, c0 + b);
      const bool one_doc = d0 == d1 && start[d0] <= c0 && c1 <= start[d0 + 1];
      if (one_doc && (!causal || c1 - 1 <= r0)) {
        m.add_full(j);
        continue;
      }
      m.add_masked(j, [&](index_t r, index_t c) {
        const index_t qi = r0 + r, kj = c0 + c;
        return (!causal || kj <= qi) && doc_of(qi) == doc_of(kj);
      });
    }
    m.end_row();
  }
  return m.finish();
}

AttentionMask from_block_mask(index_t queries, index_t keys, index_t block, std::span<const std::uint8_t> grid) {
  detail::AttentionMaskBuilder m(queries, keys, block, "mask::from_block_mask");
  detail::check_dim(static_cast<index_t>(grid.size()), m.block_rows() * m.block_cols(), "mask::from_block_mask",
                    "grid", "entries", "block_rows * block_cols");
  for (index_t i = 0; i < m.block_rows(); ++i) {
    for (index_t j = 0; j < m.block_cols(); ++j)
      if (grid[static_cast<std::size_t>(i * m.block_cols() + j)] != 0) m.add_full(j);
    m.end_row();
  }
  return m.finish();
}

namespace {

/// The slice count of a result over x and y: equal counts, or 1 broadcast.
index_t broadcast(index_t x, index_t y, const char* who, const char* what) {
  if (x != y && x != 1 && y != 1)
    throw DimensionMismatch(detail::concat(who, ": a has ", x, " ", what, " slices and b ", y,
                                           "; they must be equal or 1"));
  return std::max(x, y);
}

/// Merges a and b block row by block row over the slices of the result (a count of 1
/// broadcasts); `keep_alone` stores blocks present in only one of them (union), `combine`
/// the element rule of a block present in both.
template <class Combine>
AttentionMask merge(const AttentionMask& a, const AttentionMask& b, const char* who, bool keep_alone,
                    Combine combine) {
  detail::check_dim(b.queries(), a.queries(), who, "b", "queries", "a.queries()");
  detail::check_dim(b.keys(), a.keys(), who, "b", "keys", "a.keys()");
  detail::check_dim(b.block_size(), a.block_size(), who, "b", "as block size", "a.block_size()");
  const index_t batch = broadcast(a.batch(), b.batch(), who, "batch");
  const index_t heads = broadcast(a.heads(), b.heads(), who, "head");
  detail::AttentionMaskBuilder m(a.queries(), a.keys(), a.block_size(), who, batch, heads);
  const index_t bs = a.block_size(), br = m.block_rows(), bc = m.block_cols();
  // Element (r, c) of stored block k of x: allowed.
  auto at = [bs](const AttentionMask& x, index_t k, index_t r, index_t c) {
    const auto e = x.element_mask(k);
    return e.empty() || e[static_cast<std::size_t>(r * bs + c)] != 0;
  };
  auto add_alone = [&](const AttentionMask& x, index_t k, index_t j) {
    if (x.is_full(k)) m.add_full(j);
    else m.add_masked(j, [&](index_t r, index_t c) { return at(x, k, r, c); });
  };
  const auto pa = a.structure().block_row_ptr(), pb = b.structure().block_row_ptr();
  const auto ca = a.structure().block_col_indices(), cb = b.structure().block_col_indices();
  for (index_t z = 0; z < batch; ++z)
    for (index_t h = 0; h < heads; ++h) {
      const index_t sa = a.slice(z, h), sb = b.slice(z, h);
      for (index_t i = 0; i < br; ++i) {
        const index_t ra = sa * br + i, rb = sb * br + i;
        index_t ka = pa[ra], kb = pb[rb];
        while (ka < pa[ra + 1] || kb < pb[rb + 1]) {
          const index_t ja = ka < pa[ra + 1] ? ca[ka] - sa * bc : bc;
          const index_t jb = kb < pb[rb + 1] ? cb[kb] - sb * bc : bc;
          if (ja < jb) {
            if (keep_alone) add_alone(a, ka, ja);
            ++ka;
          } else if (jb < ja) {
            if (keep_alone) add_alone(b, kb, jb);
            ++kb;
          } else {
            if (a.is_full(ka) && b.is_full(kb)) m.add_full(ja);
            else m.add_masked(ja, [&](index_t r, index_t c) { return combine(at(a, ka, r, c), at(b, kb, r, c)); });
            ++ka;
            ++kb;
          }
        }
        m.end_row();
      }
    }
  return m.finish();
}

}  // namespace

AttentionMask unite(const AttentionMask& a, const AttentionMask& b) {
  return merge(a, b, "mask::unite", true, [](bool x, bool y) { return x || y; });
}

AttentionMask intersect(const AttentionMask& a, const AttentionMask& b) {
  return merge(a, b, "mask::intersect", false, [](bool x, bool y) { return x && y; });
}

AttentionMask stack(std::span<const AttentionMask> masks, index_t batch, index_t heads) {
  const char* who = "mask::stack";
  if (batch < 1 || heads < 1)
    throw InvalidArgument(detail::concat(who, ": batch = ", batch, " and heads = ", heads, " must be >= 1"));
  detail::check_dim(static_cast<index_t>(masks.size()), detail::checked_mul(batch, heads, "mask::stack: slices"), who,
                    "masks", "entries", "batch * heads");
  const AttentionMask& first = masks.front();
  detail::AttentionMaskBuilder m(first.queries(), first.keys(), first.block_size(), who, batch, heads);
  const index_t bs = first.block_size();
  for (std::size_t s = 0; s < masks.size(); ++s) {
    const AttentionMask& x = masks[s];
    if (x.slices() != 1)
      throw InvalidArgument(detail::concat(who, ": masks[", s, "] has ", x.slices(), " slices; expected 1"));
    detail::check_dim(x.queries(), first.queries(), who, "a mask", "queries", "masks[0]'s");
    detail::check_dim(x.keys(), first.keys(), who, "a mask", "keys", "masks[0]'s");
    detail::check_dim(x.block_size(), bs, who, "a mask", "as block size", "masks[0]'s");
    const auto ptr = x.structure().block_row_ptr();
    const auto col = x.structure().block_col_indices();
    for (index_t i = 0; i < m.block_rows(); ++i) {
      for (index_t k = ptr[i]; k < ptr[i + 1]; ++k) {
        if (x.is_full(k)) {
          m.add_full(col[k]);
          continue;
        }
        const auto e = x.element_mask(k);
        m.add_masked(col[k], [&](index_t r, index_t c) { return e[static_cast<std::size_t>(r * bs + c)] != 0; });
      }
      m.end_row();
    }
  }
  return m.finish();
}

}  // namespace mask

}  // namespace trnsparse
