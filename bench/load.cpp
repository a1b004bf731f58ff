// `bench --section load`: small products on a machine that is not idle. A child process
// keeps one core busy, as a second program, a data loader or another job does on a
// laptop, a CI runner or a shared node; each product is timed with the library's
// default thread count and with one thread, side by side, with and without the child.
// The ratio is what a user of the default gets against the safe choice.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common.hpp"
#include "load.hpp"
#include "runtime/parallel.hpp"
#include "trnsparse/attention.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/runtime.hpp"
#include "trnsparse/solvers.hpp"

namespace trnsparse::bench {

namespace {

/// A child process that spins on one core until it is destroyed (or this process dies).
class BusyChild {
public:
  BusyChild() {
    std::fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (;;) asm volatile("" ::: "memory");  // spins; the compiler keeps the loop
    }
    if (pid_ < 0) throw Error("bench --section load: fork failed");
    usleep(100000);  // let the scheduler place it
  }
  ~BusyChild() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  BusyChild(const BusyChild&) = delete;
  BusyChild& operator=(const BusyChild&) = delete;

private:
  pid_t pid_ = -1;
};

struct Op {
  std::string name;
  std::string what;
  std::function<void()> run;
  double per_run = 1.0;  ///< units of the reported time in one run (CG: iterations)
};

}  // namespace

void load_section(const Options& o, const Row& head, const Emit& emit) {
  const int threads = num_threads();
  const index_t n = o.poisson_n;
  // The demo's `--formats` products: the 3D Poisson matrix in CSR (fp64) and in 32 x 32
  // blocks (fp32).
  const CsrMatrix<double> A = poisson3d<double>(n);
  const BsrMatrix<float> A32 = to_bsr(cast<float>(A), 32);
  const std::vector<double> x(static_cast<std::size_t>(A.cols()), 1.0);
  const std::vector<float> x32(static_cast<std::size_t>(A.cols()), 1.0f);
  std::vector<double> y(static_cast<std::size_t>(A.rows()));
  std::vector<float> y32(static_cast<std::size_t>(A.rows()));
  // A small finite-element operator against 8 columns: elasticity, 3 x 3 blocks.
  const BsrMatrix<double> E = to_bsr(elasticity3d<double>(std::max<index_t>(4, n / 3)), 3);
  const Dense<double> X = random_dense<double>(E.cols(), 8, 3);
  Dense<double> Y(E.rows(), 8);
  // A short attention forward: one head of 1024 x 64, a local window of 64-blocks.
  constexpr index_t seq = 1024, dim = 64, block = 64;
  const AttentionMask mask = mask::local_window(seq, block, 1);
  const Dense<float> Q = random_dense<float>(seq, dim, 4), K = random_dense<float>(seq, dim, 5),
                     V = random_dense<float>(seq, dim, 6);
  Dense<float> O(seq, dim);
  std::vector<float> lse(static_cast<std::size_t>(seq));
  // CG with Jacobi on the Poisson matrix: a fixed number of iterations (tol 0).
  constexpr index_t iterations = 20;
  const std::vector<double> M = jacobi_preconditioner(A);
  const LinearOperator<double> op(A);

  const std::vector<Op> ops = {
      {"spmv_csr_fp64", "poisson3d:" + std::to_string(n), [&] { spmv(1.0, A, std::span(x), 0.0, std::span(y)); }},
      {"spmv_bsr32_fp32", "poisson3d:" + std::to_string(n),
       [&] { spmv(1.0f, A32, std::span(x32), 0.0f, std::span(y32)); }},
      {"spmm_bsr3_fp64_w8", "elasticity3d:" + std::to_string(std::max<index_t>(4, n / 3)),
       [&] { spmm(1.0, E, X.view(), 0.0, Y.view()); }},
      {"attention_fwd_fp32", "local window, L 1024, d 64",
       [&] { attention_forward<float>(mask, Q.view(), K.view(), V.view(), O.view(), lse); }},
      {"cg_iteration_fp64", "poisson3d:" + std::to_string(n) + ", Jacobi",
       [&] { (void)cg(op, std::span(x), {.tol = 0.0, .max_iter = iterations, .preconditioner = M}); },
       static_cast<double>(iterations)},
  };

  for (const bool busy : {false, true}) {
    std::unique_ptr<BusyChild> child;
    if (busy) child = std::make_unique<BusyChild>();
    for (const Op& op_ : ops) {
      const auto with = [&](int t) {
        return [&op_, t] {
          set_num_threads(t);
          op_.run();
        };
      };
      const detail::TeamStats before = detail::team_stats();
      const auto [many, one] = paired_median_ms(o.reps, 5, with(threads), with(1));
      const detail::TeamStats after = detail::team_stats();
      set_num_threads(threads);
      Row row = head;
      row.insert(row.end(), {{"op", str(op_.name)},
                             {"problem", str(op_.what)},
                             {"busy_process", busy ? "true" : "false"},
                             {"ms", num(many / op_.per_run)},
                             {"one_thread_ms", num(one / op_.per_run)},
                             {"ratio_vs_one_thread", num(many / one)},
                             {"teams", num(static_cast<double>(after.teams - before.teams))},
                             {"teams_alone", num(static_cast<double>(after.alone - before.alone))},
                             {"stalls", num(static_cast<double>(after.stalls - before.stalls))}});
      emit(row);
    }
  }
}

}  // namespace trnsparse::bench
