// Topology discovery, rank mapping and the hierarchy tree, on synthetic and XML machines that do
// not exist here: every rank once, leaders lowest in their groups, one tree level per splitting
// topology level, subtree sizes that add up.
#include <gtest/gtest.h>
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "topo/mapping.hpp"
#include "topo/topology.hpp"
#include "topo/tree.hpp"

namespace {

using shmcoll::MapBy;
using shmcoll::topo::Level;
using shmcoll::topo::Location;
using shmcoll::topo::Topology;
using shmcoll::topo::Tree;

std::vector<Location> locations(const Topology& topology, int ranks, MapBy policy) {
  std::vector<Location> where;
  for (int core : shmcoll::topo::map_ranks(topology, ranks, policy)) {
    where.push_back(topology.core(core));
  }
  return where;
}

// The levels that split the team, computed independently of Tree::build: a level splits when
// keying ranks by (all earlier levels, this level) gives more sets than the earlier levels alone.
std::vector<std::string> splitting_levels(
    const std::vector<Location>& where, const std::vector<shmcoll::topo::HierarchyLevel>& levels) {
  std::vector<std::string> split;
  std::vector<Level> used;
  auto count_sets = [&](const std::vector<Level>& keys) {
    std::set<std::vector<int>> sets;
    for (const Location& at : where) {
      std::vector<int> key;
      for (Level level : keys) key.push_back(at.at(level));
      sets.insert(key);
    }
    return sets.size();
  };
  for (const auto& entry : levels) {
    std::vector<Level> with = used;
    with.push_back(entry.level);
    if (count_sets(with) > count_sets(used)) {
      split.push_back(shmcoll::topo::level_name(entry.level));
      used = with;
    }
  }
  if (count_sets(used) < where.size()) split.push_back("rank");
  return split;
}

void expect_valid_tree(const Tree& tree, const std::vector<Location>& where,
                       const std::vector<shmcoll::topo::HierarchyLevel>& levels) {
  const int n = static_cast<int>(where.size());
  ASSERT_EQ(tree.size(), n);
  EXPECT_EQ(tree.nodes[Tree::root()].parent, -1);
  // Every rank exactly once: each non-root has a parent, appears once among all children, and
  // reaches the root without a cycle.
  std::vector<int> seen_as_child(n, 0);
  for (int rank = 0; rank < n; ++rank) {
    for (int child : tree.nodes[rank].children) {
      ++seen_as_child[child];
      EXPECT_EQ(tree.nodes[child].parent, rank);
    }
    EXPECT_TRUE(std::is_sorted(tree.nodes[rank].children.begin(), tree.nodes[rank].children.end()));
  }
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_EQ(seen_as_child[rank], rank == Tree::root() ? 0 : 1) << "rank " << rank;
    int steps = 0;
    for (int at = rank; at != Tree::root() && steps <= n; at = tree.nodes[at].parent) ++steps;
    EXPECT_LE(steps, n) << "rank " << rank << " does not reach the root";
  }
  // Subtree sizes add up.
  EXPECT_EQ(tree.nodes[Tree::root()].subtree_size, n);
  for (int rank = 0; rank < n; ++rank) {
    int sum = 1;
    for (int child : tree.nodes[rank].children) sum += tree.nodes[child].subtree_size;
    EXPECT_EQ(tree.nodes[rank].subtree_size, sum);
  }
  // Leaders: each group's leader is its lowest member; members are distinct, in rank order.
  for (const auto& group : tree.groups) {
    ASSERT_GE(group.members.size(), 2u);
    EXPECT_TRUE(std::is_sorted(group.members.begin(), group.members.end()));
    EXPECT_EQ(std::adjacent_find(group.members.begin(), group.members.end()), group.members.end());
    EXPECT_EQ(group.leader(), *std::min_element(group.members.begin(), group.members.end()));
    EXPECT_EQ(group.level, tree.levels[group.depth]);
  }
  // Depth: one tree level per splitting topology level.
  EXPECT_EQ(tree.levels, splitting_levels(where, levels));
}

struct Shape {
  const char* name;
  const char* synthetic;
  int cores;
  std::vector<std::string> compact_levels;  // expected splitting levels, one rank per core
};

class SyntheticShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(SyntheticShapes, TreesAreValidForEveryMappingAndTeamSize) {
  const Shape& shape = GetParam();
  const Topology topology(std::string("synthetic:") + shape.synthetic);
  EXPECT_FALSE(topology.is_this_system());
  ASSERT_EQ(topology.core_count(), shape.cores);
  const auto levels = shmcoll::topo::parse_hierarchy(shmcoll::topo::kDefaultHierarchy);
  for (MapBy policy : {MapBy::core, MapBy::package, MapBy::numa}) {
    for (int ranks : {1, 2, 3, shape.cores / 2 + 1, shape.cores, shape.cores * 2 + 1}) {
      if (ranks < 1) continue;
      SCOPED_TRACE(std::string(shmcoll::topo::map_by_name(policy)) + " ranks " +
                   std::to_string(ranks));
      const auto where = locations(topology, ranks, policy);
      expect_valid_tree(Tree::build(where, levels), where, levels);
    }
  }
  const auto compact = locations(topology, shape.cores, MapBy::core);
  const Tree tree = Tree::build(compact, levels);
  EXPECT_EQ(tree.levels, shape.compact_levels);
  EXPECT_TRUE(tree.rank_ordered);  // compact mapping: every subtree a contiguous rank range
}

INSTANTIATE_TEST_SUITE_P(
    Topo, SyntheticShapes,
    ::testing::Values(Shape{"1x1x2", "pack:1 numa:1 core:2 pu:1", 2, {"core"}},
                      Shape{"2x2x4", "pack:2 numa:2 core:4 pu:1", 16, {"package", "numa", "core"}},
                      Shape{"4x2x8", "pack:4 numa:2 core:8 pu:1", 64, {"package", "numa", "core"}},
                      Shape{"2x96", "pack:2 core:96 pu:1", 192, {"package", "core"}},
                      Shape{"2x2x2l3x4smt2",
                            "pack:2 numa:2 l3:2 core:4 pu:2",
                            32,
                            {"package", "numa", "l3", "core"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Topo, TwoPackageShapeHasTheExpectedGroups) {
  const Topology topology("synthetic:pack:2 numa:2 core:4 pu:1");
  const auto where = locations(topology, 16, MapBy::core);
  const Tree tree =
      Tree::build(where, shmcoll::topo::parse_hierarchy(shmcoll::topo::kDefaultHierarchy));
  std::map<int, std::vector<std::size_t>> sizes_by_depth;
  for (const auto& group : tree.groups) sizes_by_depth[group.depth].push_back(group.members.size());
  EXPECT_EQ(sizes_by_depth[0], (std::vector<std::size_t>{2}));           // package leaders 0, 8
  EXPECT_EQ(sizes_by_depth[1], (std::vector<std::size_t>{2, 2}));        // NUMA leaders per package
  EXPECT_EQ(sizes_by_depth[2], (std::vector<std::size_t>{4, 4, 4, 4}));  // cores per NUMA node
  EXPECT_EQ(tree.nodes[0].children, (std::vector<int>{1, 2, 3, 4, 8}));
  EXPECT_EQ(tree.nodes[8].parent, 0);
  EXPECT_EQ(tree.nodes[12].parent, 8);
}

TEST(Topo, RadixLimitsChildrenPerGroupAndKeepsRankOrder) {
  const Topology topology("synthetic:pack:2 core:96 pu:1");
  const auto levels = shmcoll::topo::parse_hierarchy("package,core:4");
  const auto where = locations(topology, 192, MapBy::core);
  const Tree tree = Tree::build(where, levels);
  expect_valid_tree(tree, where, levels);
  EXPECT_TRUE(tree.rank_ordered);
  for (const auto& node : tree.nodes) {
    const auto core_children =
        std::count_if(node.children.begin(), node.children.end(),
                      [&](int c) { return tree.levels[tree.nodes[c].depth] == "core"; });
    EXPECT_LE(core_children, 4);
  }
  // 96 ranks in fan-out 4 need 4 hops from the package leader, not 1 with 95 children.
  int hops = 0;
  for (int at = 95; at != 0; at = tree.nodes[at].parent) ++hops;
  EXPECT_GE(hops, 3);
}

TEST(Topo, SpreadDealsPackagesThenNumaNodes) {
  const Topology topology("synthetic:pack:2 numa:2 core:4 pu:1");
  const auto order = shmcoll::topo::core_order(topology, MapBy::package);
  ASSERT_EQ(order.size(), 16u);
  EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), 16u);  // a permutation
  std::vector<int> packages, nodes;
  for (int i = 0; i < 4; ++i) {
    packages.push_back(topology.core(order[i]).at(Level::package));
    nodes.push_back(topology.core(order[i]).at(Level::numa));
  }
  EXPECT_EQ(packages, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(std::set<int>(nodes.begin(), nodes.end()).size(), 4u);
  const auto by_numa = shmcoll::topo::core_order(topology, MapBy::numa);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(topology.core(by_numa[i]).at(Level::numa), i);
}

TEST(Topo, OversubscribedRanksShareCoresAndFormRankGroups) {
  const Topology topology("synthetic:pack:2 core:2 pu:1");
  const auto levels = shmcoll::topo::parse_hierarchy(shmcoll::topo::kDefaultHierarchy);
  const auto where = locations(topology, 8, MapBy::core);
  const Tree tree = Tree::build(where, levels);
  expect_valid_tree(tree, where, levels);
  EXPECT_EQ(tree.levels, (std::vector<std::string>{"package", "core", "rank"}));
}

TEST(Topo, UnboundRanksGiveAFlatTree) {
  const std::vector<Location> nowhere(5);
  const Tree tree =
      Tree::build(nowhere, shmcoll::topo::parse_hierarchy(shmcoll::topo::kDefaultHierarchy));
  EXPECT_EQ(tree.levels, (std::vector<std::string>{"rank"}));
  EXPECT_EQ(tree.nodes[0].children, (std::vector<int>{1, 2, 3, 4}));
  const Tree alone = Tree::build(std::vector<Location>(1), {});
  EXPECT_EQ(alone.depth(), 0);
  EXPECT_EQ(alone.nodes[0].subtree_size, 1);
}

// Cores of different counts per package: hwloc restricts a synthetic machine, exports it as XML,
// and shmcoll loads that file.
TEST(Topo, IrregularXmlTopology) {
  hwloc_topology_t source;
  hwloc_topology_init(&source);
  ASSERT_EQ(hwloc_topology_set_synthetic(source, "pack:3 numa:1 core:6 pu:1"), 0);
  ASSERT_EQ(hwloc_topology_load(source), 0);
  hwloc_bitmap_t keep = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(keep, 0, 5);  // package 0: 6 cores
  hwloc_bitmap_set_range(keep, 6, 8);  // package 1: 3 cores
  hwloc_bitmap_set(keep, 12);          // package 2: 1 core
  ASSERT_EQ(hwloc_topology_restrict(source, keep, 0), 0);
  const std::string path = "/tmp/shmcoll-irregular-" + std::to_string(getpid()) + ".xml";
  ASSERT_EQ(hwloc_topology_export_xml(source, path.c_str(), 0), 0);
  hwloc_bitmap_free(keep);
  hwloc_topology_destroy(source);

  const Topology topology("xml:" + path);
  unlink(path.c_str());
  EXPECT_EQ(topology.core_count(), 10);
  EXPECT_EQ(topology.count(Level::package), 3);
  const auto levels = shmcoll::topo::parse_hierarchy(shmcoll::topo::kDefaultHierarchy);
  for (MapBy policy : {MapBy::core, MapBy::package, MapBy::numa}) {
    for (int ranks : {2, 7, 10, 13}) {
      SCOPED_TRACE(std::string(shmcoll::topo::map_by_name(policy)) + " ranks " +
                   std::to_string(ranks));
      const auto where = locations(topology, ranks, policy);
      expect_valid_tree(Tree::build(where, levels), where, levels);
    }
  }
  const auto compact = locations(topology, 10, MapBy::core);
  const Tree tree = Tree::build(compact, levels);
  EXPECT_EQ(tree.levels, (std::vector<std::string>{"package", "core"}));
  std::vector<std::size_t> core_groups;
  for (const auto& group : tree.groups) {
    if (group.level == "core") core_groups.push_back(group.members.size());
  }
  EXPECT_EQ(core_groups, (std::vector<std::size_t>{6, 3}));  // package 2's lone core: no group
}

TEST(Topo, ThisMachineLocatesBoundProcess) {
  const Topology machine("");
  ASSERT_TRUE(machine.is_this_system());
  ASSERT_GE(machine.core_count(), 1);
  const pid_t child = fork();
  if (child == 0) {
    const int last = machine.core_count() - 1;
    const bool ok = machine.bind_to_core(last) && machine.where_this_process_runs().core == last &&
                    machine.where_this_process_runs() == machine.core(last);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Topo, BadSpecificationsAreNamedErrors) {
  auto expect_error = [](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const shmcoll::Error& error) {
      EXPECT_EQ(error.code(), shmcoll::Errc::invalid_argument) << error.what();
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  expect_error([] { Topology("synthetic:pack:2 core:4"); }, "synthetic");
  expect_error([] { Topology("lstopo:whatever"); }, "lstopo:whatever");
  expect_error([] { shmcoll::topo::parse_hierarchy("package,socket"); }, "SHMCOLL_HIERARCHY");
  expect_error([] { shmcoll::topo::parse_hierarchy("package,socket"); }, "\"package,socket\"");
  expect_error([] { shmcoll::topo::parse_hierarchy("core,package"); }, "narrower");
  expect_error([] { shmcoll::topo::parse_hierarchy("numa:1"); }, "radix");
  expect_error([] { shmcoll::Placement::parse("node:"); }, "placement");
  expect_error([] { shmcoll::Placement::parse("remote"); }, "placement");
  EXPECT_THROW(Topology("xml:/nonexistent/topology.xml"), shmcoll::Error);
  EXPECT_EQ(shmcoll::Placement::parse("node:3").node, 3);
  EXPECT_EQ(shmcoll::topo::hierarchy_to_string(shmcoll::topo::parse_hierarchy("numa:4,core")),
            "numa:4,core");
}

}  // namespace
