// Team::split, as MPI_Comm_split: row and column teams of a grid used between the parent's own
// calls, members without a color, splits of splits, bad colors, and a member that dies before
// the split: checked on real forked processes against references computed from the inputs.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Errc;
using shmcoll::Op;
using shmcoll::Team;
using shmcoll::testing::shared_block;

struct Seen {
  int row_rank[16], row_size[16], column_rank[16], column_size[16];
  long row_sum[16], column_sum[16], world_sum[16];
  int column_order[16][16];  // the parent ranks a column's allgather returns, in its order
  int code[16];              // the Errc a rank's split failed with, -1 for none
};

TEST(Split, RowsAndColumnsOfAGridRunBetweenTheParentsCalls) {
  constexpr int kRows = 2, kColumns = 3, kRanks = kRows * kColumns;
  auto* seen = shared_block<Seen>();
  shmcoll::run(kRanks, {}, [&](Team& team) {
    const int rank = team.rank();
    // Rows keep the parent's order; columns are ranked in reverse by their keys.
    std::optional<Team> row = team.split(rank / kColumns, rank);
    std::optional<Team> column = team.split(rank % kColumns, -rank);
    seen->row_rank[rank] = row->rank(), seen->row_size[rank] = row->size();
    seen->column_rank[rank] = column->rank(), seen->column_size[rank] = column->size();
    // Interleaved with calls on the parent: each team's rounds are its own.
    for (int round = 0; round < 50; ++round) {
      long mine = rank + 1 + round, row_sum = 0, column_sum = 0, world_sum = 0;
      row->allreduce(&mine, &row_sum, 1, shmcoll::Dtype::i64, Op::sum);
      team.allreduce(&mine, &world_sum, 1, shmcoll::Dtype::i64, Op::sum);
      column->allreduce(&mine, &column_sum, 1, shmcoll::Dtype::i64, Op::sum);
      if (round == 49) {
        seen->row_sum[rank] = row_sum, seen->column_sum[rank] = column_sum;
        seen->world_sum[rank] = world_sum;
      }
    }
    std::vector<int> order(static_cast<std::size_t>(column->size()));
    column->allgather(&rank, 1, shmcoll::Dtype::i32, order.data(), 1, shmcoll::Dtype::i32);
    std::copy(order.begin(), order.end(), seen->column_order[rank]);
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    const int row = rank / kColumns, column = rank % kColumns;
    EXPECT_EQ(seen->row_rank[rank], column) << rank;
    EXPECT_EQ(seen->row_size[rank], kColumns) << rank;
    EXPECT_EQ(seen->column_rank[rank], kRows - 1 - row) << rank;
    EXPECT_EQ(seen->column_size[rank], kRows) << rank;
    long row_sum = 0, column_sum = 0, world_sum = 0;
    for (int other = 0; other < kRanks; ++other) {
      const long value = other + 1 + 49;
      world_sum += value;
      if (other / kColumns == row) row_sum += value;
      if (other % kColumns == column) column_sum += value;
    }
    EXPECT_EQ(seen->row_sum[rank], row_sum) << rank;
    EXPECT_EQ(seen->column_sum[rank], column_sum) << rank;
    EXPECT_EQ(seen->world_sum[rank], world_sum) << rank;
    for (int position = 0; position < kRows; ++position) {  // highest parent rank first
      EXPECT_EQ(seen->column_order[rank][position], (kRows - 1 - position) * kColumns + column)
          << rank;
    }
  }
}

TEST(Split, MembersWithoutAColorGetNoTeamAndSplitsSplitAgain) {
  constexpr int kRanks = 7;
  auto* seen = shared_block<Seen>();
  shmcoll::run(kRanks, {}, [&](Team& team) {
    const int rank = team.rank();
    std::optional<Team> even = team.split(rank % 2 == 0 ? 0 : Team::kNoColor, 0);
    seen->row_size[rank] = even ? even->size() : 0;
    seen->row_rank[rank] = even ? even->rank() : -1;
    if (!even) return;
    // The even ranks' team splits again: its lower and upper halves.
    std::optional<Team> half = even->split(even->rank() < 2 ? 0 : 1, 0);
    long mine = rank, sum = 0;
    half->allreduce(&mine, &sum, 1, shmcoll::Dtype::i64, Op::sum);
    seen->column_size[rank] = half->size();
    seen->column_sum[rank] = sum;
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank % 2) {
      EXPECT_EQ(seen->row_size[rank], 0) << rank;
      continue;
    }
    EXPECT_EQ(seen->row_size[rank], 4) << rank;
    EXPECT_EQ(seen->row_rank[rank], rank / 2) << rank;
    EXPECT_EQ(seen->column_size[rank], 2) << rank;
    EXPECT_EQ(seen->column_sum[rank], rank < 4 ? 0 + 2 : 4 + 6) << rank;
  }
}

TEST(Split, ANegativeColorOtherThanNoColorIsRejectedAndTheTeamGoesOn) {
  auto* seen = shared_block<Seen>();
  shmcoll::run(3, {}, [&](Team& team) {
    seen->code[team.rank()] = -1;
    try {
      team.split(-5, 0);
    } catch (const shmcoll::Error& error) {
      seen->code[team.rank()] = static_cast<int>(error.code());
      if (std::string(error.what()).find("color -5") == std::string::npos) throw;
    }
    long one = 1, total = 0;
    team.allreduce(&one, &total, 1, shmcoll::Dtype::i64, Op::sum);
    seen->world_sum[team.rank()] = total;
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(seen->code[rank], static_cast<int>(Errc::invalid_argument)) << rank;
    EXPECT_EQ(seen->world_sum[rank], 3) << rank;
  }
}

// (Named for the serial group: it compares /dev/shm before and after.)
TEST(SplitDeadPeer, AMemberKilledBeforeTheSplitFailsTheOthersAndLeavesNoSegment) {
  constexpr int kRanks = 4, kVictim = 2;
  auto* seen = shared_block<Seen>();
  const auto shm_before = shmcoll::testing::dev_shm_entries();
  EXPECT_THROW(shmcoll::run(kRanks, {},
                            [&](Team& team) {
                              seen->code[team.rank()] = -1;
                              if (team.rank() == kVictim) kill(getpid(), SIGKILL);
                              try {
                                team.split(0, 0);
                              } catch (const shmcoll::Error& error) {
                                seen->code[team.rank()] = static_cast<int>(error.code());
                              }
                            }),
               shmcoll::Error);
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank != kVictim) EXPECT_EQ(seen->code[rank], static_cast<int>(Errc::peer_failed)) << rank;
  }
  EXPECT_EQ(shmcoll::testing::dev_shm_entries(), shm_before);
}

}  // namespace
