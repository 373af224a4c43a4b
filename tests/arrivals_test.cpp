// The algorithms in which the last rank to arrive completes the call for all (barrier_arrivals,
// allreduce_arrivals): bitwise the flat algorithms' results at every team size, barriers that
// hold (also those a rooted call's root releases), and arrival counts that stay right over
// thousands of calls mixed with other collectives.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Op;
using shmcoll::testing::ScopedEnv;
using shmcoll::testing::shared_block;

constexpr int kMaxRanks = 16;

struct Digests {
  std::uint64_t by_rank[2][kMaxRanks];  // [flat, arrivals]
  int failures;
};

std::uint64_t fold(std::uint64_t hash, const void* data, std::size_t bytes) {
  const auto* byte = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ byte[i]) * 1099511628211ull;
  return hash;
}

// Values whose sum depends on the order of the additions, different on every rank and call.
double term(int rank, int call, std::size_t i) {
  return 1.0 / (1.0 + static_cast<double>(i) + 977.0 * rank + 0.37 * call);
}

// Allreduces of up to a message line (13 doubles) with sum and a non-commutative operator,
// bcasts and barriers in between; the digest of every result.
std::uint64_t mixed_calls(shmcoll::Team& team, int calls, int& failures) {
  const Op second_minus_first = Op::create(
      [](const void* in, void* inout, std::size_t n, shmcoll::Dtype) {
        const auto* a = static_cast<const double*>(in);
        auto* b = static_cast<double*>(inout);
        for (std::size_t i = 0; i < n; ++i) b[i] = b[i] - 0.5 * a[i];
      },
      false);
  std::uint64_t hash = 1469598103934665603ull;
  std::vector<double> data(13);
  for (int call = 0; call < calls; ++call) {
    const std::size_t count = 1 + static_cast<std::size_t>(call) % data.size();
    for (std::size_t i = 0; i < count; ++i) data[i] = term(team.rank(), call, i);
    const std::span<double> values(data.data(), count);
    team.allreduce_in_place(values, call % 3 == 0 ? second_minus_first : Op::sum);
    hash = fold(hash, data.data(), count * sizeof(double));
    std::int64_t ranks_seen = 1;
    team.allreduce_in_place(std::span<std::int64_t>(&ranks_seen, 1), Op::sum);
    if (ranks_seen != team.size()) ++failures;
    std::int32_t word = team.rank() == call % team.size() ? call : -1;
    team.bcast(std::span<std::int32_t>(&word, 1), call % team.size());
    if (word != call) ++failures;
    if (call % 4 == 0) team.barrier();
  }
  return hash;
}

class Arrivals : public ::testing::TestWithParam<int> {};

TEST_P(Arrivals, AllreduceIsBitwiseTheFlatOneOverMixedCalls) {
  const int ranks = GetParam();
  auto* digests = shared_block<Digests>();
  const char* algorithms[2][2] = {{"allreduce_inline", "barrier_flat"},
                                  {"allreduce_arrivals", "barrier_arrivals"}};
  for (int which = 0; which < 2; ++which) {
    ScopedEnv allreduce("SHMCOLL_ALLREDUCE_ALGORITHM", algorithms[which][0]);
    ScopedEnv barrier("SHMCOLL_BARRIER_ALGORITHM", algorithms[which][1]);
    shmcoll::run(ranks, {}, [&](shmcoll::Team& team) {
      int failures = 0;
      digests->by_rank[which][team.rank()] = mixed_calls(team, 600, failures);
      __atomic_add_fetch(&digests->failures, failures, __ATOMIC_RELAXED);
    });
  }
  EXPECT_EQ(digests->failures, 0);
  for (int rank = 0; rank < ranks; ++rank) {
    EXPECT_EQ(digests->by_rank[0][rank], digests->by_rank[0][0]) << "flat, rank " << rank;
    EXPECT_EQ(digests->by_rank[1][rank], digests->by_rank[0][0]) << "arrivals, rank " << rank;
  }
}

// 200 steps of: (a bcast rooted at each rank in turn, when `rooted_call_first`), then a barrier
// after which every rank checks that all have reached the step; the failures seen.
int barrier_failures(int ranks, bool rooted_call_first) {
  struct Steps {
    int reached[kMaxRanks];
    int failures;
  };
  auto* steps = shared_block<Steps>();
  ScopedEnv barrier("SHMCOLL_BARRIER_ALGORITHM", "barrier_arrivals");
  shmcoll::run(ranks, {}, [&](shmcoll::Team& team) {
    for (int step = 1; step <= 200; ++step) {
      if (rooted_call_first) {
        const int root = step % team.size();
        std::int32_t word = team.rank() == root ? step : -1;
        team.bcast(std::span<std::int32_t>(&word, 1), root);
        if (word != step) __atomic_add_fetch(&steps->failures, 1, __ATOMIC_RELAXED);
      }
      __atomic_store_n(&steps->reached[team.rank()], step, __ATOMIC_RELEASE);
      team.barrier();
      for (int rank = 0; rank < team.size(); ++rank) {
        if (__atomic_load_n(&steps->reached[rank], __ATOMIC_ACQUIRE) < step) {
          __atomic_add_fetch(&steps->failures, 1, __ATOMIC_RELAXED);
        }
      }
      team.barrier();  // nobody starts the next step before all have checked
    }
  });
  return steps->failures;
}

TEST_P(Arrivals, BarrierHoldsEveryoneUntilAllArrive) {
  EXPECT_EQ(barrier_failures(GetParam(), false), 0);
}

// After a rooted call its root releases the barrier (every rank a root in turn): it still holds
// everyone until all have arrived, and the root leaves no earlier than that either.
TEST_P(Arrivals, BarrierAfterARootedCallHoldsEveryoneUntilAllArrive) {
  EXPECT_EQ(barrier_failures(GetParam(), true), 0);
}

INSTANTIATE_TEST_SUITE_P(TeamSizes, Arrivals, ::testing::Values(2, 3, 5, 8, 16),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// A mismatch is seen by the rank that reads every line (the last to arrive) and fails them all.
TEST(Arrivals, MismatchedCallsFailEveryRank) {
  auto* codes = shared_block<Digests>();
  ScopedEnv allreduce("SHMCOLL_ALLREDUCE_ALGORITHM", "allreduce_arrivals");
  EXPECT_THROW(
      shmcoll::run(5, {},
                   [&](shmcoll::Team& team) {
                     std::int32_t value = 1;
                     try {
                       if (team.rank() == 3) {
                         team.allreduce_in_place(std::span<std::int32_t>(&value, 1), Op::max);
                       } else {
                         team.allreduce_in_place(std::span<std::int32_t>(&value, 1), Op::sum);
                       }
                     } catch (const shmcoll::Error& error) {
                       if (error.code() == shmcoll::Errc::mismatched_call) {
                         __atomic_add_fetch(&codes->failures, 1, __ATOMIC_RELAXED);
                       }
                       throw;
                     }
                   }),
      shmcoll::Error);
  EXPECT_EQ(codes->failures, 5);
}

// Runs `calls` on `ranks` ranks, which must fail; returns how many ranks failed with
// mismatched_call.
int ranks_failing_with_mismatch(int ranks, const std::function<void(shmcoll::Team&)>& calls) {
  auto* codes = shared_block<Digests>();
  EXPECT_THROW(shmcoll::run(ranks, {},
                            [&](shmcoll::Team& team) {
                              try {
                                calls(team);
                              } catch (const shmcoll::Error& error) {
                                if (error.code() == shmcoll::Errc::mismatched_call) {
                                  __atomic_add_fetch(&codes->failures, 1, __ATOMIC_RELAXED);
                                }
                                throw;
                              }
                            }),
               shmcoll::Error);
  return codes->failures;
}

// A rank that calls something else where the others call a barrier that a root releases: every
// rank fails, the root (which reads every rank's line) and the others alike (a rank slow enough
// may see the failure as it starts the bcast before).
TEST(Arrivals, AMismatchAtABarrierARootReleasesFailsEveryRank) {
  ScopedEnv barrier("SHMCOLL_BARRIER_ALGORITHM", "barrier_arrivals");
  EXPECT_EQ(ranks_failing_with_mismatch(4,
                                        [](shmcoll::Team& team) {
                                          std::int32_t word = 7;
                                          team.bcast(std::span<std::int32_t>(&word, 1), 2);
                                          if (team.rank() == 1) {
                                            team.allreduce_in_place(
                                                std::span<std::int32_t>(&word, 1), Op::sum);
                                          } else {
                                            team.barrier();
                                          }
                                        }),
            4);
}

// Ranks that disagree on a rooted call's root, where the odd one only writes (a bcast or a
// gather that nobody waits in), meet at a barrier with different releasers: two ranks that each
// take themselves for it (bcast, roots 0 and the last rank), or nobody (gather: the others name
// the last rank, which names 0). Every rank fails with mismatched_call, none waits forever.
TEST(Arrivals, CrossedRootsBeforeABarrierARootReleasesFailEveryRank) {
  ScopedEnv barrier("SHMCOLL_BARRIER_ALGORITHM", "barrier_arrivals");
  ScopedEnv timeout("SHMCOLL_TIMEOUT", "20s");  // a hang fails with timeout, not mismatched_call
  for (const bool gather : {false, true}) {
    for (const int ranks : {2, 3}) {
      const int failed = ranks_failing_with_mismatch(ranks, [&](shmcoll::Team& team) {
        const int odd = ranks - 1;
        const bool is_odd = team.rank() == odd;
        std::int32_t word = 7;
        std::vector<std::int32_t> all(static_cast<std::size_t>(ranks));
        if (gather) {
          team.gather(&word, 1, shmcoll::Dtype::i32, all.data(), 1, shmcoll::Dtype::i32,
                      is_odd ? 0 : odd);
        } else {
          team.bcast(std::span<std::int32_t>(&word, 1), is_odd ? odd : 0);
        }
        team.barrier();
      });
      EXPECT_EQ(failed, ranks) << (gather ? "gather" : "bcast") << ", " << ranks << " ranks";
    }
  }
}

}  // namespace
