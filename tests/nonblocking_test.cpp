// Nonblocking calls (Team::ibarrier, ibcast, ireduce, iallreduce): several outstanding at once and
// mixed with blocking calls, results checked against references computed from the inputs;
// progress while the caller waits for something else; errors at issue and from a dead peer.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Errc;
using shmcoll::Op;
using shmcoll::Request;
using shmcoll::Team;
using shmcoll::testing::shared_block;

struct Results {
  int failures[16];
  int code[16];
  std::atomic<int> flag;
};

TEST(Nonblocking, OutstandingCallsMixedWithBlockingOnesGiveTheReferenceResults) {
  constexpr int kRanks = 4;
  auto* results = shared_block<Results>();
  shmcoll::run(kRanks, {}, [&](Team& team) {
    const int rank = team.rank();
    int& failures = results->failures[rank];
    for (int round = 0; round < 20; ++round) {
      const int root = round % kRanks;
      const std::size_t n = 1 + static_cast<std::size_t>(round) * 3001;
      std::vector<double> mine(n), sum(n), reduced(n), broadcast(n);
      for (std::size_t i = 0; i < n; ++i) mine[i] = rank + 1.0 + i % 7;
      for (std::size_t i = 0; i < n; ++i) broadcast[i] = rank == root ? -1.0 * i : 0.0;
      // Four calls outstanding at once, then a blocking one that must wait for them.
      Request sum_done = team.iallreduce(mine.data(), sum.data(), n, Dtype::f64, Op::sum);
      Request bcast_done = team.ibcast(broadcast.data(), n, Dtype::f64, root);
      Request reduce_done = team.ireduce(mine.data(), reduced.data(), n, Dtype::f64, Op::max, root);
      Request barrier_done = team.ibarrier();
      long one = 1, total = 0;
      team.allreduce(&one, &total, 1, Dtype::i64, Op::sum);
      if (total != kRanks) ++failures;
      barrier_done.wait();
      reduce_done.wait();
      while (!bcast_done.test()) std::this_thread::yield();
      bcast_done.wait();
      sum_done.wait();
      for (std::size_t i = 0; i < n; ++i) {
        const double expected_sum = kRanks * (kRanks + 1) / 2.0 + kRanks * double(i % 7);
        if (sum[i] != expected_sum) ++failures;
        if (broadcast[i] != -1.0 * i) ++failures;
        if (rank == root && reduced[i] != kRanks + double(i % 7)) ++failures;
      }
    }
  });
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(results->failures[rank], 0) << rank;
}

// Rank 1 waits for its ibarrier and then raises a flag; rank 0 waits for the flag before it
// waits for its own ibarrier. Only a call that progresses without its caller lets both finish
// (as MPI requires of a nonblocking barrier followed by a receive of what the peer sends after
// its wait).
// Where ranks share CPUs the worker leaves a fresh call to a waiting thread for a moment
// (kWorkerGraceWhereCpusShared), then takes it: progress either way.
void expect_progress_while_waiting_elsewhere(const shmcoll::Options& options) {
  auto* results = shared_block<Results>();
  results->flag = 0;
  shmcoll::run(2, options, [&](Team& team) {
    Request barrier = team.ibarrier();
    if (team.rank() == 1) {
      barrier.wait();
      results->flag = 1;
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (results->flag == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    results->failures[0] = results->flag == 0 ? 1 : 0;
    barrier.wait();
  });
  EXPECT_EQ(results->failures[0], 0) << "rank 0's ibarrier made no progress until its wait";
}

TEST(Nonblocking, CallsProgressWhileTheCallerWaitsForSomethingElse) {
  expect_progress_while_waiting_elsewhere({});
}

TEST(Nonblocking, CallsProgressWhileTheCallerWaitsForSomethingElseOnSharedCpus) {
  shmcoll::Options options;
  options.processes_share_cpus = true;
  expect_progress_while_waiting_elsewhere(options);
}

TEST(Nonblocking, BadArgumentsAreRejectedAtIssueAndTheTeamGoesOn) {
  auto* results = shared_block<Results>();
  shmcoll::run(3, {}, [&](Team& team) {
    double value = 1.0, total = 0.0;
    results->code[team.rank()] = -1;
    try {
      (void)team.ibcast(&value, 1, Dtype::f64, 7);
    } catch (const shmcoll::Error& error) {
      results->code[team.rank()] = static_cast<int>(error.code());
      if (std::string(error.what()).find("ibcast") == std::string::npos) throw;
    }
    team.iallreduce(&value, &total, 1, Dtype::f64, Op::sum).wait();
    results->failures[team.rank()] = total == 3.0 ? 0 : 1;
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(results->code[rank], static_cast<int>(Errc::invalid_argument)) << rank;
    EXPECT_EQ(results->failures[rank], 0) << rank;
  }
}

// (Named for the serial group: no other test's ranks may share its CPUs while it times out.)
TEST(NonblockingDeadPeer, AWaitWhosePeerDiedFailsInsteadOfHanging) {
  constexpr int kRanks = 3, kVictim = 1;
  auto* results = shared_block<Results>();
  EXPECT_THROW(
      shmcoll::run(kRanks, {},
                   [&](Team& team) {
                     results->code[team.rank()] = -1;
                     if (team.rank() == kVictim) kill(getpid(), SIGKILL);
                     std::vector<double> data(1000, 1.0), sum(1000);
                     try {
                       team.iallreduce(data.data(), sum.data(), 1000, Dtype::f64, Op::sum).wait();
                     } catch (const shmcoll::Error& error) {
                       results->code[team.rank()] = static_cast<int>(error.code());
                     }
                   }),
      shmcoll::Error);
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank != kVictim)
      EXPECT_EQ(results->code[rank], static_cast<int>(Errc::peer_failed)) << rank;
  }
}

}  // namespace
