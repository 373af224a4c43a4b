#include "topo/cost_model.hpp"

#include <algorithm>

namespace shmcoll::topo {

double CostModel::level_cost(const std::string& level) const {
  const auto known = level_from_name(level);
  return known ? handoff[static_cast<int>(*known)] : shared_core;
}

double CostModel::tree_handoffs(const Tree& tree) const {
  if (tree.size() < 2) return 0;
  // Ranks in decreasing order: every child (a higher rank) is done before its parent.
  std::vector<double> up(tree.nodes.size(), 0), down(tree.nodes.size(), 0);
  for (int rank = tree.size() - 1; rank >= 0; --rank) {
    const TreeNode& node = tree.nodes[rank];
    double arrived = 0;
    for (int child : node.children) {
      const double link = level_cost(tree.levels[tree.nodes[child].depth]);
      arrived = std::max(arrived, up[child] + link);
      down[rank] = std::max(down[rank], down[child] + link);
    }
    if (!node.children.empty()) arrived += poll * static_cast<double>(node.children.size() - 1);
    up[rank] = arrived;
  }
  return up[Tree::root()] + down[Tree::root()];
}

double CostModel::flat_handoffs(const Tree& tree) const {
  if (tree.size() < 2) return 0;
  const double widest = tree.levels.empty() ? shared_core : level_cost(tree.levels.front());
  return widest + poll * static_cast<double>(tree.size() - 2);
}

}  // namespace shmcoll::topo
