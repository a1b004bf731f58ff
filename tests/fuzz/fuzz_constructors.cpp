// libFuzzer target: the validating raw-array constructors and the conversions.
//
// The input decodes into a target (CsrMatrix, CooMatrix, BsrStructure or BsrMatrix), a
// value type, a shape, a block size, two index arrays and values. A constructor rejecting
// them with a trnsparse::Error is fine; anything else (a crash, a sanitizer report, another
// exception) is a finding. CSR and BSR are built with Canonicalize::no and ::yes: input
// accepted as canonical must come out unchanged. A matrix that is built and small enough
// to hold densely (at most 4096 rows and columns and 65536 elements) goes through
// to_dense, to_coo, to_csr, to_bsr and transpose, which must not throw and must all
// describe the same matrix.
//
// Input layout (little-endian; past the end every byte reads as 0 and arrays stop):
//   u8     selector: bits 0-1 target (0 CSR, 1 COO, 2 BsrStructure, 3 BsrMatrix),
//                    bits 2-3 value type (0 float, 1 double, 2 and 3 bf16)
//   int    rows, cols, block_size
//   array  row_ptr (CSR), row indices (COO) or block_row_ptr (BSR)
//   array  column indices, or block column indices
//   u16 n, then n i8  values: v / 4, except -128 = NaN and 127 = +inf
// where an int is an i16, or the i16 -32768 followed by an i64, and an array is a u16 n
// followed by n ints. tests/fuzz/make_constructor_seeds.sh writes the seed corpus.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include <trnsparse/bsr.hpp>
#include <trnsparse/convert.hpp>
#include <trnsparse/coo.hpp>
#include <trnsparse/csr.hpp>
#include <trnsparse/error.hpp>

namespace {

using trnsparse::index_t;

constexpr index_t max_dense_side = 4096;
constexpr index_t max_dense_elements = 65536;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_constructors: %s\n", what);
    std::abort();
  }
}

class Input {
public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  [[nodiscard]] bool empty() const { return pos_ >= size_; }

  std::uint64_t unsigned_le(int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i, ++pos_)
      if (pos_ < size_) v |= std::uint64_t{data_[pos_]} << (8 * i);
    return v;
  }

  index_t integer() {
    const auto small = static_cast<std::int16_t>(unsigned_le(2));
    if (small != std::numeric_limits<std::int16_t>::min()) return small;
    return static_cast<index_t>(unsigned_le(8));
  }

  std::vector<index_t> indices() {
    const std::uint64_t n = unsigned_le(2);
    std::vector<index_t> out;
    while (out.size() < n && !empty()) out.push_back(integer());
    return out;
  }

  template <class T>
  std::vector<T> values() {
    const std::uint64_t n = unsigned_le(2);
    std::vector<T> out;
    while (out.size() < n && !empty()) {
      const auto v = static_cast<std::int8_t>(unsigned_le(1));
      const double x = v == -128 ? std::numeric_limits<double>::quiet_NaN()
                       : v == 127 ? std::numeric_limits<double>::infinity()
                                  : v / 4.0;
      out.push_back(static_cast<T>(x));
    }
    return out;
  }

private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

struct Decoded {
  index_t rows, cols, block_size;
  std::vector<index_t> first, second;
};

bool small(index_t rows, index_t cols) {
  return rows <= max_dense_side && cols <= max_dense_side && rows * cols <= max_dense_elements;
}

template <class T>
bool same_value(T a, T b) {
  const auto x = static_cast<double>(a);
  const auto y = static_cast<double>(b);
  return x == y || (std::isnan(x) && std::isnan(y));
}

template <class T>
void require_same(const trnsparse::Dense<T>& a, const trnsparse::Dense<T>& b, const char* what) {
  require(a.rows() == b.rows() && a.cols() == b.cols(), what);
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < a.cols(); ++j) require(same_value(a(i, j), b(i, j)), what);
}

template <class T>
void require_transposed(const trnsparse::Dense<T>& t, const trnsparse::Dense<T>& a, const char* what) {
  require(t.rows() == a.cols() && t.cols() == a.rows(), what);
  for (index_t i = 0; i < a.rows(); ++i)
    for (index_t j = 0; j < a.cols(); ++j) require(same_value(t(j, i), a(i, j)), what);
}

template <class F>
void must_not_throw(const char* what, F&& f) {
  try {
    f();
  } catch (const trnsparse::Error& e) {
    std::fprintf(stderr, "fuzz_constructors: %s threw: %s\n", what, e.what());
    std::abort();
  }
}

template <class T>
void check_conversions(const trnsparse::CsrMatrix<T>& A, index_t block_size) {
  if (!small(A.rows(), A.cols())) return;
  must_not_throw("a conversion of a valid CSR matrix", [&] {
    const trnsparse::Dense<T> d = trnsparse::to_dense(A);
    require_same(trnsparse::to_dense(trnsparse::to_coo(A)), d, "CSR -> COO changed the matrix");
    require_transposed(trnsparse::to_dense(trnsparse::transpose(A)), d, "CSR transpose is wrong");
    const trnsparse::BsrMatrix<T> B = trnsparse::to_bsr(A, block_size);
    require_same(trnsparse::to_dense(B), d, "CSR -> BSR changed the matrix");
    require_same(trnsparse::to_dense(trnsparse::to_csr(B)), d, "CSR -> BSR -> CSR changed the matrix");
    require_same(trnsparse::to_dense(trnsparse::to_csr(d.view())), d, "dense -> CSR changed the matrix");
  });
}

template <class T>
void check_conversions(const trnsparse::BsrMatrix<T>& A, index_t block_size) {
  if (!small(A.rows(), A.cols())) return;
  must_not_throw("a conversion of a valid BSR matrix", [&] {
    const trnsparse::Dense<T> d = trnsparse::to_dense(A);
    const trnsparse::CsrMatrix<T> C = trnsparse::to_csr(A);
    require_same(trnsparse::to_dense(C), d, "BSR -> CSR changed the matrix");
    require_transposed(trnsparse::to_dense(trnsparse::transpose(A)), d, "BSR transpose is wrong");
    require_same(trnsparse::to_dense(trnsparse::to_bsr(C, block_size)), d, "BSR -> CSR -> BSR changed the matrix");
    require_same(trnsparse::to_dense(trnsparse::to_bsr(d.view(), block_size)), d, "dense -> BSR changed the matrix");
  });
}

// Canonicalize::no accepts only canonical input, which ::yes must then leave unchanged.
template <class T>
void fuzz_csr(const Decoded& in, const std::vector<T>& values, index_t block_size) {
  std::optional<trnsparse::CsrMatrix<T>> strict;
  try {
    strict.emplace(in.rows, in.cols, in.first, in.second, values, trnsparse::Canonicalize::no);
  } catch (const trnsparse::Error&) {
    check_conversions(trnsparse::CsrMatrix<T>(in.rows, in.cols, in.first, in.second, values,
                                              trnsparse::Canonicalize::yes),
                      block_size);
    return;
  }
  must_not_throw("Canonicalize::yes on a canonical CSR input", [&] {
    const trnsparse::CsrMatrix<T> B(in.rows, in.cols, in.first, in.second, values, trnsparse::Canonicalize::yes);
    require(std::ranges::equal(strict->row_ptr(), B.row_ptr()) &&
                std::ranges::equal(strict->col_indices(), B.col_indices()) &&
                std::ranges::equal(strict->values(), B.values(), same_value<T>),
            "Canonicalize::yes changed a canonical CSR matrix");
  });
  check_conversions(*strict, block_size);
}

template <class T>
void fuzz_coo(const Decoded& in, const std::vector<T>& values, index_t block_size) {
  const trnsparse::CooMatrix<T> A(in.rows, in.cols, in.first, in.second, values);
  trnsparse::CooMatrix<T> canonical = A;
  canonical.canonicalize();
  require(canonical.is_canonical(), "canonicalize() left the COO matrix non-canonical");
  if (!small(A.rows(), A.cols())) return;
  must_not_throw("COO -> CSR of a valid COO matrix", [&] {
    const trnsparse::CsrMatrix<T> C = trnsparse::to_csr(A);
    if (canonical.nnz() == A.nnz())  // no duplicates, so no sums whose rounding order could differ
      require_same(trnsparse::to_dense(C), trnsparse::to_dense(A), "COO -> CSR changed the matrix");
    check_conversions(C, block_size);
  });
}

template <class T>
void fuzz_bsr_structure(const Decoded& in, const std::vector<T>& values, index_t block_size) {
  const auto s = trnsparse::BsrStructure::make(in.rows, in.cols, in.block_size, in.first, in.second);
  const trnsparse::BsrStructure copy(in.rows, in.cols, in.block_size, in.first, in.second);
  require(copy == *s && copy.fingerprint() == s->fingerprint(), "equal structures compare unequal");
  check_conversions(trnsparse::BsrMatrix<T>(s, values), block_size);
}

template <class T>
void fuzz_bsr(const Decoded& in, const std::vector<T>& values, index_t block_size) {
  std::optional<trnsparse::BsrMatrix<T>> strict;
  try {
    strict.emplace(in.rows, in.cols, in.block_size, in.first, in.second, values, trnsparse::Canonicalize::no);
  } catch (const trnsparse::Error&) {
    check_conversions(trnsparse::BsrMatrix<T>(in.rows, in.cols, in.block_size, in.first, in.second, values,
                                              trnsparse::Canonicalize::yes),
                      block_size);
    return;
  }
  must_not_throw("Canonicalize::yes on a canonical BSR input", [&] {
    const trnsparse::BsrMatrix<T> B(in.rows, in.cols, in.block_size, in.first, in.second, values,
                                    trnsparse::Canonicalize::yes);
    require(strict->structure() == B.structure() && std::ranges::equal(strict->blocks(), B.blocks(), same_value<T>),
            "Canonicalize::yes changed a canonical BSR matrix");
  });
  check_conversions(*strict, block_size);
}

template <class T>
void fuzz(int target, Input& input, const Decoded& in) {
  const std::vector<T> values = input.values<T>();
  const index_t block_size = std::clamp<index_t>(in.block_size, 1, 16);  // for conversions to BSR
  switch (target) {
    case 0: fuzz_csr(in, values, block_size); break;
    case 1: fuzz_coo(in, values, block_size); break;
    case 2: fuzz_bsr_structure(in, values, block_size); break;
    default: fuzz_bsr(in, values, block_size); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input input(data, size);
  const auto selector = static_cast<unsigned>(input.unsigned_le(1));
  Decoded in;
  in.rows = input.integer();
  in.cols = input.integer();
  in.block_size = input.integer();
  in.first = input.indices();
  in.second = input.indices();
  try {
    switch ((selector >> 2) & 3u) {
      case 0: fuzz<float>(static_cast<int>(selector & 3u), input, in); break;
      case 1: fuzz<double>(static_cast<int>(selector & 3u), input, in); break;
      default: fuzz<trnsparse::bf16>(static_cast<int>(selector & 3u), input, in); break;
    }
  } catch (const trnsparse::Error&) {
  }
  return 0;
}
