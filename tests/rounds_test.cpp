// Round bookkeeping over long runs: 32-bit round words that wrap, and values compared many calls
// after they were written (a heap sender's wait for its readers), tried by starting a team's
// round count where billions of rounds would have put it.
#include "shm/rounds.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <numeric>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Op;
using shmcoll::Team;
using shmcoll::shm::Rounds;

// Teams made in this scope count rounds from `first` (forked ranks inherit the setting).
class RoundsStartAt {
 public:
  explicit RoundsStartAt(std::int64_t first) { Rounds::start_rounds_at_for_testing(first); }
  ~RoundsStartAt() { Rounds::start_rounds_at_for_testing(0); }
};

struct Failures {
  std::atomic<long> wrong;
};

// A sender whose block peers read straight from its heap must not return before they have. Its
// readers' `released` words were last written long ago (here: never, with the count 2^32 - 64
// rounds on, as after that many rounds of other collectives); compared in 32-bit serial order
// such a word reads as "already released", and the sender's next writes reached the root's copy.
// The call must take fewer rounds than the message-line window, or its empty rounds would hold the
// sender back until the root is done: 8 MiB through 4 MiB slots is 2.
TEST(Rounds, HeapSendersWaitForTheirReadersWhateverTheRoundCount) {
  RoundsStartAt start((std::int64_t{1} << 32) - 64);
  auto* failures = shmcoll::testing::shared_block<Failures>();
  constexpr std::size_t kCount = std::size_t{2} << 20;  // 8 MiB of i32
  shmcoll::Options options;
  options.slot_bytes = 4 << 20;
  options.heap_bytes = 9 << 20;
  shmcoll::run(2, options, [&](Team& team) {
    const std::span<std::int32_t> mine = team.allocate<std::int32_t>(kCount);
    std::vector<std::int32_t> gathered(team.rank() == 0 ? 2 * kCount : 0);
    for (std::int32_t call = 0; call < 4; ++call) {
      std::fill(mine.begin(), mine.end(), call);
      team.gather(mine.data(), kCount, Dtype::i32, gathered.data(), kCount, Dtype::i32, 0);
      // What a real program does next: reuse its buffer at once.
      std::fill(mine.begin(), mine.end(), -1);
      long wrong = 0;
      for (std::int32_t value : gathered) wrong += value != call;
      failures->wrong += wrong;
    }
  });
  EXPECT_EQ(failures->wrong.load(), 0) << "elements the root read after the sender returned";
}

// Every kind of round (message lines, slots, the tree, the exchange) across the point where the
// 32-bit round words wrap, against results computed from the inputs.
TEST(Rounds, CollectivesAreRightAcrossTheRoundWordWrap) {
  RoundsStartAt start((std::int64_t{1} << 32) - 200);
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::Options options;
  options.slot_bytes = 4096;  // many rounds per large call
  shmcoll::run(3, options, [&](Team& team) {
    const int me = team.rank(), p = team.size();
    long wrong = 0;
    for (int call = 0; call < 120; ++call) {
      const std::size_t n = call % 3 == 0 ? 5000 : 3;
      std::vector<std::int64_t> in(n), out(n);
      for (std::size_t i = 0; i < n; ++i) in[i] = me * 1000 + std::int64_t(i) + call;
      team.allreduce(in.data(), out.data(), std::int64_t(n), Dtype::i64, Op::sum);
      for (std::size_t i = 0; i < n; ++i) {
        wrong += out[i] != 3000 + 3 * (std::int64_t(i) + call);  // ranks 0, 1, 2
      }
      std::vector<std::int64_t> all(n * p);
      team.allgather(in.data(), std::int64_t(n), Dtype::i64, all.data(), std::int64_t(n),
                     Dtype::i64);
      for (int r = 0; r < p; ++r) {
        for (std::size_t i = 0; i < n; ++i)
          wrong += all[r * n + i] != r * 1000 + std::int64_t(i) + call;
      }
      std::vector<std::int64_t> root_data = in;
      team.bcast(root_data.data(), std::int64_t(n), Dtype::i64, call % p);
      for (std::size_t i = 0; i < n; ++i) {
        wrong += root_data[i] != (call % p) * 1000 + std::int64_t(i) + call;
      }
      team.barrier();
    }
    failures->wrong += wrong;
  });
  EXPECT_EQ(failures->wrong.load(), 0);
}

// A wait whose peer posts within the spin window never sleeps on a futex (the window here is 2 s,
// so no scheduling delay reaches it); with no spin and no yield, the same waits sleep, and the
// counts say so.
TEST(WaitCounts, APeerThatPostsWithinTheSpinWindowNeverPutsTheWaiterToSleep) {
  struct Counts {
    shmcoll::WaitCounts of_rank0[2];
  };
  auto* counts = shmcoll::testing::shared_block<Counts>();
  const char* spins[2] = {"2000000000", "0"};
  for (int setting = 0; setting < 2; ++setting) {
    shmcoll::testing::ScopedEnv spin("SHMCOLL_SPIN_NS", spins[setting]);
    shmcoll::testing::ScopedEnv yield("SHMCOLL_YIELD_NS", "0");
    shmcoll::run(2, {}, [&](Team& team) {
      const shmcoll::WaitCounts before = team.wait_counts();
      for (int call = 0; call < 20; ++call) {
        if (team.rank() == 1) {
          // Late, but well within the window: rank 0 waits about 2 ms each time.
          const double until = shmcoll::testing::monotonic_seconds() + 0.002;
          while (shmcoll::testing::monotonic_seconds() < until) {
          }
        }
        team.barrier();
      }
      if (team.rank() == 0) {
        const shmcoll::WaitCounts after = team.wait_counts();
        counts->of_rank0[setting] = {after.yields - before.yields,
                                     after.futex_sleeps - before.futex_sleeps};
      }
    });
  }
  EXPECT_EQ(counts->of_rank0[0].futex_sleeps, 0u) << "slept although the peer came within the spin";
  // (Yields are allowed: when the scheduler puts both ranks on one CPU for a moment, the waiter
  // gives its CPU to the peer it waits for, by design; the full suite's load made 28 of them.)
  // (Not every one of the 20: a waiter the scheduler holds back 2 ms may find the peer there.)
  EXPECT_GT(counts->of_rank0[1].futex_sleeps, 0u) << "without spinning, waits sleep";
}

}  // namespace
