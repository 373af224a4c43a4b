// Mismatched calls across ranks: every rank fails with mismatched_call, whose message names two
// ranks whose calls differ and the field that differs, instead of corrupting memory or hanging.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Errc;
using shmcoll::Op;
using shmcoll::Team;
using shmcoll::testing::ScopedEnv;
using shmcoll::testing::shared_block;

constexpr int kMaxRanks = 8;

struct Outcomes {
  int code[kMaxRanks];  // the first Errc each rank saw, -1 for none
  char message[kMaxRanks][512];
};

// Every rank makes `call(team, odd_one_out)`, where only the last rank has odd_one_out set, then
// a barrier (a rank that did not wait in the mismatched call learns of it there). Returns what
// each rank saw first.
Outcomes* run_mismatch(int ranks, const std::function<void(Team&, bool)>& call) {
  auto* outcomes = shared_block<Outcomes>();
  shmcoll::run(ranks, {}, [&](Team& team) {
    const int me = team.rank();
    outcomes->code[me] = -1;
    try {
      call(team, me == team.size() - 1);
      team.barrier();
    } catch (const shmcoll::Error& error) {
      outcomes->code[me] = static_cast<int>(error.code());
      std::snprintf(outcomes->message[me], sizeof outcomes->message[me], "%s", error.what());
    }
  });
  return outcomes;
}

void expect_every_rank_names(const Outcomes& outcomes, int ranks, const std::string& field) {
  const std::string odd_rank = "rank " + std::to_string(ranks - 1) + " called";
  for (int rank = 0; rank < ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(outcomes.code[rank], static_cast<int>(Errc::mismatched_call))
        << outcomes.message[rank] << " / rank 0 saw: " << outcomes.message[0];
    const std::string message = outcomes.message[rank];
    EXPECT_NE(message.find("mismatched_call: rank " + std::to_string(rank) + ": "),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(odd_rank), std::string::npos) << message;      // the odd one out
    EXPECT_NE(message.find(" but rank "), std::string::npos) << message;  // and one other
    EXPECT_NE(message.find(": " + field), std::string::npos) << message;
  }
}

class MismatchedCall : public ::testing::TestWithParam<int> {};

TEST_P(MismatchedCall, DifferentCollective) {
  const int ranks = GetParam();
  auto* outcomes = run_mismatch(ranks, [](Team& team, bool odd) {
    std::int64_t value = 1;
    if (odd) {
      team.allreduce(shmcoll::in_place, &value, 1, Dtype::i64, Op::sum);
    } else {
      team.bcast(&value, 1, Dtype::i64, 0);
    }
  });
  expect_every_rank_names(*outcomes, ranks, "the collective differs");
  EXPECT_NE(std::string(outcomes->message[0]).find("called bcast(root 0, bytes 8)"),
            std::string::npos)
      << outcomes->message[0];
}

TEST_P(MismatchedCall, DifferentRoot) {
  const int ranks = GetParam();
  auto* outcomes = run_mismatch(ranks, [](Team& team, bool odd) {
    std::vector<double> data(4, 1.0);
    team.bcast(data.data(), 4, Dtype::f64, odd ? 1 : 0);
  });
  expect_every_rank_names(*outcomes, ranks, "the root differs");
}

TEST_P(MismatchedCall, DifferentOp) {
  const int ranks = GetParam();
  auto* outcomes = run_mismatch(ranks, [](Team& team, bool odd) {
    std::int32_t value = team.rank();
    team.allreduce(shmcoll::in_place, &value, 1, Dtype::i32, odd ? Op::max : Op::sum);
  });
  expect_every_rank_names(*outcomes, ranks, "the op differs");
  EXPECT_NE(std::string(outcomes->message[0]).find("allreduce(count 1, dtype i32, op max)"),
            std::string::npos)
      << outcomes->message[0];
}

TEST_P(MismatchedCall, DifferentDatatype) {
  const int ranks = GetParam();
  auto* outcomes = run_mismatch(ranks, [](Team& team, bool odd) {
    std::vector<std::uint64_t> data(2, 1);
    team.allreduce(shmcoll::in_place, data.data(), 2, odd ? Dtype::f64 : Dtype::u64, Op::sum);
  });
  expect_every_rank_names(*outcomes, ranks, "the datatype differs");
}

// Large enough to go through the slots, chunk by chunk: the rounds no longer line up.
TEST_P(MismatchedCall, DifferentCountThroughTheSlots) {
  const int ranks = GetParam();
  auto* outcomes = run_mismatch(ranks, [](Team& team, bool odd) {
    std::vector<float> data(1 << 20, 1.0f);
    team.allreduce(shmcoll::in_place, data.data(), odd ? (1 << 20) - 8 : 1 << 20, Dtype::f32,
                   Op::sum);
  });
  expect_every_rank_names(*outcomes, ranks, "the count differs");
}

TEST_P(MismatchedCall, DifferentRecvcounts) {
  const int ranks = GetParam();
  auto* outcomes = run_mismatch(ranks, [](Team& team, bool odd) {
    std::vector<std::int64_t> counts(team.size(), 2);
    if (odd) {  // the same total, split differently
      counts[0] = 1;
      counts[1] = 3;
    }
    std::vector<std::int32_t> send(2 * team.size(), 1), recv(3);
    team.reduce_scatter(send.data(), recv.data(), counts, Dtype::i32, Op::sum);
  });
  expect_every_rank_names(*outcomes, ranks, "recvcounts differ");
}

TEST_P(MismatchedCall, DifferentBlockBytes) {
  const int ranks = GetParam();
  auto* outcomes = run_mismatch(ranks, [](Team& team, bool odd) {
    const std::int64_t block = odd ? 3 : 2;
    std::vector<std::int16_t> send(3 * team.size(), 1), recv(3 * team.size());
    const shmcoll::Datatype type{Dtype::i16};
    team.alltoall(send.data(), block, type, recv.data(), block, type);
  });
  expect_every_rank_names(*outcomes, ranks, "the count differs");
  EXPECT_NE(std::string(outcomes->message[0]).find("alltoall(block bytes 6)"), std::string::npos)
      << outcomes->message[0];
}

INSTANTIATE_TEST_SUITE_P(Ranks, MismatchedCall, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Equal calls whose arguments legitimately differ by rank agree: scatter's root passes a send
// count and type, the others a receive count and type, of the same bytes.
TEST(MatchedCall, RankSpecificArgumentsOfOneCallAgree) {
  auto* outcomes = run_mismatch(4, [](Team& team, bool) {
    std::vector<std::int32_t> send(8 * team.size(), 7), recv(8);
    const shmcoll::Datatype ints{Dtype::i32};
    const shmcoll::Datatype bytes{Dtype::byte};
    if (team.rank() == 1) {
      team.scatter(send.data(), 8, ints, shmcoll::in_place, 0, ints, 1);
    } else {
      team.scatter(nullptr, 0, ints, recv.data(), 32, bytes, 1);
    }
    team.allgather(shmcoll::in_place, 0, ints, send.data(), 8, ints);
  });
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_EQ(outcomes->code[rank], -1) << outcomes->message[rank];
}

// SHMCOLL_CHECK_CALLS=0 switches the check off: a mismatch that happens not to hang goes through.
TEST(MismatchedCall, CheckCanBeSwitchedOff) {
  ScopedEnv off("SHMCOLL_CHECK_CALLS", "0");
  auto* outcomes = run_mismatch(2, [](Team& team, bool odd) {
    std::int32_t value = team.rank();
    team.allreduce(shmcoll::in_place, &value, 1, Dtype::i32, odd ? Op::max : Op::sum);
  });
  EXPECT_EQ(outcomes->code[0], -1) << outcomes->message[0];
  EXPECT_EQ(outcomes->code[1], -1) << outcomes->message[1];
}

}  // namespace
