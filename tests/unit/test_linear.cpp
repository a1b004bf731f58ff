// The linear layer's products (linear.hpp): Y = X Wᵀ + bias, dX = dY W, dW = dYᵀ X on
// W's blocks and the bias gradient, on every ISA, against the reference kernels
// (kernels/reference/products.hpp, the specification) on ragged shapes (rows, columns and
// tokens not multiples of the block or of a panel, more tokens than one column chunk,
// decode shapes of 1 to 16 tokens, strided operands, empty block rows, an empty
// structure), and byte for byte across 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "kernel_support.hpp"
#include "kernels/cpu/tables.hpp"
#include "runtime/huge_pages.hpp"
#include "support.hpp"
#include "trnsparse/linear.hpp"

namespace trnsparse::test {
namespace {

struct LinearCase {
  std::string name;
  index_t out;     // W.rows()
  index_t in;      // W.cols()
  index_t b;
  index_t tokens;  // > 512: more than one column chunk of the tiling
  PatternSpec pattern{};
  bool bf16_forward_only = false;  // a bf16 forward / dX path alone: other types and dW skip it
};

std::vector<LinearCase> cases() {
  const PatternSpec full{1.0, 0.0, false, 0.0};
  const PatternSpec none{0.0, 1.0, false, 0.0};
  return {
      {"ragged_b32", 100, 75, 32, 37},
      {"b16_many_tokens", 64, 130, 16, 600},
      // bf16 on AMX: X's (dY's) whole pairs of token panels load as they lie (b = 32,
      // whole block rows, a sparse layer), the last 11 tokens from packed tiles.
      {"b32_tokens_in_place", 96, 160, 32, 75},
      // The same at b = 64 in groups of 16 tokens x 64 outputs: a ragged last block row
      // of outputs (forward), then both products in place, 8 tokens packed.
      {"b64_wide_in_place", 150, 192, 64, 75},
      {"b64_wide_both_products", 128, 192, 64, 40},
      // b = 128: two such groups a block row (the second partial in the forward).
      {"b128_wide_in_place", 200, 256, 128, 40},
      {"b128_wide_both_products", 256, 256, 128, 40},
      // bf16 dW on AMX: more than 1024 tokens, so a band of block rows takes them in two
      // chunks (the second partial), each block's sums kept between them.
      {"b32_dw_token_chunks", 320, 160, 32, 1100},
      {"odd_b12", 50, 47, 12, 9},
      {"small_b4", 30, 22, 4, 5},
      {"b64_one_token", 130, 200, 64, 1},
      {"b128_full", 128, 160, 128, 40, full},
      // A block row of more than 1 MiB of bf16 blocks (33 of 128 x 128): AMX takes X's
      // token panels in chunks of 6, so 7 panels make a whole chunk and a lone panel.
      {"b128_token_chunks", 130, 4200, 128, 100, full, true},
      {"empty_layout", 40, 33, 16, 7, none},
      // Decode (at most 16 tokens, b a multiple of 8 and of the vector width): 1, 2 and
      // groups of 4 tokens, a partial last group, a partial last block row and column.
      // bf16 on vdpbf16ps: the tokens in lanes with 16 (1 token), 8, 4, 2 and 1 pair
      // slots each, a partial last pair group (odd features), and b = 16 at 1 token
      // (16 pair slots need b a multiple of 32: the widening groups).
      {"decode_b32_ragged_3_tokens", 100, 75, 32, 3},
      {"decode_b16_16_tokens", 64, 130, 16, 16},
      {"decode_b32_ragged_6_tokens", 100, 75, 32, 6},
      {"decode_b32_ragged_12_tokens", 100, 75, 32, 12},
      {"decode_b128_2_tokens", 200, 300, 128, 2},
      {"decode_b64_1_token", 130, 200, 64, 1},
      {"decode_b16_ragged_1_token", 40, 75, 16, 1},
  };
}

/// X (tokens x n) in a buffer of leading dimension n + 3, random values.
template <Value T>
Dense<T> strided_operand(Rng& rng, index_t tokens, index_t n) {
  return random_dense<T>(rng, tokens, n + 3);
}
template <class T>
DenseView<const T> first_columns(const Dense<T>& d, index_t n) {
  return DenseView<const T>(d.values().data(), d.rows(), n, d.cols());
}

/// The float64 products with their magnitudes, for near_kernel's tolerance.
Reference linear_reference(const Dense<double>& X, const Dense<double>& W, const std::vector<double>& bias) {
  Dense<double> Wt(W.cols(), W.rows());
  for (index_t o = 0; o < W.rows(); ++o)
    for (index_t i = 0; i < W.cols(); ++i) Wt(i, o) = W(o, i);
  Reference ref = reference_gemm(1.0, X, Wt, 0.0, Dense<double>(0, 0));
  ref.inner += 1;  // the bias
  for (index_t t = 0; t < X.rows(); ++t)
    for (index_t o = 0; o < W.rows(); ++o) {
      ref.value(t, o) += bias.empty() ? 0.0 : bias[static_cast<std::size_t>(o)];
      ref.magnitude(t, o) += bias.empty() ? 0.0 : std::fabs(bias[static_cast<std::size_t>(o)]);
    }
  return ref;
}

template <class Pair>
class KernelLinear : public Seeded<> {};
TYPED_TEST_SUITE(KernelLinear, ProductTypes, TypeNames);

TYPED_TEST(KernelLinear, ForwardAndInputGradientMatchTheReference) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  using Acc = acc_t<TA>;
  const RuntimeGuard guard;
  for (const LinearCase& c : cases()) {
    if (c.bf16_forward_only && !std::is_same_v<TA, bf16>) continue;
    SCOPED_TRACE(c.name);
    const BsrMatrix<TA> W = random_bsr<TA>(this->rng, c.out, c.in, c.b, c.pattern);
    const auto arrays = arrays_of(W.structure());
    const Dense<TA> X = strided_operand<TA>(this->rng, c.tokens, c.in);
    const Dense<TA> dY = strided_operand<TA>(this->rng, c.tokens, c.out);
    const DenseView<const TA> x = first_columns(X, c.in), dy = first_columns(dY, c.out);
    std::vector<Acc> bias(static_cast<std::size_t>(c.out));
    for (Acc& v : bias) v = static_cast<Acc>(to_double(random_value<TA>(this->rng)));
    const std::vector<double> bias64(bias.begin(), bias.end());
    const Dense<double> Wd = widen<TA>(dense_of(W).view());
    const Reference fwd = linear_reference(widen<TA>(x), Wd, bias64);
    const Reference fwd_plain = linear_reference(widen<TA>(x), Wd, {});
    Dense<double> Wt(c.in, c.out);
    for (index_t o = 0; o < c.out; ++o)
      for (index_t i = 0; i < c.in; ++i) Wt(i, o) = Wd(o, i);
    const Reference bwd = linear_reference(widen<TA>(dy), Wt, {});

    Dense<TY> want(c.tokens, c.out), want_plain(c.tokens, c.out), want_dx(c.tokens, c.in);
    kernels::reference::linear_forward(arrays, W.blocks().data(), c.tokens, x.data, x.ld, bias.data(),
                                       want.values().data(), c.out);
    kernels::reference::linear_forward(arrays, W.blocks().data(), c.tokens, x.data, x.ld, static_cast<Acc*>(nullptr),
                                       want_plain.values().data(), c.out);
    std::vector<Acc> work(static_cast<std::size_t>(c.in));
    kernels::reference::linear_backward_input(arrays, W.blocks().data(), c.tokens, dy.data, dy.ld,
                                              want_dx.values().data(), c.in, work.data());
    ASSERT_TRUE((near_float64<TA, TY>(want.view(), fwd, 0.0)));
    ASSERT_TRUE((near_float64<TA, TY>(want_dx.view(), bwd, 0.0)));
    for_each_isa([&](Isa) {
      // Outputs with a leading dimension of their own and NaN beyond their columns: the
      // kernels write exactly the logical columns.
      Dense<TY> y = filled<TY>(c.tokens, c.out + 5, quiet_nan<TY>());
      Dense<TY> y_plain(c.tokens, c.out), dx(c.tokens, c.in);
      const DenseView<TY> yv(y.values().data(), c.tokens, c.out, c.out + 5);
      linear_forward<TA, TY>(weight_of(W), x, std::span<const Acc>(bias), yv);
      linear_forward<TA, TY>(weight_of(W), x, {}, y_plain.view());
      linear_backward_input<TA, TY>(weight_of(W), dy, dx.view());
      EXPECT_TRUE((near_kernel<TA, TY>(DenseView<const TY>(yv), want.view(), fwd)));
      EXPECT_TRUE((near_kernel<TA, TY>(y_plain.view(), want_plain.view(), fwd_plain)));
      EXPECT_TRUE((near_kernel<TA, TY>(dx.view(), want_dx.view(), bwd)));
      for (index_t t = 0; t < c.tokens; ++t)
        for (index_t j = c.out; j < c.out + 5; ++j) ASSERT_TRUE(is_nan(y(t, j))) << "written past Y's columns";
    });
  }
}

template <class T>
class KernelLinearGradients : public Seeded<> {};
TYPED_TEST_SUITE(KernelLinearGradients, ValueTypes, TypeNames);

TYPED_TEST(KernelLinearGradients, WeightAndBiasGradientsMatchTheReference) {
  using T = TypeParam;
  using Acc = acc_t<T>;
  const RuntimeGuard guard;
  for (const LinearCase& c : cases()) {
    if (c.bf16_forward_only) continue;
    SCOPED_TRACE(c.name);
    const auto s = random_structure(this->rng, c.out, c.in, c.b, c.pattern);
    const Dense<T> X = strided_operand<T>(this->rng, c.tokens, c.in);
    const Dense<T> dY = strided_operand<T>(this->rng, c.tokens, c.out);
    const DenseView<const T> x = first_columns(X, c.in), dy = first_columns(dY, c.out);
    const index_t b = c.b;
    // dW = dYᵀ X as a gemm of dYᵀ (out x tokens) and X (tokens x in): the float64 values
    // and magnitudes, read at the stored blocks.
    const Reference full = reference_gemm(1.0, widen<T>(transpose_dense<T>(dy).view()), widen<T>(x), 0.0,
                                          Dense<double>(0, 0));
    BsrMatrix<T> want(s);
    kernels::reference::linear_backward_weight(arrays_of(*s), want.blocks().data(), c.tokens, dy.data, dy.ld, x.data,
                                               x.ld);
    std::vector<Acc> want_db(static_cast<std::size_t>(c.out));
    kernels::reference::column_sums(dy.data, c.tokens, dy.ld, want_db.data(), 0, c.out);
    // The blocks as a (n_blocks * b) x b matrix, with the reference at the same places.
    Reference at_blocks{Dense<double>(s->n_blocks() * b, b), Dense<double>(s->n_blocks() * b, b), c.tokens};
    for (index_t bi = 0; bi < s->block_rows(); ++bi)
      for (index_t q = s->block_row_ptr()[bi]; q < s->block_row_ptr()[bi + 1]; ++q)
        for (index_t r = 0; r < s->row_extent(bi); ++r)
          for (index_t cc = 0; cc < s->col_extent(s->block_col_indices()[q]); ++cc) {
            const index_t o = bi * b + r, i = s->block_col_indices()[q] * b + cc;
            at_blocks.value(q * b + r, cc) = full.value(o, i);
            at_blocks.magnitude(q * b + r, cc) = full.magnitude(o, i);
          }
    const auto blocks_of = [&](const BsrMatrix<T>& m) {
      return DenseView<const T>(m.blocks().data(), s->n_blocks() * b, b, b);
    };
    ASSERT_TRUE((near_float64<T, T>(blocks_of(want), at_blocks, 0.0)));
    for_each_isa([&](Isa) {
      BsrMatrix<T> got(s);
      linear_backward_weight<T>(dy, x, {got.structure_ptr(), got.blocks().data()});
      EXPECT_TRUE(padding_is_zero(got));
      EXPECT_TRUE((near_kernel<T, T>(blocks_of(got), blocks_of(want), at_blocks)));
      std::vector<Acc> db(static_cast<std::size_t>(c.out));
      linear_backward_bias<T>(dy, std::span<Acc>(db));
      EXPECT_EQ(std::memcmp(db.data(), want_db.data(), db.size() * sizeof(Acc)), 0) << "bias gradient";
    });
  }
}

TEST(KernelLinearErrors, ShapesAndAliasingAreChecked) {
  Rng rng(7);
  const BsrMatrix<float> W = random_bsr<float>(rng, 40, 30, 8);
  Dense<float> X(5, 30), Y(5, 40), bad(5, 31);
  const std::vector<float> bias(40), short_bias(39);
  EXPECT_THROW((linear_forward<float, float>(weight_of(W), bad.view(), {}, Y.view())), DimensionMismatch);
  EXPECT_THROW((linear_forward<float, float>(weight_of(W), X.view(), std::span<const float>(short_bias), Y.view())),
               DimensionMismatch);
  EXPECT_THROW((linear_forward<float, float>(weight_of(W), X.view(), {}, bad.view())), DimensionMismatch);
  EXPECT_THROW((linear_backward_input<float, float>(weight_of(W), X.view(), Y.view())), DimensionMismatch);
  BsrMatrix<float> dW(W.structure_ptr());
  EXPECT_THROW((linear_backward_weight<float>(X.view(), Y.view(), {dW.structure_ptr(), dW.blocks().data()})),
               DimensionMismatch);
  Dense<float> shared(5, 40);
  const DenseView<const float> in(shared.values().data(), 5, 30, 40);
  EXPECT_THROW((linear_forward<float, float>(weight_of(W), in, std::span<const float>(bias), shared.view())),
               InvalidArgument);
}

// ---- determinism ---------------------------------------------------------------------------

template <class Pair>
class DeterminismLinear : public Seeded<> {};
TYPED_TEST_SUITE(DeterminismLinear, ProductTypes, TypeNames);

TYPED_TEST(DeterminismLinear, EveryProductGivesTheSameBitsOnAnyThreadCount) {
  using TA = typename TypeParam::TA;
  using TY = typename TypeParam::TY;
  using Acc = acc_t<TA>;
  // Enough work for 3 threads (parts_for) on every product: 3 x 2^16 multiply-adds each.
  const index_t out = 224, in = 200, b = 32, tokens = 260;
  const BsrMatrix<TA> W = random_bsr<TA>(this->rng, out, in, b, {0.5, 0.1, true, 0.1});
  const Dense<TA> X = random_dense<TA>(this->rng, tokens, in);
  const Dense<TA> dY = random_dense<TA>(this->rng, tokens, out);
  std::vector<Acc> bias(static_cast<std::size_t>(out));
  for (Acc& v : bias) v = static_cast<Acc>(to_double(random_value<TA>(this->rng)));
  const auto values = [](const auto& d) {
    return std::vector<std::remove_cvref_t<decltype(d.values()[0])>>(d.values().begin(), d.values().end());
  };
  expect_thread_independent([&] {
    Dense<TY> y(tokens, out);
    linear_forward<TA, TY>(weight_of(W), X.view(), std::span<const Acc>(bias), y.view());
    return values(y);
  });
  // Decode: few tokens over a weight large enough for 3 threads (bf16: 5 tokens with
  // 2 pair slots a lane, 13 with one).
  const BsrMatrix<TA> big = random_bsr<TA>(this->rng, 1024, 1000, 32, {0.5, 0.0, false, 0.0});
  for (const index_t n : {5, 13}) {
    const Dense<TA> few = random_dense<TA>(this->rng, n, 1000);
    expect_thread_independent([&] {
      Dense<TY> y(n, 1024);
      linear_forward<TA, TY>(weight_of(big), few.view(), {}, y.view());
      return values(y);
    });
  }
  expect_thread_independent([&] {
    Dense<TY> dx(tokens, in);
    linear_backward_input<TA, TY>(weight_of(W), dY.view(), dx.view());
    return values(dx);
  });
  if constexpr (std::is_same_v<TA, bf16>) {
    // On AMX, a thread's block rows of more than 1 MiB of blocks (one thread: both of
    // wide's, 1.15 MB) take X in chunks of 14 token panels, and 576 KB in pairs of panels.
    const BsrMatrix<TA> wide = random_bsr<TA>(this->rng, 130, 2200, 128, {1.0, 0.0, false, 0.0});
    const Dense<TA> many = random_dense<TA>(this->rng, 300, 2200);
    expect_thread_independent([&] {
      Dense<TY> y(300, 130);
      linear_forward<TA, TY>(weight_of(wide), many.view(), {}, y.view());
      return values(y);
    });
  }
  if constexpr (std::is_same_v<TA, TY>) {
    expect_thread_independent([&] {
      BsrMatrix<TA> dW(W.structure_ptr());
      linear_backward_weight<TA>(dY.view(), X.view(), {dW.structure_ptr(), dW.blocks().data()});
      return std::vector<TA>(dW.blocks().begin(), dW.blocks().end());
    });
    if constexpr (std::is_same_v<TA, bf16>) {
      // On AMX, dW takes more than 1024 tokens in chunks when a thread's band holds
      // several block rows, and all at once in a band of one: the same bits either way.
      const Dense<TA> X2 = random_dense<TA>(this->rng, 1100, in), dY2 = random_dense<TA>(this->rng, 1100, out);
      expect_thread_independent([&] {
        BsrMatrix<TA> dW(W.structure_ptr());
        linear_backward_weight<TA>(dY2.view(), X2.view(), {dW.structure_ptr(), dW.blocks().data()});
        return std::vector<TA>(dW.blocks().begin(), dW.blocks().end());
      });
    }
    expect_thread_independent([&] {
      std::vector<Acc> db(static_cast<std::size_t>(out));
      linear_backward_bias<TA>(dY.view(), std::span<Acc>(db));
      return db;
    });
  }
}

/// bf16 BSR products and SDDMMs run the AMX tables on amx alone (avx512_bf16 keeps the
/// vdpbf16ps ones), so the tests above, which run every supported ISA, hold both to the
/// reference on an AMX host; fp32 never runs them.
TEST(KernelLinearAmx, AmxTablesOnAmxAlone) {
  const RuntimeGuard guard;
  const auto amx = kernels::cpu::avx512bf16::bsr_kernels_amx<float>();
  const auto amx_sddmm = kernels::cpu::avx512bf16::sddmm_kernels_amx();
  for (const Isa isa : supported_isas()) {
    SCOPED_TRACE(std::string(to_string(isa)));
    set_isa(isa);
    const bool on_amx = isa == Isa::amx;
    EXPECT_EQ((dispatch::bsr_kernels<bf16, float>().compute == amx.compute), on_amx);
    EXPECT_EQ(dispatch::sddmm_kernels<bf16>().compute == amx_sddmm.compute, on_amx);
    EXPECT_NE(reinterpret_cast<const void*>((dispatch::bsr_kernels<float, float>().compute)),
              reinterpret_cast<const void*>(amx.compute));
  }
}


// ---- huge pages for a streamed weight --------------------------------------------------------

TEST(KernelLinearStreaming, ADecodedWeightMovesOntoHugePagesAfterRepeatedStreams) {
  Rng rng(11);
  // 8 MiB of fp32 blocks at an offset of one 4 KiB page into a fresh mapping: 3 whole
  // 2 MiB pages inside, and the 2 the ends lie in.
  const index_t out = 2048, in = 1024, b = 32;
  const BsrMatrix<float> source = random_bsr<float>(rng, out, in, b, {1.0, 0.0, false, 0.0});
  const std::span<const float> blocks = source.blocks();
  const Mapping mapping{blocks.size_bytes() + (std::size_t{4} << 20)};
  ASSERT_NE(mapping.p, MAP_FAILED);
  auto* w = reinterpret_cast<float*>(mapping.p + 4096);
  std::memcpy(w, blocks.data(), blocks.size_bytes());
  const BlockSparseWeight<const float> W{source.structure_ptr(), w};
  const Dense<float> X = random_dense<float>(rng, 1, in);
  Dense<float> first(1, out), y(1, out);
  linear_forward<float, float>(weight_of(source), X.view(), {}, first.view());
  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(mode_file, mode);
  for (unsigned call = 1; call <= detail::kCollapseAfter; ++call) {
    // Before the kCollapseAfter-th stream the weight stays on the pages it had (small
    // ones, unless the system backs every mapping with huge pages; -1: smaps does not say).
    if (call == detail::kCollapseAfter && mode.find("[always]") == std::string::npos) EXPECT_LE(huge_kb_at(w), 0);
    linear_forward<float, float>(W, X.view(), {}, y.view());
    ASSERT_EQ(std::memcmp(y.values().data(), first.values().data(), y.values().size_bytes()), 0) << "call " << call;
  }
  EXPECT_EQ(std::memcmp(w, blocks.data(), blocks.size_bytes()), 0);  // the contents never change
  if (!kernel_collapses()) GTEST_SKIP() << "this kernel does not collapse memory on request (MADV_COLLAPSE)";
  EXPECT_GE(huge_kb_at(w), 3 * 2048);
}

}  // namespace
}  // namespace trnsparse::test
