// The optimised CPU kernels (src/kernels/cpu) against their reference twins
// (src/kernels/reference, the executable specification) and a float64 dense reference,
// on every ISA this CPU supports and every (operand, output) type pair.
//
// The shapes aim at the tile kernels' edges (bsr_tile.inc, csr_tile.inc,
// avx512bf16/bsr_kernels.cpp): strips of kMR rows with a shorter last strip (b = 3, 10,
// 17 against kMR = 4 / 8), panels of NR columns with tails (NR = 4 scalar, 8..32 SIMD;
// widths 15..33), column chunks of 16 panels (64..512 columns: widths 100, 257, 300,
// and 529, 600, 1100, which end in a partial chunk on every ISA, fp32 on AVX-512 too),
// the width-1 vector path (spmv, and spmm with a strided n x 1 B), the small-block
// kernels (b <= 8: b² lanes for one column, column passes of NV vectors otherwise,
// partial last block rows of B read as zero), the transposed path
// (BSC view with a permutation), the bf16 pair path for even block sizes (b = 10, 16, 32,
// 64, 128) and its widening fallback for odd ones (b = 1, 9, 17), the bf16 small pair
// kernels (b <= 8 against widths 2 to 8, and the SpMV) and the widening small-block
// kernels, logical
// shapes that do not fill their edge blocks, block rows with no stored block, stored
// all-zero blocks, one dense block row, and empty matrices in each dimension.
//
// The products run on one thread here: an OpenMP region costs milliseconds on a loaded
// machine, and test_determinism.cpp holds 2 and 3 threads bitwise equal to one.
//
// Tolerances (see support.hpp near_reference and kernel_support.hpp near_kernel): every
// result is an inner product of length k accumulated in acc_t<TA> with unit roundoff u
// (2^-24 for float and bf16 operands, 2^-53 for double), so it is within
// gamma_{k+3} M ~ (k+3) u sum |alpha||a||b| + |beta||c| of the exact value, whatever the
// order and FMA contraction. bf16 operands are bf16 numbers widened exactly, so the
// float64 reference sees the same inputs the pair path (vdpbf16ps: exact bf16 products,
// fp32 sums, round to nearest per pair) consumes; a bf16 output adds 2^-8 relative.
// vdpbf16ps also flushes subnormal inputs and outputs: the random inputs here are drawn
// from [-1, 1) and have no subnormal products; KernelBf16Subnormal bounds the flush.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernel_support.hpp"
#include "dispatch/dispatch.hpp"
#include "kernels/reference/products.hpp"
#include "plan/csr_analysis.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {

namespace ref = kernels::reference;

struct Scaling {
  double alpha;
  double beta;
};
/// beta = 0 runs with a NaN-filled output (it must be written without being read).
constexpr Scaling scalings[] = {{1.0, 0.0}, {-1.5, 0.5}};
/// Also run once per matrix: alpha = 0 scales C only.
constexpr Scaling only_beta{0.0, -1.0};

/// One matrix and the operand widths it meets.
struct BsrCase {
  std::string name;
  index_t rows;
  index_t cols;
  index_t b;
  std::vector<index_t> widths;
  PatternSpec pattern{};
};

std::vector<BsrCase> bsr_cases() {
  const PatternSpec no_blocks{0.0, 1.0, false, 0.0};
  const PatternSpec zero_blocks{0.6, 0.0, true, 1.0};
  const PatternSpec full{1.0, 0.0, false, 0.0};
  return {
      {"empty_0x0_b3", 0, 0, 3, {0, 1, 4}},
      {"no_rows_0x7_b3", 0, 7, 3, {1, 4}},
      {"no_cols_6x0_b4", 6, 0, 4, {1, 3}},
      {"single_1x1_b1", 1, 1, 1, {0, 1, 2, 17}, full},
      {"single_1x1_b16", 1, 1, 16, {1, 33}, full},
      {"unaligned_7x5_b3", 7, 5, 3, {1, 2, 15, 16, 17, 300}},
      {"b1_40x37", 40, 37, 1, {1, 2, 31, 32, 33}},
      {"b2_33x31", 33, 31, 2, {1, 2, 8, 15, 16, 17, 257, 300}},
      {"b8_64x50", 64, 50, 8, {1, 7, 8, 9, 31, 32, 33, 100}},
      // The small-block kernels (b <= 8): every size, and widths around their column
      // passes (NV vectors of 4..16 lanes: 16..64 columns) with partial last vectors.
      {"b3_31x29", 31, 29, 3, {1, 3, 8, 16, 31, 63, 64, 65, 130}},
      {"b4_42x38", 42, 38, 4, {1, 4, 8, 16, 47, 64, 65}},
      {"b5_52x47", 52, 47, 5, {1, 5, 8, 47, 48, 49, 64}},
      {"b6_60x61", 60, 61, 6, {1, 6, 8, 31, 32, 33, 64}},
      {"b7_45x50", 45, 50, 7, {1, 7, 17, 40}},
      {"even_b10_100x90", 100, 90, 10, {1, 16, 17}},
      {"odd_b9_100x90", 100, 90, 9, {1, 2, 33}},
      {"odd_b17_60x52", 60, 52, 17, {1, 2, 16, 257}},
      {"unaligned_130x67_b16", 130, 67, 16, {1, 16, 17, 257}},
      {"b32_96x70", 96, 70, 32, {1, 33, 300}},
      {"unaligned_259x130_b64", 259, 130, 64, {1, 2, 33}},
      {"b128_150x140", 150, 140, 128, {1, 2, 17}},
      {"dense_b10_30x30", 30, 30, 10, {1, 33}, full},
      {"no_stored_blocks_20x20_b4", 20, 20, 4, {1, 5}, no_blocks},
      {"all_zero_blocks_30x30_b4", 30, 30, 4, {1, 17}, zero_blocks},
      // Wider than a chunk (packed B slabs, panel_offset): a general even b (the bf16 pair
      // path), the b = 16 fast path and a general odd b, each with partial edge blocks.
      {"wide_b10_47x43", 47, 43, 10, {600}},
      {"wide_b16_40x37", 40, 37, 16, {1100}},
      {"wide_odd_b17_40x36", 40, 36, 17, {529}},
  };
}

enum class Product { spmm, spmv, spmm_transposed };

const char* name_of(Product op) {
  switch (op) {
    case Product::spmm: return "spmm";
    case Product::spmv: return "spmv";
    case Product::spmm_transposed: return "spmm_transposed";
  }
  return "?";
}

/// C = alpha op(A) B + beta C by the reference kernel (C dense, ld = cols).
template <Value TA, class TY>
void reference_product(Product op, const BsrMatrix<TA>& A, double alpha, const Dense<TA>& B, double beta,
                       Dense<TY>& C) {
  const ref::BsrArrays arrays = arrays_of(A.structure());
  const auto al = static_cast<acc_t<TA>>(alpha);
  const auto be = static_cast<acc_t<TA>>(beta);
  if (op == Product::spmm_transposed) {
    std::vector<acc_t<TA>> work(static_cast<std::size_t>(A.cols() * B.cols()));
    ref::bsr_spmm_transposed(arrays, A.blocks().data(), B.cols(), al, B.values().data(), B.ld(), be,
                             C.values().data(), C.ld(), work.data());
  } else {
    ref::bsr_spmm(arrays, A.blocks().data(), B.cols(), al, B.values().data(), B.ld(), be, C.values().data(), C.ld());
  }
}

/// Runs `op` through the public API on every supported ISA and checks it against the
/// float64 reference and the reference kernel. B holds NaN beyond its columns (never
/// read); C holds NaN (beta = 0) or a sentinel beyond its columns (never written).
template <Value TA, class TY>
void check_product(Rng& rng, Product op, const BsrMatrix<TA>& A, const Dense<double>& op_a, index_t width,
                   Scaling s) {
  SCOPED_TRACE(::testing::Message() << name_of(op) << ", width " << width << ", alpha " << s.alpha << ", beta "
                                    << s.beta);
  const Dense<TA> b = random_dense<TA>(rng, op_a.cols(), width);
  const Dense<TY> c = initial_output<TY>(rng, op_a.rows(), width, s.beta);
  const Reference expected = reference_gemm(s.alpha, op_a, widen<TA>(b), s.beta, widen<TY>(c));
  Dense<TY> want = c;
  reference_product(op, A, s.alpha, b, s.beta, want);
  ASSERT_TRUE(near_reference<TA>(want.view(), expected)) << "the reference kernel itself";

  const auto alpha = static_cast<acc_t<TA>>(s.alpha);
  const auto beta = static_cast<acc_t<TA>>(s.beta);
  const TY fill = s.beta == 0.0 ? quiet_nan<TY>() : sentinel_value<TY>();
  for_each_isa([&](Isa) {
    Dense<TY> got = c;
    if (op == Product::spmv) {
      spmv(alpha, A, b.values(), beta, got.values());
    } else {
      const StridedDense<TA> B(b, width + 3, quiet_nan<TA>());
      StridedDense<TY> C(c, width + 2, fill);
      if (op == Product::spmm) spmm(alpha, A, B.view(), beta, C.view());
      else spmm_transposed(alpha, A, B.view(), beta, C.view());
      EXPECT_TRUE(C.padding_holds(fill)) << "C was written beyond its columns";
      for (index_t i = 0; i < got.rows(); ++i)
        for (index_t j = 0; j < width; ++j) got(i, j) = C.view()(i, j);
    }
    EXPECT_TRUE(near_reference<TA>(got.view(), expected));
    EXPECT_TRUE((near_kernel<TA, TY>(got.view(), want.view(), expected)));
  });
}

template <class Pair>
class KernelBsr : public Seeded<> {
protected:
  using TA = typename Pair::TA;
  using TY = typename Pair::TY;

  void run(Product op) {
    const RuntimeGuard guard;
    set_num_threads(1);
    for (const BsrCase& c : bsr_cases()) {
      SCOPED_TRACE(c.name);
      const BsrMatrix<TA> A = random_bsr<TA>(this->rng, c.rows, c.cols, c.b, c.pattern);
      const Dense<double> a = widen<TA>(dense_of(A));
      const Dense<double> op_a = op == Product::spmm_transposed ? transpose_dense<double>(a) : a;
      bool first = true;
      for (const index_t width : c.widths) {
        if (op == Product::spmv && width != 1) continue;
        for (const Scaling s : scalings) check_product<TA, TY>(this->rng, op, A, op_a, width, s);
        if (std::exchange(first, false)) check_product<TA, TY>(this->rng, op, A, op_a, width, only_beta);
      }
    }
  }
};
TYPED_TEST_SUITE(KernelBsr, ProductTypes, TypeNames);

TYPED_TEST(KernelBsr, SpmmMatchesTheReference) { this->run(Product::spmm); }
TYPED_TEST(KernelBsr, SpmvMatchesTheReference) { this->run(Product::spmv); }
TYPED_TEST(KernelBsr, SpmmTransposedMatchesTheReference) { this->run(Product::spmm_transposed); }

// ---- bf16 operands outside the normal range -------------------------------------------------

/// A bf16 subnormal: 1..127 times 2^-133, random sign.
bf16 subnormal_bf16(Rng& rng) {
  const auto mantissa = static_cast<std::uint16_t>(1 + rng.below(127));
  return bf16::from_bits(static_cast<std::uint16_t>(mantissa | (rng.bernoulli(0.5) ? 0x8000u : 0u)));
}

/// A normal bf16 of magnitude in [2^-70, 2^-60): products of two land in fp32's
/// subnormal range (below 2^-126).
bf16 tiny_bf16(Rng& rng) {
  return bf16(std::ldexp(rng.uniform(-1.0, 1.0), -60 - static_cast<int>(rng.below(10))));
}

template <class Pair>
class KernelBf16Subnormal : public Seeded<> {
 protected:
  /// The n entries of an x with x(at) = inf, the others random; and a bf16 matrix of
  /// structure s whose stored values are none of them zero (so that inf meets no 0).
  std::vector<bf16> x_infinite_at(index_t n, index_t at) {
    std::vector<bf16> x(static_cast<std::size_t>(n));
    for (bf16& v : x) v = random_value<bf16>(this->rng);
    x[static_cast<std::size_t>(at)] = bf16(std::numeric_limits<float>::infinity());
    return x;
  }
  template <class Structure>
  BsrMatrix<bf16> nonzero_matrix(const Structure& s) {
    const index_t b = s->block_size();
    std::vector<bf16> blocks(static_cast<std::size_t>(s->n_blocks() * b * b));
    for (bf16& v : blocks) v = bf16(0.5f + 0.5f * static_cast<float>(this->rng.uniform(0.0, 1.0)));
    return BsrMatrix<bf16>(s, std::move(blocks));
  }
};

/// Expects y's rows [first, last) not finite and every other row finite.
template <class TY>
void expect_infinite_rows_only(const std::vector<TY>& y, index_t first, index_t last) {
  for (index_t i = 0; i < static_cast<index_t>(y.size()); ++i) {
    const auto v = static_cast<float>(y[static_cast<std::size_t>(i)]);
    if (i >= first && i < last) EXPECT_FALSE(std::isfinite(v)) << "row " << i;
    else EXPECT_TRUE(std::isfinite(v)) << "row " << i << ": " << v;
  }
}
using Bf16Pairs = ::testing::Types<TypePair<bf16, float>, TypePair<bf16, bf16>>;
TYPED_TEST_SUITE(KernelBf16Subnormal, Bf16Pairs, TypeNames);

// Rows alternate between tiny/subnormal values and ordinary ones, so the ordinary rows
// are checked at full accuracy next to the flushed ones. A flushed input, product or
// partial sum loses less than 2^-126 max(1, |a|) max(1, |b|) per term, hence the absolute
// slack |alpha| 2 (k+1) 2^-126 (|a|, |b| <= 1 here) plus half a bf16 subnormal ulp
// (2^-134) for a bf16 output. Exact IEEE subnormal arithmetic (the widening kernels) is
// within the same slack.
TYPED_TEST(KernelBf16Subnormal, FlushIsBoundedAndNothingLeaks) {
  using TY = typename TypeParam::TY;
  const RuntimeGuard guard;
  struct Shape {
    index_t b, rows, cols, width;
  };
  // On avx512bf16, vdpbf16ps runs all: an even b = 16 (the pair panels), small blocks
  // against at most 8 columns (the small pair kernel) and against one (the pair SpMV),
  // odd and even, with partial edges.
  for (const Shape& shape : {Shape{16, 48, 32, 40}, Shape{3, 8, 5, 8}, Shape{4, 12, 7, 5}, Shape{3, 8, 5, 1},
                             Shape{4, 12, 7, 1}, Shape{5, 12, 9, 1}}) {
    SCOPED_TRACE("b = " + std::to_string(shape.b) + ", width = " + std::to_string(shape.width));
    const index_t b = shape.b, cols = shape.cols, width = shape.width;
    const auto s = BsrStructure::make(shape.rows, cols, b, {0, 2, 3, 5}, {0, 1, 1, 0, 1});
    // Alternate rows of each block and odd columns of B: ordinary values; the others:
    // subnormal or tiny.
    auto odd_or_tiny = [&](index_t i, bool subnormal) {
      if (i % 2 == 1) return random_value<bf16>(this->rng);
      return subnormal ? subnormal_bf16(this->rng) : tiny_bf16(this->rng);
    };
    std::vector<bf16> blocks(static_cast<std::size_t>(s->n_blocks() * b * b));
    for (std::size_t e = 0; e < blocks.size(); ++e)
      blocks[e] = odd_or_tiny(static_cast<index_t>(e) % (b * b) / b, this->rng.bernoulli(0.5));
    const BsrMatrix<bf16> A(s, std::move(blocks));
    Dense<bf16> B(cols, width);
    for (index_t i = 0; i < cols; ++i)
      for (index_t j = 0; j < width; ++j) B(i, j) = odd_or_tiny(j, this->rng.bernoulli(0.5));
    const double alpha = 1.0;
    const Dense<TY> C0 = filled<TY>(shape.rows, width, quiet_nan<TY>());
    const Reference expected = reference_gemm(alpha, widen<bf16>(dense_of(A)), widen<bf16>(B), 0.0, widen<TY>(C0));
    const double slack = std::fabs(alpha) * 2.0 * static_cast<double>(expected.inner + 1) * 0x1p-126 +
                         (std::is_same_v<TY, bf16> ? 0x1p-134 : 0.0);
    Dense<TY> want = C0;
    reference_product(Product::spmm, A, alpha, B, 0.0, want);
    EXPECT_TRUE((near_float64<bf16, TY>(want.view(), expected, slack))) << "the reference kernel itself";
    for_each_isa([&](Isa) {
      Dense<TY> got = C0;
      spmm(static_cast<float>(alpha), A, B.view(), 0.0f, got.view());
      EXPECT_TRUE((near_float64<bf16, TY>(got.view(), expected, slack)));
      EXPECT_TRUE((near_kernel<bf16, TY>(got.view(), want.view(), expected, 2.0 * slack)));
    });
  }
}

// An infinite entry reaches its own row only. The bf16 small pair kernels read a row's
// last pair or quad past the row's end (b = 3, 5 and 6 at widths 2-8; odd b in the SpMV),
// where the next words in memory are the next row's first entries (or the next
// block's), and clear them; B's and x's padding is zero, so a leak would show as NaN
// (inf * 0) in the row above. Each ISA, every small b (2, 4 and 8 read whole rows: the
// controls), widths 1 (the pair SpMV), 2 and 8.
TYPED_TEST(KernelBf16Subnormal, AnInfiniteEntryStaysInItsRow) {
  using TY = typename TypeParam::TY;
  const RuntimeGuard guard;
  for (const index_t b : {2, 3, 4, 5, 6, 8})
    for (const index_t width : {index_t{1}, index_t{2}, index_t{8}}) {
      SCOPED_TRACE("b = " + std::to_string(b) + ", width = " + std::to_string(width));
      const auto s = BsrStructure::make(2 * b, 2 * b, b, {0, 2, 3}, {0, 1, 1});
      std::vector<bf16> blocks(static_cast<std::size_t>(s->n_blocks() * b * b));
      for (bf16& v : blocks) v = random_value<bf16>(this->rng);
      for (std::size_t q = 0; q < 3; ++q) blocks[q * b * b + b] = bf16(std::numeric_limits<float>::infinity());  // A(1, 0)
      const BsrMatrix<bf16> A(s, std::move(blocks));
      Dense<bf16> B(2 * b, width);
      for (index_t i = 0; i < 2 * b; ++i)
        for (index_t j = 0; j < width; ++j) B(i, j) = random_value<bf16>(this->rng);
      for_each_isa([&](Isa) {
        Dense<TY> got = filled<TY>(2 * b, width, quiet_nan<TY>());
        spmm(1.0f, A, B.view(), 0.0f, got.view());
        for (index_t i = 0; i < 2 * b; ++i)
          for (index_t j = 0; j < width; ++j) {
            const auto v = static_cast<float>(got(i, j));
            if (i % b == 1) EXPECT_FALSE(std::isfinite(v)) << "row " << i << ", column " << j;
            else EXPECT_TRUE(std::isfinite(v)) << "row " << i << ", column " << j << ": " << v;
          }
      });
    }
}

// An infinite entry of x meets its own column only: the pair SpMV pads an odd block's
// last pair of x with a zero word, where the word after it is the next block column's
// first entry. Block row 0 holds only block column 0, so x(b) = inf must leave it finite.
TYPED_TEST(KernelBf16Subnormal, AnInfiniteXEntryMeetsItsColumnOnly) {
  using TY = typename TypeParam::TY;
  const RuntimeGuard guard;
  for (const index_t b : {index_t{2}, index_t{3}, index_t{5}}) {
    SCOPED_TRACE("b = " + std::to_string(b));
    const BsrMatrix<bf16> A = this->nonzero_matrix(BsrStructure::make(2 * b, 2 * b, b, {0, 1, 2}, {0, 1}));
    const std::vector<bf16> x = this->x_infinite_at(2 * b, b);
    for_each_isa([&](Isa) {
      std::vector<TY> y(static_cast<std::size_t>(2 * b), quiet_nan<TY>());
      spmv(1.0f, A, std::span<const bf16>(x), 0.0f, std::span<TY>(y));
      expect_infinite_rows_only(y, b, 2 * b);
    });
  }
}

// The same for the half storage's pair kernel: its pads of x (an odd block's last pair,
// both in a block row's own sums and in its mirrors) are zero words where the word after
// them is the next block row's first entry. Upper block triangle of 3 block rows: (0, 0),
// (0, 2); (1, 1); (2, 2). x(b) = inf reaches block row 1 only: block row 0 reads x's
// block 0 (then x(b) as a pad) for its diagonal and for (0, 2)'s mirror into block row 2.
TYPED_TEST(KernelBf16Subnormal, AnInfiniteXEntryStaysInItsBlockRowOfTheHalfStorage) {
  using TY = typename TypeParam::TY;
  const RuntimeGuard guard;
  for (const index_t b : {index_t{2}, index_t{3}, index_t{4}, index_t{5}}) {
    SCOPED_TRACE("b = " + std::to_string(b));
    const BsrMatrix<bf16> A = this->nonzero_matrix(BsrStructure::make(3 * b, 3 * b, b, {0, 2, 3, 4}, {0, 2, 1, 2}));
    const std::vector<bf16> x = this->x_infinite_at(3 * b, b);
    for_each_isa([&](Isa) {
      std::vector<TY> y(static_cast<std::size_t>(3 * b), quiet_nan<TY>());
      spmv_symmetric(1.0f, A, Triangle::upper, std::span<const bf16>(x), 0.0f, std::span<TY>(y));
      expect_infinite_rows_only(y, b, 2 * b);
    });
  }
}

// ---- CSR -------------------------------------------------------------------------------------

// CSR products run the ISA's threaded kernels (csr_tile.inc: chunks of 4, 2 and 1 vectors
// of C columns in registers, then a partial vector for the tail columns; bf16 widened to
// fp32 as it is read). They sum each element over the row's entries in storage order, as
// the reference kernel does, so they differ from it by FMA contraction only, within the
// same bound as above.
const index_t csr_widths[] = {1, 2, 15, 16, 17, 31, 32, 33, 64, 65, 100};

template <class Pair>
class KernelCsr : public Seeded<> {};
TYPED_TEST_SUITE(KernelCsr, ProductTypes, TypeNames);

TYPED_TEST(KernelCsr, SpmmSpmvAndTransposedMatchTheReference) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const RuntimeGuard guard;
  set_num_threads(1);
  std::size_t n = 0;
  for (const MatrixSpec& spec : adversarial_specs()) {
    SCOPED_TRACE(spec.name);
    const Dense<TA> a = random_dense<TA>(this->rng, spec);
    const Dense<double> wide = widen<TA>(a);
    const Dense<double> wide_t = transpose_dense<double>(wide);
    const CsrMatrix<TA> A = csr_from_dense<TA>(a);
    for (const index_t width : csr_widths) {
      const Scaling s = scalings[n++ % std::size(scalings)];
      SCOPED_TRACE(::testing::Message() << "width " << width << ", alpha " << s.alpha << ", beta " << s.beta);
      const auto alpha = static_cast<acc_t<TA>>(s.alpha);
      const auto beta = static_cast<acc_t<TA>>(s.beta);
      const TY fill = s.beta == 0.0 ? quiet_nan<TY>() : sentinel_value<TY>();
      const Dense<TA> b = random_dense<TA>(this->rng, spec.cols, width);
      const Dense<TY> c = initial_output<TY>(this->rng, spec.rows, width, s.beta);
      const Reference expected = reference_gemm(s.alpha, wide, widen<TA>(b), s.beta, widen<TY>(c));
      Dense<TY> want = c;
      ref::csr_spmm(A.rows(), width, A.row_ptr().data(), A.col_indices().data(), A.values().data(), alpha,
                    b.values().data(), b.ld(), beta, want.values().data(), want.ld());
      // Aᵀ B with B: rows x width.
      const Dense<TA> bt = random_dense<TA>(this->rng, spec.rows, width);
      const Dense<TY> ct = initial_output<TY>(this->rng, spec.cols, width, s.beta);
      const Reference expected_t = reference_gemm(s.alpha, wide_t, widen<TA>(bt), s.beta, widen<TY>(ct));
      for_each_isa([&](Isa) {
        const StridedDense<TA> B(b, width + 3, quiet_nan<TA>());
        StridedDense<TY> C(c, width + 2, fill);
        spmm(alpha, A, B.view(), beta, C.view());
        EXPECT_TRUE(near_reference<TA>(C.view(), expected));
        EXPECT_TRUE((near_kernel<TA, TY>(C.view(), want.view(), expected)));
        EXPECT_TRUE(C.padding_holds(fill)) << "C was written beyond its columns";
        if (width == 1) {
          Dense<TY> y = c;
          spmv(alpha, A, b.values(), beta, y.values());
          EXPECT_TRUE(near_reference<TA>(y.view(), expected));
          EXPECT_TRUE((near_kernel<TA, TY>(y.view(), want.view(), expected)));
        }
        const StridedDense<TA> Bt(bt, width + 1, quiet_nan<TA>());
        StridedDense<TY> Ct(ct, width + 1, fill);
        spmm_transposed(alpha, A, Bt.view(), beta, Ct.view());
        EXPECT_TRUE(near_reference<TA>(Ct.view(), expected_t)) << "spmm_transposed";
        EXPECT_TRUE(Ct.padding_holds(fill)) << "spmm_transposed wrote C beyond its columns";
      });
    }
  }
}

// bf16 operands sum in fp32 in the reference kernel's order, and a product of two bf16 is
// exact in fp32 (8 + 8 significant bits): an FMA rounds as the reference's multiply-then-
// add does, so kernel and reference hold the same fp32 sum of each row (no product here
// falls below fp32's normal range: the inputs are at least 2^-52 in magnitude). With
// beta = 0 both round alpha times that sum once to TY: the same bits. With beta != 0 the
// kernel may contract alpha * acc + beta * c into an FMA where the reference rounds both
// products: each evaluation is within 2u (|alpha acc| + |beta c|) (1 + u) of the exact
// value (u = 2^-24), and |alpha acc| + |beta c| <= (1 + gamma_k) M, so the two differ by
// at most 4 (1 + u) (1 + gamma_k) u M < 5 u M, whatever the row length; a bf16 output
// rounds each once more (2^-8 relative, as near_kernel allows). A different summation
// order would stray by up to k u M.
template <class TY>
::testing::AssertionResult same_sums(DenseView<const TY> got, DenseView<const TY> want, const Reference& ref,
                                     bool bitwise) {
  if (bitwise) return same_matrix<TY>(got, want);
  const double u_out = std::is_same_v<TY, bf16> ? unit_roundoff<bf16> : 0.0;
  for (index_t i = 0; i < got.rows; ++i)
    for (index_t j = 0; j < got.cols; ++j) {
      const double g = to_double(got(i, j)), w = to_double(want(i, j));
      const double tol =
          5.0 * unit_roundoff<float> * ref.magnitude(i, j) + u_out * (1.0 + 2.0 * u_out) * (std::fabs(g) + std::fabs(w));
      if (!(std::fabs(g - w) <= tol))
        return ::testing::AssertionFailure() << "(" << i << ", " << j << "): got " << g << ", reference kernel " << w
                                             << ", |diff| " << std::fabs(g - w) << " > " << tol;
    }
  return ::testing::AssertionSuccess();
}

/// A rows x cols CSR with ragged rows: about a fifth empty, row 1 (when there is one)
/// full, the others of random length; half the non-empty rows reach the last column, so
/// that products read B's last row (csr_tile.inc's partial vector loads it masked, where
/// it reads the other rows of a bf16 B whole).
template <Value T>
CsrMatrix<T> ragged_csr(Rng& rng, index_t rows, index_t cols) {
  std::vector<index_t> ptr{0}, idx;
  std::vector<T> values;
  for (index_t i = 0; i < rows; ++i) {
    if (cols > 0 && !(i != 1 && rng.bernoulli(0.2))) {
      const double density = i == 1 ? 1.0 : rng.uniform(0.0, 0.6);
      const bool last = rng.bernoulli(0.5);
      for (index_t j = 0; j < cols; ++j)
        if (rng.bernoulli(density) || (last && j == cols - 1)) {
          idx.push_back(j);
          values.push_back(random_value<T>(rng));
        }
    }
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  return CsrMatrix<T>(rows, cols, std::move(ptr), std::move(idx), std::move(values));
}

const index_t csr_bf16_widths[] = {1, 2, 3, 7, 8, 16, 17, 64};

class KernelCsrMixed : public Seeded<> {};

// The mixed product (fp32 values, double B, C and sums: AMG's V-cycle) on the random and
// ragged shapes, every width with a strided B and C, with 64- and 32-bit column indices,
// against the reference kernel on every ISA. Each value widens to double exactly, so both
// sum the same products in double in the same order, up to FMA contraction: the bound of
// near_kernel for double.
TEST_F(KernelCsrMixed, SameSumsAsTheReferenceKernel) {
  const RuntimeGuard guard;
  set_num_threads(1);
  std::vector<std::pair<std::string, CsrMatrix<float>>> matrices;
  for (const MatrixSpec& spec : adversarial_specs())
    matrices.emplace_back(spec.name, csr_from_dense<float>(random_dense<float>(rng, spec)));
  for (const auto& [rows, cols] : {std::pair<index_t, index_t>{200, 150}, {37, 9}, {50, 1}, {5, 1000}})
    matrices.emplace_back("ragged_" + std::to_string(rows) + "x" + std::to_string(cols),
                          ragged_csr<float>(rng, rows, cols));
  std::size_t n = 0;
  for (const auto& matrix : matrices) {
    const CsrMatrix<float>& A = matrix.second;
    SCOPED_TRACE(matrix.first);
    const Dense<double> wide = widen<float>(dense_of(A));
    const std::vector<std::int32_t> narrow = detail::compact_indices(A.cols(), A.col_indices());
    for (const index_t width : csr_widths) {
      const Scaling s = scalings[n++ % std::size(scalings)];
      SCOPED_TRACE(::testing::Message() << "width " << width << ", alpha " << s.alpha << ", beta " << s.beta);
      const double fill = s.beta == 0.0 ? quiet_nan<double>() : sentinel_value<double>();
      const Dense<double> b = random_dense<double>(rng, A.cols(), width);
      const Dense<double> c = initial_output<double>(rng, A.rows(), width, s.beta);
      const Reference expected = reference_gemm(s.alpha, wide, b, s.beta, c);
      Dense<double> want = c;
      ref::csr_spmm(A.rows(), width, A.row_ptr().data(), A.col_indices().data(), A.values().data(), s.alpha,
                    b.values().data(), b.ld(), s.beta, want.values().data(), want.ld());
      EXPECT_TRUE(near_reference<double>(want.view(), expected)) << "reference kernel";
      for_each_isa([&](Isa) {
        for (const bool compact : {false, true}) {
          SCOPED_TRACE(compact ? "32-bit indices" : "64-bit indices");
          const StridedDense<double> B(b, width + 3, quiet_nan<double>());
          StridedDense<double> C(c, width + 2, fill);
          const kernels::CsrProduct<double, double, float> prod{.width = width,
                                                                .in_rows = A.cols(),
                                                                .ptr = A.row_ptr().data(),
                                                                .idx = A.col_indices().data(),
                                                                .idx32 = compact ? narrow.data() : nullptr,
                                                                .values = A.values().data(),
                                                                .alpha = s.alpha,
                                                                .beta = s.beta,
                                                                .B = B.view().data,
                                                                .ldb = B.view().ld,
                                                                .C = C.view().data,
                                                                .ldc = C.view().ld};
          dispatch::csr_kernels<double, double, float>().spmm(prod, 0, A.rows());
          EXPECT_TRUE((near_kernel<double, double>(C.view(), want.view(), expected)));
          EXPECT_TRUE(C.padding_holds(fill)) << "C was written beyond its columns";
        }
      });
    }
  }
}

template <class TY>
class KernelCsrBf16 : public Seeded<> {};
using Bf16Outputs = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(KernelCsrBf16, Bf16Outputs, TypeNames);

// The random shapes (adversarial_specs) and ragged ones, every width of csr_bf16_widths
// with a strided B (its padding NaN: the whole-vector loads read it into lanes that are
// dropped) and a strided C, beta = 0 (C NaN, never read) and not, spmv, and Aᵀ B (the
// transposed pattern's 64-bit indices), against the reference kernel on every ISA.
TYPED_TEST(KernelCsrBf16, SameSumsAsTheReferenceKernel) {
  using TY = TypeParam;
  const RuntimeGuard guard;
  set_num_threads(1);
  std::vector<std::pair<std::string, CsrMatrix<bf16>>> matrices;
  for (const MatrixSpec& spec : adversarial_specs())
    matrices.emplace_back(spec.name, csr_from_dense<bf16>(random_dense<bf16>(this->rng, spec)));
  for (const auto& [rows, cols] : {std::pair<index_t, index_t>{200, 150}, {37, 9}, {50, 1}, {5, 1000}})
    matrices.emplace_back("ragged_" + std::to_string(rows) + "x" + std::to_string(cols),
                          ragged_csr<bf16>(this->rng, rows, cols));
  for (const auto& matrix : matrices) {
    const CsrMatrix<bf16>& A = matrix.second;  // not a structured binding: the lambda below captures it (clang 14)
    SCOPED_TRACE(matrix.first);
    const Dense<double> wide = widen<bf16>(dense_of(A));
    const Dense<bf16> at_dense = transpose_dense<bf16>(dense_of(A));
    const CsrMatrix<bf16> At = csr_from_dense<bf16>(at_dense);  // Aᵀ's entries in the transposed pattern's order
    for (const index_t width : csr_bf16_widths)
      for (const Scaling s : scalings) {
        SCOPED_TRACE(::testing::Message() << "width " << width << ", alpha " << s.alpha << ", beta " << s.beta);
        const float alpha = static_cast<float>(s.alpha), beta = static_cast<float>(s.beta);
        const bool bitwise = s.beta == 0.0;
        const TY fill = s.beta == 0.0 ? quiet_nan<TY>() : sentinel_value<TY>();
        const Dense<bf16> b = random_dense<bf16>(this->rng, A.cols(), width);
        const Dense<TY> c = initial_output<TY>(this->rng, A.rows(), width, s.beta);
        const Reference expected = reference_gemm(s.alpha, wide, widen<bf16>(b), s.beta, widen<TY>(c));
        Dense<TY> want = c;
        ref::csr_spmm(A.rows(), width, A.row_ptr().data(), A.col_indices().data(), A.values().data(), alpha,
                      b.values().data(), b.ld(), beta, want.values().data(), want.ld());
        const Dense<bf16> bt = random_dense<bf16>(this->rng, A.rows(), width);
        const Dense<TY> ct = initial_output<TY>(this->rng, A.cols(), width, s.beta);
        const Reference expected_t = reference_gemm(s.alpha, transpose_dense<double>(wide), widen<bf16>(bt), s.beta,
                                                    widen<TY>(ct));
        Dense<TY> want_t = ct;
        ref::csr_spmm(At.rows(), width, At.row_ptr().data(), At.col_indices().data(), At.values().data(), alpha,
                      bt.values().data(), bt.ld(), beta, want_t.values().data(), want_t.ld());
        for_each_isa([&](Isa) {
          const StridedDense<bf16> B(b, width + 3, quiet_nan<bf16>());
          StridedDense<TY> C(c, width + 2, fill);
          spmm(alpha, A, B.view(), beta, C.view());
          EXPECT_TRUE(same_sums<TY>(C.view(), want.view(), expected, bitwise));
          EXPECT_TRUE(near_reference<bf16>(C.view(), expected));
          EXPECT_TRUE(C.padding_holds(fill)) << "C was written beyond its columns";
          if (width == 1) {
            Dense<TY> y = c;
            spmv(alpha, A, b.values(), beta, y.values());
            EXPECT_TRUE(same_sums<TY>(y.view(), want.view(), expected, bitwise)) << "spmv";
          }
          const StridedDense<bf16> Bt(bt, width + 1, quiet_nan<bf16>());
          StridedDense<TY> Ct(ct, width + 1, fill);
          spmm_transposed(alpha, A, Bt.view(), beta, Ct.view());
          EXPECT_TRUE(same_sums<TY>(Ct.view(), want_t.view(), expected_t, bitwise)) << "spmm_transposed";
          EXPECT_TRUE(Ct.padding_holds(fill)) << "spmm_transposed wrote C beyond its columns";
        });
      }
  }
}

// The half-storage product (kernels/cpu/symmetric_tile.inc) against its reference twin on
// a matrix of several chunks (plan/csr_analysis.hpp: windows of at most n / 8 rows in
// all), so that mirrored entries cross chunk boundaries through the windows; the arrow's
// mirrors reach every row. The two sum in
// different orders, within the bound above.
TYPED_TEST(KernelCsr, SpmvSymmetricMatchesTheReference) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const auto alpha = static_cast<acc_t<TA>>(-1.5);
  const auto beta = static_cast<acc_t<TA>>(0.5);
  for (const bool arrow : {false, true})
    for (const Triangle uplo : {Triangle::upper, Triangle::lower}) {
      SCOPED_TRACE(::testing::Message() << (arrow ? "arrow, " : "band, ") << (uplo == Triangle::upper ? "upper" : "lower"));
      const CsrMatrix<TA> A = banded_triangle<TA>(this->rng, 50000, {0, 1, 7, 300, 1500}, arrow, uplo);
      if (!arrow) ASSERT_GE(detail::symmetric_chunks(A.rows(), A.row_ptr(), A.col_indices(), uplo).chunks(), 3);
      const Dense<TA> x = random_dense<TA>(this->rng, A.rows(), 1);
      const Dense<TY> y = random_dense<TY>(this->rng, A.rows(), 1);
      const Reference expected = reference_symmetric(alpha, A, x, beta, y);
      Dense<TY> want = y;
      std::vector<acc_t<TA>> work(static_cast<std::size_t>(A.rows()));
      ref::csr_spmv_symmetric(A.rows(), A.row_ptr().data(), A.col_indices().data(), A.values().data(), alpha,
                              x.values().data(), beta, want.values().data(), work.data());
      for_each_isa([&](Isa) {
        Dense<TY> got = y;
        spmv_symmetric(alpha, A, uplo, x.values(), beta, got.values());
        EXPECT_TRUE(near_reference<TA>(got.view(), expected));
        EXPECT_TRUE((near_kernel<TA, TY>(got.view(), want.view(), expected)));
      });
    }
}

// The half-storage BSR product (symmetric_tile.inc's block kernels, and the reference
// kernel for other block sizes: b = 7) against its reference twin and float64, on the
// element triangle of a banded matrix converted to BSR, n not a multiple of b: the
// diagonal blocks hold a triangle and the last block row is partial. Several chunks
// (checked), so that mirrored blocks cross chunks through the windows; the arrow's
// mirrors reach every block row. Each diagonal block's unread triangle holds NaN, which
// must not reach the result.
TYPED_TEST(KernelCsr, BsrSpmvSymmetricMatchesTheReference) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  const auto alpha = static_cast<acc_t<TA>>(-1.5);
  const auto beta = static_cast<acc_t<TA>>(0.5);
  for (const index_t b : {2, 3, 4, 5, 6, 7, 8})
    for (const bool arrow : {false, true})
      for (const Triangle uplo : {Triangle::upper, Triangle::lower}) {
        const bool upper = uplo == Triangle::upper;
        SCOPED_TRACE(::testing::Message() << "b = " << b << (arrow ? ", arrow, " : ", band, ")
                                          << (upper ? "upper" : "lower"));
        const CsrMatrix<TA> T = banded_triangle<TA>(this->rng, 20003, {0, 1, 2, 9, 200, 900}, arrow, uplo);
        BsrMatrix<TA> A = to_bsr(T, b);
        const index_t n = A.rows(), nb = A.structure().block_rows();
        const auto ptr = A.structure().block_row_ptr();
        const auto col = A.structure().block_col_indices();
        if (!arrow)
          ASSERT_GE(detail::symmetric_chunks(nb, ptr, col, uplo, detail::kSymmetricChunkEntries / (b * b)).chunks(), 3);
        for (index_t bi = 0; bi < nb; ++bi)
          for (index_t q = ptr[bi]; q < ptr[bi + 1]; ++q)
            if (col[q] == bi)
              for (index_t r = 0; r < b && bi * b + r < n; ++r)
                for (index_t c = 0; c < b && bi * b + c < n; ++c)
                  if (upper ? c < r : c > r) A.block(q)[r * b + c] = quiet_nan<TA>();
        const Dense<TA> x = random_dense<TA>(this->rng, n, 1);
        const Dense<TY> y = random_dense<TY>(this->rng, n, 1);
        const Reference expected = reference_symmetric(alpha, T, x, beta, y);
        Dense<TY> want = y;
        std::vector<acc_t<TA>> work(static_cast<std::size_t>(n));
        const ref::BsrArrays arrays{n, n, b, nb, ptr.data(), col.data()};
        ref::bsr_spmv_symmetric(arrays, A.blocks().data(), upper, alpha, x.values().data(), beta, want.values().data(),
                                work.data());
        EXPECT_TRUE(near_reference<TA>(want.view(), expected)) << "the reference kernel";
        for_each_isa([&](Isa) {
          Dense<TY> got = y;
          spmv_symmetric(alpha, A, uplo, x.values(), beta, got.values());
          EXPECT_TRUE(near_reference<TA>(got.view(), expected));
          EXPECT_TRUE((near_kernel<TA, TY>(got.view(), want.view(), expected)));
        });
      }
}

// The CSR and half-storage products read 32-bit column indices when the columns fit
// them (detail::CsrAnalyses::compact); a matrix with more columns runs the same kernels
// on its 64-bit indices. Both must give the same bits, on every ISA.
template <class T>
class KernelCompactIndices : public Seeded<> {};
using CsrValueTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(KernelCompactIndices, CsrValueTypes);

TYPED_TEST(KernelCompactIndices, SameBitsAsTheWideIndices) {
  using T = TypeParam;
  const RuntimeGuard guard;
  for (const Triangle uplo : {Triangle::upper, Triangle::lower}) {
    const bool upper = uplo == Triangle::upper;
    SCOPED_TRACE(upper ? "upper" : "lower");
    // A band of several chunks, so that mirrored entries cross into other chunks' rows.
    const CsrMatrix<T> U = banded_triangle<T>(this->rng, 50000, {0, 1, 7, 300, 1500}, false, uplo);
    const index_t n = U.rows();
    const std::vector<std::int32_t> narrow = detail::compact_indices(n, U.col_indices());
    ASSERT_EQ(narrow.size(), U.col_indices().size());
    const detail::SymmetricChunks& s = detail::symmetric_chunks(n, U.row_ptr(), U.col_indices(), uplo);
    ASSERT_GE(s.chunks(), 3);
    for (const index_t width : {1, 3, 37}) {
      SCOPED_TRACE(::testing::Message() << "width " << width);
      const Dense<T> B = random_dense<T>(this->rng, n, width);
      const Dense<T> C0 = random_dense<T>(this->rng, n, width);
      for_each_isa([&](Isa) {
        const auto& csr = dispatch::csr_kernels<T, T>();
        const auto& sym = dispatch::symmetric_kernels<T, T>();
        Dense<T> wide = C0, compact = C0;
        std::vector<double> dots[2];
        for (const bool use_compact : {false, true}) {
          Dense<T>& C = use_compact ? compact : wide;
          const std::int32_t* idx32 = use_compact ? narrow.data() : nullptr;
          const kernels::CsrProduct<T, T> prod{.width = width,
                                               .in_rows = n,
                                               .ptr = U.row_ptr().data(),
                                               .idx = U.col_indices().data(),
                                               .idx32 = idx32,
                                               .values = U.values().data(),
                                               .alpha = T(-1.5),
                                               .beta = T(0.5),
                                               .B = B.values().data(),
                                               .ldb = width,
                                               .C = C.values().data(),
                                               .ldc = width};
          csr.spmm(prod, 0, n);
          if (width > 1) continue;
          std::vector<T> window(static_cast<std::size_t>(s.window_total())), buffer(static_cast<std::size_t>(s.max_span));
          std::vector<T> y(C.values().begin(), C.values().end());
          const kernels::SymmetricProduct<T, T> sp{.ptr = U.row_ptr().data(),
                                                   .idx = U.col_indices().data(),
                                                   .idx32 = idx32,
                                                   .values = U.values().data(),
                                                   .upper = upper,
                                                   .alpha = T(2),
                                                   .beta = T(-1),
                                                   .x = B.values().data(),
                                                   .y = y.data(),
                                                   .out = y.data(),
                                                   .window = window.data(),
                                                   .b = 1,
                                                   .n = n};
          std::vector<double>& dot = dots[use_compact];
          dot.assign(static_cast<std::size_t>(s.chunks() * kernels::kCgLanes), 0.0);
          for (index_t c = 0; c < s.chunks(); ++c)
            sym.local(sp, s, c, buffer.data(), dot.data() + c * kernels::kCgLanes);
          for (index_t c = 0; c < s.chunks(); ++c)
            sym.combine(sp, s, c, dot.data() + c * kernels::kCgLanes);
          std::copy(y.begin(), y.end(), C.values().begin());
          // Every row's x_i y_i term once: the lanes add up to xᵀy (fp64 sums of fp64
          // products of T values, reordered: relative error within n ulp).
          double total = 0.0, expected = 0.0, magnitude = 0.0;
          for (const double v : dot) total += v;
          for (index_t i = 0; i < n; ++i) {
            const double term = static_cast<double>(B.values()[i]) * static_cast<double>(y[i]);
            expected += term;
            magnitude += std::abs(term);
          }
          EXPECT_NEAR(total, expected, static_cast<double>(n) * std::numeric_limits<double>::epsilon() * magnitude);
        }
        EXPECT_TRUE(same_bytes(wide, compact));
        EXPECT_EQ(dots[0], dots[1]);  // the fused xᵀy lanes (empty for width > 1)
      });
    }
  }
}

}  // namespace
}  // namespace trnsparse::test
