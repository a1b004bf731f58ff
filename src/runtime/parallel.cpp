// The thread pool behind run_team (runtime/parallel.hpp).
//
// One team at a time: a caller that finds the pool taken (another thread's team, or a
// team it is part of) runs its pass alone. Workers are created on first use, one per
// thread beyond the caller, and never exit. Between teams a worker spins for kSpin, so
// that the passes of a solver iteration or a training step find it awake, then sleeps
// on a futex of its own, which only a team that has a place for it rings. A team is opened by bumping `epoch_`; a worker joins it with one
// compare-exchange on `state_` while it is open and leaves by decrementing its count.
// The caller closes the team once its own fn returns (every unit is then taken) and waits
// for the workers that joined: first spinning, then yielding its core, since a worker
// it waits for may share that core.
#include "runtime/parallel.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <cstdint>
#include <mutex>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

namespace trnsparse::detail {

namespace {

using Clock = std::chrono::steady_clock;

/// How long an idle worker polls for the next team before it sleeps: longer than the gap
/// between the passes of a solver iteration, short enough that a process waiting for
/// this core loses little to it.
constexpr auto kSpin = std::chrono::microseconds(200);
/// How long the caller polls for the workers of its team before it yields its core.
constexpr auto kCallerSpin = std::chrono::microseconds(20);
/// A caller that waited for its workers longer than kStall and than half its own share
/// met a worker taken off its core (another process wants it): the next teams run on the
/// caller alone for a while, kBackoffMin at first, doubling while it recurs up to
/// kBackoffMax. A product then costs at most its one-thread time plus one stall per
/// backoff period, where a busy core would otherwise stall most teams. A large product
/// keeps its threads: its normal wait is far below half its share.
constexpr auto kStall = std::chrono::microseconds(100);
constexpr auto kBackoffMin = std::chrono::milliseconds(4);
constexpr auto kBackoffMax = std::chrono::milliseconds(256);

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_one(std::atomic<std::uint32_t>* word) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

/// A worker's own place to sleep: a team rings the bells of the slots it uses, so a
/// team of 2 on a machine of 64 threads wakes one worker, not 63.
struct alignas(64) Bell {
  std::atomic<std::uint32_t> rings{0};
  std::atomic<bool> asleep{false};
};

/// True on a thread that is running inside a team (a worker, or a caller during its
/// team): a pass started there runs alone.
thread_local bool t_in_team = false;
/// True on the thread whose fork() locked the pool's mutex (atfork prepare).
thread_local bool t_fork_locked = false;

/// Runs fn(ctx, slot) with t_in_team set, returning what it threw (nothing: null).
std::exception_ptr run_in_team(void (*fn)(void*, int), void* ctx, int slot) noexcept {
  const bool outer = t_in_team;
  t_in_team = true;
  std::exception_ptr error;
  try {
    fn(ctx, slot);
  } catch (...) {
    error = std::current_exception();
  }
  t_in_team = outer;
  return error;
}

/// Runs fn(ctx, 0) on the calling thread alone.
void run_alone(void (*fn)(void*, int), void* ctx) {
  if (const std::exception_ptr error = run_in_team(fn, ctx, 0)) std::rethrow_exception(error);
}

class Pool {
public:
  /// Runs a team; see run_team.
  void run(int parts, void (*fn)(void*, int), void* ctx) {
    stats_.teams.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock lock(mutex_, std::try_to_lock);
    const auto start = Clock::now();
    if (!lock.owns_lock() || start < alone_until_) {  // another thread's team, or a backoff
      stats_.alone.fetch_add(1, std::memory_order_relaxed);
      return run_alone(fn, ctx);
    }
    parts = std::min(parts, kMaxParts);
    grow(parts - 1);
    fn_ = fn;
    ctx_ = ctx;
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    const std::uint32_t epoch = epoch_.load(std::memory_order_relaxed) + 1;
    state_.store(std::uint64_t{epoch} << kEpochShift | kOpen | std::uint64_t(parts) << kPartsShift,
                 std::memory_order_release);
    epoch_.store(epoch, std::memory_order_seq_cst);
    // The worker sets `asleep`, then reads the epoch; this bumped the epoch, then reads
    // `asleep` (both sequentially consistent): one of the two sees the other.
    ring(parts);
    const std::exception_ptr own_error = run_in_team(fn, ctx, 0);
    // Closed: no worker joins now. Wait for those that did (each is in a unit it took).
    std::uint64_t s = state_.fetch_and(~kOpen, std::memory_order_acq_rel) & ~kOpen;
    const auto own_done = Clock::now();
    const auto rethrow = [&] {
      if (own_error) std::rethrow_exception(own_error);
      if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    };
    if ((s & kActiveMask) == 0) return rethrow();
    const auto spin_until = own_done + kCallerSpin;
    for (unsigned i = 0; (s & kActiveMask) != 0; ++i) {
      if (i % 64 != 63 || Clock::now() < spin_until) cpu_relax();
      else sched_yield();
      s = state_.load(std::memory_order_acquire);
    }
    const auto end = Clock::now();
    const auto waited = end - own_done;
    if (waited > kStall && waited > (own_done - start) / 2) {
      stats_.stalls.fetch_add(1, std::memory_order_relaxed);
      backoff_ = std::clamp<Clock::duration>(2 * backoff_, kBackoffMin, kBackoffMax);
      alone_until_ = end + backoff_;
    } else if (backoff_ > Clock::duration::zero()) {
      backoff_ /= 2;
    }
    rethrow();
  }

  /// Rings the bells of the sleeping workers of slots [1, parts); see wake_team.
  void wake(int parts) {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || Clock::now() < alone_until_) return;
    parts = std::min(parts, kMaxParts);
    grow(parts - 1);
    stats_.woken.fetch_add(static_cast<std::uint64_t>(ring(parts)), std::memory_order_relaxed);
  }

  /// After fork() in the child: the workers are gone with the parent's threads.
  void forget_workers() noexcept {
    new (&mutex_) std::mutex;
    workers_ = 0;
    bells_.clear();
    state_.store(0, std::memory_order_relaxed);
  }

  std::mutex& mutex() noexcept { return mutex_; }

  TeamStats stats() const noexcept {
    return {stats_.teams.load(std::memory_order_relaxed), stats_.alone.load(std::memory_order_relaxed),
            stats_.stalls.load(std::memory_order_relaxed), stats_.woken.load(std::memory_order_relaxed)};
  }

private:
  // state_: epoch << kEpochShift | kOpen | parts << kPartsShift | workers inside fn_.
  static constexpr int kEpochShift = 32;
  static constexpr std::uint64_t kOpen = std::uint64_t{1} << 31;
  static constexpr int kPartsShift = 16;
  static constexpr std::uint64_t kPartsMask = ((std::uint64_t{1} << 15) - 1) << kPartsShift;
  static constexpr std::uint64_t kActiveMask = (std::uint64_t{1} << kPartsShift) - 1;
  static constexpr int kMaxParts = (1 << 15) - 1;

  /// Starts workers until there are `want` (under mutex_). A worker that cannot be
  /// started is not needed: the caller takes its units.
  void grow(int want) {
    for (; workers_ < want; ++workers_) {
      pthread_t thread;
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      // The epoch before this team's: the new worker joins the team being opened.
      bells_.push_back(std::make_unique<Bell>());
      auto* arg = new WorkerArg{this, bells_.back().get(), workers_ + 1, epoch_.load(std::memory_order_relaxed)};
      const int rc = pthread_create(&thread, &attr, &Pool::worker_main, arg);
      pthread_attr_destroy(&attr);
      if (rc != 0) {
        delete arg;
        bells_.pop_back();
        return;
      }
    }
  }

  /// Wakes the sleeping workers of slots [1, parts) (under mutex_); returns how many.
  int ring(int parts) {
    int rung = 0;
    for (int slot = 1; slot < parts && slot <= workers_; ++slot) {
      Bell& bell = *bells_[static_cast<std::size_t>(slot - 1)];
      if (!bell.asleep.load(std::memory_order_seq_cst)) continue;
      bell.rings.fetch_add(1, std::memory_order_relaxed);
      futex_wake_one(&bell.rings);
      ++rung;
    }
    return rung;
  }

  struct WorkerArg {
    Pool* pool;
    Bell* bell;
    int slot;
    std::uint32_t epoch;  // the last epoch the worker has seen
  };

  static void* worker_main(void* p) {
    const WorkerArg arg = *static_cast<WorkerArg*>(p);
    delete static_cast<WorkerArg*>(p);
    t_in_team = true;
    arg.pool->work(*arg.bell, arg.slot, arg.epoch);
    return nullptr;
  }

  [[noreturn]] void work(Bell& bell, int slot, std::uint32_t seen) {
    for (;;) {
      seen = wait_for_team(bell, seen);
      if (!join(slot, seen)) continue;
      // The first error of a team reaches its caller (the others are dropped); the
      // release on the count publishes it.
      if (std::exception_ptr error = run_in_team(fn_, ctx_, slot); error && !failed_.exchange(true))
        error_ = std::move(error);
      state_.fetch_sub(1, std::memory_order_release);
    }
  }

  /// Joins team `epoch` if it is open and has a place for `slot`: one more active worker.
  /// A worker that saw an older epoch does not join a newer team it has not seen, so it
  /// runs each team at most once.
  bool join(int slot, std::uint32_t epoch) {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    do {
      if (s >> kEpochShift != epoch || !(s & kOpen) ||
          static_cast<std::uint64_t>(slot) >= ((s & kPartsMask) >> kPartsShift))
        return false;
    } while (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed));
    return true;
  }

  /// Waits until the epoch moves on from `seen`: polls for kSpin, then sleeps until
  /// `bell` rings (a team, or wake_team), and polls for kSpin again.
  std::uint32_t wait_for_team(Bell& bell, std::uint32_t seen) {
    auto spin_until = Clock::now() + kSpin;
    for (unsigned i = 0;; ++i) {
      const std::uint32_t e = epoch_.load(std::memory_order_acquire);
      if (e != seen) return e;
      if (i % 64 != 63 || Clock::now() < spin_until) {
        cpu_relax();
        continue;
      }
      const std::uint32_t rings = bell.rings.load(std::memory_order_relaxed);
      bell.asleep.store(true, std::memory_order_seq_cst);
      if (epoch_.load(std::memory_order_seq_cst) == seen) futex_wait(&bell.rings, rings);
      bell.asleep.store(false, std::memory_order_relaxed);
      spin_until = Clock::now() + kSpin;
    }
  }

  std::mutex mutex_;  // held by the caller of the current team
  int workers_ = 0;   // under mutex_
  Clock::time_point alone_until_{};     // under mutex_: teams before this run on the caller alone
  Clock::duration backoff_{};           // under mutex_: the last such period
  struct {
    std::atomic<std::uint64_t> teams{0}, alone{0}, stalls{0}, woken{0};
  } stats_;
  void (*fn_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  std::vector<std::unique_ptr<Bell>> bells_;  // under mutex_: slot s's at s - 1
  alignas(64) std::atomic<std::uint32_t> epoch_{0};
  std::exception_ptr error_;         // the first worker error of the team (failed_ set)
  std::atomic<bool> failed_{false};
  alignas(64) std::atomic<std::uint64_t> state_{0};
};

/// The pool, never destroyed: its workers sleep in the kernel when the process exits.
/// fork() while another thread runs a team waits for it (prepare), and the child starts
/// over without workers.
Pool& pool() {
  static Pool* const p = [] {
    auto* q = new Pool;
    // A fork from inside a team (the forking thread holds the mutex, or waits on a worker
    // that cannot finish while the mutex is asked for) skips the lock.
    pthread_atfork(
        [] {
          if (t_in_team) return;
          pool().mutex().lock();
          t_fork_locked = true;
        },
        [] {
          if (std::exchange(t_fork_locked, false)) pool().mutex().unlock();
        },
        [] {
          t_fork_locked = false;
          pool().forget_workers();
        });
    return q;
  }();
  return *p;
}

}  // namespace

TeamStats team_stats() noexcept { return pool().stats(); }

void wake_team(int parts) {
  if (parts <= 1 || t_in_team) return;
  pool().wake(parts);
}

void run_team(int parts, void (*fn)(void*, int), void* ctx) {
  if (parts <= 1 || t_in_team) return run_alone(fn, ctx);
  pool().run(parts, fn, ctx);
}

}  // namespace trnsparse::detail
