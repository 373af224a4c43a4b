#include "api/environment.hpp"

#include "api/launch_env.hpp"
#include "api/rank_setup.hpp"
#include "coll/tunables.hpp"

namespace shmcoll::detail {

std::vector<EnvironmentVariable> environment_variables() {
  std::vector<EnvironmentVariable> all;
  for (const coll::TunableInfo& tunable : coll::tunable_table()) {
    all.push_back({tunable.env, tunable.default_value, tunable.meaning, "tunable"});
  }
  const EnvironmentVariable others[] = {
      {kRankEnv, "-", "this rank's number, set by shmcoll-run for Team::attach", "launcher"},
      {kSizeEnv, "-", "the team's size, set by shmcoll-run", "launcher"},
      {kSegmentFdEnv, "-", "descriptor of the team's segment, inherited from shmcoll-run",
       "launcher"},
      {kCoreEnv, "-", "the logical core shmcoll-run bound this rank to (--bind-to core)",
       "launcher"},
      {kMpiDisableEnv, "0", "1 makes every MPI collective a plain PMPI call", "MPI layer"},
      {kMpiVerboseEnv, "0",
       "1 prints per-collective calls, bytes and time through shmcoll and PMPI, and why calls went "
       "to PMPI, at MPI_Finalize",
       "MPI layer"},
      {kMpiMaxTeamsEnv, "16",
       "most communicator teams alive per process; later communicators use PMPI", "MPI layer"},
      {kMpiTeamAfterCallsEnv, "0",
       "calls a communicator makes through PMPI before it gets a team (0: a team at its first)",
       "MPI layer"},
      {kMpiPoolTeamsEnv, "4",
       "teams of freed communicators kept for the next communicator over the same ranks",
       "MPI layer"},
      {kMpiFakeNodesEnv, "0",
       "split MPI_COMM_WORLD into k pretend nodes (tests the multi-node path)", "MPI layer"},
  };
  all.insert(all.end(), std::begin(others), std::end(others));
  return all;
}

}  // namespace shmcoll::detail
