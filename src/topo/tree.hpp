// The hierarchy tree over a team: ranks grouped by the topology levels they share, each group's
// lowest rank its leader, leaders grouped again one level up. Plain data, no collectives: the
// algorithms in coll/ walk it.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topo/topology.hpp"

namespace shmcoll::topo {

struct HierarchyLevel {
  Level level;
  int radix = 0;  // most children a member has inside one group; 0: all on the leader (flat)
};

// SHMCOLL_HIERARCHY: levels widest first, each optionally with ":radix", e.g. "package,numa:4,
// core". Unknown names, repeats and radix 1 are invalid_argument errors naming the variable.
std::vector<HierarchyLevel> parse_hierarchy(std::string_view spec);
inline constexpr const char* kHierarchyEnv = "SHMCOLL_HIERARCHY";
inline constexpr const char* kDefaultHierarchy = "package,numa,l3,core:8";
std::string hierarchy_to_string(std::span<const HierarchyLevel> levels);
// SHMCOLL_HIERARCHY, or the default when it is unset or empty.
std::vector<HierarchyLevel> hierarchy_from_env();

// One group: the leaders of the parts one level split a set of ranks into (or, at the bottom,
// ranks sharing one core). Members are in rank order, so members[0] is the leader.
struct TreeGroup {
  int depth = 0;      // 0: the top group
  std::string level;  // the splitting level ("package", ...), or "rank" for ranks sharing a core
  std::vector<int> members;
  int leader() const { return members.front(); }
};

struct TreeNode {
  int parent = -1;            // -1 for the root
  std::vector<int> children;  // in rank order
  int depth = 0;              // depth of the group that links this rank to its parent
  int subtree_size = 1;       // this rank and all below it
};

struct Tree {
  std::vector<std::string> levels;  // the levels that split the team, widest first
  std::vector<TreeGroup> groups;    // top group first, then by depth and leader
  std::vector<TreeNode> nodes;      // one per rank
  // Every subtree is a contiguous range of ranks with the children's ranges in order, so a
  // non-commutative reduction can combine along the tree in rank order.
  bool rank_ordered = true;

  int size() const { return static_cast<int>(nodes.size()); }
  int depth() const { return static_cast<int>(levels.size()); }
  static constexpr const char* kSharedCoreLevel = "rank";
  static constexpr int root() { return 0; }  // every leader is its group's lowest rank

  // `where[r]` is rank r's location; a level that splits no group is dropped.
  static Tree build(std::span<const Location> where, std::span<const HierarchyLevel> levels);
};

}  // namespace shmcoll::topo
