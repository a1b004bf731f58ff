// Attention masks against element predicates: the builders (local, dilated, global,
// causal, document), their unions and intersections, stacked slices, block lists, and
// argument validation.
#include <algorithm>
#include <functional>
#include <vector>

#include "support.hpp"
#include "trnsparse/attention.hpp"

namespace trnsparse::test {
namespace {


using Pred = std::function<bool(index_t, index_t)>;
using AttentionRandom = Seeded<>;

/// Every (i, j) of the mask agrees with the predicate; every full block allows all its
/// logical elements, every partial block some but not all (builders drop empty blocks).
void expect_mask(const AttentionMask& m, index_t queries, index_t keys, const Pred& pred, bool builder = true) {
  ASSERT_EQ(m.queries(), queries);
  ASSERT_EQ(m.keys(), keys);
  for (index_t i = 0; i < queries; ++i)
    for (index_t j = 0; j < keys; ++j) ASSERT_EQ(m.allows(i, j), pred(i, j)) << "i = " << i << ", j = " << j;
  const BsrStructure& s = m.structure();
  const index_t b = s.block_size();
  const auto ptr = s.block_row_ptr();
  const auto col = s.block_col_indices();
  for (index_t bi = 0; bi < s.block_rows(); ++bi)
    for (index_t k = ptr[bi]; k < ptr[bi + 1]; ++k) {
      index_t allowed = 0;
      const index_t rows = s.row_extent(bi), cols = s.col_extent(col[k]);
      for (index_t r = 0; r < rows; ++r)
        for (index_t c = 0; c < cols; ++c) allowed += pred(bi * b + r, col[k] * b + c) ? 1 : 0;
      if (m.is_full(k)) EXPECT_EQ(allowed, rows * cols) << "full block " << k;
      else if (builder) EXPECT_TRUE(allowed > 0 && allowed < rows * cols) << "partial block " << k;
      if (!m.is_full(k)) EXPECT_EQ(m.element_mask(k).size(), static_cast<std::size_t>(b * b));
    }
}

// ---- masks ------------------------------------------------------------------------------

TEST(AttentionMask, LocalDilatedGlobalCausal) {
  for (index_t b : {1, 4, 8, 16}) {
    SCOPED_TRACE("block " + std::to_string(b));
    const index_t seq = 45;
    auto blk = [b](index_t i) { return i / b; };
    expect_mask(mask::local_window(seq, b, 1), seq, seq,
                [&](index_t i, index_t j) { return std::abs(blk(i) - blk(j)) <= 1; });
    expect_mask(mask::local_window(seq, b, 1000), seq, seq, [](index_t, index_t) { return true; });
    expect_mask(mask::dilated(seq, b, 3), seq, seq, [&](index_t i, index_t j) { return (blk(i) - blk(j)) % 3 == 0; });
    expect_mask(mask::global_tokens(seq, b, 1, 2), seq, seq, [&](index_t i, index_t j) {
      return blk(i) < 2 || blk(j) < 2 || std::abs(blk(i) - blk(j)) <= 1;
    });
    expect_mask(mask::causal(seq, b), seq, seq, [](index_t i, index_t j) { return j <= i; });
  }
  const auto c = mask::causal(40, 8);
  EXPECT_EQ(c.n_blocks(), 15);
  EXPECT_EQ(c.n_partial(), 5);
}

TEST(AttentionMask, Document) {
  const std::vector<index_t> lengths{5, 0, 17, 3, 20, 1};
  std::vector<index_t> doc;
  for (std::size_t d = 0; d < lengths.size(); ++d) doc.insert(doc.end(), static_cast<std::size_t>(lengths[d]), static_cast<index_t>(d));
  const auto seq = static_cast<index_t>(doc.size());
  for (bool causal : {false, true})
    for (index_t b : {1, 4, 8, 64}) {
      SCOPED_TRACE("block " + std::to_string(b) + (causal ? " causal" : ""));
      expect_mask(mask::document(lengths, b, causal), seq, seq, [&](index_t i, index_t j) {
        return doc[static_cast<std::size_t>(i)] == doc[static_cast<std::size_t>(j)] && (!causal || j <= i);
      });
    }
  EXPECT_EQ(mask::document(std::vector<index_t>{}, 4).n_blocks(), 0);
}

TEST_F(AttentionRandom, MaskUnionIntersectionAndBlockGrid) {
  const index_t q = 37, k = 29, b = 8, nbr = 5, nbc = 4;
  std::vector<std::uint8_t> g1(nbr * nbc), g2(nbr * nbc);
  for (auto& v : g1) v = rng.bernoulli(0.5) ? 1 : 0;
  for (auto& v : g2) v = rng.bernoulli(0.5) ? 1 : 0;
  const auto a = mask::from_block_mask(q, k, b, g1);
  auto grid = [&](const std::vector<std::uint8_t>& g) {
    return [&g, b](index_t i, index_t j) { return g[static_cast<std::size_t>(i / b * 4 + j / b)] != 0; };
  };
  expect_mask(a, q, k, grid(g1));
  // A mask with element-level partial blocks: random element masks on g2's pattern.
  std::vector<index_t> ptr{0}, idx;
  for (index_t i = 0; i < nbr; ++i) {
    for (index_t j = 0; j < nbc; ++j)
      if (g2[static_cast<std::size_t>(i * nbc + j)]) idx.push_back(j);
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  std::vector<std::uint8_t> elems(idx.size() * b * b);
  for (std::size_t t = 0; t < elems.size(); ++t) elems[t] = (t / (b * b)) % 3 == 0 || rng.bernoulli(0.6) ? 1 : 0;
  const AttentionMask e(BsrStructure::make(q, k, b, ptr, idx), elems);
  Dense<std::uint8_t> allow_e(q, k);
  for (index_t i = 0; i < q; ++i)
    for (index_t j = 0; j < k; ++j) allow_e(i, j) = e.allows(i, j) ? 1 : 0;
  EXPECT_GT(e.n_partial(), 0);
  EXPECT_LT(e.n_partial(), e.n_blocks());  // every third block all-ones: classified full
  expect_mask(e, q, k, [&](index_t i, index_t j) { return allow_e(i, j) != 0; }, false);
  expect_mask(mask::unite(a, e), q, k, [&](index_t i, index_t j) { return grid(g1)(i, j) || allow_e(i, j) != 0; });
  expect_mask(mask::intersect(a, e), q, k,
              [&](index_t i, index_t j) { return grid(g1)(i, j) && allow_e(i, j) != 0; });
  const auto c = mask::causal(40, 8), w = mask::local_window(40, 8, 1);
  expect_mask(mask::intersect(c, w), 40, 40, [](index_t i, index_t j) { return j <= i && i / 8 - j / 8 <= 1; });
}

/// Bottom-right alignment of queries against a longer (or shorter) key sequence: causal
/// allows j <= i + keys - queries; local_window compares key blocks with the block of the
/// query's position i + keys - queries.
TEST(AttentionMask, CausalAndLocalWindowAlignBottomRight) {
  auto floor_div = [](index_t n, index_t b) { return n >= 0 ? n / b : -((-n + b - 1) / b); };
  for (index_t b : {1, 3, 8, 16})
    for (auto [nq, nk] : {std::pair<index_t, index_t>{5, 40}, {1, 33}, {40, 40}, {37, 21}, {0, 9}, {9, 0}}) {
      SCOPED_TRACE("block " + std::to_string(b) + ", " + std::to_string(nq) + " x " + std::to_string(nk));
      const index_t off = nk - nq;
      expect_mask(mask::causal(nq, nk, b), nq, nk, [&](index_t i, index_t j) { return j <= i + off; });
      for (index_t w : {0, 1, 2}) {
        expect_mask(mask::local_window(nq, nk, b, w), nq, nk, [&](index_t i, index_t j) {
          return std::abs(j / b - floor_div(i + off, b)) <= w;
        });
      }
    }
  // The square overloads are the two-length ones at equal lengths.
  EXPECT_EQ(mask::causal(50, 50, 8).structure().fingerprint(), mask::causal(50, 8).structure().fingerprint());
  EXPECT_EQ(mask::local_window(50, 50, 8, 1).n_partial(), 0);
}

/// stack builds batch x heads slices; allows(z, h, i, j) reads slice (z, h), and a count
/// of 1 broadcasts; unite / intersect broadcast a single slice over a stacked mask.
TEST(AttentionMask, StackedSlicesAndBroadcast) {
  const index_t n = 29, b = 4;
  std::vector<AttentionMask> m;
  for (index_t s = 0; s < 6; ++s) m.push_back(s % 2 == 0 ? mask::causal(n, b) : mask::local_window(n, b, s / 2));
  const auto st = mask::stack(m, 2, 3);
  EXPECT_EQ(st.batch(), 2);
  EXPECT_EQ(st.heads(), 3);
  EXPECT_EQ(st.queries(), n);
  EXPECT_EQ(st.block_rows(), 8);
  for (index_t z = 0; z < 2; ++z)
    for (index_t h = 0; h < 3; ++h)
      for (index_t i = 0; i < n; ++i)
        for (index_t j = 0; j < n; ++j) ASSERT_EQ(st.allows(z, h, i, j), m[z * 3 + h].allows(i, j));
  const auto g = mask::global_tokens(n, b, 0, 1);
  const auto u = mask::unite(st, g), x = mask::intersect(g, st);
  EXPECT_EQ(u.slices(), 6);
  EXPECT_EQ(x.slices(), 6);
  for (index_t z = 0; z < 2; ++z)
    for (index_t h = 0; h < 3; ++h)
      for (index_t i = 0; i < n; ++i)
        for (index_t j = 0; j < n; ++j) {
          ASSERT_EQ(u.allows(z, h, i, j), st.allows(z, h, i, j) || g.allows(i, j));
          ASSERT_EQ(x.allows(z, h, i, j), st.allows(z, h, i, j) && g.allows(i, j));
        }
  // Per-head slices shared by the batch: z past 1 reads slice (0, h).
  const auto heads_only = mask::stack(std::span(m).first(3), 1, 3);
  EXPECT_EQ(heads_only.allows(5, 2, 7, 3), m[2].allows(7, 3));
  EXPECT_NO_THROW(mask::unite(st, mask::stack(std::span(m).first(2), 2, 1)));  // 3 heads against 1
  EXPECT_THROW(mask::unite(st, mask::stack(std::span(m).first(2), 1, 2)), DimensionMismatch);  // 3 against 2
}

/// from_blocks takes classified blocks of every slice, validates them, and agrees with
/// the builders when given their arrays.
TEST(AttentionMask, FromBlocksRoundTripAndValidation) {
  const index_t n = 21, b = 4;
  std::vector<AttentionMask> m{mask::causal(n, b), mask::document(std::vector<index_t>{7, 14}, b, true)};
  const auto st = mask::stack(m, 1, 2);
  const auto ptr = st.structure().block_row_ptr();
  const auto col = st.structure().block_col_indices();
  std::vector<index_t> local(col.begin(), col.end());
  for (index_t r = 0; r < 2 * st.block_rows(); ++r)
    for (index_t k = ptr[r]; k < ptr[r + 1]; ++k) local[static_cast<std::size_t>(k)] -= (r / st.block_rows()) * st.block_cols();
  const std::vector<index_t> vptr(ptr.begin(), ptr.end());
  const std::vector<index_t> part(st.partial_index().begin(), st.partial_index().end());
  const std::vector<std::uint8_t> el(st.partial_masks().begin(), st.partial_masks().end());
  const auto again = AttentionMask::from_blocks(1, 2, n, n, b, vptr, local, part, el);
  EXPECT_EQ(again.structure().fingerprint(), st.structure().fingerprint());
  for (index_t h = 0; h < 2; ++h)
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < n; ++j) ASSERT_EQ(again.allows(0, h, i, j), st.allows(0, h, i, j));
  auto bad_col = local;
  bad_col[1] = 99;
  EXPECT_THROW(AttentionMask::from_blocks(1, 2, n, n, b, vptr, bad_col, part, el), IndexError);
  auto bad_part = part;
  bad_part[0] = static_cast<index_t>(el.size());
  EXPECT_THROW(AttentionMask::from_blocks(1, 2, n, n, b, vptr, local, bad_part, el), IndexError);
  EXPECT_THROW(AttentionMask::from_blocks(1, 3, n, n, b, vptr, local, part, el), DimensionMismatch);
  EXPECT_THROW(AttentionMask::from_blocks(0, 2, n, n, b, vptr, local, part, el), InvalidArgument);
  EXPECT_THROW(AttentionMask::from_blocks(1, 2, n, n, b, vptr, local, part, std::vector<std::uint8_t>(5)),
               DimensionMismatch);
  EXPECT_THROW(mask::stack(m, 2, 2), DimensionMismatch);
  EXPECT_THROW(mask::stack(std::vector<AttentionMask>{st}, 1, 1), InvalidArgument);
}

TEST(AttentionMask, CostsStoredBlocksNotSequenceSquared) {
  // seq = 2^24 tokens: a seq^2 pass would take hours; the window stores 3 blocks per row.
  const index_t seq = index_t{1} << 24, b = 128, nb = seq / b;
  const auto m = mask::local_window(seq, b, 1);
  EXPECT_EQ(m.n_blocks(), 3 * nb - 2);
  EXPECT_EQ(m.n_partial(), 0);
  EXPECT_EQ(mask::causal(seq / 256, b).n_partial(), nb / 256);  // b² bytes per partial block
}

TEST(AttentionMask, RejectsBadArguments) {
  EXPECT_THROW(mask::local_window(10, 0, 1), InvalidArgument);
  EXPECT_THROW(mask::local_window(10, 4, -1), InvalidArgument);
  EXPECT_THROW(mask::dilated(10, 4, 0), InvalidArgument);
  EXPECT_THROW(mask::global_tokens(10, 4, 1, -1), InvalidArgument);
  EXPECT_THROW(mask::causal(-1, 4), InvalidArgument);
  EXPECT_THROW(mask::document(std::vector<index_t>{3, -1}, 4), InvalidArgument);
  EXPECT_THROW(mask::from_block_mask(10, 10, 4, std::vector<std::uint8_t>(8)), DimensionMismatch);
  EXPECT_THROW(mask::unite(mask::causal(10, 4), mask::causal(12, 4)), DimensionMismatch);
  EXPECT_THROW(mask::intersect(mask::causal(12, 4), mask::causal(12, 3)), DimensionMismatch);
  EXPECT_THROW(AttentionMask(nullptr), InvalidArgument);
  EXPECT_THROW(AttentionMask(mask::causal(8, 4).structure_ptr(), std::vector<std::uint8_t>(5)), DimensionMismatch);
}

}  // namespace
}  // namespace trnsparse::test
