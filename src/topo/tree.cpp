#include "topo/tree.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>

#include "util/fail.hpp"

namespace shmcoll::topo {

std::vector<HierarchyLevel> parse_hierarchy(std::string_view spec) {
  std::vector<HierarchyLevel> levels;
  auto reject = [whole = spec](auto&&... parts) {
    fail(Errc::invalid_argument, "hierarchy \"", whole, "\" (", kHierarchyEnv, "): ", parts...,
         " (levels are package, numa, l3, l2, core, widest first, each optionally :radix >= 2)");
  };
  for (std::string_view rest = spec; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t colon = item.find(':');
    HierarchyLevel entry;
    const auto level = level_from_name(item.substr(0, colon));
    if (!level) reject("unknown level \"", item.substr(0, colon), "\"");
    entry.level = *level;
    if (colon != std::string_view::npos) {
      const std::string_view digits = item.substr(colon + 1);
      const auto [end, error] =
          std::from_chars(digits.data(), digits.data() + digits.size(), entry.radix);
      if (error != std::errc{} || end != digits.data() + digits.size() || entry.radix < 2) {
        reject("radix \"", digits, "\" of level ", level_name(entry.level), " is not >= 2");
      }
    }
    for (const auto& earlier : levels) {
      if (earlier.level >= entry.level) {
        reject("level ", level_name(entry.level), " is repeated or comes after a narrower one");
      }
    }
    levels.push_back(entry);
  }
  return levels;
}

std::vector<HierarchyLevel> hierarchy_from_env() {
  const char* text = std::getenv(kHierarchyEnv);
  return parse_hierarchy(text && *text ? text : kDefaultHierarchy);
}

std::string hierarchy_to_string(std::span<const HierarchyLevel> levels) {
  std::string text;
  for (const auto& entry : levels) {
    if (!text.empty()) text += ',';
    text += level_name(entry.level);
    if (entry.radix > 0) text += ":" + std::to_string(entry.radix);
  }
  return text;
}

namespace {

using RankSet = std::vector<int>;  // ascending ranks

// Links members[lo] to the first member of each of up to `radix` contiguous chunks of
// members(lo, hi), recursively, so every subtree is a contiguous run of the group.
void link_group(Tree& tree, const std::vector<int>& members, std::size_t lo, std::size_t hi,
                int radix, int depth) {
  const std::size_t rest = hi - lo - 1;
  if (rest == 0) return;
  const std::size_t chunks = radix > 0 ? std::min<std::size_t>(radix, rest) : rest;
  std::size_t first = lo + 1;
  for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
    const std::size_t length = rest / chunks + (chunk < rest % chunks ? 1 : 0);
    TreeNode& child = tree.nodes[members[first]];
    child.parent = members[lo];
    child.depth = depth;
    link_group(tree, members, first, first + length, radix, depth);
    first += length;
  }
}

void add_group(Tree& tree, int depth, const char* level, std::vector<int> members, int radix) {
  if (members.size() < 2) return;
  link_group(tree, members, 0, members.size(), radix, depth);
  tree.groups.push_back(TreeGroup{depth, level, std::move(members)});
}

int finish_subtree(Tree& tree, int rank, int& next_expected) {
  TreeNode& node = tree.nodes[rank];
  if (rank != next_expected) tree.rank_ordered = false;
  ++next_expected;
  node.subtree_size = 1;
  for (int child : node.children) node.subtree_size += finish_subtree(tree, child, next_expected);
  return node.subtree_size;
}

}  // namespace

Tree Tree::build(std::span<const Location> where, std::span<const HierarchyLevel> levels) {
  Tree tree;
  const int size = static_cast<int>(where.size());
  tree.nodes.resize(where.size());
  std::vector<RankSet> sets(1);
  for (int rank = 0; rank < size; ++rank) sets[0].push_back(rank);

  for (const HierarchyLevel& entry : levels) {
    std::vector<std::vector<RankSet>> parts_of_set;
    bool splits = false;
    for (const RankSet& set : sets) {
      std::map<std::int32_t, RankSet> by_index;  // unknown (-1) ranks stay together
      for (int rank : set) by_index[where[rank].at(entry.level)].push_back(rank);
      std::vector<RankSet> parts;
      for (auto& [index, part] : by_index) parts.push_back(std::move(part));
      std::sort(parts.begin(), parts.end());  // by lowest rank
      splits |= parts.size() > 1;
      parts_of_set.push_back(std::move(parts));
    }
    if (!splits) continue;
    const int depth = tree.depth();
    tree.levels.push_back(level_name(entry.level));
    std::vector<RankSet> next;
    for (auto& parts : parts_of_set) {
      std::vector<int> leaders;
      for (auto& part : parts) {
        leaders.push_back(part.front());
        next.push_back(std::move(part));
      }
      add_group(tree, depth, level_name(entry.level), std::move(leaders), entry.radix);
    }
    sets = std::move(next);
  }
  // Ranks left sharing a set share a core (oversubscription) or are not located at all.
  const bool shared = std::any_of(sets.begin(), sets.end(), [](auto& s) { return s.size() > 1; });
  if (shared) {
    const int depth = tree.depth();
    tree.levels.push_back(kSharedCoreLevel);
    const int radix = levels.empty() ? 0 : levels.back().radix;  // the narrowest level's
    for (RankSet& set : sets) add_group(tree, depth, kSharedCoreLevel, std::move(set), radix);
  }

  for (int rank = 1; rank < size; ++rank) {
    tree.nodes[tree.nodes[rank].parent].children.push_back(rank);  // ascending: rank order
  }
  if (size > 0) {
    int next_expected = 0;
    finish_subtree(tree, root(), next_expected);
  }
  std::stable_sort(tree.groups.begin(), tree.groups.end(),
                   [](const TreeGroup& a, const TreeGroup& b) { return a.depth < b.depth; });
  return tree;
}

}  // namespace shmcoll::topo
