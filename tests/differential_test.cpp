// The differential tester: random sequences of every collective (random kinds, sizes, types,
// derived datatypes, operations including a non-commutative one, roots, in-place choices and
// v/w layouts) on real forked processes, each result checked against a reference computed from
// the inputs (differential.hpp), then the whole sequence run again to check that every rank's
// results are bitwise the same run to run and that allreduce/bcast results agree across ranks.
#include "differential.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "shm/shared_pages.hpp"
#include "test_support.hpp"

namespace {

using namespace shmcoll::differential;
using shmcoll::testing::ScopedEnv;
using shmcoll::testing::shared_block;

constexpr int kMaxRanks = 64;

struct Shared {
  std::atomic<int> failures;
  char first_failure[512];
  std::uint64_t digest[2][kMaxRanks];
  std::uint64_t common_digest[kMaxRanks];
  std::atomic<int> ranks_that_shared;  // ranks holding shared pages at the end (kept buffer)
};

void run_sequence(int p, std::uint64_t seed, int calls, std::size_t slot_bytes,
                  std::int64_t largest, Shared* shared, int pass) {
  const shmcoll::Op matrix = shmcoll::Op::create(shmcoll::testing::matrix_product, false);
  const TypeMenu menu;
  const std::vector<Reduction> reductions = reduction_menu(matrix);
  shmcoll::Options options;
  options.slot_bytes = slot_bytes;
  shmcoll::run(p, options, [&](shmcoll::Team& team) {
    share_kept_buffer(team);
    std::uint64_t digest = 0, common = 0;
    for (int index = 0; index < calls; ++index) {
      const Call call = describe_call(seed, index, p, menu, reductions, largest);
      const std::string problem = run_and_check(team, call, menu, reductions, digest, common);
      if (!problem.empty() && shared->failures.fetch_add(1) == 0) {
        std::snprintf(shared->first_failure, sizeof shared->first_failure,
                      "p=%d seed=%llu call %d (%s, root %d, %s): rank %d: %s", p,
                      static_cast<unsigned long long>(seed), index,
                      shmcoll::collective_name(call.kind), call.root,
                      call.in_place ? "in place" : "not in place", team.rank(), problem.c_str());
      }
    }
    if (shmcoll::shm::shared_page_registrations() > 0) shared->ranks_that_shared.fetch_add(1);
    shared->digest[pass][team.rank()] = digest;
    shared->common_digest[team.rank()] = common;
  });
}

// Returns how many ranks held shared pages at the end of the second pass.
int check_sequences(int p, std::uint64_t seed, int calls, std::size_t slot_bytes,
                    std::int64_t largest = kLargestElements) {
  auto* shared = shared_block<Shared>();
  for (int pass = 0; pass < 2; ++pass) {
    shared->ranks_that_shared = 0;
    run_sequence(p, seed, calls, slot_bytes, largest, shared, pass);
    EXPECT_EQ(shared->failures.load(), 0) << shared->first_failure;
    if (shared->failures.load() != 0) return 0;
  }
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_EQ(shared->digest[0][rank], shared->digest[1][rank])
        << "rank " << rank << "'s results differ between two runs of the same sequence";
    EXPECT_EQ(shared->common_digest[rank], shared->common_digest[0])
        << "rank " << rank << "'s allreduce/bcast results differ from rank 0's";
  }
  return shared->ranks_that_shared.load();
}

class DifferentialTest : public ::testing::TestWithParam<int> {};

// A one-page slot makes mid-sized messages take many rounds and split at odd places; every
// send block from Team::allocate memory beyond a message line is read directly.
TEST_P(DifferentialTest, RandomSequencesSmallSlots) {
  ScopedEnv direct("SHMCOLL_DIRECT_MIN", "0");
  check_sequences(GetParam(), 1000 + GetParam(), GetParam() >= 5 ? 120 : 250, 4096);
}

// Send blocks from 16 KiB up in the kept buffer are read from its shared pages (moved there: the
// opt-in).
TEST_P(DifferentialTest, RandomSequencesDefaultSlots) {
  ScopedEnv shared_pages("SHMCOLL_SHARE_PAGES_MIN", "16K");
  ScopedEnv moved_pages("SHMCOLL_MOVE_PAGES", "1");
  const int p = GetParam();
  const int sharing = check_sequences(p, 2000 + p, p >= 5 ? 80 : 150, 0);
  if (p > 1) {
    EXPECT_EQ(sharing, p) << "ranks whose kept buffer was never shared";
  }
}

// Every send block of the exchange collectives beyond a message line is read out of its
// sender's memory with the kernel's cross-memory copy (receive layouts with gaps included).
TEST_P(DifferentialTest, RandomSequencesReadFromSendersMemory) {
  ScopedEnv cma("SHMCOLL_CMA_MIN", "1");
  const int p = GetParam();
  check_sequences(p, 4000 + p, p >= 5 ? 80 : 150, 0);
}

INSTANTIATE_TEST_SUITE_P(TeamSizes, DifferentialTest, ::testing::Values(1, 2, 3, 5, 8),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// Large teams on this 2-core machine (ranks share CPUs and wait by yielding): shorter sequences,
// and the one call in ten that may be large stays within what p^2 rank pairs can move quickly.
class LargeTeamDifferentialTest : public ::testing::TestWithParam<int> {};

TEST_P(LargeTeamDifferentialTest, RandomSequences) {
  check_sequences(GetParam(), 3000 + GetParam(), GetParam() >= 64 ? 24 : 60, 0,
                  GetParam() >= 64 ? 200 : 3000);
}

INSTANTIATE_TEST_SUITE_P(TeamSizes, LargeTeamDifferentialTest, ::testing::Values(16, 64),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// The tree of a synthetic two-package machine, with the tree algorithms forced where they apply.
TEST(DifferentialTreeTest, TwoPackageSyntheticTopology) {
  ScopedEnv topology("SHMCOLL_TOPOLOGY", "synthetic:package:2 core:4 pu:1");
  const shmcoll::testing::ForceTreeAlgorithms force_tree;
  check_sequences(8, 3000, 120, 4096);
}

}  // namespace
