// Where a rank runs and where its memory goes: binding, mapping and placement, decided before the
// rank joins its team.
#pragma once

#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "topo/topology.hpp"

namespace shmcoll::detail {

// The environment shmcoll-run hands a bound rank: its logical core in the topology.
inline constexpr const char* kCoreEnv = "SHMCOLL_CORE";

struct RankSetup {
  topo::Location location;  // published at join; the tree is built from every rank's
  Placement placement;
  bool processes_share_cpus = false;  // Options::processes_share_cpus
};

// The core each of `ranks` ranks is mapped to, or empty when ranks are not bound. When ranks
// outnumber cores, says so once on stderr, prefixed by `who`.
std::vector<int> plan_cores(const topo::Topology& topology, int ranks, const Options& options,
                            const char* who);
// Where each of `cores.size()` mapped ranks (plan_cores) would run, for tools that plan a team
// without starting it; `ranks` unlocated ones when `cores` is empty (unbound).
std::vector<topo::Location> planned_locations(const topo::Topology& topology,
                                              const std::vector<int>& cores, int ranks);
// In the rank's own process: binds it to `core` when the topology is this machine's.
void bind_rank(const topo::Topology& topology, int core);
// Where the rank runs: its actual binding on this machine; on a loaded topology, the core it was
// mapped to (-1: nowhere in particular).
topo::Location locate_rank(const topo::Topology& topology, int core);
// Options first, then SHMCOLL_PLACEMENT, then local.
Placement placement_from(const Options& options);

}  // namespace shmcoll::detail
