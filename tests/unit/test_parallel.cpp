// The thread pool and the work split (runtime/parallel.hpp): every unit runs once, a
// slot is never used by two threads at once, the caller does not depend on a worker
// that is not there, a stalled worker sends the next teams to the caller alone, and the
// pool survives fork().
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/parallel.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse {
namespace {

using namespace std::chrono_literals;

/// Sets the thread count for a scope.
class Threads {
public:
  explicit Threads(int n) : old_(num_threads()) { set_num_threads(n); }
  ~Threads() { set_num_threads(old_); }

private:
  int old_;
};

/// Waits until teams are not being sent to the caller alone after an earlier stall (a
/// test before may have met one): longer than the longest backoff, 256 ms.
void wait_out_backoff() { std::this_thread::sleep_for(300ms); }

/// Spins until `done()` or 10 s have passed; false on the time-out.
template <class F>
bool wait_for(F&& done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done())
    if (std::chrono::steady_clock::now() > deadline) return false;
    else std::this_thread::yield();
  return true;
}

// Every unit runs exactly once, for teams larger and smaller than the units, and no slot
// runs on two threads at once.
TEST(Parallel, RunsEveryUnitOnceAndSlotsAlone) {
  const Threads threads(4);
  for (const int parts : {1, 2, 3, 4, 7})
    for (const index_t units : {0, 1, 2, 7, 64, 1001})
      for (int rep = 0; rep < 20; ++rep) {  // owners and thieves meet at different units
        std::vector<std::atomic<int>> runs(static_cast<std::size_t>(units));
        std::vector<std::atomic<int>> inside(static_cast<std::size_t>(parts));
        std::atomic<bool> shared_slot{false}, bad_slot{false};
        detail::parallel_for(parts, units, [&](int slot, index_t u) {
          if (slot < 0 || slot >= parts) {
            bad_slot = true;
            return;
          }
          if (inside[static_cast<std::size_t>(slot)].fetch_add(1) != 0) shared_slot = true;
          runs[static_cast<std::size_t>(u)].fetch_add(1);
          inside[static_cast<std::size_t>(slot)].fetch_sub(1);
        });
        ASSERT_FALSE(bad_slot) << "parts " << parts;
        ASSERT_FALSE(shared_slot) << "parts " << parts << ", units " << units;
        for (index_t u = 0; u < units; ++u)
          ASSERT_EQ(runs[static_cast<std::size_t>(u)].load(), 1) << "unit " << u << " of " << units << ", parts " << parts;
      }
}

// Slot 0 (the caller) blocks in its first unit until another slot has taken a unit of
// range 0: only taking from another range lets it get there.
TEST(Parallel, OthersTakeTheUnitsOfASlowThread) {
  const Threads threads(2);
  const index_t units = 40;  // range 0: [0, 20), range 1: [20, 40)
  wait_out_backoff();
  std::atomic<bool> stolen{false}, waited{false};
  std::atomic<int> done{0};
  detail::parallel_for(2, units, [&](int slot, index_t u) {
    if (slot != 0 && u < units / 2) stolen = true;
    if (slot == 0 && !waited.exchange(true)) wait_for([&] { return stolen.load(); });
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), units);
  EXPECT_TRUE(stolen.load()) << "the worker took none of the caller's range";
}

// A caller whose pool is held by another thread's team runs its pass alone, at once.
TEST(Parallel, ACallerNeverWaitsForABusyPool) {
  const Threads threads(2);
  std::atomic<bool> holding{false}, release{false};
  std::thread holder([&] {
    detail::run_team(2, [&](int slot) {
      if (slot != 0) return;
      holding = true;
      wait_for([&] { return release.load(); });
    });
  });
  ASSERT_TRUE(wait_for([&] { return holding.load(); }));
  std::atomic<int> done{0}, other_slots{0};
  detail::parallel_for(2, 100, [&](int slot, index_t) {
    done.fetch_add(1);
    if (slot != 0) other_slots.fetch_add(1);
  });
  release = true;
  holder.join();
  EXPECT_EQ(done.load(), 100);
  EXPECT_EQ(other_slots.load(), 0);
}

// wake_team wakes a worker asleep between teams, without a team, and a team after it
// runs as usual; it does nothing for one part or inside a team.
TEST(Parallel, WakeTeamWakesASleepingWorkerAhead) {
  const Threads threads(2);
  wait_out_backoff();
  detail::parallel_for(2, 2, [](int, index_t) {});  // the worker exists
  const auto woken = [] { return detail::team_stats().woken; };
  bool rung = false;
  // The worker sleeps once it has polled for a while (a busy host may hold it longer).
  for (int attempt = 0; attempt < 50 && !rung; ++attempt) {
    std::this_thread::sleep_for(20ms);
    const std::uint64_t before = woken();
    detail::wake_team(2);
    rung = woken() == before + 1;
  }
  EXPECT_TRUE(rung) << "no sleeping worker was woken";
  const std::uint64_t before = woken();
  detail::wake_team(1);
  detail::parallel_for(2, 4, [](int, index_t) { detail::wake_team(2); });
  EXPECT_EQ(woken(), before);
  std::atomic<int> done{0};
  detail::parallel_for(2, 100, [&](int, index_t) { done.fetch_add(1); });
  EXPECT_EQ(done.load(), 100);
}

// A pass inside a team's unit runs on that unit's thread alone.
TEST(Parallel, NestedPassesRunAlone) {
  const Threads threads(2);
  std::atomic<int> inner{0}, inner_other_slots{0};
  detail::parallel_for(2, 8, [&](int, index_t) {
    detail::parallel_for(2, 10, [&](int slot, index_t) {
      inner.fetch_add(1);
      if (slot != 0) inner_other_slots.fetch_add(1);
    });
  });
  EXPECT_EQ(inner.load(), 80);
  EXPECT_EQ(inner_other_slots.load(), 0);
}

// A caller that waits for a worker held up inside a unit records a stall, and its next
// team runs on the caller alone.
TEST(Parallel, AStalledWorkerSendsTheNextTeamsToTheCaller) {
  const Threads threads(2);
  wait_out_backoff();
  const detail::TeamStats before = detail::team_stats();
  std::atomic<bool> worker_in{false};
  detail::parallel_for(2, 2, [&](int slot, index_t) {
    if (slot != 0) {
      worker_in = true;
      std::this_thread::sleep_for(20ms);  // held up, as a worker taken off its core
    } else {
      wait_for([&] { return worker_in.load(); });
    }
  });
  if (!worker_in.load()) GTEST_SKIP() << "no worker joined within 10 s";
  std::atomic<int> other_slots{0};
  detail::parallel_for(2, 100, [&](int slot, index_t) {
    if (slot != 0) other_slots.fetch_add(1);
  });
  const detail::TeamStats after = detail::team_stats();
  EXPECT_GE(after.stalls - before.stalls, 1u);
  EXPECT_GE(after.alone - before.alone, 1u);
  EXPECT_EQ(other_slots.load(), 0);
}

// A child forked after the pool has run gets a pool of its own.
TEST(Parallel, WorksAfterFork) {
  const Threads threads(2);
  std::atomic<int> done{0};
  detail::parallel_for(2, 64, [&](int, index_t) { done.fetch_add(1); });
  ASSERT_EQ(done.load(), 64);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int> child_done{0};
    for (int rep = 0; rep < 50; ++rep) detail::parallel_for(2, 64, [&](int, index_t) { child_done.fetch_add(1); });
    _exit(child_done.load() == 50 * 64 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

// An exception thrown in a unit, on the caller or on a worker, reaches the caller once
// the team is over (no worker still runs in its scope), and the pool keeps working.
TEST(Parallel, AnErrorInAUnitReachesTheCallerAndThePoolGoesOn) {
  const Threads threads(2);
  for (int rep = 0; rep < 50; ++rep) {
    std::atomic<int> running{0};
    EXPECT_THROW(detail::parallel_for(2, 64,
                                      [&](int, index_t u) {
                                        running.fetch_add(1);
                                        if (u == static_cast<index_t>(rep % 64)) {
                                          running.fetch_sub(1);
                                          throw InvalidArgument("unit failed");
                                        }
                                        running.fetch_sub(1);
                                      }),
                 InvalidArgument);
    EXPECT_EQ(running.load(), 0) << "a unit still ran after the error reached the caller";
  }
  std::atomic<int> done{0};
  detail::parallel_for(2, 64, [&](int, index_t) { done.fetch_add(1); });
  EXPECT_EQ(done.load(), 64);
}

// fork() from inside a unit neither deadlocks nor breaks the child.
TEST(Parallel, ForkFromInsideATeam) {
  const Threads threads(2);
  std::atomic<int> status{-1};
  detail::parallel_for(2, 2, [&](int, index_t u) {
    if (u != 0) return;
    const pid_t pid = fork();
    if (pid == 0) {
      std::atomic<int> child_done{0};
      detail::parallel_for(2, 16, [&](int, index_t) { child_done.fetch_add(1); });
      _exit(child_done.load() == 16 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    status = WIFEXITED(st) ? WEXITSTATUS(st) : 100;
  });
  EXPECT_EQ(status.load(), 0);
}

// Pieces by the kept operand's bytes: a whole number a part, from two to kPiecesPerPart,
// the fewest whose shares fit in kPieceKeptBytes.
TEST(Parallel, PiecesByKeptBytes) {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  EXPECT_EQ(detail::pieces_for(1, 100 * MiB), 1);
  EXPECT_EQ(detail::pieces_for(2, 0), 4);
  EXPECT_EQ(detail::pieces_for(2, 3 * MiB + MiB / 2), 4);  // a 4096 x 4096 bf16 layer at density 0.1
  EXPECT_EQ(detail::pieces_for(2, 5 * MiB), 6);
  EXPECT_EQ(detail::pieces_for(2, 6 * MiB + 1), 8);
  EXPECT_EQ(detail::pieces_for(2, 100 * MiB), 2 * detail::kPiecesPerPart);
  EXPECT_EQ(detail::pieces_for(3, 7 * MiB), 9);
  for (int parts = 2; parts <= 8; ++parts)
    for (std::size_t mib = 0; mib <= 40; ++mib) {
      const int n = detail::pieces_for(parts, mib * MiB);
      EXPECT_EQ(n % parts, 0) << parts << " parts, " << mib << " MiB";
      EXPECT_GE(n, 2 * parts);
      EXPECT_LE(n, detail::kPiecesPerPart * parts);
      if (n > 2 * parts) EXPECT_GT(mib * MiB, static_cast<std::size_t>(n - parts) * detail::kPieceKeptBytes);
      if (n < detail::kPiecesPerPart * parts) EXPECT_LE(mib * MiB, static_cast<std::size_t>(n) * detail::kPieceKeptBytes);
    }
}

TEST(Parallel, UnitRangesRejectTooManyUnits) {
  detail::UnitRanges ranges;
  EXPECT_THROW(ranges.reset(2, index_t{1} << 32), OverflowError);
}

}  // namespace
}  // namespace trnsparse
