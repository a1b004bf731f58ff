// The format advisor: estimate_fill (exact on every block row, close on a sample, the
// same for a seed); advise on hand-built calibrations (its predictions, exclusions and
// choice, with no timing); the calibration's text form and cache file; measure_product_ms.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"
#include "trnsparse/advisor.hpp"

namespace trnsparse::test {
namespace {

namespace fs = std::filesystem;

double exact_fill(const CsrMatrix<double>& A, index_t b) {
  const auto B = to_bsr(A, b);
  return A.nnz() == 0 ? 1.0
                      : static_cast<double>(B.n_blocks()) * static_cast<double>(b * b) / static_cast<double>(A.nnz());
}

TEST(Advisor, FillIsExactOverEveryBlockRow) {
  const CsrMatrix<double> poisson = poisson3d<double>(9), random = random_csr<double>(101, 77, 0.05, 3);
  for (index_t b : {1, 2, 3, 4, 5, 8, 16, 128}) {
    SCOPED_TRACE("block " + std::to_string(b));
    EXPECT_DOUBLE_EQ(estimate_fill(poisson, b), exact_fill(poisson, b));
    EXPECT_DOUBLE_EQ(estimate_fill(random, b), exact_fill(random, b));
  }
  EXPECT_DOUBLE_EQ(estimate_fill(elasticity3d<double>(3), 3), 1.0);  // natural 3 x 3 blocks
  EXPECT_DOUBLE_EQ(estimate_fill(block_stencil3d<double>(4), 5), 1.0);
  EXPECT_DOUBLE_EQ(estimate_fill(CsrMatrix<double>(10, 10), 4), 1.0);
}

TEST(Advisor, SampledFillIsCloseAndReproducible) {
  const CsrMatrix<double> A = poisson3d<double>(24);
  for (index_t b : {2, 4, 8}) {
    SCOPED_TRACE("block " + std::to_string(b));
    const double exact = exact_fill(A, b), sampled = estimate_fill(A, b, 0.1, 7);
    EXPECT_NEAR(sampled, exact, 0.1 * exact);
    EXPECT_EQ(sampled, estimate_fill(A, b, 0.1, 7));
  }
  // A sample too small to hold a block row falls back to the first one with entries.
  EXPECT_GT(estimate_fill(A, 4, 1e-9, 1), 1.0);
  EXPECT_THROW(estimate_fill(A, 0), InvalidArgument);
  EXPECT_THROW(estimate_fill(A, 4, 0.0), InvalidArgument);
  EXPECT_THROW(estimate_fill(A, 4, 1.5), InvalidArgument);
}

// ---- advise with a fake calibration ------------------------------------------------------
//
// The advice is a pure function of the matrix and the calibration, so a hand-built
// calibration makes every prediction, exclusion and choice checkable without timing.

using Speed = Calibration::Speed;

/// A calibration for "test machine" covering (dtype, width), each block size at speed(b).
template <class F>
Calibration fake_calibration(std::string_view dtype, index_t width, F speed) {
  Calibration c("test machine");
  for (const index_t b : Calibration::block_sizes) c.set(dtype, width, b, speed(b));
  return c;
}

/// Per entry cheaper with larger blocks, per row dearer: neither term dominates.
Speed graded_speed(index_t b) { return {0.25 + 0.75 / static_cast<double>(b), 2.0 + static_cast<double>(b)}; }

std::vector<index_t> candidate_sizes(const Advice& a) {
  std::vector<index_t> sizes;
  for (const Candidate& c : a.candidates) sizes.push_back(c.block_size);
  return sizes;
}

/// The advice's choice is one of its candidates, with no candidate predicted faster, and
/// its speedup is CSR's prediction over the choice's.
void expect_consistent_choice(const Advice& a) {
  ASSERT_FALSE(a.candidates.empty());
  EXPECT_EQ(a.candidates.front().format, Format::csr);
  EXPECT_EQ(a.candidates.front().block_size, 1);
  EXPECT_EQ(a.format == Format::csr, a.block_size == 1);
  const auto chosen = std::ranges::find_if(
      a.candidates, [&](const Candidate& c) { return c.format == a.format && c.block_size == a.block_size; });
  ASSERT_NE(chosen, a.candidates.end()) << "the choice is not a candidate";
  for (const Candidate& c : a.candidates) EXPECT_LE(chosen->predicted_ms, c.predicted_ms) << "block " << c.block_size;
  if (chosen->predicted_ms > 0.0)
    EXPECT_EQ(a.predicted_speedup_vs_csr, a.candidates.front().predicted_ms / chosen->predicted_ms);
  else
    EXPECT_EQ(a.predicted_speedup_vs_csr, 1.0);
}

TEST(Advise, PredictsStoredEntriesAndRowsAtTheCalibratedSpeeds) {
  // A random matrix of 101 rows (ceil(rows / b) rounds up for every b > 1; its fill
  // passes 16 from b = 6 on) and a mesh-like one whose every block size is a candidate.
  // Both are small enough that every block row is sampled: each fill is estimate_fill's
  // exact one.
  const Calibration cal = fake_calibration("fp32", 4, graded_speed);
  for (const CsrMatrix<float>& A : {random_csr<float>(101, 77, 0.05, 3), elasticity3d<float>(3)}) {
    SCOPED_TRACE(std::to_string(A.rows()) + " x " + std::to_string(A.cols()));
    const Advice a = advise(A, {.width = 4}, cal);
    const double nnz = static_cast<double>(A.nnz());
    // Every block size up to the larger dimension whose stored entries stay within 16 x nnz.
    std::vector<index_t> expected{1};
    for (const index_t b : Calibration::block_sizes)
      if (b > 1 && b <= std::max(A.rows(), A.cols()) && estimate_fill(A, b) <= 16.0) expected.push_back(b);
    EXPECT_EQ(candidate_sizes(a), expected);
    for (const Candidate& c : a.candidates) {
      SCOPED_TRACE("block " + std::to_string(c.block_size));
      EXPECT_EQ(c.format, c.block_size == 1 ? Format::csr : Format::bsr);
      EXPECT_EQ(c.fill, c.block_size == 1 ? 1.0 : estimate_fill(A, c.block_size));
      const Speed s = graded_speed(c.block_size);
      const double rows = static_cast<double>(ceil_div(A.rows(), c.block_size));
      // The documented formula; DOUBLE_EQ (4 ulps) in case the library's build contracts
      // it into fused multiply-adds and this one does not.
      EXPECT_DOUBLE_EQ(c.predicted_ms, (c.fill * nnz * s.ns_per_entry + rows * s.ns_per_row) * 1e-6);
    }
    expect_consistent_choice(a);
  }
  EXPECT_EQ(candidate_sizes(advise(elasticity3d<float>(3), {.width = 4}, cal)).size(),
            std::size(Calibration::block_sizes));
}

// A calibration measured with 2 threads timed CSR on its in-cache matrix (2^18 entries)
// with both; a product of 101 rows runs on one (parts_for), so it is priced twice as
// slow. The advice stays a function of the matrix and the calibration alone.
TEST(Advise, PricesASmallProductAtTheThreadsItGets) {
  const CsrMatrix<float> A = random_csr<float>(101, 77, 0.05, 3);
  const Calibration one = fake_calibration("fp32", 1, graded_speed);  // its machine names no threads: 1
  Calibration two("cpu; isa avx512; threads 2; trnsparse 0.0.0");
  for (const index_t b : Calibration::block_sizes) two.set("fp32", 1, b, graded_speed(b));
  const Candidate csr_one = advise(A, {.width = 1}, one).candidates.front();
  const Candidate csr_two = advise(A, {.width = 1}, two).candidates.front();
  ASSERT_EQ(csr_two.format, Format::csr);
  EXPECT_DOUBLE_EQ(csr_two.predicted_ms, 2.0 * csr_one.predicted_ms);
}

TEST(Advise, PicksTheBlockSizeTheCalibrationFavours) {
  // elasticity3d's natural 3 x 3 blocks are full: BSR-3 stores exactly A's entries.
  const CsrMatrix<float> A = elasticity3d<float>(3);
  ASSERT_EQ(estimate_fill(A, 3), 1.0);
  // No row term, so the per-entry prices alone decide.
  const Advice bsr3 = advise(A, {.width = 1}, fake_calibration("fp32", 1, [](index_t b) {
                               return Speed{b == 3 ? 0.5 : 2.0, 0.0};
                             }));
  EXPECT_EQ(bsr3.format, Format::bsr);
  EXPECT_EQ(bsr3.block_size, 3);
  expect_consistent_choice(bsr3);
  // CSR at 2 ns per entry, BSR-3 at 0.5 on the same entries: 4 x, up to the rounding of
  // the two products by 1e-6.
  EXPECT_DOUBLE_EQ(bsr3.predicted_speedup_vs_csr, 4.0);

  const Advice csr = advise(A, {.width = 1}, fake_calibration("fp32", 1, [](index_t b) {
                              return Speed{b == 1 ? 0.5 : 2.0, 0.0};
                            }));
  EXPECT_EQ(csr.format, Format::csr);
  EXPECT_EQ(csr.block_size, 1);
  EXPECT_EQ(csr.predicted_speedup_vs_csr, 1.0);
  expect_consistent_choice(csr);
}

TEST(Advise, LeavesOutBlockSizesStoringOver16TimesTheEntries) {
  // The 256 x 256 identity in b x b blocks stores b elements per entry: b = 16 is at the
  // limit (kept), 32, 64 and 128 beyond it.
  std::vector<index_t> ptr, idx;
  for (index_t i = 0; i <= 256; ++i) ptr.push_back(i);
  for (index_t i = 0; i < 256; ++i) idx.push_back(i);
  const CsrMatrix<double> I(256, 256, ptr, idx, std::vector<double>(256, 1.0));
  // BSR-128 priced as free: it still cannot be chosen.
  const Advice a = advise(I, {.width = 2}, fake_calibration("fp64", 2, [](index_t b) {
                            return Speed{b == 128 ? 1e-9 : 1.0, 0.0};
                          }));
  EXPECT_EQ(candidate_sizes(a), (std::vector<index_t>{1, 2, 3, 4, 5, 6, 8, 16}));
  for (const Candidate& c : a.candidates)
    if (c.block_size != 3 && c.block_size != 5 && c.block_size != 6)  // 256 % b != 0: edge blocks cut
      EXPECT_EQ(c.fill, static_cast<double>(c.block_size));
  EXPECT_EQ(a.format, Format::csr);  // equal per-entry prices: CSR stores the fewest
  expect_consistent_choice(a);
}

TEST(Advise, LeavesOutBlocksLargerThanTheMatrix) {
  // 5 x 3 and full: block sizes above 5 exceed both dimensions.
  const CsrMatrix<float> A = random_csr<float>(5, 3, 1.0, 1);
  ASSERT_EQ(A.nnz(), 15);
  const Advice a = advise(A, {}, fake_calibration("fp32", 1, graded_speed));
  EXPECT_EQ(candidate_sizes(a), (std::vector<index_t>{1, 2, 3, 4, 5}));
  expect_consistent_choice(a);
  // 3 x 5 likewise: the larger dimension counts, whichever it is.
  EXPECT_EQ(candidate_sizes(advise(random_csr<float>(3, 5, 1.0, 1), {}, fake_calibration("fp32", 1, graded_speed))),
            (std::vector<index_t>{1, 2, 3, 4, 5}));
}

TEST(Advise, EmptyMatrices) {
  const Calibration cal = fake_calibration("fp32", 1, graded_speed);
  // No entries: every fill is 1 and only the row terms remain.
  const Advice a = advise(CsrMatrix<float>(10, 10), {}, cal);
  EXPECT_EQ(candidate_sizes(a), (std::vector<index_t>{1, 2, 3, 4, 5, 6, 8}));
  for (const Candidate& c : a.candidates) {
    EXPECT_EQ(c.fill, 1.0);
    EXPECT_DOUBLE_EQ(c.predicted_ms,
                     static_cast<double>(ceil_div(10, c.block_size)) * graded_speed(c.block_size).ns_per_row * 1e-6);
  }
  expect_consistent_choice(a);
  // No rows either: CSR alone, predicted free, no speedup.
  const Advice none = advise(CsrMatrix<float>(0, 0), {}, cal);
  ASSERT_EQ(none.candidates.size(), 1u);
  EXPECT_EQ(none.candidates[0].predicted_ms, 0.0);
  EXPECT_EQ(none.format, Format::csr);
  EXPECT_EQ(none.predicted_speedup_vs_csr, 1.0);
}

TEST(Advise, RejectsWidthZeroAndUncoveredCalibrations) {
  const CsrMatrix<float> A = poisson3d<float>(3);
  const Calibration cal = fake_calibration("fp32", 1, graded_speed);
  EXPECT_THAT([&] { advise(A, {.width = 0}, cal); }, throws_naming<InvalidArgument>("width = 0"));
  EXPECT_THAT([&] { advise(A, {.width = 8}, cal); }, throws_naming<InvalidArgument>("fp32", "width 8"));
  EXPECT_THAT([&] { advise(poisson3d<double>(3), {}, cal); }, throws_naming<InvalidArgument>("fp64", "width 1"));
  EXPECT_THAT([&] { advise(poisson3d<bf16>(3), {}, cal); }, throws_naming<InvalidArgument>("bf16", "width 1"));
  // Every block size is needed: one missing leaves the calibration short.
  Calibration partial("test machine");
  for (const index_t b : Calibration::block_sizes)
    if (b != 128) partial.set("fp32", 1, b, graded_speed(b));
  EXPECT_FALSE(partial.covers("fp32", 1));
  EXPECT_THAT([&] { advise(A, {}, partial); }, throws_naming<InvalidArgument>("fp32", "width 1"));
}

TEST(Advise, SameInputsSameAdvice) {
  // 13824 rows: the smaller block sizes sample their block rows (about 4096 of them).
  const CsrMatrix<float> A = poisson3d<float>(24);
  const Calibration cal = fake_calibration("fp32", 16, graded_speed);
  const Advice a = advise(A, {.width = 16}, cal), b = advise(A, {.width = 16}, cal);
  ASSERT_EQ(candidate_sizes(a), candidate_sizes(b));
  for (std::size_t i = 0; i < a.candidates.size(); ++i) {
    EXPECT_EQ(a.candidates[i].fill, b.candidates[i].fill);
    EXPECT_EQ(a.candidates[i].predicted_ms, b.candidates[i].predicted_ms);
  }
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.block_size, b.block_size);
  EXPECT_EQ(a.predicted_speedup_vs_csr, b.predicted_speedup_vs_csr);
  expect_consistent_choice(a);
}

// ---- the calibration's text form ---------------------------------------------------------

/// A calibration with awkward doubles (no short decimal form, tiny, huge, a zero row
/// term) at several keys.
Calibration awkward_calibration() {
  Calibration c("test machine");
  for (const index_t b : Calibration::block_sizes) {
    c.set("fp32", 1, b, {1.0 / 3.0 + static_cast<double>(b), 0.1 * static_cast<double>(b)});
    c.set("bf16", 64, b, {std::nextafter(1.0, 2.0) * static_cast<double>(b), 0.0});
  }
  c.set("fp64", 3, 2, {1e-300, 1.7976931348623157e308});
  return c;
}

TEST(Calibration, TextRoundTripsExactly) {
  const Calibration c = awkward_calibration();
  std::string why = "stale";
  const Calibration back = Calibration::parse(c.serialize(), "test machine", &why);
  EXPECT_EQ(why, "");  // success clears it
  EXPECT_EQ(back.machine(), "test machine");
  EXPECT_TRUE(back.covers("fp32", 1));
  EXPECT_TRUE(back.covers("bf16", 64));
  EXPECT_FALSE(back.covers("fp64", 3));  // one block size only
  for (const auto& [dtype, width] : {std::pair<std::string, index_t>{"fp32", 1}, {"bf16", 64}, {"fp64", 3}})
    for (const index_t b : Calibration::block_sizes) {
      const Speed* want = c.find(dtype, width, b);
      const Speed* got = back.find(dtype, width, b);
      ASSERT_EQ(got == nullptr, want == nullptr) << dtype << " " << width << " " << b;
      if (!want) continue;
      EXPECT_EQ(got->ns_per_entry, want->ns_per_entry);
      EXPECT_EQ(got->ns_per_row, want->ns_per_row);
      EXPECT_EQ(got->ns_per_entry_cached, want->ns_per_entry_cached);
    }
  EXPECT_EQ(back.serialize(), c.serialize());
  // An empty calibration round-trips too.
  EXPECT_EQ(Calibration::parse(Calibration("m").serialize(), "m", &why).serialize(), Calibration("m").serialize());
  EXPECT_EQ(why, "");
}

// The time per entry runs from the cached speed (a matrix of kCachedBytes or fewer) to
// the streamed one (kLargeBytes or more), linearly in log2(bytes); a zero cached speed
// means the streamed one at every size.
TEST(Calibration, TimePerEntryRunsFromCachedToStreamedOnALogScale) {
  const Speed s{2.0, 5.0, 1.0};
  EXPECT_EQ(s.per_entry(1.0), 1.0);
  EXPECT_EQ(s.per_entry(Calibration::kCachedBytes), 1.0);
  EXPECT_EQ(s.per_entry(Calibration::kLargeBytes), 2.0);
  EXPECT_EQ(s.per_entry(1e12), 2.0);
  // 2^24 and 2^23 lie 1/2 and 1/4 of the way from 2^22 to 2^26 on the log scale.
  static_assert(Calibration::kCachedBytes == 0x1p22 && Calibration::kLargeBytes == 0x1p26);
  EXPECT_DOUBLE_EQ(s.per_entry(std::ldexp(1.0, 24)), 1.5);
  EXPECT_DOUBLE_EQ(s.per_entry(std::ldexp(1.0, 23)), 1.25);
  const Speed streamed_only{2.0, 5.0};
  EXPECT_EQ(streamed_only.per_entry(1.0), 2.0);
  EXPECT_EQ(streamed_only.per_entry(std::ldexp(1.0, 23)), 2.0);
  // The same entries, priced by their bytes: 1 M bf16 CSR entries (6 bytes each with
  // 32-bit indices: 6 MiB) lie nearer the cached speed than as many fp64 ones (12 MiB).
  Calibration g("m");
  for (const char* dtype : {"bf16", "fp64"})
    for (const index_t b : Calibration::block_sizes) g.set(dtype, 1, b, {2.0, 0.0, 1.0});
  const CsrMatrix<double> big = random_csr<double>(1 << 14, 1 << 14, 0x1p-8, 3);
  EXPECT_LT(advise(cast<bf16>(big), {.width = 1}, g).candidates.front().predicted_ms,
            advise(big, {.width = 1}, g).candidates.front().predicted_ms);
  // advise prices a candidate's stored entries at the time per entry of its own size.
  Calibration c("m");
  for (const index_t b : Calibration::block_sizes) c.set("fp64", 1, b, {4.0, 0.0, 1.0});
  const CsrMatrix<double> A = poisson3d<double>(4);  // 352 entries: priced as cached
  const Advice a = advise(A, {.width = 1}, c);
  EXPECT_DOUBLE_EQ(a.candidates.front().predicted_ms, static_cast<double>(A.nnz()) * 1.0 * 1e-6);
  // The cached speed round-trips through the text form.
  std::string why;
  const Calibration back = Calibration::parse(c.serialize(), "m", &why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(back.find("fp64", 1, 3)->ns_per_entry_cached, 1.0);
}

TEST(Calibration, RejectsAnotherVersionMachineOrATruncatedText) {
  const std::string text = fake_calibration("fp32", 1, graded_speed).serialize();
  const auto rejected = [](const char* what, const std::string& bad, const std::string& machine,
                           const std::string& reason) {
    SCOPED_TRACE(what);
    std::string why;
    const Calibration c = Calibration::parse(bad, machine, &why);
    EXPECT_THAT(why, ::testing::HasSubstr(reason));
    EXPECT_EQ(c.machine(), machine);
    EXPECT_FALSE(c.covers("fp32", 1));
    EXPECT_EQ(c.find("fp32", 1, 1), nullptr);
    // Without a place for the reason, the result is the same.
    EXPECT_EQ(Calibration::parse(bad, machine).serialize(), Calibration(machine).serialize());
  };
  rejected("another version", "trnsparse-calibration 999" + text.substr(text.find('\n')), "test machine", "version");
  rejected("another file", "trnsparse-calibrations" + text.substr(text.find('\n')), "test machine", "version");
  rejected("empty", "", "test machine", "version");
  rejected("another machine", text, "another test machine", "the CPU changed (test machine -> another test machine)");
  rejected("no end line", text.substr(0, text.rfind("end\n")), "test machine", "truncated");
  rejected("the header alone", text.substr(0, text.find('\n') + 1), "test machine", "truncated");
}

// A re-measure names what changed, part by part of this_machine()'s line.
TEST(Calibration, NamesWhatChangedSinceTheCachedOne) {
  Calibration cached("cpu X; isa avx2; threads 1; trnsparse 1.2.3");
  cached.set("fp32", 1, 1, {1.0, 0.0, 0.0});
  std::string why;
  (void)Calibration::parse(cached.serialize(), "cpu X; isa avx512; threads 2; trnsparse 1.2.3", &why);
  EXPECT_EQ(why, "the instruction set changed (isa avx2 -> isa avx512); the thread count changed (threads 1 -> threads 2)");
  (void)Calibration::parse(cached.serialize(), "cpu X; isa avx2; threads 1; trnsparse 1.3.0", &why);
  EXPECT_EQ(why, "the library version changed (trnsparse 1.2.3 -> trnsparse 1.3.0)");
}

TEST(Calibration, RejectsMalformedLinesNamingThem) {
  const std::string text = fake_calibration("fp32", 1, graded_speed).serialize();
  // Line 4 (after the header, the machine line and block size 1) is a good line for
  // block size 2; the bad lines are made from its fields, so they stay bad whatever
  // speeds a line carries after its first two.
  std::size_t at = 0;
  for (int line = 0; line < 3; ++line) at = text.find('\n', at) + 1;
  std::vector<std::string> good;
  std::istringstream line4(text.substr(at, text.find('\n', at) - at));
  for (std::string field; line4 >> field;) good.push_back(field);
  ASSERT_GE(good.size(), 5u);
  ASSERT_EQ(good[2], "2");
  const auto with = [&](std::size_t i, const std::string& value) {
    std::vector<std::string> fields = good;
    if (i == fields.size()) fields.push_back(value);
    else if (value.empty()) fields.erase(fields.begin() + static_cast<std::ptrdiff_t>(i));
    else fields[i] = value;
    std::string joined;
    for (const std::string& f : fields) joined += (joined.empty() ? "" : " ") + f;
    return joined;
  };
  const std::size_t last = good.size() - 1;
  at = text.find('\n', at) + 1;  // insert as line 5
  for (const std::string& bad :
       {with(0, "fp16"), with(1, "0"), with(1, "-1"), with(1, "x"), with(2, "7"), with(2, "256"), with(3, "abc"),
        with(3, "-1"), with(3, "0"), with(3, "nan"), with(3, "inf"), with(4, "-0.5"), with(4, "inf"),
        with(last, "-1"), with(last, "nan"), with(last, ""), with(last + 1, "9"), std::string(),
        std::string("end of it")}) {
    SCOPED_TRACE("line \"" + bad + "\"");
    std::string why;
    const Calibration c = Calibration::parse(text.substr(0, at) + bad + "\n" + text.substr(at), "test machine", &why);
    EXPECT_THAT(why, ::testing::HasSubstr("malformed line 5"));
    // Nothing is kept, not even the good lines before it.
    EXPECT_EQ(c.find("fp32", 1, 1), nullptr);
    EXPECT_FALSE(c.covers("fp32", 1));
  }
  // The good line itself, there, is accepted.
  std::string why;
  EXPECT_TRUE(Calibration::parse(text.substr(0, at) + with(2, "2") + "\n" + text.substr(at), "test machine", &why)
                  .covers("fp32", 1));
  EXPECT_EQ(why, "");
}

// ---- the calibration file ----------------------------------------------------------------

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

TEST(Calibration, LoadsACoveringCacheWithoutMeasuring) {
  const TempDir dir("trnsparse_test_advisor_");
  const fs::path file = dir.path() / "calibration.txt";
  Calibration c(Calibration::this_machine());
  for (const index_t b : Calibration::block_sizes) c.set("fp64", 3, b, graded_speed(b));
  c.set("fp32", 1, 2, {9.0, 9.0});  // other (dtype, width) lines are carried along
  write_text(file, c.serialize());
  std::string status;
  int progress_calls = 0;
  const Calibration got =
      load_calibration("fp64", 3, file, false, &status, [&](int, int) { ++progress_calls; });
  EXPECT_EQ(status, "cached");
  EXPECT_EQ(progress_calls, 0);
  EXPECT_EQ(got.machine(), Calibration::this_machine());
  EXPECT_TRUE(got.covers("fp64", 3));
  for (const index_t b : Calibration::block_sizes) {
    ASSERT_NE(got.find("fp64", 3, b), nullptr);
    EXPECT_EQ(got.find("fp64", 3, b)->ns_per_entry, graded_speed(b).ns_per_entry);
    EXPECT_EQ(got.find("fp64", 3, b)->ns_per_row, graded_speed(b).ns_per_row);
  }
  EXPECT_EQ(read_text(file), c.serialize());  // a cache that serves is not rewritten
  // The advice on the loaded calibration is the advice on the one written.
  const CsrMatrix<double> A = elasticity3d<double>(2);
  EXPECT_EQ(advise(A, {.width = 3}, got).block_size, advise(A, {.width = 3}, c).block_size);
}

/// The one test that measures (about a second): a missing cache is measured, saved with
/// its directory, and then served. No speed is checked beyond being a valid one.
TEST(Calibration, MeasuresAndSavesAMissingCache) {
  // Cached even when the host is busy (the tests run side by side, or beside a build),
  // as ctest's environment already asks: this test is about measuring and saving.
  EnvGuard env;
  env.set("TRNSPARSE_CALIBRATE_UNDER_LOAD", "1");
  const TempDir dir("trnsparse_test_advisor_");
  const fs::path file = dir.path() / "new" / "calibration.txt";
  std::string status;
  std::vector<std::pair<int, int>> progress;
  const Calibration got = load_calibration("fp32", 1, file, false, &status,
                                           [&](int done, int total) { progress.emplace_back(done, total); });
  EXPECT_THAT(status, ::testing::StartsWith("measured: "));
  EXPECT_THAT(status, ::testing::HasSubstr(file.string()));
  // Once, or twice when the first measurement was unsettled (the tests run side by side).
  const int total = static_cast<int>(std::size(Calibration::block_sizes));
  ASSERT_TRUE(progress.size() == static_cast<std::size_t>(total) || progress.size() == 2u * static_cast<std::size_t>(total))
      << progress.size();
  for (std::size_t i = 0; i < progress.size(); ++i)
    EXPECT_EQ(progress[i], std::make_pair(static_cast<int>(i) % total + 1, total));
  ASSERT_TRUE(got.covers("fp32", 1));
  for (const index_t b : Calibration::block_sizes) {
    EXPECT_GT(got.find("fp32", 1, b)->ns_per_entry, 0.0) << b;
    EXPECT_GE(got.find("fp32", 1, b)->ns_per_row, 0.0) << b;
  }
  // Written whole (no temporary left beside it), and it parses back to the same speeds.
  EXPECT_EQ(std::distance(fs::directory_iterator(file.parent_path()), fs::directory_iterator()), 1);
  std::string why = "unset";
  const Calibration saved = Calibration::parse(read_text(file), Calibration::this_machine(), &why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(saved.serialize(), got.serialize());
  // The second load is served from the file.
  EXPECT_EQ(load_calibration("fp32", 1, file, false, &status).serialize(), got.serialize());
  EXPECT_EQ(status, "cached");
}

// With another process keeping a core busy, the speeds are measured (twice) and used but
// not cached, and the status says why and what to run.
TEST(Calibration, RefusesToCacheSpeedsTakenUnderLoad) {
  EnvGuard env;
  env.set("TRNSPARSE_CALIBRATE_UNDER_LOAD", nullptr);
  const TempDir dir("trnsparse_test_advisor_");
  const fs::path file = dir.path() / "calibration.txt";
  std::fflush(nullptr);
  const pid_t busy = fork();
  ASSERT_GE(busy, 0);
  if (busy == 0)
    for (;;) asm volatile("" ::: "memory");  // spins until killed
  std::string status;
  const Calibration got = load_calibration("fp64", 1, file, false, &status);
  kill(busy, SIGKILL);
  waitpid(busy, nullptr, 0);
  EXPECT_THAT(status, ::testing::StartsWith("measured under load, not cached (other processes used "));
  EXPECT_THAT(status, ::testing::HasSubstr("--recalibrate"));
  EXPECT_FALSE(got.unsettled().empty());
  EXPECT_TRUE(got.covers("fp64", 1));  // used all the same
  EXPECT_FALSE(fs::exists(file));
}

TEST(Calibration, DefaultPathFollowsXdgCacheHomeThenHome) {
  EnvGuard env;
  env.set("HOME", "/home/tester");
  env.set("XDG_CACHE_HOME", "/var/cache/tester");
  EXPECT_EQ(Calibration::default_path(), fs::path("/var/cache/tester/trnsparse/calibration.txt"));
  // The XDG base directory specification ignores a relative or empty XDG_CACHE_HOME.
  for (const char* xdg : {"relative/cache", "", static_cast<const char*>(nullptr)}) {
    env.set("XDG_CACHE_HOME", xdg);
    EXPECT_EQ(Calibration::default_path(), fs::path("/home/tester/.cache/trnsparse/calibration.txt"))
        << (xdg ? xdg : "unset");
  }
  env.set("HOME", "");
  EXPECT_EQ(Calibration::default_path(), fs::path());
  env.set("HOME", nullptr);
  EXPECT_EQ(Calibration::default_path(), fs::path());
}

// ---- measure_product_ms ------------------------------------------------------------------

TEST(MeasureProduct, RejectsBadArgumentsAndTimesATinyProduct) {
  const CsrMatrix<float> A = poisson3d<float>(3);
  EXPECT_THAT([&] { measure_product_ms(A, Format::csr, 1, {.width = 0}); }, throws_naming<InvalidArgument>("width"));
  EXPECT_THAT([&] { measure_product_ms(A, Format::csr, 1, {.width = 1}, 0); }, throws_naming<InvalidArgument>("reps"));
  EXPECT_THROW(measure_product_ms(A, Format::bsr, 0, {.width = 1}), InvalidArgument);
  EXPECT_THROW(measure_product_ms(A, Format::bsr, -3, {.width = 1}), InvalidArgument);
  // A time only, no bound on it: positive for every format and type.
  EXPECT_GT(measure_product_ms(A, Format::csr, 1, {.width = 1}, 1), 0.0);
  EXPECT_GT(measure_product_ms(A, Format::bsr, 2, {.width = 3}, 2), 0.0);
  EXPECT_GT(measure_product_ms(poisson3d<bf16>(3), Format::bsr, 4, {.width = 2}), 0.0);
  EXPECT_GT(measure_product_ms(poisson3d<double>(3), Format::csr, 1, {.width = 5}), 0.0);
}

}  // namespace
}  // namespace trnsparse::test
