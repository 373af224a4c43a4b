#include "topo/mapping.hpp"

#include <map>

#include "util/fail.hpp"

namespace shmcoll::topo {

namespace {

// Round robin over the lists: the first of each, then the second of each, and so on; a list
// that runs out is skipped, so irregular shapes keep every core exactly once.
std::vector<int> interleave(const std::vector<std::vector<int>>& lists) {
  std::vector<int> order;
  for (std::size_t turn = 0;; ++turn) {
    const std::size_t before = order.size();
    for (const auto& list : lists) {
      if (turn < list.size()) order.push_back(list[turn]);
    }
    if (order.size() == before) return order;
  }
}

// The given cores, split by their index at `level` (in index order), each part in given order.
std::vector<std::vector<int>> split_by(const Topology& topology, const std::vector<int>& cores,
                                       Level level) {
  std::map<int, std::vector<int>> parts;
  for (int core : cores) parts[topology.core(core).at(level)].push_back(core);
  std::vector<std::vector<int>> lists;
  for (auto& [index, list] : parts) lists.push_back(std::move(list));
  return lists;
}

}  // namespace

std::vector<int> core_order(const Topology& topology, MapBy policy) {
  std::vector<int> compact(static_cast<std::size_t>(topology.core_count()));
  for (std::size_t i = 0; i < compact.size(); ++i) compact[i] = static_cast<int>(i);
  switch (policy) {
    case MapBy::core:
      return compact;
    case MapBy::numa:
      return interleave(split_by(topology, compact, Level::numa));
    case MapBy::package: {
      std::vector<std::vector<int>> per_package;
      for (const auto& package : split_by(topology, compact, Level::package)) {
        per_package.push_back(interleave(split_by(topology, package, Level::numa)));
      }
      return interleave(per_package);
    }
  }
  return compact;
}

std::vector<int> map_ranks(const Topology& topology, int ranks, MapBy policy) {
  const std::vector<int> order = core_order(topology, policy);
  std::vector<int> cores(static_cast<std::size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    cores[static_cast<std::size_t>(rank)] = order[static_cast<std::size_t>(rank) % order.size()];
  }
  return cores;
}

const char* map_by_name(MapBy policy) {
  switch (policy) {
    case MapBy::core:
      return "core";
    case MapBy::package:
      return "package";
    case MapBy::numa:
      return "numa";
  }
  return "?";
}

MapBy map_by_from_name(std::string_view name) {
  for (MapBy policy : {MapBy::core, MapBy::package, MapBy::numa}) {
    if (name == map_by_name(policy)) return policy;
  }
  fail(Errc::invalid_argument, "map-by \"", name, "\" must be core, package or numa");
}

}  // namespace shmcoll::topo
