// Which core each rank runs on: the mapping policies of shmcoll-run's --map-by.
#pragma once

#include <string_view>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "topo/topology.hpp"

namespace shmcoll::topo {

// The order in which ranks take cores: compact (hwloc order), or round robin across packages and
// then across the NUMA nodes inside each package, or round robin across NUMA nodes.
std::vector<int> core_order(const Topology& topology, MapBy policy);

// The logical core of each of `ranks` ranks. Ranks beyond the core count wrap around (they share
// cores: oversubscription).
std::vector<int> map_ranks(const Topology& topology, int ranks, MapBy policy);

const char* map_by_name(MapBy policy);
// "core", "package" or "numa" (command lines check the choice); anything else is an error.
MapBy map_by_from_name(std::string_view name);

}  // namespace shmcoll::topo
