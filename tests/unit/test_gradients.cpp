// Sampled dense-dense products (SDDMM) and the gradients of the sparse products, for BSR
// and CSR, against float64 dense references, the reference kernels and, for the
// gradients, central finite differences in double.
//
// Tolerances: an SDDMM element is one inner product of length w (the operand width)
// accumulated in acc_t<T>, scaled by alpha and added to beta times the old value: the
// near_reference / near_kernel bounds of support.hpp and kernel_support.hpp apply with
// k = w. dA = alpha dC Bᵀ is such an SDDMM; dB = alpha Aᵀ dC a product with k = rows of A.
// The finite differences are exact in exact arithmetic (the loss L(A, B) = sum W∘(alpha A B)
// is bilinear, so (L(A + hV) - L(A - hV)) / 2h = <dL/dA, V> for every h); what remains is
// rounding. Each loss is within n u M_L of its exact value (n < 2^10 roundings per term,
// u = 2^-53, M_L the loss with every product replaced by its magnitude), so the difference
// quotient is within 2^-43 (M_L(+) + M_L(-)) / 2h; the analytic <dA, V> (or <dB, U>) is a
// sum of the same kind, within 2^-43 M_dir with M_dir = sum |alpha||W||V||B| (|alpha||W||A||U|).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernel_support.hpp"
#include "kernels/reference/products.hpp"
#include "support.hpp"

namespace trnsparse::test {
namespace {

namespace ref = kernels::reference;

/// A stored entry at logical position (i, j), held at values()[p].
struct Position {
  index_t i;
  index_t j;
  index_t p;
};

// ---- the two formats, behind one interface ----------------------------------------------

struct BsrFormat {
  template <Value T>
  using Matrix = BsrMatrix<T>;
  static constexpr const char* name = "bsr";

  /// A random matrix with empty block rows, zero blocks and a dense block row.
  template <Value T>
  static BsrMatrix<T> random(Rng& rng, index_t rows, index_t cols, index_t b) {
    return random_bsr<T>(rng, rows, cols, b);
  }
  /// Every block stored, every value non-zero.
  template <Value T>
  static BsrMatrix<T> full(Rng& rng, index_t rows, index_t cols, index_t b) {
    return random_bsr<T>(rng, rows, cols, b, PatternSpec{1.0, 0.0, false, 0.0});
  }
  template <Value T>
  static std::span<T> values(BsrMatrix<T>& A) {
    return A.blocks();
  }
  template <Value T>
  static std::span<const T> values(const BsrMatrix<T>& A) {
    return A.blocks();
  }
  /// The same structure (shared) with other values; padding zeroed.
  template <Value T>
  static BsrMatrix<T> with_values(const BsrMatrix<T>& A, std::vector<T> v) {
    return BsrMatrix<T>(A.structure_ptr(), std::move(v));
  }
  /// The stored logical entries (padding excluded).
  template <Value T>
  static std::vector<Position> positions(const BsrMatrix<T>& A) {
    const BsrStructure& s = A.structure();
    const index_t b = s.block_size();
    std::vector<Position> out;
    for (index_t bi = 0; bi < s.block_rows(); ++bi)
      for (index_t k = s.block_row_ptr()[bi]; k < s.block_row_ptr()[bi + 1]; ++k) {
        const index_t bj = s.block_col_indices()[k];
        for (index_t r = 0; r < s.row_extent(bi); ++r)
          for (index_t c = 0; c < s.col_extent(bj); ++c) out.push_back({bi * b + r, bj * b + c, k * b * b + r * b + c});
      }
    return out;
  }
  template <Value T>
  static void reference_sddmm(BsrMatrix<T>& out, acc_t<T> alpha, const Dense<T>& X, const Dense<T>& Y, acc_t<T> beta) {
    ref::bsr_sddmm(arrays_of(out.structure()), out.blocks().data(), X.cols(), alpha, X.values().data(), X.ld(),
                   Y.values().data(), Y.ld(), beta);
  }
  template <Value T>
  static bool same_structure(const BsrMatrix<T>& a, const BsrMatrix<T>& b) {
    return a.structure_ptr() == b.structure_ptr();
  }
  template <Value T>
  static bool padding_zero(const BsrMatrix<T>& A) {
    return padding_is_zero(A);
  }
};

struct CsrFormat {
  template <Value T>
  using Matrix = CsrMatrix<T>;
  static constexpr const char* name = "csr";

  /// The non-zeros of a random BSR: empty rows, a band of dense rows, unaligned shapes.
  template <Value T>
  static CsrMatrix<T> random(Rng& rng, index_t rows, index_t cols, index_t b) {
    return csr_from_dense<T>(dense_of(random_bsr<T>(rng, rows, cols, b)));
  }
  template <Value T>
  static CsrMatrix<T> full(Rng& rng, index_t rows, index_t cols, index_t) {
    return csr_from_dense<T>(random_dense<T>(rng, rows, cols));
  }
  template <Value T>
  static std::span<T> values(CsrMatrix<T>& A) {
    return A.values();
  }
  template <Value T>
  static std::span<const T> values(const CsrMatrix<T>& A) {
    return A.values();
  }
  template <Value T>
  static CsrMatrix<T> with_values(const CsrMatrix<T>& A, std::vector<T> v) {
    return {A.rows(), A.cols(), {A.row_ptr().begin(), A.row_ptr().end()},
            {A.col_indices().begin(), A.col_indices().end()}, std::move(v)};
  }
  template <Value T>
  static std::vector<Position> positions(const CsrMatrix<T>& A) {
    std::vector<Position> out;
    for (index_t i = 0; i < A.rows(); ++i)
      for (index_t p = A.row_ptr()[i]; p < A.row_ptr()[i + 1]; ++p) out.push_back({i, A.col_indices()[p], p});
    return out;
  }
  template <Value T>
  static void reference_sddmm(CsrMatrix<T>& out, acc_t<T> alpha, const Dense<T>& X, const Dense<T>& Y, acc_t<T> beta) {
    ref::csr_sddmm(out.rows(), X.cols(), out.row_ptr().data(), out.col_indices().data(), out.values().data(), alpha,
                   X.values().data(), X.ld(), Y.values().data(), Y.ld(), beta);
  }
  template <Value T>
  static bool same_structure(const CsrMatrix<T>& a, const CsrMatrix<T>& b) {
    return std::ranges::equal(a.row_ptr(), b.row_ptr()) && std::ranges::equal(a.col_indices(), b.col_indices());
  }
  template <Value T>
  static bool padding_zero(const CsrMatrix<T>&) {
    return true;
  }
};

template <class F, Value V>
struct FormatValue {
  using Format = F;
  using T = V;
};

struct FormatValueNames {
  template <class P>
  static std::string GetName(int) {
    return std::string(P::Format::name) + "_" + type_name<typename P::T>();
  }
};

using FormatValues = ::testing::Types<FormatValue<BsrFormat, float>, FormatValue<BsrFormat, double>,
                                      FormatValue<BsrFormat, bf16>, FormatValue<CsrFormat, float>,
                                      FormatValue<CsrFormat, double>, FormatValue<CsrFormat, bf16>>;

/// The stored logical values of A in position order, as a 1 x n matrix.
template <class F, Value T>
Dense<T> stored_row(const typename F::template Matrix<T>& A, const std::vector<Position>& pos) {
  Dense<T> d(1, static_cast<index_t>(pos.size()));
  const auto v = F::values(A);
  for (std::size_t n = 0; n < pos.size(); ++n) d(0, static_cast<index_t>(n)) = v[static_cast<std::size_t>(pos[n].p)];
  return d;
}

/// The entries of `full` (a float64 reference over the whole logical shape) at the
/// stored positions, as a 1 x n reference.
Reference at_positions(const Reference& full, const std::vector<Position>& pos) {
  Reference r{Dense<double>(1, static_cast<index_t>(pos.size())), Dense<double>(1, static_cast<index_t>(pos.size())),
              full.inner};
  for (std::size_t n = 0; n < pos.size(); ++n) {
    r.value(0, static_cast<index_t>(n)) = full.value(pos[n].i, pos[n].j);
    r.magnitude(0, static_cast<index_t>(n)) = full.magnitude(pos[n].i, pos[n].j);
  }
  return r;
}

/// The dense matrix holding `row` (a 1 x n matrix in position order) at the positions.
Dense<double> scatter(const Dense<double>& row, const std::vector<Position>& pos, index_t rows, index_t cols) {
  Dense<double> d(rows, cols);
  for (std::size_t n = 0; n < pos.size(); ++n) d(pos[n].i, pos[n].j) = row(0, static_cast<index_t>(n));
  return d;
}

struct Shape {
  std::string name;
  index_t rows;
  index_t cols;
  index_t b;  // block size (BSR); CSR takes the non-zeros of such a BSR
};

/// Empty in each dimension, 1x1, unaligned edges, strips and panels with tails
/// (b = 40: two SIMD panels, the second partial), a block larger than a panel pair.
std::vector<Shape> shapes() {
  return {{"empty_0x0", 0, 0, 3},         {"no_rows_0x5", 0, 5, 2},  {"no_cols_6x0", 6, 0, 4},
          {"single_1x1", 1, 1, 1},        {"unaligned_7x5_b3", 7, 5, 3}, {"b8_40x33", 40, 33, 8},
          {"b16_50x45", 50, 45, 16},      {"b40_90x50", 90, 50, 40}, {"b64_70x80", 70, 80, 64}};
}

constexpr index_t sampled_widths[] = {0, 1, 5, 16, 17, 33};

// ---- sampled_matmul -------------------------------------------------------------------------

template <class P>
class Sampled : public Seeded<> {};
TYPED_TEST_SUITE(Sampled, FormatValues, FormatValueNames);

// out = alpha X Yᵀ + beta out at the stored positions, on every ISA: beta = 0 with NaN
// stored values (never read), beta != 0 with random ones; X and Y strided with NaN beyond
// their columns; padding (BSR) stays zero.
TYPED_TEST(Sampled, MatchesTheMaskedDenseProduct) {
  using F = typename TypeParam::Format;
  using T = typename TypeParam::T;
  const RuntimeGuard guard;
  set_num_threads(1);  // thread independence: test_determinism.cpp
  std::size_t n = 0;
  for (const Shape& shape : shapes()) {
    SCOPED_TRACE(shape.name);
    const auto pattern = F::template random<T>(this->rng, shape.rows, shape.cols, shape.b);
    const std::vector<Position> pos = F::positions(pattern);
    for (const index_t w : sampled_widths) {
      const double alpha = n % 2 == 0 ? 1.0 : -0.5;
      const double beta = n++ % 2 == 0 ? 0.0 : 1.5;
      SCOPED_TRACE(::testing::Message() << "width " << w << ", alpha " << alpha << ", beta " << beta);
      std::vector<T> initial(F::values(pattern).begin(), F::values(pattern).end());
      for (const Position& q : pos)
        initial[static_cast<std::size_t>(q.p)] = beta == 0.0 ? quiet_nan<T>() : random_value<T>(this->rng);
      const auto out0 = F::with_values(pattern, std::move(initial));
      const Dense<T> X = random_dense<T>(this->rng, shape.rows, w);
      const Dense<T> Y = random_dense<T>(this->rng, shape.cols, w);
      const Dense<double> old = scatter(widen<T>(stored_row<F, T>(out0, pos)), pos, shape.rows, shape.cols);
      const Reference expected = at_positions(
          reference_gemm(alpha, widen<T>(X), transpose_dense<double>(widen<T>(Y)), beta, old), pos);
      auto want = out0;
      F::reference_sddmm(want, static_cast<acc_t<T>>(alpha), X, Y, static_cast<acc_t<T>>(beta));
      const Dense<T> want_row = stored_row<F, T>(want, pos);
      ASSERT_TRUE(near_reference<T>(want_row.view(), expected)) << "the reference kernel itself";
      const StridedDense<T> Xs(X, w + 3, quiet_nan<T>());
      const StridedDense<T> Ys(Y, w + 1, quiet_nan<T>());
      for_each_isa([&](Isa) {
        auto out = out0;
        sampled_matmul(static_cast<acc_t<T>>(alpha), Xs.view(), Ys.view(), static_cast<acc_t<T>>(beta), out);
        const Dense<T> got = stored_row<F, T>(out, pos);
        EXPECT_TRUE(near_reference<T>(got.view(), expected));
        EXPECT_TRUE((near_kernel<T, T>(got.view(), want_row.view(), expected)));
        EXPECT_TRUE(F::padding_zero(out)) << "padding was written";
        EXPECT_TRUE(F::same_structure(out, out0));
      });
    }
  }
}

TYPED_TEST(Sampled, RejectsMismatchedOperands) {
  using F = typename TypeParam::Format;
  using T = typename TypeParam::T;
  auto out = F::template random<T>(this->rng, 6, 4, 2);
  const acc_t<T> one = 1;
  const Dense<T> X(6, 3), Y(4, 3), X5(5, 3), Y5(5, 3), Y2(4, 2);
  EXPECT_THAT([&] { sampled_matmul(one, X5.view(), Y.view(), one, out); },
              throws_naming<DimensionMismatch>("sampled_matmul", "X", "out.rows()"));
  EXPECT_THAT([&] { sampled_matmul(one, X.view(), Y5.view(), one, out); },
              throws_naming<DimensionMismatch>("sampled_matmul", "Y", "out.cols()"));
  EXPECT_THAT([&] { sampled_matmul(one, X.view(), Y2.view(), one, out); },
              throws_naming<DimensionMismatch>("sampled_matmul", "Y", "X.cols"));
  EXPECT_NO_THROW(sampled_matmul(one, X.view(), Y.view(), one, out));
}

// X or Y over the output's own values: the output may not alias an input (every product
// checks this for its output, and so does sampled_matmul for BSR).
TYPED_TEST(Sampled, RejectsOperandsAliasingTheOutput) {
  using F = typename TypeParam::Format;
  using T = typename TypeParam::T;
  auto out = F::template full<T>(this->rng, 6, 4, 2);
  const acc_t<T> one = 1;
  const Dense<T> X(6, 3), Y(4, 3);
  ASSERT_EQ(F::values(out).size(), 24u);
  const DenseView<const T> x_alias(F::values(out).data(), 6, 1, 1);
  const DenseView<const T> y_alias(F::values(out).data(), 4, 1, 1);
  const DenseView<const T> x1(X.values().data(), 6, 1, 3);
  const DenseView<const T> y1(Y.values().data(), 4, 1, 3);
  EXPECT_THROW(sampled_matmul(one, x_alias, y1, one, out), InvalidArgument) << "X aliases out";
  EXPECT_THROW(sampled_matmul(one, x1, y_alias, one, out), InvalidArgument) << "Y aliases out";
}

// ---- spmm_backward --------------------------------------------------------------------------

template <class P>
class Backward : public Seeded<> {};
TYPED_TEST_SUITE(Backward, FormatValues, FormatValueNames);

// dA = alpha dC Bᵀ at the stored positions (same structure, padding zero) and
// dB = alpha Aᵀ dC, against float64 dense products, on every ISA.
TYPED_TEST(Backward, MatchesTheDenseGradients) {
  using F = typename TypeParam::Format;
  using T = typename TypeParam::T;
  const RuntimeGuard guard;
  set_num_threads(1);
  std::size_t n = 0;
  for (const Shape& shape : shapes()) {
    SCOPED_TRACE(shape.name);
    const auto A = F::template random<T>(this->rng, shape.rows, shape.cols, shape.b);
    const std::vector<Position> pos = F::positions(A);
    const Dense<double> a = scatter(widen<T>(stored_row<F, T>(A, pos)), pos, shape.rows, shape.cols);
    const index_t w = sampled_widths[n++ % std::size(sampled_widths)];
    const double alpha = -0.75;
    SCOPED_TRACE(::testing::Message() << "width " << w);
    const Dense<T> B = random_dense<T>(this->rng, shape.cols, w);
    const Dense<T> dC = random_dense<T>(this->rng, shape.rows, w);
    const Reference dA_expected = at_positions(
        reference_gemm(alpha, widen<T>(dC), transpose_dense<double>(widen<T>(B)), 0.0, Dense<double>()), pos);
    const Reference dB_expected =
        reference_gemm(alpha, transpose_dense<double>(a), widen<T>(dC), 0.0, Dense<double>());
    for_each_isa([&](Isa) {
      const auto g = spmm_backward(static_cast<acc_t<T>>(alpha), A, B.view(), dC.view());
      EXPECT_TRUE(F::same_structure(g.dA, A)) << "dA does not have A's structure";
      EXPECT_TRUE(F::padding_zero(g.dA)) << "dA has non-zero padding";
      EXPECT_TRUE(near_reference<T>(stored_row<F, T>(g.dA, pos).view(), dA_expected)) << "dA";
      EXPECT_TRUE(near_reference<T>(g.dB.view(), dB_expected)) << "dB";
    });
  }
}

/// L(A, B) = sum W∘(alpha A B), through the library's forward product, and its magnitude
/// sum |W| |alpha| |A| |B|.
template <class M>
std::pair<double, double> loss(double alpha, const M& A, const Dense<double>& B, const Dense<double>& W,
                               const Dense<double>& a_dense) {
  Dense<double> C(W.rows(), W.cols());
  spmm(alpha, A, B.view(), 0.0, C.view());
  double l = 0.0, m = 0.0;
  for (index_t i = 0; i < W.rows(); ++i)
    for (index_t c = 0; c < W.cols(); ++c) {
      l += W(i, c) * C(i, c);
      double row = 0.0;
      for (index_t j = 0; j < a_dense.cols(); ++j) row += std::fabs(a_dense(i, j) * B(j, c));
      m += std::fabs(W(i, c) * alpha) * row;
    }
  return {l, m};
}

template <class F>
class BackwardFiniteDifferences : public Seeded<> {};
using Formats = ::testing::Types<BsrFormat, CsrFormat>;
struct FormatNames {
  template <class F>
  static std::string GetName(int) {
    return F::name;
  }
};
TYPED_TEST_SUITE(BackwardFiniteDifferences, Formats, FormatNames);

// Central differences of L along every stored value, a random direction over all stored
// values, every element of B (small problems) and a random direction over B, against
// <dL/dA, V> = <dA, V> and <dB, U> from spmm_backward(alpha, A, B, dC = W).
TYPED_TEST(BackwardFiniteDifferences, MatchCentralDifferencesInDouble) {
  using F = TypeParam;
  const RuntimeGuard guard;
  set_num_threads(1);
  const double alpha = 1.75, h = 0x1p-4;
  for (const Shape& shape : {Shape{"unaligned_7x5_b3", 7, 5, 3}, Shape{"b4_10x9", 10, 9, 4}}) {
    SCOPED_TRACE(shape.name);
    const auto A = F::template random<double>(this->rng, shape.rows, shape.cols, shape.b);
    const std::vector<Position> pos = F::positions(A);
    const index_t w = 3;
    const Dense<double> B = random_dense<double>(this->rng, shape.cols, w);
    const Dense<double> W = random_dense<double>(this->rng, shape.rows, w);
    const auto dense_of_values = [&](const auto& M) {
      return scatter(stored_row<F, double>(M, pos), pos, shape.rows, shape.cols);
    };
    for_each_isa([&](Isa) {
      const auto g = spmm_backward(alpha, A, B.view(), W.view());
      const auto dA = F::values(g.dA);
      const auto check = [&](const auto& plus, const auto& minus, double analytic, double m_dir, const char* what,
                             index_t index) {
        const auto [lp, mp] = plus();
        const auto [lm, mm] = minus();
        const double fd = (lp - lm) / (2.0 * h);
        const double tol = 0x1p-43 * ((mp + mm) / (2.0 * h) + m_dir);
        EXPECT_NEAR(fd, analytic, tol) << what << " " << index;
      };
      // Along single stored values and along a random direction V over all of them.
      std::vector<std::vector<double>> directions;
      for (const Position& q : pos) {
        std::vector<double> e(F::values(A).size());
        e[static_cast<std::size_t>(q.p)] = 1.0;
        directions.push_back(std::move(e));
      }
      std::vector<double> v(F::values(A).size());
      for (const Position& q : pos) v[static_cast<std::size_t>(q.p)] = random_value<double>(this->rng);
      directions.push_back(std::move(v));
      for (std::size_t d = 0; d < directions.size(); ++d) {
        const std::vector<double>& dir = directions[d];
        double analytic = 0.0;
        for (std::size_t p = 0; p < dir.size(); ++p) analytic += dA[p] * dir[p];
        const auto shifted = [&](double sign) {
          std::vector<double> vals(F::values(A).begin(), F::values(A).end());
          for (std::size_t p = 0; p < vals.size(); ++p) vals[p] += sign * h * dir[p];
          return F::with_values(A, std::move(vals));
        };
        const auto Ap = shifted(1.0), Am = shifted(-1.0);
        const auto V = F::with_values(A, dir);
        check([&] { return loss(alpha, Ap, B, W, dense_of_values(Ap)); },
              [&] { return loss(alpha, Am, B, W, dense_of_values(Am)); }, analytic,
              loss(alpha, V, B, W, dense_of_values(V)).second,
              d + 1 == directions.size() ? "dA along a random direction" : "dA along stored value",
              static_cast<index_t>(d));
      }
      // Along single elements of B and a random direction U.
      const Dense<double> a = dense_of_values(A);
      for (index_t e = 0; e <= B.rows() * w; ++e) {
        Dense<double> U(B.rows(), w);
        if (e < B.rows() * w) U.values()[static_cast<std::size_t>(e)] = 1.0;
        else U = random_dense<double>(this->rng, B.rows(), w);
        double analytic = 0.0;
        for (std::size_t p = 0; p < U.values().size(); ++p) analytic += g.dB.values()[p] * U.values()[p];
        Dense<double> Bp = B, Bm = B;
        for (std::size_t p = 0; p < U.values().size(); ++p) {
          Bp.values()[p] += h * U.values()[p];
          Bm.values()[p] -= h * U.values()[p];
        }
        check([&] { return loss(alpha, A, Bp, W, a); }, [&] { return loss(alpha, A, Bm, W, a); }, analytic,
              loss(alpha, A, U, W, a).second, e < B.rows() * w ? "dB along element" : "dB along a random direction",
              e);
      }
    });
  }
}

TYPED_TEST(BackwardFiniteDifferences, RejectsMismatchedShapes) {
  using F = TypeParam;
  const auto A = F::template random<float>(this->rng, 6, 4, 2);
  const Dense<float> B(4, 3), dC(6, 3), B5(5, 3), dC5(5, 3), dC2(6, 2);
  EXPECT_THAT([&] { (void)spmm_backward(1.0f, A, B5.view(), dC.view()); },
              throws_naming<DimensionMismatch>("spmm_backward", "B", "A.cols()"));
  EXPECT_THAT([&] { (void)spmm_backward(1.0f, A, B.view(), dC5.view()); },
              throws_naming<DimensionMismatch>("spmm_backward", "dC", "A.rows()"));
  EXPECT_THAT([&] { (void)spmm_backward(1.0f, A, B.view(), dC2.view()); },
              throws_naming<DimensionMismatch>("spmm_backward", "dC", "B.cols"));
  EXPECT_NO_THROW((void)spmm_backward(1.0f, A, B.view(), dC.view()));
}

}  // namespace
}  // namespace trnsparse::test
