// The collectives over the hierarchy tree, on real forked processes: 8 ranks oversubscribing this
// machine, mapped onto synthetic 2-package topologies compactly and spread, checked against
// references computed from the inputs, with commutative and non-commutative operations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "api/team_state.hpp"
#include "coll/tunables.hpp"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"
#include "topo/mapping.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Op;
using shmcoll::coll::Algorithm;
using shmcoll::testing::matrix_product;
using shmcoll::testing::ScopedEnv;
using shmcoll::testing::shared_block;

struct Shared {
  std::atomic<int> failures;
  std::atomic<int> arrivals;
  std::atomic<int> tree_depth;
  std::atomic<int> rank_ordered;
};

#define CHECK_OR_COUNT(condition)                                                                \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      std::fprintf(stderr, "rank %d: %s failed (line %d)\n", team.rank(), #condition, __LINE__); \
      shared->failures.fetch_add(1);                                                             \
    }                                                                                            \
  } while (0)

std::uint64_t matrix_entry(int rank, std::size_t i) {
  return (i % 4 == 3) ? 1 : (i * 13 + static_cast<std::size_t>(rank) * 5 + 1) % 7;
}

std::vector<std::uint64_t> matrix_reference(int ranks, std::size_t count) {
  std::vector<std::uint64_t> product(count);
  for (std::size_t i = 0; i < count; ++i) product[i] = matrix_entry(ranks - 1, i);
  for (int rank = ranks - 2; rank >= 0; --rank) {  // M0 x (M1 x (... x Mp-1))
    std::vector<std::uint64_t> left(count);
    for (std::size_t i = 0; i < count; ++i) left[i] = matrix_entry(rank, i);
    matrix_product(left.data(), product.data(), count, Dtype::u64);
  }
  return product;
}

void exercise(shmcoll::Team& team, Shared* shared) {
  const int p = team.size();
  const int me = team.rank();
  const auto& state = shmcoll::detail::TeamAccess::state(team);
  if (me == 0) {
    shared->tree_depth = state.tree.depth();
    shared->rank_ordered = state.tree.rank_ordered;
  }
  const Op matrix = Op::create(matrix_product, false);

  for (int phase = 1; phase <= 20; ++phase) {  // nobody leaves a barrier before all arrived
    shared->arrivals.fetch_add(1);
    team.barrier();
    CHECK_OR_COUNT(shared->arrivals.load() >= phase * p);
    team.barrier();
  }

  for (std::size_t count : {std::size_t{1}, std::size_t{5}, std::size_t{15}}) {
    std::vector<std::int64_t> send(count), recv(count, -1), want(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
      send[i] = (me + 1) * static_cast<std::int64_t>(i + 3);
      for (int r = 0; r < p; ++r) want[i] += (r + 1) * static_cast<std::int64_t>(i + 3);
    }
    team.allreduce(send.data(), recv.data(), static_cast<std::int64_t>(count), Dtype::i64, Op::sum);
    CHECK_OR_COUNT(recv == want);
    std::vector<std::int64_t> in_place = send;
    team.allreduce(shmcoll::in_place, in_place.data(), static_cast<std::int64_t>(count), Dtype::i64,
                   Op::sum);
    CHECK_OR_COUNT(in_place == want);
    std::vector<std::int64_t> prefix(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
      for (int r = 0; r <= me; ++r) prefix[i] += (r + 1) * static_cast<std::int64_t>(i + 3);
    }
    team.scan(send.data(), recv.data(), static_cast<std::int64_t>(count), Dtype::i64, Op::sum);
    CHECK_OR_COUNT(recv == prefix);
    for (std::size_t i = 0; i < count; ++i) prefix[i] -= send[i];
    std::fill(recv.begin(), recv.end(), -1);
    team.exscan(send.data(), recv.data(), static_cast<std::int64_t>(count), Dtype::i64, Op::sum);
    CHECK_OR_COUNT(me == 0 ? recv == std::vector<std::int64_t>(count, -1) : recv == prefix);
    for (int root = 0; root < p; ++root) {
      std::fill(recv.begin(), recv.end(), -1);
      team.reduce(send.data(), me == root ? recv.data() : nullptr, static_cast<std::int64_t>(count),
                  Dtype::i64, Op::sum, root);
      if (me == root) CHECK_OR_COUNT(recv == want);
      std::vector<std::int64_t> data(count, me == root ? root * 1000 + 7 : -1);
      team.bcast(data.data(), static_cast<std::int64_t>(count), Dtype::i64, root);
      CHECK_OR_COUNT(data == std::vector<std::int64_t>(count, root * 1000 + 7));
    }
  }

  for (std::size_t count : {std::size_t{4}, std::size_t{12}}) {  // 1 and 3 matrices
    std::vector<std::uint64_t> send(count), recv(count, 0);
    for (std::size_t i = 0; i < count; ++i) send[i] = matrix_entry(me, i);
    const auto want = matrix_reference(p, count);
    team.allreduce(send.data(), recv.data(), static_cast<std::int64_t>(count), Dtype::u64, matrix);
    CHECK_OR_COUNT(recv == want);
    for (int root = 0; root < p; root += 3) {
      std::fill(recv.begin(), recv.end(), 0);
      team.reduce(send.data(), recv.data(), static_cast<std::int64_t>(count), Dtype::u64, matrix,
                  root);
      if (me == root) CHECK_OR_COUNT(recv == want);
    }
    team.scan(send.data(), recv.data(), static_cast<std::int64_t>(count), Dtype::u64, matrix);
    CHECK_OR_COUNT(recv == matrix_reference(me + 1, count));
    std::vector<std::uint64_t> in_place = send;
    team.exscan(shmcoll::in_place, in_place.data(), static_cast<std::int64_t>(count), Dtype::u64,
                matrix);
    CHECK_OR_COUNT(in_place == (me == 0 ? send : matrix_reference(me, count)));
  }
}

struct Case {
  const char* name;
  const char* topology;
  shmcoll::MapBy map_by;
  int expected_depth;
  bool rank_ordered;
};

class TreeCollectives : public ::testing::TestWithParam<Case> {};

TEST_P(TreeCollectives, MatchReferencesWithEightOversubscribedRanks) {
  const Case& c = GetParam();
  // At 8 ranks the cost model prefers the flat algorithms; force the tree ones (they still give
  // way to flat for a non-commutative op on a tree that is not rank-ordered).
  const shmcoll::testing::ForceTreeAlgorithms force_tree;
  auto* shared = shared_block<Shared>();
  shmcoll::Options options;
  options.bind = shmcoll::Binding::core;
  options.map_by = c.map_by;
  options.topology = c.topology;
  options.placement = shmcoll::Placement{shmcoll::Placement::Kind::none};
  shmcoll::run(8, options, [&](shmcoll::Team& team) { exercise(team, shared); });
  EXPECT_EQ(shared->failures.load(), 0);
  EXPECT_EQ(shared->tree_depth.load(), c.expected_depth);
  EXPECT_EQ(shared->rank_ordered.load() != 0, c.rank_ordered);
}

INSTANTIATE_TEST_SUITE_P(
    Synthetic, TreeCollectives,
    ::testing::Values(
        // 2 packages x 2 NUMA nodes x 2 cores: package, numa and core levels.
        Case{"compact_2x2x2", "synthetic:pack:2 numa:2 core:2 pu:1", shmcoll::MapBy::core, 3, true},
        // Spread: packages alternate by rank, so subtrees are not rank ranges and the
        // non-commutative reductions must take the flat algorithms.
        Case{"spread_2x2x2", "synthetic:pack:2 numa:2 core:2 pu:1", shmcoll::MapBy::package, 3,
             false},
        // 2 packages x 2 cores for 8 ranks: ranks wrap around (core 0 holds ranks 0 and 4), two
        // ranks per core form the bottom level, and subtrees are not rank ranges.
        Case{"compact_2x2_shared_cores", "synthetic:pack:2 core:2 pu:1", shmcoll::MapBy::core, 3,
             false}),
    [](const auto& info) { return std::string(info.param.name); });

shmcoll::coll::TreeShape shape_of(const char* topology_spec, int ranks, shmcoll::MapBy policy) {
  const shmcoll::topo::Topology topology(topology_spec);
  std::vector<shmcoll::topo::Location> where;
  for (int core : shmcoll::topo::map_ranks(topology, ranks, policy)) {
    where.push_back(topology.core(core));
  }
  return shmcoll::coll::TreeShape::of(
      shmcoll::topo::Tree::build(where, shmcoll::topo::hierarchy_from_env()));
}

TEST(TreeCollectives, SelectionTakesTheTreeOnlyWhereItPaysAndIsExact) {
  constexpr const char* k64 = "synthetic:pack:4 numa:2 core:8 pu:1";
  const auto ordered = shape_of(k64, 64, shmcoll::MapBy::core);
  const auto unordered = shape_of(k64, 64, shmcoll::MapBy::package);
  // 8 ranks on 2 packages: the flat algorithms' 8 reads cost less than the tree's levels.
  const auto small = shape_of("synthetic:pack:2 numa:2 core:2 pu:1", 8, shmcoll::MapBy::core);
  // 8 ranks on this machine's 2 cores: handoffs between ranks sharing a core are context switches.
  const auto shared = shape_of("synthetic:pack:1 numa:1 core:2 pu:1", 8, shmcoll::MapBy::core);
  EXPECT_TRUE(ordered.pays && ordered.rank_ordered);
  EXPECT_TRUE(unordered.pays && !unordered.rank_ordered);
  EXPECT_FALSE(small.pays);
  EXPECT_FALSE(shared.pays);
  const auto tunables = shmcoll::coll::Tunables::from_env().team;
  using shmcoll::coll::select_allreduce;
  EXPECT_EQ(select_allreduce(tunables, ordered, 64, false), Algorithm::allreduce_tree);
  EXPECT_EQ(select_allreduce(tunables, unordered, 64, true), Algorithm::allreduce_tree);
  EXPECT_EQ(select_allreduce(tunables, unordered, 64, false), Algorithm::allreduce_inline);
  EXPECT_EQ(select_allreduce(tunables, shared, 64, true), Algorithm::allreduce_inline);
  EXPECT_EQ(select_allreduce(tunables, small, 64, true), Algorithm::allreduce_inline);
  // Medium payloads take the tree through the slots up to SHMCOLL_TREE_MAX, then the slices.
  EXPECT_EQ(select_allreduce(tunables, ordered, 4096, true), Algorithm::allreduce_tree);
  EXPECT_EQ(select_allreduce(tunables, ordered, 16 << 10, false), Algorithm::allreduce_tree);
  EXPECT_EQ(select_allreduce(tunables, ordered, (16 << 10) + 1, true), Algorithm::allreduce_slices);
  EXPECT_EQ(select_allreduce(tunables, unordered, 4096, false), Algorithm::allreduce_all_read);
  EXPECT_EQ(shmcoll::coll::select_reduce(tunables, ordered, 4096, false), Algorithm::reduce_tree);
  EXPECT_EQ(shmcoll::coll::select_bcast(tunables, unordered, 16 << 10), Algorithm::bcast_tree);
  EXPECT_EQ(shmcoll::coll::select_bcast(tunables, shared, 4096), Algorithm::bcast_pipelined);
  EXPECT_EQ(shmcoll::coll::select_barrier(tunables, ordered), Algorithm::barrier_tree);
  EXPECT_EQ(shmcoll::coll::select_barrier(tunables, shared), Algorithm::barrier_flat);
  EXPECT_EQ(shmcoll::coll::select_bcast(tunables, unordered, 120), Algorithm::bcast_tree);
  EXPECT_EQ(shmcoll::coll::select_reduce(tunables, unordered, 8, false), Algorithm::reduce_inline);
  // A prefix needs rank-ordered subtrees even for a commutative op.
  EXPECT_EQ(shmcoll::coll::select_scan(tunables, ordered, 64), Algorithm::scan_tree);
  EXPECT_EQ(shmcoll::coll::select_scan(tunables, unordered, 64), Algorithm::scan_inline);
  EXPECT_EQ(shmcoll::coll::select_scan(tunables, ordered, 121), Algorithm::scan_tree);
  EXPECT_EQ(shmcoll::coll::select_scan(tunables, ordered, (16 << 10) + 1), Algorithm::scan_chunks);
  EXPECT_EQ(shmcoll::coll::select_scan(tunables, shared, 121), Algorithm::scan_chunks);
  // Ranks that outnumber their CPUs (as every member's profile says): the last rank to arrive
  // completes small barriers and allreduces for all.
  auto crowded = shared;
  crowded.ranks_share_cpus = true;
  EXPECT_EQ(shmcoll::coll::select_barrier(tunables, crowded), Algorithm::barrier_arrivals);
  EXPECT_EQ(select_allreduce(tunables, crowded, 104, false), Algorithm::allreduce_arrivals);
  EXPECT_EQ(select_allreduce(tunables, crowded, 105, true), Algorithm::allreduce_all_read);
}

// Forcing the tree algorithms on this machine's own (flat or shallow) tree, unbound, at odd sizes.
TEST(TreeCollectives, ForcedTreeAlgorithmsOnThisMachine) {
  const shmcoll::testing::ForceTreeAlgorithms force_tree;
  ScopedEnv hierarchy("SHMCOLL_HIERARCHY", "core:2");
  for (int p : {1, 2, 3, 5}) {
    auto* shared = shared_block<Shared>();
    shmcoll::run(p, {}, [&](shmcoll::Team& team) { exercise(team, shared); });
    EXPECT_EQ(shared->failures.load(), 0) << p << " ranks";
  }
}

}  // namespace
