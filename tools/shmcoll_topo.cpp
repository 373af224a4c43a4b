// shmcoll-topo: what shmcoll would do on this machine (or a described one) for N ranks: the
// machine summary, which core each rank gets, and the hierarchy tree the collectives walk.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "api/rank_setup.hpp"
#include "topo/cost_model.hpp"
#include "topo/mapping.hpp"
#include "topo/topology.hpp"
#include "topo/tree.hpp"

namespace {

using shmcoll::topo::Level;
using shmcoll::topo::Location;
using shmcoll::topo::Tree;

std::string index_text(std::int32_t index) {
  return index == Location::kUnknown ? "-" : std::to_string(index);
}

void print_mapping(const std::vector<Location>& where) {
  std::printf("\nrank -> core (logical indices as lstopo's L#; PU as P#; '-' = not confined)\n");
  std::printf("%6s %6s %6s %8s %6s %6s %6s\n", "rank", "core", "PU", "package", "numa", "l3", "l2");
  for (std::size_t rank = 0; rank < where.size(); ++rank) {
    const Location& at = where[rank];
    std::printf("%6zu %6s %6s %8s %6s %6s %6s\n", rank, index_text(at.core).c_str(),
                index_text(at.pu_os_index).c_str(), index_text(at.at(Level::package)).c_str(),
                index_text(at.at(Level::numa)).c_str(), index_text(at.at(Level::l3)).c_str(),
                index_text(at.at(Level::l2)).c_str());
  }
}

void print_subtree(const Tree& tree, int rank, int indent) {
  const auto& node = tree.nodes[rank];
  std::printf("%*srank %d", indent, "", rank);
  if (node.parent >= 0) std::printf("  (%s)", tree.levels[node.depth].c_str());
  if (!node.children.empty()) {
    std::printf("  %zu children, subtree of %d", node.children.size(), node.subtree_size);
  }
  std::printf("\n");
  for (int child : node.children) print_subtree(tree, child, indent + 2);
}

void print_tree(const Tree& tree, const std::string& hierarchy) {
  std::printf("\nhierarchy %s: ", hierarchy.c_str());
  if (tree.levels.empty()) {
    std::printf("no level splits the team (one rank)\n");
  } else {
    std::printf("%d level(s) split the team:", tree.depth());
    for (const auto& level : tree.levels) std::printf(" %s", level.c_str());
    std::printf("%s\n", tree.rank_ordered ? " (rank-ordered: non-commutative reductions may use it)"
                                          : " (not rank-ordered: non-commutative reductions "
                                            "stay flat)");
  }
  for (int depth = 0; depth < tree.depth(); ++depth) {
    int groups = 0, smallest = 1 << 30, largest = 0;
    for (const auto& group : tree.groups) {
      if (group.depth != depth) continue;
      ++groups;
      smallest = std::min<int>(smallest, static_cast<int>(group.members.size()));
      largest = std::max<int>(largest, static_cast<int>(group.members.size()));
    }
    std::printf("  depth %d (%s): %d group(s) of %d", depth, tree.levels[depth].c_str(), groups,
                smallest);
    if (largest != smallest) std::printf("-%d", largest);
    std::printf(" members\n");
  }
  const shmcoll::topo::CostModel model;
  std::printf(
      "\ncost model, small allreduce/barrier critical path in cross-core handoffs h "
      "(docs/performance-details.md, Cost model): tree %.1f h, flat %.1f h\n",
      model.tree_handoffs(tree), model.flat_handoffs(tree));
  std::printf("\ntree (each rank under its parent, with the level that links them)\n");
  print_subtree(tree, Tree::root(), 2);
}

void write_dot(const Tree& tree, const std::vector<Location>& where, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "digraph shmcoll_tree {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (int rank = 0; rank < tree.size(); ++rank) {
    const Location& at = where[static_cast<std::size_t>(rank)];
    out << "  r" << rank << " [label=\"rank " << rank << "\\ncore " << index_text(at.core)
        << " pkg " << index_text(at.at(Level::package)) << " numa "
        << index_text(at.at(Level::numa)) << "\"];\n";
  }
  for (int rank = 0; rank < tree.size(); ++rank) {
    for (int child : tree.nodes[rank].children) {
      out << "  r" << rank << " -> r" << child << " [label=\""
          << tree.levels[tree.nodes[child].depth] << "\"];\n";
    }
  }
  out << "}\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Show what shmcoll does on this machine, or on one described to hwloc: the machine, which "
      "core each rank gets, and the hierarchy tree its collectives walk.\n"
      "Example: shmcoll-topo --np 64 --topology 'synthetic:pack:2 numa:2 l3:4 core:8 pu:1' "
      "--map-by package --dot tree.dot"};
  int ranks = 0;
  std::string topology_spec, hierarchy, bind_to = "core", map_by = "core", dot_path;
  app.add_option("-n,--np", ranks, "number of ranks (default: one per core)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--topology", topology_spec,
                 "synthetic:<hwloc description> or xml:<file> (default: SHMCOLL_TOPOLOGY, else "
                 "this machine)");
  app.add_option("--hierarchy", hierarchy,
                 "levels to split on, e.g. package,numa:4,core (default: SHMCOLL_HIERARCHY, else "
                 "package,numa,l3,core:8)");
  app.add_option("--bind-to", bind_to, "core or none (unbound ranks are not located: flat tree)")
      ->check(CLI::IsMember({"core", "none"}));
  app.add_option("--map-by", map_by, "core (compact), package (spread) or numa")
      ->check(CLI::IsMember({"core", "package", "numa"}));
  app.add_option("--dot", dot_path, "also write the tree as Graphviz to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    const shmcoll::topo::Topology& topology = shmcoll::topo::Topology::shared(topology_spec);
    const auto levels = hierarchy.empty() ? shmcoll::topo::hierarchy_from_env()
                                          : shmcoll::topo::parse_hierarchy(hierarchy);
    if (ranks == 0) ranks = topology.core_count();

    shmcoll::Options options;
    options.bind = bind_to == "core" ? shmcoll::Binding::core : shmcoll::Binding::none;
    options.map_by = shmcoll::topo::map_by_from_name(map_by);
    const std::vector<int> cores =
        shmcoll::detail::plan_cores(topology, ranks, options, "shmcoll-topo");
    // Where each rank would run: the mapped core, or (unbound) nowhere in particular.
    const std::vector<Location> where = shmcoll::detail::planned_locations(topology, cores, ranks);

    std::printf("topology: %s\n  %s\n",
                topology.spec().empty() ? "this machine (hwloc)" : topology.spec().c_str(),
                topology.summary().c_str());
    std::printf("ranks: %d, --bind-to %s --map-by %s%s\n", ranks, bind_to.c_str(), map_by.c_str(),
                ranks > topology.core_count() && !cores.empty() ? " (oversubscribed)" : "");
    print_mapping(where);
    const Tree tree = Tree::build(where, levels);
    print_tree(tree, shmcoll::topo::hierarchy_to_string(levels));
    if (!dot_path.empty()) {
      write_dot(tree, where, dot_path);
      std::printf("\nwrote %s (render: dot -Tpng %s -o tree.png)\n", dot_path.c_str(),
                  dot_path.c_str());
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "shmcoll-topo: %s\n", error.what());
    return 1;
  }
}
