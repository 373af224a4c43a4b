#include "api/environment.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "api/launch_env.hpp"
#include "api/rank_setup.hpp"
#include "coll/tunables.hpp"

namespace shmcoll::detail {

namespace {

int env_count(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::max(0, std::atoi(text)) : fallback;
}

}  // namespace

const MpiLayerSettings& mpi_layer_settings() {
  static const MpiLayerSettings settings = [] {
    MpiLayerSettings read;
    const char* disable = std::getenv(kMpiDisableEnv);
    read.disabled = disable && *disable && std::atoi(disable) != 0;
    read.fake_nodes = env_count(kMpiFakeNodesEnv, read.fake_nodes);
    read.max_teams = env_count(kMpiMaxTeamsEnv, read.max_teams);
    read.pool_teams = env_count(kMpiPoolTeamsEnv, read.pool_teams);
    read.team_after_calls = env_count(kMpiTeamAfterCallsEnv, read.team_after_calls);
    read.new_team_after_calls = env_count(kMpiNewTeamAfterEnv, read.new_team_after_calls);
    // Renamed when the rule became a count of calls (runs must take the same path every time):
    // a setting of the old name would otherwise be dropped without a word.
    if (std::getenv(kMpiNewTeamAfterRetiredEnv)) {
      std::fprintf(stderr,
                   "shmcoll: %s is ignored: a communicator now earns a team by its calls, %s "
                   "(default %d)\n",
                   kMpiNewTeamAfterRetiredEnv, kMpiNewTeamAfterEnv,
                   MpiLayerSettings{}.new_team_after_calls);
    }
    read.node_by_node = env_count(kMpiNodeByNodeEnv, read.node_by_node ? 1 : 0) != 0;
    read.nonblocking_across_nodes =
        env_count(kMpiNonblockingAcrossNodesEnv, read.nonblocking_across_nodes ? 1 : 0) != 0;
    return read;
  }();
  return settings;
}

std::vector<EnvironmentVariable> environment_variables() {
  std::vector<EnvironmentVariable> all;
  for (const coll::TunableInfo& tunable : coll::tunable_table()) {
    all.push_back({tunable.env, tunable.default_value, tunable.meaning, "tunable"});
  }
  const MpiLayerSettings defaults;
  const EnvironmentVariable others[] = {
      {kRankEnv, "-", "this rank's number, set by shmcoll-run for Team::attach", "launcher"},
      {kSizeEnv, "-", "the team's size, set by shmcoll-run", "launcher"},
      {kSegmentFdEnv, "-", "descriptor of the team's segment, inherited from shmcoll-run",
       "launcher"},
      {kCoreEnv, "-", "the logical core shmcoll-run bound this rank to (--bind-to core)",
       "launcher"},
      {kMpiDisableEnv, defaults.disabled ? "1" : "0",
       "1 makes every MPI collective a plain PMPI call", "MPI layer"},
      {kMpiVerboseEnv, "0",
       "1 prints per-collective calls, bytes and time through shmcoll and PMPI, and why calls went "
       "to PMPI, at MPI_Finalize",
       "MPI layer"},
      {kMpiMaxTeamsEnv, std::to_string(defaults.max_teams),
       "most communicator teams alive per process; later communicators use PMPI", "MPI layer"},
      {kMpiTeamAfterCallsEnv, std::to_string(defaults.team_after_calls),
       "calls a communicator makes through PMPI before its members first agree on a team (one "
       "kept from a freed communicator, or a new one once it has proved busy); MPI_COMM_WORLD's "
       "agree in MPI_Init",
       "MPI layer"},
      {kMpiNewTeamAfterEnv, std::to_string(defaults.new_team_after_calls),
       "blocking calls the communicators of a set of ranks make through PMPI (on the member that "
       "made most) before these ranks get a new team, checked at a communicator's calls n+1, then "
       "2 to 16 times as many; counted in calls, not time, so every run takes the same path; "
       "not for MPI_COMM_WORLD, whose team is made in MPI_Init",
       "MPI layer"},
      {kMpiNewTeamAfterRetiredEnv, "-",
       "retired: ignored, with a warning on stderr (the rule counts calls now, "
       "SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS)",
       "MPI layer"},
      {kMpiPoolTeamsEnv, std::to_string(defaults.pool_teams),
       "teams of freed communicators kept for the next communicator over the same ranks",
       "MPI layer"},
      {kMpiNodeByNodeEnv, defaults.node_by_node ? "1" : "0",
       "0 leaves communicators spanning nodes to the MPI (PMPI) instead of running them node by "
       "node (the members agree: one rank's 0 is enough)",
       "MPI layer"},
      {kMpiNonblockingAcrossNodesEnv, defaults.nonblocking_across_nodes ? "1" : "0",
       "1 runs nonblocking calls on communicators spanning nodes node by node, on the node teams' "
       "workers, where the MPI provides MPI_THREAD_MULTIPLE (every member must set it)",
       "MPI layer"},
      {kMpiFakeNodesEnv, std::to_string(defaults.fake_nodes),
       "split MPI_COMM_WORLD into k pretend nodes (tests the multi-node path)", "MPI layer"},
  };
  all.insert(all.end(), std::begin(others), std::end(others));
  return all;
}

}  // namespace shmcoll::detail
