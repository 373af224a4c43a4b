#include "api/rank_setup.hpp"

#include <cstdio>
#include <cstdlib>

#include "shm/placement.hpp"
#include "topo/mapping.hpp"

namespace shmcoll::detail {

std::vector<int> plan_cores(const topo::Topology& topology, int ranks, const Options& options,
                            const char* who) {
  if (options.bind == Binding::none) return {};
  if (ranks > topology.core_count()) {
    std::fprintf(stderr, "%s: %d ranks on %d cores: oversubscribed, ranks share cores\n", who,
                 ranks, topology.core_count());
  }
  return topo::map_ranks(topology, ranks, options.map_by);
}

void bind_rank(const topo::Topology& topology, int core) {
  if (core >= 0 && topology.is_this_system()) topology.bind_to_core(core);
}

std::vector<topo::Location> planned_locations(const topo::Topology& topology,
                                              const std::vector<int>& cores, int ranks) {
  std::vector<topo::Location> where(static_cast<std::size_t>(ranks));
  for (std::size_t rank = 0; rank < cores.size() && rank < where.size(); ++rank) {
    where[rank] = topology.core(cores[rank]);
  }
  return where;
}

topo::Location locate_rank(const topo::Topology& topology, int core) {
  if (topology.is_this_system()) return topology.where_this_process_runs();
  return core >= 0 && core < topology.core_count() ? topology.core(core) : topo::Location{};
}

Placement placement_from(const Options& options) {
  if (options.placement) return *options.placement;
  const char* text = std::getenv(shm::kPlacementEnv);
  if (!text || !*text) return Placement{};
  try {
    return Placement::parse(text);
  } catch (const Error& error) {
    throw Error(error.code(), std::string(shm::kPlacementEnv) + ": " + error.what());
  }
}

}  // namespace shmcoll::detail
