// Dead and departed peers: every survivor fails with peer_failed within a second, never hangs,
// and no segment name is left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Errc;
using shmcoll::testing::monotonic_seconds;
using shmcoll::testing::shared_block;

struct Outcome {
  double killed_at;
  double failed_at[16];
  int code[16];  // Errc seen by each rank, -1 when the rank saw none
};

// Runs allreduces in a loop on every rank; the victim kills itself with SIGKILL mid-loop.
void allreduce_until_victim_dies(shmcoll::Team& team, int victim, Outcome& outcome) {
  std::vector<double> data(1000, 1.0);
  outcome.code[team.rank()] = -1;
  try {
    for (int iteration = 0; iteration < 1'000'000; ++iteration) {
      if (team.rank() == victim && iteration == 300) {
        outcome.killed_at = monotonic_seconds();
        kill(getpid(), SIGKILL);
      }
      team.allreduce_in_place(std::span<double>(data), shmcoll::Op::max);
    }
  } catch (const shmcoll::Error& error) {
    outcome.failed_at[team.rank()] = monotonic_seconds();
    outcome.code[team.rank()] = static_cast<int>(error.code());
  }
}

class DeadPeer : public ::testing::TestWithParam<int> {};

TEST_P(DeadPeer, KilledRankMakesEverySurvivorFailWithinOneSecond) {
  const int ranks = GetParam();
  const int victim = ranks / 2;
  auto* outcome = shared_block<Outcome>();
  const auto shm_before = shmcoll::testing::dev_shm_entries();
  try {
    shmcoll::run(ranks, {},
                 [&](shmcoll::Team& team) { allreduce_until_victim_dies(team, victim, *outcome); });
    FAIL() << "run() returned although rank " << victim << " was killed";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), Errc::rank_failed) << error.what();
    EXPECT_NE(std::string(error.what()).find("rank " + std::to_string(victim)), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("SIGKILL"), std::string::npos) << error.what();
  }
  for (int rank = 0; rank < ranks; ++rank) {
    if (rank == victim) continue;
    EXPECT_EQ(outcome->code[rank], static_cast<int>(Errc::peer_failed)) << "rank " << rank;
    EXPECT_LT(outcome->failed_at[rank] - outcome->killed_at, 1.0) << "rank " << rank;
  }
  EXPECT_EQ(shmcoll::testing::dev_shm_entries(), shm_before);
}

INSTANTIATE_TEST_SUITE_P(TeamSizes, DeadPeer, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

TEST(DepartedPeer, RankThatLeavesEarlyFailsTheOthersInsteadOfHanging) {
  auto* outcome = shared_block<Outcome>();
  shmcoll::run(3, {}, [&](shmcoll::Team& team) {
    outcome->code[team.rank()] = -1;
    if (team.rank() == 1) return;  // leaves without calling the collective
    try {
      team.barrier();
    } catch (const shmcoll::Error& error) {
      outcome->code[team.rank()] = static_cast<int>(error.code());
    }
  });
  EXPECT_EQ(outcome->code[0], static_cast<int>(Errc::peer_failed));
  EXPECT_EQ(outcome->code[2], static_cast<int>(Errc::peer_failed));
}

TEST(FailingRank, ChildThatThrowsIsReportedByRankAndStatus) {
  try {
    shmcoll::run(3, {}, [](shmcoll::Team& team) {
      if (team.rank() == 2) throw std::runtime_error("boom");
      team.barrier();
    });
    FAIL() << "run() returned although rank 2 threw";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), Errc::rank_failed);
    EXPECT_NE(std::string(error.what()).find("rank 2"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("status 1"), std::string::npos) << error.what();
  }
}

TEST(FailingRank, RankZeroErrorIsRethrownAfterChildrenAreReleased) {
  try {
    shmcoll::run(3, {}, [](shmcoll::Team& team) {
      if (team.rank() == 0) throw shmcoll::Error(Errc::invalid_argument, "rank zero gave up");
      team.barrier();
    });
    FAIL() << "run() returned although rank 0 threw";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("rank zero gave up"), std::string::npos);
  }
}

TEST(Timeout, ConfiguredDeadlineTurnsAnEndlessWaitIntoAnError) {
  shmcoll::testing::ScopedEnv timeout("SHMCOLL_TIMEOUT", "200ms");
  auto* outcome = shared_block<Outcome>();
  shmcoll::run(2, {}, [&](shmcoll::Team& team) {
    outcome->code[team.rank()] = -1;
    if (team.rank() == 1) usleep(1'500'000);  // arrives far too late
    try {
      team.barrier();
    } catch (const shmcoll::Error& error) {
      outcome->code[team.rank()] = static_cast<int>(error.code());
    }
  });
  EXPECT_EQ(outcome->code[0], static_cast<int>(Errc::timeout));
}

}  // namespace

namespace {

TEST(DeadPeer, EveryLaterCollectiveFailsEvenWhenItWouldNotWait) {
  struct Codes {
    int later[4];
  };
  auto* codes = shared_block<Codes>();
  try {
    shmcoll::run(3, {}, [&](shmcoll::Team& team) {
      team.barrier();  // every rank, the victim too, has published this round
      if (team.rank() == 2) kill(getpid(), SIGKILL);
      usleep(300'000);  // the supervisor notices the death and aborts the team meanwhile
      // Rank 1's non-root reduce needs no wait of its own (everyone reached the previous round),
      // yet the team is gone: it must say so.
      codes->later[team.rank()] = -1;
      try {
        float value = 1, result = 0;
        team.reduce(&value, &result, 1, shmcoll::Dtype::f32, shmcoll::Op::sum, 0);
      } catch (const shmcoll::Error& error) {
        codes->later[team.rank()] = static_cast<int>(error.code());
      }
    });
  } catch (const shmcoll::Error&) {
  }
  EXPECT_EQ(codes->later[0], static_cast<int>(Errc::peer_failed));
  EXPECT_EQ(codes->later[1], static_cast<int>(Errc::peer_failed));
}

}  // namespace
