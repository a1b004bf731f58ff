// SpGEMM plans: the symbolic phase (C's structure from the operands' structures) and the
// cache of plans by the pair of structures.
#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <emmintrin.h>
#include <limits>
#include <list>
#include <mutex>

#include "dispatch/dispatch.hpp"
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

namespace {

/// Runs f(first, last) for consecutive ranges of the rows of `v`, one a thread: a pass of
/// a few operations per stored entry.
template <class F>
void for_row_ranges(const RowsView& v, F&& f) {
  const int parts = parts_for(v.rows, work_ns(Work::stream, static_cast<double>(v.ptr[v.rows] + v.rows)));
  parallel_parts(parts, [&](int t) { f(v.rows * t / parts, v.rows * (t + 1) / parts); });
}

/// Runs f(i) for each row i of `v` on the threads (for_row_ranges).
template <class F>
void for_rows(const RowsView& v, F&& f) {
  for_row_ranges(v, [&](index_t first, index_t last) {
    for (index_t i = first; i < last; ++i) f(i);
  });
}

}  // namespace

std::vector<index_t> spgemm_cost(const RowsView& L, const RowsView& R) {
  std::vector<index_t> cost = make_vector<index_t>(L.rows + 1, "spgemm: row costs");
  // A row reads each row of R at most once (its columns are distinct): its products are
  // at most R's stored entries, so only the prefix can overflow.
  for_rows(L, [&](index_t i) {
    index_t c = 0;
    for (index_t q = L.ptr[i]; q < L.ptr[i + 1]; ++q) c += R.ptr[L.idx[q] + 1] - R.ptr[L.idx[q]];
    cost[i + 1] = c;
  });
  for (index_t i = 0; i < L.rows; ++i) cost[i + 1] = checked_add(cost[i], cost[i + 1], "spgemm: block products");
  return cost;
}

std::string describe_operands(const BsrStructure& a, const BsrStructure& b) {
  return concat("A is ", a.rows(), " x ", a.cols(), " (block size ", a.block_size(), "), B is ", b.rows(), " x ",
                b.cols(), " (block size ", b.block_size(), ")");
}

void check_spgemm_operands(const char* who, const BsrStructure& a, const BsrStructure& b, SpgemmForm form,
                           const DescribeOperands& operands) {
  if (a.block_size() != b.block_size())
    throw InvalidArgument(concat(who, ": block sizes differ: ", operands()));
  switch (form) {
    case SpgemmForm::a_b:
      if (a.cols() != b.rows())
        throw DimensionMismatch(concat(who, ": A.cols() = ", a.cols(), " != B.rows() = ", b.rows(), ": ", operands()));
      break;
    case SpgemmForm::at_b:
      if (a.rows() != b.rows())
        throw DimensionMismatch(concat(who, ": Aᵀ·B needs A.rows() = ", a.rows(), " == B.rows() = ", b.rows(), ": ",
                                       operands()));
      break;
    case SpgemmForm::a_bt:
      if (a.cols() != b.cols())
        throw DimensionMismatch(concat(who, ": A·Bᵀ needs A.cols() = ", a.cols(), " == B.cols() = ", b.cols(), ": ",
                                       operands()));
      break;
  }
  // The kernels number a row's entries in 32 bits (the column → position map).
  const index_t c_block_cols = form == SpgemmForm::a_bt ? b.block_rows() : b.block_cols();
  if (c_block_cols > index_t{INT32_MAX})
    throw OverflowError(concat(who, ": C would have ", c_block_cols,
                               " (block) columns; SpGEMM numbers a row's entries in 32 bits: ", operands()));
}

namespace {

/// repeats[k] = 1 when row k of `v` has the same columns as row k - 1. Finite-element
/// matrices with several unknowns per node repeat each node's pattern that many times:
/// a product's symbolic phase then reads one row of each run.
std::vector<std::uint8_t> repeated_rows(const RowsView& v) {
  std::vector<std::uint8_t> repeats = make_vector<std::uint8_t>(v.rows, "spgemm_plan: repeated rows");
  for_rows(v, [&](index_t k) {
    const index_t n = v.ptr[k + 1] - v.ptr[k];
    repeats[k] = k > 0 && n > 0 && n == v.ptr[k] - v.ptr[k - 1] &&
                 std::equal(v.idx + v.ptr[k], v.idx + v.ptr[k + 1], v.idx + v.ptr[k - 1]);
  });
  return repeats;
}

/// Runs average at least this many entries for the numeric phase to read them as
/// vectors: shorter ones cost more as masked vectors than as scalar terms
/// (docs/spgemm.md, "Tried, not kept").
constexpr index_t kRunEntries = 6;

/// Writes the lengths of row k's runs of consecutive columns to out[0, kRowRuns), zero
/// after the last, or only zeros when they do not fit (a run of more than 255 counts as
/// several).
void row_runs(const RowsView& v, index_t k, std::uint8_t* out) {
  constexpr int kMax = kernels::kRowRuns;
  std::fill_n(out, kMax, std::uint8_t{0});
  int u = 0;
  index_t n = 0;
  for (index_t s = v.ptr[k]; s < v.ptr[k + 1]; ++s) {
    if (n > 0 && (v.idx[s] != v.idx[s - 1] + 1 || n == 255)) {
      if (u == kMax) break;
      out[u++] = static_cast<std::uint8_t>(n);
      n = 0;
    }
    ++n;
  }
  if (n > 0 && u < kMax) out[u] = static_cast<std::uint8_t>(n);
  else std::fill_n(out, kMax, std::uint8_t{0});  // empty, or more runs than fit
}

/// Whether `v`'s rows have runs worth reading as vectors: at least kRunEntries entries a
/// run on average, and the rows whose runs fit in kRowRuns holding at least half the
/// entries. Decided on a sample of rows spread over `v`, so a product of scattered rows
/// pays next to nothing for it.
bool runs_pay(const RowsView& v) {
  constexpr int kMax = kernels::kRowRuns;
  index_t entries = 0, in_runs = 0, runs = 0;  // sampled: all entries, those in rows whose runs fit
  for (index_t k = 0; k < v.rows; k += std::max<index_t>(1, v.rows / 256)) {
    const index_t len = v.ptr[k + 1] - v.ptr[k];
    index_t n = len > 0 ? 1 : 0;  // runs of any length (a sample need not split the long ones)
    for (index_t s = v.ptr[k] + 1; s < v.ptr[k + 1]; ++s) n += v.idx[s] != v.idx[s - 1] + 1;
    entries += len;
    if (n <= kMax) {
      in_runs += len;
      runs += n;
    }
  }
  return runs > 0 && in_runs >= kRunEntries * runs && 2 * in_runs >= entries;
}

/// The runs of consecutive columns of `v`'s rows (kernels::SpgemmOperand::runs), for
/// rows whose runs pay (runs_pay). A row repeating the row before copies its runs.
std::vector<std::uint8_t> column_runs(const RowsView& v, const std::uint8_t* repeats) {
  constexpr int kMax = kernels::kRowRuns;
  std::vector<std::uint8_t> out = make_vector<std::uint8_t>(v.rows * kMax, "spgemm_plan: runs of columns");
  for_row_ranges(v, [&](index_t first, index_t last) {
    for (index_t k = first; k < last; ++k) {
      std::uint8_t* row = out.data() + k * kMax;
      if (k > first && repeats[k]) std::copy_n(row - kMax, kMax, row);
      else row_runs(v, k, row);
    }
  });
  return out;
}

/// The symbolic phase's view of C = L·R: both operands, their repeated rows, when C has
/// fewer than 64 columns R's rows as the bits of a word each (r_masks; else null), and
/// the ISA's kernel for rows of few products.
struct SymbolicOperands {
  RowsView L, R;
  const std::uint8_t* l_repeats;
  const std::uint8_t* r_repeats;
  const std::uint64_t* r_masks;
  const kernels::SpgemmRowColumns& short_rows;
};

/// Row k of `v`'s columns (all below 64) as the bits of masks[k], for each row.
void row_masks(const RowsView& v, std::uint64_t* masks) {
  for_rows(v, [&](index_t k) {
    std::uint64_t word = 0;
    for (index_t s = v.ptr[k]; s < v.ptr[k + 1]; ++s) word |= std::uint64_t{1} << v.idx[s];
    masks[k] = word;
  });
}

/// Calls f(j) for each column j that row i of C reaches, at least once each: the
/// columns of R's rows k in L's row i, skipping a row k that repeats row k - 1 when
/// row k - 1 was read just before.
template <class F>
void for_row_columns(const SymbolicOperands& op, index_t i, F&& f) {
  // Copied to locals: f's stores may alias the operands' fields, which would then be
  // read again after each one.
  const index_t *l_idx = op.L.idx, *r_ptr = op.R.ptr, *r_idx = op.R.idx;
  const std::uint8_t* r_repeats = op.r_repeats;
  const index_t begin = op.L.ptr[i], end = op.L.ptr[i + 1];
  for (index_t q = begin; q < end; ++q) {
    const index_t k = l_idx[q];
    if (r_repeats[k] && q > begin && l_idx[q - 1] == k - 1) continue;
    const index_t s_end = r_ptr[k + 1];
    for (index_t s = r_ptr[k]; s < s_end; ++s) f(r_idx[s]);
  }
}

/// Buffers of column indices kept between plans: a symbolic phase writes as many columns
/// as C has, and fresh memory costs more to fault in than the phase takes to fill it. A
/// plan takes one for each of its threads and gives them back once C's indices are
/// gathered, so no two plans share one.
class ColumnBuffers {
public:
  std::vector<index_t> take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return {};
    std::vector<index_t> v = std::move(free_.back());
    free_.pop_back();
    return v;
  }
  void give(std::vector<index_t> v) {
    if (v.empty()) return;
    std::lock_guard lock(mutex_);
    if (free_.size() < kKept) free_.push_back(std::move(v));
  }

private:
  static constexpr std::size_t kKept = 8;
  std::mutex mutex_;
  std::vector<std::vector<index_t>> free_;
};

ColumnBuffers& column_buffers() {
  static ColumnBuffers buffers;
  return buffers;
}

/// The columns of the rows one thread has done, appended in the order it did them. The
/// buffer is used to its capacity: its elements past size() are scratch.
class ThreadColumns {
public:
  ThreadColumns() : buf_(column_buffers().take()) {}
  ~ThreadColumns() { column_buffers().give(std::move(buf_)); }
  ThreadColumns(ThreadColumns&& other) noexcept : buf_(std::move(other.buf_)), size_(other.size_) {}
  ThreadColumns& operator=(ThreadColumns&&) = delete;

  [[nodiscard]] index_t size() const noexcept { return size_; }
  [[nodiscard]] const index_t* data() const noexcept { return buf_.data(); }
  /// Room for `n` more elements at the end; its address. What is written there counts
  /// from commit(end of what was written).
  index_t* room(index_t n) {
    const auto want = static_cast<std::size_t>(size_ + n);
    if (want > buf_.size()) {
      // Grown on huge pages, keeping the columns found so far.
      std::vector<index_t> bigger = huge_reserved<index_t>(
          static_cast<index_t>(std::max({want, 2 * buf_.size(), std::size_t{1} << 16})), "spgemm_plan: C's columns");
      bigger.insert(bigger.end(), buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(size_));
      bigger.resize(bigger.capacity());
      buf_.swap(bigger);
    }
    return buf_.data() + size_;
  }
  void commit(const index_t* end) noexcept { size_ = end - buf_.data(); }

private:
  std::vector<index_t> buf_;
  index_t size_ = 0;
};

/// One thread's scratch for the symbolic phase: a byte per column marking the columns a
/// row of C reaches, a byte per group of 64 columns marking the groups it touched (both
/// zero between rows; the numeric phase's column map takes four bytes per column), and
/// the columns found. Aligned to a cache line: the threads' scratch changes as they go,
/// and must not share a line.
struct alignas(64) SymbolicScratch {
  std::vector<std::uint8_t> marks, groups;
  std::vector<index_t> touched;  // the row's touched groups (and scratch past them)
  ThreadColumns out;
  explicit SymbolicScratch(index_t cols)
      : marks(make_vector<std::uint8_t>((cols / 64 + 1) * 64, "spgemm_plan: column marks")),
        groups(make_vector<std::uint8_t>(cols / 64 + 1, "spgemm_plan: column groups")) {}
};

/// The marks of columns [64 g, 64 g + 64) as the bits of a word; clears them.
inline std::uint64_t take_group(std::uint8_t* marks, index_t g) {
  std::uint8_t* at = marks + g * 64;
  std::uint64_t bits = 0;
  const __m128i zero = _mm_setzero_si128();
  for (int q = 0; q < 4; ++q) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 16 * q));
    bits |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpgt_epi8(x, zero)))) << (16 * q);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at + 16 * q), zero);
  }
  return bits;
}

/// Writes the columns of group g whose bits are set in `bits` to dst in order; returns
/// the end of what it wrote.
inline index_t* write_group(std::uint64_t bits, index_t g, index_t* dst) {
  for (; bits != 0; bits &= bits - 1) *dst++ = g * 64 + std::countr_zero(bits);
  return dst;
}

/// Appends row i's sorted, distinct columns to `m.out`; returns their number. The row
/// reaches at most `products` columns. A row of C that has 64 columns or more and few
/// products goes to the ISA's kernel (op.short_rows), which sorts them in registers.
/// Else a column is marked by a store of its byte, with no load before it: a
/// read-modify-write of a word of bits makes each column wait for the store of the one
/// before in the same word, and a test of whether it was seen mispredicts on scattered
/// rows. The marks are read back a group of 64 at a time, in order of the groups the row
/// touched, which are kept by the size of C:
/// - fewer than 64 columns (a small matrix, or a BSR matrix of few block columns): C's
///   row is the OR of the words of R's rows (r_masks), one operation per entry of L's row
///   rather than per term;
/// - fewer than 64 groups (4096 columns): the touched groups are the bits of a register;
/// - else each group is listed when its byte turns from zero (a branch that a mesh row,
///   which touches a few groups many times, and a scattered row, which touches a new group
///   with almost every column, both predict), and the list sorted.
index_t symbolic_row(const SymbolicOperands& op, index_t i, index_t products, SymbolicScratch& m) {
  const auto n_groups = static_cast<index_t>(m.groups.size());
  if (n_groups > 1 && op.short_rows.columns && products <= op.short_rows.max_products) {
    index_t* const at = m.out.room(op.short_rows.max_products + 16);
    const index_t n = op.short_rows.columns(op.L.idx, op.L.ptr[i], op.L.ptr[i + 1], op.R.ptr, op.R.idx, products, at);
    m.out.commit(at + n);
    return n;
  }
  // At most min(products, columns) distinct columns, and as many groups as columns.
  const index_t most = std::min(products, n_groups * 64);
  index_t* const start = m.out.room(most);
  index_t* dst = start;
  if (n_groups == 1) {
    std::uint64_t word = 0;
    for (index_t q = op.L.ptr[i]; q < op.L.ptr[i + 1]; ++q) word |= op.r_masks[op.L.idx[q]];
    dst = write_group(word, 0, dst);
  } else {
    std::uint8_t *marks = m.marks.data(), *groups = m.groups.data();
    if (m.touched.size() < static_cast<std::size_t>(most)) m.touched.resize(static_cast<std::size_t>(most));
    index_t* touched = m.touched.data();
    index_t n_touched = 0;
    if (n_groups <= 64) {
      std::uint64_t word = 0;
      for_row_columns(op, i, [&](index_t j) {
        marks[j] = 1;
        word |= std::uint64_t{1} << (j >> 6);
      });
      for (; word != 0; word &= word - 1) touched[n_touched++] = std::countr_zero(word);
    } else {
      for_row_columns(op, i, [&](index_t j) {
        marks[j] = 1;
        if (groups[j >> 6] == 0) {
          groups[j >> 6] = 1;
          touched[n_touched++] = j >> 6;
        }
      });
      std::sort(touched, touched + n_touched);  // insertion sort on a mesh row's few groups
    }
    for (index_t t = 0; t < n_touched; ++t) {
      groups[touched[t]] = 0;
      dst = write_group(take_group(marks, touched[t]), touched[t], dst);
    }
  }
  m.out.commit(dst);
  return dst - start;
}

}  // namespace

NarrowStructure narrow_structure(const RowsView& L, const RowsView& R, index_t cols) {
  // R's rows as words, then C's.
  std::vector<std::uint64_t> masks = make_vector<std::uint64_t>(R.rows + L.rows, "multiply: rows of B and C");
  std::uint64_t *r_masks = masks.data(), *c_masks = r_masks + R.rows;
  row_masks(R, r_masks);
  std::vector<index_t> ptr = make_vector<index_t>(L.rows + 1, "multiply: C's row pointers");
  std::vector<index_t> cost = make_vector<index_t>(L.rows + 1, "multiply: row costs");
  for_rows(L, [&](index_t i) {
    std::uint64_t word = 0;
    index_t products = 0;
    for (index_t q = L.ptr[i]; q < L.ptr[i + 1]; ++q) {
      const index_t k = L.idx[q];
      word |= r_masks[k];
      products += R.ptr[k + 1] - R.ptr[k];
    }
    c_masks[i] = word;
    ptr[i + 1] = std::popcount(word);
    cost[i + 1] = products;
  });
  // Neither sum can overflow: a row of C, and a row of B (distinct columns), have at most
  // 64 entries, so the sums stay within 64 times A's rows and stored entries, each below
  // 2^57 for arrays in memory.
  index_t entries = 0, products = 0;
  for (index_t i = 1; i <= L.rows; ++i) {
    ptr[i] = entries += ptr[i];
    cost[i] = products += cost[i];
  }
  const index_t stored = ptr[L.rows];
  Block<index_t> idx = huge_untouched<index_t>(stored, "multiply: C's column indices");
  for_row_ranges(L, [&](index_t first, index_t last) {
    index_t* to = idx.get() + ptr[first];
    for (index_t i = first; i < last; ++i) to = write_group(c_masks[i], 0, to);
  });
  NarrowStructure n{trusted_structure(L.rows, cols, 1, std::move(ptr),
                                      Storage<index_t>(std::move(idx), static_cast<std::size_t>(stored))),
                    std::move(cost), {}, {}, {}};
  // Only the kernel's run loop reads repeated rows; without runs it sums each row in a
  // dense accumulator.
  if (runs_pay(R)) {
    n.l_repeats = repeated_rows(L);
    n.r_repeats = repeated_rows(R);
    n.runs = column_runs(R, n.r_repeats.data());
  }
  return n;
}

}  // namespace detail

SpgemmPlan::SpgemmPlan(std::shared_ptr<const BsrStructure> a, std::shared_ptr<const BsrStructure> b,
                       SpgemmForm form)
    : form_(form) {
  if (!a || !b) throw InvalidArgument("spgemm_plan: a structure is null");
  const auto operands = [&] { return detail::describe_operands(*a, *b); };
  detail::check_spgemm_operands("spgemm_plan", *a, *b, form, operands);
  a_ = plan(a);
  b_ = plan(b);
  const detail::FormViews v = detail::form_views(*a_, *b_, form);
  cost_ = detail::spgemm_cost(v.L, v.R);
  const index_t rows = v.block_rows;

  // Rows are split by block products (the symbolic work is a bit test per product, a few
  // ns each on scattered rows: Work::spgemm).
  const int parts = detail::parts_for(rows, detail::work_ns(detail::Work::spgemm, static_cast<double>(cost_.back())));
  const std::vector<index_t> pieces = detail::balanced_split(cost_, detail::pieces_for(parts));
  const auto n_pieces = static_cast<index_t>(pieces.size()) - 1;
  // One pass: each thread appends the columns of the rows it computes to its own
  // buffer, and C's column indices are gathered from the buffers, piece by piece, at the
  // end.
  std::vector<index_t> ptr = detail::make_vector<index_t>(rows + 1, "spgemm_plan: C's row pointers");
  left_repeats_ = detail::repeated_rows(v.L);
  right_repeats_ = v.R.idx == v.L.idx ? left_repeats_ : detail::repeated_rows(v.R);
  // The CSR kernel reads R's runs as vectors when R is read by rows (A·B, Aᵀ·B).
  if (a->block_size() == 1 && form != SpgemmForm::a_bt && detail::runs_pay(v.R))
    right_runs_ = detail::column_runs(v.R, right_repeats_.data());
  // C's width decides the marks (symbolic_row): under 64 columns, R's rows as words.
  std::vector<std::uint64_t> r_masks;
  if (v.block_cols < 64) {
    r_masks = detail::make_vector<std::uint64_t>(v.R.rows, "spgemm_plan: row masks");
    detail::row_masks(v.R, r_masks.data());
  }
  const detail::SymbolicOperands op{v.L, v.R, left_repeats_.data(), right_repeats_.data(), r_masks.data(),
                                    dispatch::spgemm_row_columns()};
  std::vector<detail::SymbolicScratch> scratch;
  scratch.reserve(static_cast<std::size_t>(parts));
  for (int t = 0; t < parts; ++t) scratch.emplace_back(v.block_cols);
  std::vector<int> piece_slot(static_cast<std::size_t>(n_pieces));
  std::vector<index_t> piece_at(static_cast<std::size_t>(n_pieces));
  detail::UnitRanges ranges;
  detail::parallel_for(parts, n_pieces, ranges, [&](int slot, index_t p) {
    detail::ThreadColumns& out = scratch[slot].out;
    piece_slot[p] = slot;
    piece_at[p] = out.size();
    for (index_t i = pieces[p]; i < pieces[p + 1]; ++i) {
      // A row of L that repeats the row before it gives C's row the same columns: only
      // their count here (ptr[i] holds the row before's), the columns at the gather. The
      // first row of a piece is computed afresh, so the result is the same however the
      // pieces fall on threads.
      if (i > pieces[p] && left_repeats_[i]) ptr[i + 1] = ptr[i];
      else ptr[i + 1] = detail::symbolic_row(op, i, cost_[i + 1] - cost_[i], scratch[slot]);
    }
  });
  for (index_t i = 0; i < rows; ++i) {
    if (ptr[i + 1] > std::numeric_limits<index_t>::max() - ptr[i])
      throw OverflowError(detail::concat("spgemm_plan: C would have more than 2^63 - 1 stored entries: ", operands()));
    ptr[i + 1] += ptr[i];
  }
  const index_t stored = ptr[rows];
  const index_t bb = a->block_size() * a->block_size();
  if (stored > std::numeric_limits<index_t>::max() / bb)
    throw OverflowError(detail::concat("spgemm_plan: C's ", stored, " blocks of ", a->block_size(), " x ",
                                       a->block_size(), " values would overflow index_t: ", operands()));
  // Gathered on the threads, into memory none has touched: each faults in the pages it
  // writes, where a vector would first be written through on one thread.
  detail::Block<index_t> idx = detail::huge_untouched<index_t>(stored, "spgemm_plan: C's column indices");
  const int movers = detail::parts_for(n_pieces, detail::work_ns(detail::Work::stream, static_cast<double>(stored)));
  detail::parallel_for(movers, n_pieces, ranges, [&](int, index_t p) {
    const index_t* from = scratch[piece_slot[p]].out.data() + piece_at[p];
    index_t* to = idx.get() + ptr[pieces[p]];
    for (index_t i = pieces[p], end = pieces[p + 1]; i < end;) {
      // A run of rows computed afresh, in one copy from the buffer ...
      index_t j = i + 1;
      while (j < end && !left_repeats_[j]) ++j;
      const index_t n = ptr[j] - ptr[i];
      to = std::copy(from, from + n, to);
      from += n;
      // ... then the rows repeating the one before, copied from C's row just written.
      for (; j < end && left_repeats_[j]; ++j) to = std::copy(to - (ptr[j + 1] - ptr[j]), to, to);
      i = j;
    }
  });
  c_ = detail::trusted_structure(v.rows, v.cols, a->block_size(), std::move(ptr),
                                 detail::Storage<index_t>(std::move(idx), static_cast<std::size_t>(stored)));
  // Kept only when some row repeats: the numeric phase reads none as no rows to sum in
  // groups, and may then sum each row in a dense accumulator.
  for (std::vector<std::uint8_t>* repeats : {&left_repeats_, &right_repeats_})
    if (std::ranges::find(*repeats, std::uint8_t{1}) == repeats->end()) *repeats = {};
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
