// Sparse × sparse products (spgemm.hpp): against float64 dense products on random and
// adversarial shapes, the CPU kernels against the reference kernel, the structure of
// the symbolic phase, plans and their cache, drop tolerances, thread independence and
// errors.
#include <cstring>
#include <fstream>
#include <optional>
#include <set>

#include "dispatch/dispatch.hpp"
#include "kernel_support.hpp"
#include "kernels/reference/spgemm.hpp"
#include "ops/spgemm.hpp"
#include "runtime/huge_pages.hpp"
#include "trnsparse/spgemm.hpp"

namespace trnsparse::test {
namespace {

using Pattern = std::set<std::pair<index_t, index_t>>;

/// The pattern of a compressed-row structure.
Pattern pattern_of(const BsrStructure& s) { return stored_blocks(s); }

/// The structural product of two patterns: (i, j) for every (i, k) in a and (k, j) in b.
Pattern structural_product(const Pattern& a, const Pattern& b) {
  Pattern out;
  for (const auto& [i, k] : a)
    for (auto it = b.lower_bound({k, 0}); it != b.end() && it->first == k; ++it) out.emplace(i, it->second);
  return out;
}
Pattern transposed(const Pattern& a) {
  Pattern t;
  for (const auto& [i, j] : a) t.emplace(j, i);
  return t;
}

/// Whether every row's columns strictly ascend (a set-valued Pattern cannot tell).
template <Value T>
bool rows_ascend(const CsrMatrix<T>& A) {
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t q = A.row_ptr()[i] + 1; q < A.row_ptr()[i + 1]; ++q)
      if (A.col_indices()[q - 1] >= A.col_indices()[q]) return false;
  return true;
}

template <Value T>
Pattern csr_pattern_of(const CsrMatrix<T>& A) {
  Pattern p;
  for (index_t i = 0; i < A.rows(); ++i)
    for (index_t q = A.row_ptr()[i]; q < A.row_ptr()[i + 1]; ++q) p.emplace(i, A.col_indices()[q]);
  return p;
}

/// |got - ref| <= γ(k + 1)·magnitude elementwise, γ(n) = n u / (1 - n u), u the unit
/// roundoff of the accumulation (fp32 for float and bf16, fp64 for double); the
/// operands are exact in it, so the only errors are the k products' and sums' roundings.
template <Value T, class TC>
::testing::AssertionResult near_product(const Dense<TC>& got, const Reference& ref) {
  const double u = unit_roundoff<acc_t<T>>;
  const double n = static_cast<double>(ref.inner + 1);
  const double gamma = n * u / (1 - n * u);
  for (index_t i = 0; i < got.rows(); ++i)
    for (index_t j = 0; j < got.cols(); ++j) {
      const double err = std::fabs(to_double(got(i, j)) - ref.value(i, j));
      if (!(err <= gamma * ref.magnitude(i, j)))
        return ::testing::AssertionFailure() << "(" << i << ", " << j << "): " << to_double(got(i, j)) << " vs "
                                             << ref.value(i, j) << ", bound " << gamma * ref.magnitude(i, j);
    }
  return ::testing::AssertionSuccess();
}

/// A matrix's stored values, writable: a CSR's entries, a BSR's blocks.
template <class Matrix>
auto mutable_values(Matrix& M) {
  if constexpr (requires { M.blocks(); }) return M.blocks();
  else return M.values();
}

template <Value T>
Dense<double> wide(const Dense<T>& d) {
  return widen(d.view());
}
Dense<double> transposed_of(const Dense<double>& d) { return transpose_dense(d.view()); }

Dense<double> zero_dense(index_t rows, index_t cols) { return Dense<double>(rows, cols); }

template <class T>
class SpgemmTyped : public Seeded<> {};
TYPED_TEST_SUITE(SpgemmTyped, ValueTypes, TypeNames);

/// Shapes of (A, B) pairs: every adversarial spec as A, times a B of ragged width, up
/// to kNarrowColumns (C's structure found without a plan) and past it.
std::vector<std::pair<MatrixSpec, index_t>> product_shapes() {
  std::vector<std::pair<MatrixSpec, index_t>> shapes;
  const index_t widths[] = {0, 1, 7, 33, 64, 65, 70};
  std::size_t w = 0;
  for (const MatrixSpec& spec : adversarial_specs()) shapes.emplace_back(spec, widths[w++ % std::size(widths)]);
  return shapes;
}

TYPED_TEST(SpgemmTyped, CsrMatchesDenseProductAndStructuralPattern) {
  using T = TypeParam;
  for (const auto& [spec, width] : product_shapes()) {
    SCOPED_TRACE(spec.name + " times width " + std::to_string(width));
    const Dense<T> a = random_dense<T>(this->rng, spec);
    const Dense<T> b = random_dense<T>(this->rng, spec.cols, width, 0.3);
    const CsrMatrix<T> A = csr_from_dense(a.view());
    const CsrMatrix<T> B = csr_from_dense(b.view());
    const auto C = multiply(A, B);
    ASSERT_EQ(C.rows(), A.rows());
    ASSERT_EQ(C.cols(), B.cols());
    EXPECT_EQ(csr_pattern_of(C), structural_product(csr_pattern_of(A), csr_pattern_of(B)));
    const Reference ref = reference_gemm(1.0, widen(a.view()), widen(b.view()), 0.0, zero_dense(0, 0));
    EXPECT_TRUE(near_product<T>(dense_of(C), ref));
  }
}

TYPED_TEST(SpgemmTyped, BsrMatchesDenseProductForEveryBlockPath) {
  using T = TypeParam;
  // The compiled small sizes, a size that runs their loops with b at run time (7), and
  // sizes on the microkernel (16; 17 and 33 leave a partial panel and strip).
  for (const index_t b : {2, 3, 4, 5, 6, 7, 8, 16, 17, 33}) {
    for (const auto& [rows, inner, cols] : {std::tuple<index_t, index_t, index_t>{0, 5, 4}, {5, 0, 3}, {4, 6, 0},
                                            {13, 11, 9}, {40, 37, 29}}) {
      SCOPED_TRACE(::testing::Message() << "b " << b << ", " << rows << " x " << inner << " x " << cols);
      const BsrMatrix<T> A = random_bsr<T>(this->rng, rows, inner, b);
      const BsrMatrix<T> B = random_bsr<T>(this->rng, inner, cols, b);
      const auto C = multiply(A, B);
      EXPECT_EQ(pattern_of(C.structure()),
                structural_product(pattern_of(A.structure()), pattern_of(B.structure())));
      EXPECT_TRUE(padding_is_zero(C));
      const Reference ref =
          reference_gemm(1.0, wide(dense_of(A)), wide(dense_of(B)), 0.0, zero_dense(0, 0));
      EXPECT_TRUE(near_product<T>(dense_of(C), ref));
    }
  }
}

TYPED_TEST(SpgemmTyped, TransposedFormsAndGalerkinMatchDense) {
  using T = TypeParam;
  const Dense<T> a = random_dense<T>(this->rng, 23, 17, 0.2);
  const Dense<T> b = random_dense<T>(this->rng, 19, 17, 0.2);
  const auto da = widen(a.view()), db = widen(b.view());
  {
    SCOPED_TRACE("CSR A·Bᵀ");
    const auto C = multiply_transposed(csr_from_dense(a.view()), csr_from_dense(b.view()));
    EXPECT_TRUE(near_product<T>(dense_of(C), reference_gemm(1.0, da, transpose_dense(db.view()), 0.0, da)));
  }
  for (const index_t bs : {1, 3, 4, 16}) {
    SCOPED_TRACE(::testing::Message() << "BSR A·Bᵀ and A·Aᵀ, b " << bs);
    const BsrMatrix<T> A = bsr_from_dense(a.view(), bs, this->rng, 0.2);
    const BsrMatrix<T> B = bsr_from_dense(b.view(), bs, this->rng, 0.2);
    const auto C = multiply_transposed(A, B);
    EXPECT_TRUE(padding_is_zero(C));
    EXPECT_TRUE(near_product<T>(dense_of(C), reference_gemm(1.0, da, transpose_dense(db.view()), 0.0, da)));
    const auto G = multiply_transposed(A, A);
    EXPECT_TRUE(near_product<T>(dense_of(G), reference_gemm(1.0, da, transpose_dense(da.view()), 0.0, da)));
  }
  // Pᵀ A P: the float64 reference of the two products, bounded by the first product's
  // magnitudes carried through the second (each element's error is at most γ(2k + 2)
  // times |P|ᵀ |A| |P|).
  const Dense<T> p = random_dense<T>(this->rng, 21, 8, 0.3);
  const Dense<T> s = random_dense<T>(this->rng, 21, 21, 0.2);
  const auto dp = widen(p.view()), ds = widen(s.view());
  const Reference ap = reference_gemm(1.0, ds, dp, 0.0, ds);
  const Dense<double> pt = transpose_dense(dp.view());
  Reference ref = reference_gemm(1.0, pt, ap.value, 0.0, ds);
  Dense<double> abs_pt(pt.rows(), pt.cols());
  for (index_t i = 0; i < pt.rows(); ++i)
    for (index_t j = 0; j < pt.cols(); ++j) abs_pt(i, j) = std::fabs(pt(i, j));
  ref.magnitude = reference_gemm(1.0, abs_pt, ap.magnitude, 0.0, ds).value;
  ref.inner = 2 * ap.inner + 1;
  EXPECT_TRUE(near_product<T>(dense_of(galerkin(csr_from_dense(p.view()), csr_from_dense(s.view()))), ref));
  for (const index_t bs : {3, 16}) {  // Pᵀ read transposed by the small loops and the microkernel
    const BsrMatrix<T> P = bsr_from_dense(p.view(), bs, this->rng, 0.1);
    const BsrMatrix<T> S = bsr_from_dense(s.view(), bs, this->rng, 0.1);
    EXPECT_TRUE(near_product<T>(dense_of(galerkin(P, S)), ref)) << "b " << bs;
  }
}

/// The kernel problem of `plan` for A and B (plain form), as the ops build it.
template <class Matrix, class TC>
kernels::SpgemmProduct<detail::value_of<Matrix>, TC>
problem_of(const SpgemmPlan& plan, const Matrix& A, const Matrix& B, TC* out) {
  const BsrStructure& c = *plan.structure();
  return {.b = c.block_size(),
          .cols = c.block_cols(),
          .products = plan.cost().back(),
          .L = detail::spgemm_operand(plan.left(), false, detail::stored_values(A).data()),
          .R = detail::spgemm_operand(plan.right(), false, detail::stored_values(B).data(), nullptr, nullptr,
                                      detail::or_null(plan.right_repeats()), detail::or_null(plan.right_runs())),
          .c_ptr = c.block_row_ptr().data(),
          .c_idx = c.block_col_indices().data(),
          .c_vals = out,
          .sampled = false,
          .skip = 0.0};
}

// The scalar ISA contracts no multiply-add into an FMA, as the reference does not: the
// two sum in the same order, so they agree bit for bit. Other ISAs fuse multiply-adds:
// within the rounding bound of the dense test.
TYPED_TEST(SpgemmTyped, CpuKernelsMatchReferenceKernel) {
  using T = TypeParam;
  using TC = acc_t<T>;
  const RuntimeGuard guard;
  const auto check = [&](const BsrMatrix<T>& A, const BsrMatrix<T>& B) {
    const index_t b = A.block_size();
    const auto plan = spgemm_plan(A, B);
    const index_t n = plan->stored() * b * b;
    std::vector<TC> want(static_cast<std::size_t>(n)), work(static_cast<std::size_t>(plan->structure()->block_cols() * b * b));
    kernels::reference::spgemm_numeric(problem_of(*plan, A, B, want.data()), plan->structure()->block_rows(),
                                       work.data());
    for_each_isa([&](Isa isa) {
      std::vector<TC> got(static_cast<std::size_t>(n));
      plan->numeric(A, B, std::span<TC>(got));
      if (isa == Isa::scalar) {
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(TC)), 0);
      } else {
        const double u = unit_roundoff<TC>;
        for (std::size_t e = 0; e < got.size(); ++e)
          ASSERT_NEAR(got[e], want[e], 64 * u * (1 + std::fabs(want[e]))) << "value " << e;
      }
    });
  };
  for (const index_t b : {1, 3, 8, 9, 17}) {
    SCOPED_TRACE(::testing::Message() << "b " << b);
    check(random_bsr<T>(this->rng, 61, 50, b), random_bsr<T>(this->rng, 50, 45, b));
  }
  // C past kNarrowColumns: the dense accumulator (70 columns, with four terms a column
  // and more) and the column map (2000 columns, too few terms for the accumulator).
  SCOPED_TRACE("b 1, 70 columns");
  check(random_bsr<T>(this->rng, 61, 50, 1), random_bsr<T>(this->rng, 50, 70, 1));
  SCOPED_TRACE("b 1, 2000 columns");
  check(random_bsr<T>(this->rng, 61, 50, 1),
        random_bsr<T>(this->rng, 50, 2000, 1, PatternSpec{.density = 0.002, .dense_block_row = false}));
  // Rows of A and of B repeating the row before (three unknowns per node): A's summed
  // together, B's read in runs.
  SCOPED_TRACE("elasticity, b 1");
  const BsrMatrix<T> E = to_bsr(cast<T>(elasticity3d<double>(3)), 1);
  check(E, E);
}

// Rows of B with runs of consecutive columns are read as vectors (SpgemmPlan's runs):
// each lane sums its terms as the loops without runs do (entry by entry through the
// column map, or the dense accumulator), so on every ISA
// they agree bit for bit. Blocks of 11 in CSR give runs of 11, 22, 33 ... (neighbouring
// blocks merge), whole vectors and masked parts on every width, ragged at the edges;
// blocks of 18 leave two lanes past whole vectors of 4, 8 or 16 (summed one by one), and
// elasticity's nodes runs of 9 that leave one lane past 8 and overlap from one entry of
// A's row to the next.
TYPED_TEST(SpgemmTyped, RunsOfColumnsGiveTheScalarLoopsBits) {
  using T = TypeParam;
  using TC = acc_t<T>;
  const RuntimeGuard guard;
  const auto check = [&](const CsrMatrix<T>& A, const CsrMatrix<T>& B) {
    clear_spgemm_plan_cache();
    const auto plan = spgemm_plan(A, B);
    ASSERT_FALSE(plan->right_runs().empty()) << "B's runs are long enough to be read as vectors";
    const auto n = static_cast<std::size_t>(plan->stored());
    for_each_isa([&](Isa) {
      std::vector<TC> got(n), want(n);
      plan->numeric(A, B, std::span<TC>(got));
      auto prob = problem_of(*plan, A, B, want.data());
      prob.R.runs = nullptr;
      detail::run_spgemm(prob, plan->cost());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(TC)), 0);
    });
  };
  // Every entry of a random pattern of b x b blocks, as block size 1.
  const auto blocky = [&](index_t rows, index_t cols, index_t b) {
    const auto blocks = random_structure(this->rng, rows, cols, b, PatternSpec{});
    std::vector<index_t> ptr{0}, idx;
    for (index_t i = 0; i < rows; ++i) {
      for (index_t q = blocks->block_row_ptr()[i / b]; q < blocks->block_row_ptr()[i / b + 1]; ++q) {
        const index_t c0 = blocks->block_col_indices()[q] * b;
        for (index_t c = c0; c < std::min(cols, c0 + b); ++c) idx.push_back(c);
      }
      ptr.push_back(static_cast<index_t>(idx.size()));
    }
    std::vector<T> vals(idx.size());
    for (T& v : vals) v = random_value<T>(this->rng);
    return CsrMatrix<T>(rows, cols, std::move(ptr), std::move(idx), std::move(vals));
  };
  check(blocky(61, 50, 11), blocky(50, 45, 11));
  check(blocky(40, 72, 18), blocky(72, 18, 18));  // B: one block column, runs of exactly 18
  const CsrMatrix<T> E = cast<T>(elasticity3d<double>(6));
  check(E, E);
}

// Rows of C summed in a dense accumulator (C of up to 64 columns, or, with no repeated
// rows, as wide as the accumulator may grow for a product with the terms for it) agree
// bit for bit with the column map's loops, which the kernel takes when told that B's rows
// may repeat (none does): on every ISA and thread count, for C just past 64 columns,
// scattered products hundreds and thousands of columns wide, and a 7-point stencil.
TYPED_TEST(SpgemmTyped, DenseRowsGiveTheColumnMapsBits) {
  using T = TypeParam;
  using TC = acc_t<T>;
  const RuntimeGuard guard;
  const auto check = [&](const CsrMatrix<T>& A, const CsrMatrix<T>& B) {
    const auto plan = spgemm_plan(A, B);
    ASSERT_TRUE(plan->left_repeats().empty() && plan->right_repeats().empty()) << "no row repeats";
    const auto n = static_cast<std::size_t>(plan->stored());
    const std::vector<std::uint8_t> none(static_cast<std::size_t>(B.rows()) + 1, 0);
    const std::size_t accumulator = (static_cast<std::size_t>(B.cols()) * sizeof(TC) + 63) / 64 * 64;
    for_each_isa([&](Isa) {
      std::vector<TC> want(n);
      auto prob = problem_of(*plan, A, B, want.data());
      const auto& k = dispatch::spgemm_kernels<T, TC>();
      ASSERT_EQ(k.workspace_bytes(prob), accumulator) << "the product is summed in a dense accumulator";
      prob.R.repeats = none.data();
      ASSERT_NE(k.workspace_bytes(prob), accumulator) << "rows that may repeat take the column map";
      detail::run_spgemm(prob, plan->cost());
      for (const int threads : {1, 2, 3}) {
        SCOPED_TRACE(::testing::Message() << threads << " threads");
        set_num_threads(threads);
        std::vector<TC> got(n);
        plan->numeric(A, B, std::span<TC>(got));
        EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(TC)), 0);
      }
    });
  };
  // Rows of a few dozen entries, so that no two in a row are equal by chance.
  const PatternSpec sparse{.density = 0.05};
  for (const index_t cols : {65, 70, 700, 3000}) {
    SCOPED_TRACE(::testing::Message() << "300 x 400 x " << cols);
    check(to_csr(random_bsr<T>(this->rng, 300, 400, 1, sparse)),
          to_csr(random_bsr<T>(this->rng, 400, cols, 1, cols < 100 ? PatternSpec{} : sparse)));
  }
  SCOPED_TRACE("poisson3d:12");
  const CsrMatrix<T> P = cast<T>(poisson3d<double>(12));
  check(P, P);
}

// A CSR product with at most 64 columns finds C's structure without a plan, from the
// rows of B as words of bits, and sums each row in a dense accumulator: the plan's
// structure, and the bits of the same product with B 2^16 columns wider (empty ones),
// past the accumulator's reach, which takes the column map, on every ISA and thread
// count, with and without a drop tolerance.
TYPED_TEST(SpgemmTyped, NarrowProductsGiveThePlansStructureAndBits) {
  using T = TypeParam;
  using TC = acc_t<T>;
  const RuntimeGuard guard;
  const auto same = [](const CsrMatrix<TC>& got, const CsrMatrix<TC>& want) {
    ASSERT_EQ(got.rows(), want.rows());
    ASSERT_TRUE(std::ranges::equal(got.row_ptr(), want.row_ptr()));
    ASSERT_TRUE(std::ranges::equal(got.col_indices(), want.col_indices()));
    ASSERT_EQ(got.values().size(), want.values().size());
    if (!want.values().empty())  // bit for bit, NaNs and signed zeros included
      ASSERT_EQ(std::memcmp(got.values().data(), want.values().data(), want.values().size_bytes()), 0);
  };
  // M with `extra` more empty columns (rows: empty rows).
  const auto widened = [](const CsrMatrix<T>& M, index_t extra, bool rows) {
    std::vector<index_t> ptr(M.row_ptr().begin(), M.row_ptr().end());
    if (rows) ptr.resize(ptr.size() + static_cast<std::size_t>(extra), ptr.back());
    return CsrMatrix<T>(M.rows() + (rows ? extra : 0), M.cols() + (rows ? 0 : extra), std::move(ptr),
                        std::vector<index_t>(M.col_indices().begin(), M.col_indices().end()),
                        std::vector<T>(M.values().begin(), M.values().end()));
  };
  constexpr index_t kWider = index_t{1} << 16;
  const auto check = [&](const CsrMatrix<T>& A, const CsrMatrix<T>& B) {
    ASSERT_LE(B.cols(), kernels::kNarrowColumns);
    const CsrMatrix<T> wide = widened(B, kWider, false);
    const auto plan = spgemm_plan(A, B);
    for_each_isa([&](Isa) {
      const CsrMatrix<TC> want = multiply(A, wide), dropped = multiply(A, wide, 0.5);
      for (const int threads : {1, 2, 3}) {
        SCOPED_TRACE(::testing::Message() << threads << " threads");
        set_num_threads(threads);
        const auto misses = spgemm_plan_cache_stats().misses;
        const CsrMatrix<TC> C = multiply(A, B);
        EXPECT_EQ(spgemm_plan_cache_stats().misses, misses) << "a narrow product builds no plan";
        ASSERT_EQ(C.cols(), B.cols());
        same(C, want);
        same(plan->multiply(A, B), want);
        same(multiply(A, B, 0.5), dropped);
      }
    });
  };
  for (const index_t cols : {1, 2, 17, 63, 64}) {
    for (const auto& [rows, inner] : {std::pair<index_t, index_t>{0, 5}, {9, 0}, {1, 1}, {40, 37}, {300, 90}}) {
      SCOPED_TRACE(::testing::Message() << rows << " x " << inner << " x " << cols);
      check(to_csr(random_bsr<T>(this->rng, rows, inner, 1)), to_csr(random_bsr<T>(this->rng, inner, cols, 1)));
    }
  }
  {
    SCOPED_TRACE("tall: the passes over A's rows and the numeric phase split over threads");
    const PatternSpec sparse{.density = 0.03};
    check(to_csr(random_bsr<T>(this->rng, 100000, 90, 1, sparse)), to_csr(random_bsr<T>(this->rng, 90, 50, 1)));
  }
  {
    // Aᵀ·B and A·Bᵀ through explicit plans: the accumulator read through the transposed
    // view's permutation, against B widened by 2^16 columns (Aᵀ·B) or rows (A·Bᵀ).
    SCOPED_TRACE("transposed forms");
    const CsrMatrix<T> A = to_csr(random_bsr<T>(this->rng, 37, 40, 1));
    const CsrMatrix<T> B = to_csr(random_bsr<T>(this->rng, 37, 30, 1));
    const CsrMatrix<T> Bt = to_csr(random_bsr<T>(this->rng, 45, 40, 1));
    const CsrMatrix<T> B_wide = widened(B, kWider, false);
    const CsrMatrix<T> Bt_wide = widened(Bt, kWider, true);
    for_each_isa([&](Isa) {
      same(spgemm_plan(A, B, SpgemmForm::at_b)->multiply(A, B),
           spgemm_plan(A, B_wide, SpgemmForm::at_b)->multiply(A, B_wide));
      same(spgemm_plan(A, Bt, SpgemmForm::a_bt)->multiply(A, Bt), multiply_transposed(A, Bt_wide));
    });
  }
  // Three unknowns per node: rows of A and of B repeating the row before, B read in runs.
  SCOPED_TRACE("elasticity times its first 60 columns");
  const CsrMatrix<T> E = cast<T>(elasticity3d<double>(4));
  std::vector<index_t> ptr{0}, idx;
  std::vector<T> vals;
  for (index_t i = 0; i < E.rows(); ++i) {
    for (index_t q = E.row_ptr()[i]; q < E.row_ptr()[i + 1] && E.col_indices()[q] < 60; ++q) {
      idx.push_back(E.col_indices()[q]);
      vals.push_back(E.values()[q]);
    }
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  const CsrMatrix<T> B(E.rows(), 60, std::move(ptr), std::move(idx), std::move(vals));
  ASSERT_FALSE(spgemm_plan(E, B)->right_runs().empty()) << "B's runs are long enough to be read as vectors";
  check(E, B);
}

// A caller's values of C, on 4 KiB pages, move onto huge pages at the kCollapseAfter-th
// numeric phase that writes them (detail::collapse_streamed); the values stay the same
// bits throughout.
TEST(Spgemm, ACallersValuesMoveOntoHugePagesAfterRepeatedNumericPhases) {
  const CsrMatrix<double> A = poisson3d<double>(30);  // C: 0.7 M entries, 5 MB of values
  const auto plan = spgemm_plan(A, A);
  const auto n = static_cast<std::size_t>(plan->stored());
  const Mapping map{n * sizeof(double) + (std::size_t{4} << 20)};
  ASSERT_NE(map.p, MAP_FAILED);
  auto* values = reinterpret_cast<double*>(map.p + 4096);  // off a 2 MiB boundary
  const CsrMatrix<double> C = multiply(A, A);
  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(mode_file, mode);
  for (unsigned call = 1; call <= detail::kCollapseAfter; ++call) {
    // Before the kCollapseAfter-th phase the values stay on small pages, unless the
    // system backs every mapping with huge pages (-1: smaps does not say).
    if (call == detail::kCollapseAfter && mode.find("[always]") == std::string::npos) EXPECT_LE(huge_kb_at(values), 0);
    plan->numeric(A, A, std::span<double>(values, n));
    ASSERT_EQ(std::memcmp(values, C.values().data(), n * sizeof(double)), 0) << "call " << call;
  }
  if (!kernel_collapses()) GTEST_SKIP() << "this kernel does not collapse memory on request (MADV_COLLAPSE)";
  EXPECT_GE(huge_kb_at(values), 2048);
}

TEST(Spgemm, ThreadCountsGiveIdenticalBits) {
  const RuntimeGuard guard;
  const auto A = poisson3d<double>(20);
  const auto Ab = to_bsr(A, 3);
  // Three unknowns per node: runs of repeated rows, which threads' pieces cut.
  const auto E = elasticity3d<double>(5);
  for_each_isa([&](Isa) {
    std::optional<std::vector<double>> csr, bsr, grad, runs;
    for (const int threads : {1, 2, 3}) {
      set_num_threads(threads);
      clear_spgemm_plan_cache();
      const auto C = multiply(A, A);
      const auto Cb = multiply(Ab, Ab);
      const auto Ce = multiply(E, E);
      const std::vector<double> ce(Ce.values().begin(), Ce.values().end());
      std::vector<double> dA(static_cast<std::size_t>(A.nnz()));
      multiply_backward(A, A, C, std::span<double>(dA), std::span<double>());
      const std::vector<double> c(C.values().begin(), C.values().end()), cb(Cb.blocks().begin(), Cb.blocks().end());
      if (!csr) {
        csr = c;
        bsr = cb;
        grad = dA;
        runs = ce;
        continue;
      }
      EXPECT_EQ(c, *csr) << threads << " threads";
      EXPECT_EQ(std::memcmp(ce.data(), runs->data(), ce.size() * sizeof(double)), 0) << threads << " threads";
      EXPECT_EQ(std::memcmp(cb.data(), bsr->data(), cb.size() * sizeof(double)), 0) << threads << " threads";
      EXPECT_EQ(std::memcmp(dA.data(), grad->data(), dA.size() * sizeof(double)), 0) << threads << " threads";
    }
  });
}

// A BSR product sums each element's terms in the CSR product's order (blocks by column,
// then t ascending), with one rounding a term on every ISA but scalar, which has none:
// the same values, whichever loops (AVX-512's 3 x 3 lanes) run the blocks.
TEST(Spgemm, BsrOfThreeSumsAsTheCsrProduct) {
  const RuntimeGuard guard;
  const auto A = elasticity3d<double>(4);
  std::vector<double> v(A.values().begin(), A.values().end());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] *= 1.0 + 1e-3 * static_cast<double>(i * 7919 % 1013);
  const CsrMatrix<double> S(A.structure_ptr(), std::move(v));
  const auto Sb = to_bsr(S, 3);
  for_each_isa([&](Isa) {
    const auto csr = dense_of(multiply(S, S));
    const auto bsr = dense_of(multiply(Sb, Sb));
    ASSERT_EQ(csr.rows(), bsr.rows());
    for (index_t i = 0; i < csr.rows(); ++i)
      for (index_t j = 0; j < csr.cols(); ++j) ASSERT_EQ(csr(i, j), bsr(i, j)) << "(" << i << ", " << j << ")";
  });
}

/// A random rows x cols pattern whose rows come in runs of 1 to 4 equal rows (several
/// unknowns per node), with values that differ from row to row.
CsrMatrix<double> repeated_rows(Rng& rng, index_t rows, index_t cols, double density) {
  std::vector<index_t> ptr{0}, idx;
  std::vector<double> vals;
  std::vector<index_t> cols_of_run;
  for (index_t i = 0; i < rows;) {
    cols_of_run.clear();
    for (index_t j = 0; j < cols; ++j)
      if (rng.bernoulli(density)) cols_of_run.push_back(j);
    for (index_t r = 1 + rng.below(4); r > 0 && i < rows; --r, ++i) {
      for (const index_t j : cols_of_run) {
        idx.push_back(j);
        vals.push_back(rng.uniform(-0.5, 0.5));
      }
      ptr.push_back(static_cast<index_t>(idx.size()));
    }
  }
  return CsrMatrix<double>(rows, cols, std::move(ptr), std::move(idx), std::move(vals));
}

// The symbolic phase reads one row of each run of equal rows, copies C's rows for runs
// in A, reads rows back from its column marks or sorts them (rows spanning many
// columns), and passes rows of few products to the ISA's kernel: every path, on each
// ISA and 1 to 3 threads (pieces starting inside runs), against the structural product
// and the dense product.
TEST(Spgemm, RepeatedAndScatteredRowsGiveTheStructuralProduct) {
  const RuntimeGuard guard;
  Rng rng(7);
  struct Case {
    const char* name;
    CsrMatrix<double> A, B;
  };
  std::vector<Case> cases;
  cases.push_back({"elasticity", elasticity3d<double>(4), elasticity3d<double>(4)});
  cases.push_back({"runs times runs", repeated_rows(rng, 150, 90, 0.05), repeated_rows(rng, 90, 70, 0.08)});
  cases.push_back({"runs times random", repeated_rows(rng, 120, 60, 0.1),
                   csr_from_dense<double>(random_dense<double>(rng, 60, 50, 0.1).view())});
  cases.push_back({"scattered", csr_from_dense<double>(random_dense<double>(rng, 40, 30, 0.1).view()),
                   repeated_rows(rng, 30, 20000, 0.0004)});
  // The symbolic phase's three ways of keeping marks, on either side of each change: 63
  // columns (marks in a register), 64 and 4095 (the touched words in a register), 4096
  // (words listed and sorted).
  for (const auto& [cols, name] : {std::pair<index_t, const char*>{63, "63 columns"}, {64, "64 columns"},
                                   {4095, "4095 columns"}, {4096, "4096 columns"}})
    cases.push_back({name, csr_from_dense<double>(random_dense<double>(rng, 50, 40, 0.2).view()),
                     csr_from_dense<double>(random_dense<double>(rng, 40, cols, cols > 64 ? 0.02 : 0.15).view())});
  // Rows reaching each of C's few columns many times (more products than columns).
  cases.push_back({"dense rows over few columns", csr_from_dense<double>(random_dense<double>(rng, 4, 600, 1.0).view()),
                   csr_from_dense<double>(random_dense<double>(rng, 600, 70, 0.9).view())});
  // Rows of C over about 100 words of marks each: the symbolic phase sorts them whole.
  cases.push_back({"many scattered words", csr_from_dense<double>(random_dense<double>(rng, 20, 30, 0.5).view()),
                   csr_from_dense<double>(random_dense<double>(rng, 30, 20000, 0.0004).view())});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Pattern want = structural_product(csr_pattern_of(c.A), csr_pattern_of(c.B));
    const Reference ref = reference_gemm(1.0, wide(dense_of(c.A)), wide(dense_of(c.B)), 0.0, zero_dense(0, 0));
    for_each_isa([&](Isa) {
      for (const int threads : {1, 2, 3}) {
        set_num_threads(threads);
        clear_spgemm_plan_cache();
        const auto C = multiply(c.A, c.B);
        EXPECT_EQ(csr_pattern_of(C), want) << threads << " threads";
        EXPECT_TRUE(rows_ascend(C)) << threads << " threads";
        EXPECT_TRUE(near_product<double>(dense_of(C), ref)) << threads << " threads";
      }
    });
  }
}

// The symbolic phase's kernel for rows of few products (sorted in registers where the
// ISA has one) against its reference: rows of every size class of the network (0, 1,
// 16, 17, 32, 33 and 64 products), rows of R longer than one gather step, all-equal and
// distinct columns, and columns at both ends of 31 bits. The columns past those written
// are the kernel's scratch; past its room nothing changes.
TEST(SpgemmRowColumns, SortedRowsMatchTheReference) {
  const RuntimeGuard guard;
  Rng rng(11);
  for_each_isa([&](Isa) {
    const kernels::SpgemmRowColumns& k = dispatch::spgemm_row_columns();
    if (!k.columns) return;
    const index_t most = k.max_products;
    for (const index_t products : {index_t{0}, index_t{1}, index_t{16}, index_t{17}, index_t{32}, index_t{33},
                                   most - 1, most}) {
      if (products > most) continue;
      for (const index_t width : {index_t{1}, index_t{64}, index_t{5000}, index_t{INT32_MAX}}) {
        for (int trial = 0; trial < 20; ++trial) {
          SCOPED_TRACE(::testing::Message() << products << " products, columns below " << width << ", trial "
                                            << trial);
          // R's rows: lengths summing to `products`, some longer than 8 (two or more
          // gather steps), some empty; L's row reaches each once, in a shuffled order.
          std::vector<index_t> r_ptr{0}, r_idx, l_idx;
          for (index_t left = products; left > 0 || rng.bernoulli(0.3);) {
            const index_t len = std::min(left, trial % 4 == 0 ? rng.below(20) : rng.below(9));
            for (index_t s = 0; s < len; ++s) {
              const index_t end = rng.bernoulli(0.2) ? (rng.bernoulli(0.5) ? 0 : width - 1) : rng.below(width);
              r_idx.push_back(trial % 5 == 1 ? width - 1 : end);
            }
            // A row's columns are distinct and ascending, as in any structure.
            std::sort(r_idx.end() - len, r_idx.end());
            r_idx.erase(std::unique(r_idx.end() - len, r_idx.end()), r_idx.end());
            left -= static_cast<index_t>(r_idx.size()) - r_ptr.back();
            l_idx.push_back(static_cast<index_t>(r_ptr.size()) - 1);
            r_ptr.push_back(static_cast<index_t>(r_idx.size()));
          }
          for (std::size_t q = l_idx.size(); q > 1; --q) std::swap(l_idx[q - 1], l_idx[rng.below(index_t(q))]);
          const auto q1 = static_cast<index_t>(l_idx.size());
          std::vector<index_t> want(static_cast<std::size_t>(r_idx.size()));
          const index_t n_want = kernels::reference::spgemm_row_columns(l_idx.data(), 0, q1, r_ptr.data(),
                                                                        r_idx.data(), want.data());
          constexpr index_t kGuard = -7;
          std::vector<index_t> got(static_cast<std::size_t>(most + 16 + 8), kGuard);
          const index_t n_got = k.columns(l_idx.data(), 0, q1, r_ptr.data(), r_idx.data(),
                                          static_cast<index_t>(r_idx.size()), got.data());
          ASSERT_EQ(n_got, n_want);
          for (index_t e = 0; e < n_want; ++e) ASSERT_EQ(got[e], want[e]) << "column " << e;
          for (index_t e = most + 16; e < static_cast<index_t>(got.size()); ++e) ASSERT_EQ(got[e], kGuard);
        }
      }
    }
  });
}

TEST(Spgemm, PlansAreCachedAndTheNumericPhaseRerunsAlone) {
  clear_spgemm_plan_cache();
  auto A = poisson3d<double>(6);
  const auto B = poisson3d<double>(6);
  const auto C = multiply(A, B);
  EXPECT_EQ(spgemm_plan_cache_stats().misses, 1u);
  // Equal structures built separately find the same plan.
  const auto C2 = multiply(poisson3d<double>(6), B);
  EXPECT_EQ(spgemm_plan_cache_stats().hits, 1u);
  EXPECT_EQ(std::vector<double>(C2.values().begin(), C2.values().end()),
            std::vector<double>(C.values().begin(), C.values().end()));
  // New values, same structures: the numeric phase alone matches a full product.
  for (double& v : A.values()) v *= 0.5;
  const auto plan = spgemm_plan(A, B);
  std::vector<double> vals(static_cast<std::size_t>(plan->stored()));
  plan->numeric(A, B, std::span<double>(vals));
  clear_spgemm_plan_cache();
  const auto fresh = multiply(A, B);
  EXPECT_EQ(vals, std::vector<double>(fresh.values().begin(), fresh.values().end()));
  // A product of a result finds its structure by address (the result adopts the plan's).
  const auto CC = multiply(fresh, fresh);
  EXPECT_TRUE(spgemm_plan(fresh, fresh)->applies_to(fresh, fresh));
  EXPECT_FALSE(spgemm_plan(A, B)->applies_to(fresh, B));
  EXPECT_THROW(plan->numeric(fresh, B, std::span<double>(vals)), InvalidArgument);
  std::vector<double> short_values(3);
  EXPECT_THROW(plan->numeric(A, B, std::span<double>(short_values)), DimensionMismatch);
  EXPECT_EQ(CC.rows(), A.rows());
}

TEST(Spgemm, CsrDropToleranceLeavesOutSmallEntries) {
  Rng rng(base_seed() ^ 0x5f);
  const Dense<double> a = random_dense<double>(rng, 30, 25, 0.2);
  const Dense<double> b = random_dense<double>(rng, 25, 20, 0.2);
  const auto A = csr_from_dense(a.view()), B = csr_from_dense(b.view());
  const auto full = multiply(A, B);
  const double tol = 0.05;
  const auto C = multiply(A, B, tol);
  CsrMatrix<double> want = full;
  std::vector<index_t> ptr{0}, idx;
  std::vector<double> vals;
  for (index_t i = 0; i < full.rows(); ++i) {
    for (index_t q = full.row_ptr()[i]; q < full.row_ptr()[i + 1]; ++q)
      if (std::fabs(full.values()[q]) > tol) {
        idx.push_back(full.col_indices()[q]);
        vals.push_back(full.values()[q]);
      }
    ptr.push_back(static_cast<index_t>(idx.size()));
  }
  EXPECT_EQ(std::vector<index_t>(C.row_ptr().begin(), C.row_ptr().end()), ptr);
  EXPECT_EQ(std::vector<index_t>(C.col_indices().begin(), C.col_indices().end()), idx);
  EXPECT_EQ(std::vector<double>(C.values().begin(), C.values().end()), vals);
}

TEST(Spgemm, BsrDropToleranceSkipsBlockProductsByTheirNormBound) {
  // A = [X Y], B = [Z; W] in 2 x 2 blocks, with ‖Y‖·‖W‖ below the tolerance: C = X·Z.
  const auto s_a = BsrStructure::make(2, 4, 2, {0, 2}, {0, 1});
  const auto s_b = BsrStructure::make(4, 2, 2, {0, 1, 2}, {0, 0});
  const BsrMatrix<double> A(s_a, {1, 2, 3, 4, 1e-4, 0, 0, 1e-4});
  const BsrMatrix<double> B(s_b, {5, 6, 7, 8, 1e-4, 0, 0, 1e-4});
  const auto C = multiply(A, B, 1e-6);
  ASSERT_EQ(C.n_blocks(), 1);
  EXPECT_EQ(std::vector<double>(C.blocks().begin(), C.blocks().end()), (std::vector<double>{19, 22, 43, 50}));
  // Blocks whose norm is at or below the tolerance are not stored.
  const auto s_d = BsrStructure::make(4, 4, 2, {0, 1, 2}, {0, 1});
  const BsrMatrix<double> D(s_d, {1, 0, 0, 1, 1e-3, 0, 0, 0});
  const auto E = multiply(D, D, 1e-6);
  EXPECT_EQ(E.n_blocks(), 1);
  EXPECT_EQ(multiply(D, D).n_blocks(), 2);
  // Blocks of one value too (the block loops, not the CSR ones, which take every term):
  // a = [1 1e-4], b = [5; 1e-4], the second product 1e-8 <= 1e-6 is skipped, C = 5.
  const RuntimeGuard guard;
  const auto s_x = BsrStructure::make(1, 2, 1, {0, 2}, {0, 1});
  const auto s_y = BsrStructure::make(2, 1, 1, {0, 1, 2}, {0, 0});
  const BsrMatrix<double> X(s_x, {1, 1e-4}), Y(s_y, {5, 1e-4});
  for_each_isa([&](Isa) {
    EXPECT_EQ(multiply(X, Y, 1e-6).blocks()[0], 5.0);
    EXPECT_GT(multiply(X, Y).blocks()[0], 5.0);
  });
}

TEST(Spgemm, ErrorsNameBothOperands) {
  const CsrMatrix<double> A(3, 4), B(5, 2);
  try {
    (void)multiply(A, B);
    ADD_FAILURE() << "no exception";
  } catch (const DimensionMismatch& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("A is 3 x 4"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("B is 5 x 2"));
  }
  const BsrMatrix<float> P(BsrStructure::make(4, 4, 2, {0, 0, 0}, {}));
  const BsrMatrix<float> Q(BsrStructure::make(4, 4, 4, {0, 0}, {}));
  try {
    (void)multiply(P, Q);
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("block size 2"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("block size 4"));
  }
  const CsrMatrix<double> S(4, 4);
  EXPECT_THROW((void)multiply(S, S, -1.0), InvalidArgument);
  EXPECT_THROW((void)multiply(S, S, std::nan("")), InvalidArgument);
  EXPECT_THROW((void)multiply_transposed(A, B), DimensionMismatch);
  EXPECT_THROW((void)galerkin(B, S), DimensionMismatch);
  // C's columns are numbered in 32 bits within a row: a wider B is refused up front.
  const CsrMatrix<double> wide(1, (index_t{1} << 31) + 1, {0, 1}, {5}, {1.0});
  const CsrMatrix<double> one(1, 1, {0, 1}, {0}, {1.0});
  try {
    (void)multiply(one, wide);
    ADD_FAILURE() << "no exception";
  } catch (const OverflowError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("B is 1 x 2147483649"));
  }
  // Operands of two blocks each whose product's four blocks of b² values would not fit
  // index_t (4 b² > 2^63 - 1 >= 2 b²): refused by the symbolic phase, before any value.
  const index_t b = (index_t{1} << 31) - 1;
  const auto column = BsrStructure::make(2 * b, b, b, {0, 1, 2}, {0, 0});
  const auto row = BsrStructure::make(b, 2 * b, b, {0, 2}, {0, 1});
  try {
    (void)SpgemmPlan(column, row, SpgemmForm::a_b);
    ADD_FAILURE() << "no exception";
  } catch (const OverflowError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("would overflow index_t"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("A is 4294967294 x 2147483647"));
  }
}

TEST(Spgemm, BackwardMatchesDenseGradients) {
  Rng rng(base_seed() ^ 0x9a);
  for (const index_t b : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << "b " << b);
    const Dense<double> a = random_dense<double>(rng, 14, 11, 0.3);
    const Dense<double> bm = random_dense<double>(rng, 11, 9, 0.3);
    const auto check = [&](const auto& A, const auto& B, const Dense<double>& dc,
                           std::span<const double> dA, std::span<const double> dB) {
      // dA = dC Bᵀ and dB = Aᵀ dC, read at the stored positions of A and B.
      const Reference ga = reference_gemm(1.0, dc, transposed_of(wide(dense_of(B))), 0.0, dc);
      const Reference gb = reference_gemm(1.0, transposed_of(wide(dense_of(A))), dc, 0.0, dc);
      auto dA_m = A;
      std::copy(dA.begin(), dA.end(), mutable_values(dA_m).begin());
      auto dB_m = B;
      std::copy(dB.begin(), dB.end(), mutable_values(dB_m).begin());
      const auto got_a = dense_of(dA_m), got_b = dense_of(dB_m), pa = dense_of(A), pb = dense_of(B);
      for (index_t i = 0; i < got_a.rows(); ++i)
        for (index_t j = 0; j < got_a.cols(); ++j)
          if (pa(i, j) != 0.0) {
            EXPECT_NEAR(got_a(i, j), ga.value(i, j), 1e-12) << "dA(" << i << ", " << j << ")";
          }
      for (index_t i = 0; i < got_b.rows(); ++i)
        for (index_t j = 0; j < got_b.cols(); ++j)
          if (pb(i, j) != 0.0) {
            EXPECT_NEAR(got_b(i, j), gb.value(i, j), 1e-12) << "dB(" << i << ", " << j << ")";
          }
    };
    if (b == 1) {
      const auto A = csr_from_dense(a.view()), B = csr_from_dense(bm.view());
      auto dC = multiply(A, B);
      for (double& v : dC.values()) v = rng.uniform(-1, 1);
      std::vector<double> dA(static_cast<std::size_t>(A.nnz())), dB(static_cast<std::size_t>(B.nnz()));
      multiply_backward(A, B, dC, std::span<double>(dA), std::span<double>(dB));
      check(A, B, dense_of(dC), dA, dB);
    } else {
      const auto A = bsr_from_dense(a.view(), b, rng, 0.2), B = bsr_from_dense(bm.view(), b, rng, 0.2);
      auto dC = multiply(A, B);
      for (double& v : dC.blocks()) v = rng.uniform(-1, 1);
      const BsrMatrix<double> dCz(dC.structure_ptr(), std::vector<double>(dC.blocks().begin(), dC.blocks().end()));
      std::vector<double> dA(A.blocks().size()), dB(B.blocks().size());
      multiply_backward(A, B, dCz, std::span<double>(dA), std::span<double>(dB));
      check(A, B, dense_of(dCz), dA, dB);
    }
  }
}

}  // namespace
}  // namespace trnsparse::test
