// Every environment variable shmcoll reads, with its default and meaning, in one list:
// shmcoll-info prints it, and a test checks it against the names the sources read.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace shmcoll::detail {

// Read by the MPI layer (src/mpi), listed here because shmcoll-info does not load MPI.
inline constexpr const char* kMpiDisableEnv = "SHMCOLL_MPI_DISABLE";
inline constexpr const char* kMpiVerboseEnv = "SHMCOLL_MPI_VERBOSE";
inline constexpr const char* kMpiMaxTeamsEnv = "SHMCOLL_MPI_MAX_TEAMS";
inline constexpr const char* kMpiFakeNodesEnv = "SHMCOLL_MPI_FAKE_NODES";
inline constexpr const char* kMpiPoolTeamsEnv = "SHMCOLL_MPI_POOL_TEAMS";
inline constexpr const char* kMpiTeamAfterCallsEnv = "SHMCOLL_MPI_TEAM_AFTER_CALLS";
inline constexpr const char* kMpiNewTeamAfterEnv = "SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS";
// Its name until the rule counted calls instead of time: read only to say it is ignored.
inline constexpr const char* kMpiNewTeamAfterRetiredEnv = "SHMCOLL_MPI_NEW_TEAM_AFTER_US";
inline constexpr const char* kMpiNodeByNodeEnv = "SHMCOLL_MPI_NODE_BY_NODE";
inline constexpr const char* kMpiNonblockingAcrossNodesEnv = "SHMCOLL_MPI_NONBLOCKING_ACROSS_NODES";
// A communicator's team's heap per rank: MPI programs bring their own buffers.
inline constexpr std::size_t kMpiTeamHeapBytes = 4096;

// The MPI layer's settings, defaults here and nowhere else.
struct MpiLayerSettings {
  bool disabled = false;           // SHMCOLL_MPI_DISABLE (any number but 0)
  int fake_nodes = 0;              // SHMCOLL_MPI_FAKE_NODES
  int max_teams = 16;              // SHMCOLL_MPI_MAX_TEAMS
  int pool_teams = 4;              // SHMCOLL_MPI_POOL_TEAMS
  int team_after_calls = 1;        // SHMCOLL_MPI_TEAM_AFTER_CALLS
  int new_team_after_calls = 128;  // SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS
  bool node_by_node = true;  // SHMCOLL_MPI_NODE_BY_NODE (0: communicators spanning nodes PMPI)
  // SHMCOLL_MPI_NONBLOCKING_ACROSS_NODES (1: nonblocking calls node by node at
  // MPI_THREAD_MULTIPLE). Off: on pretend nodes sharing CPUs it loses at small sizes
  // (docs/clusters.md), and no rule from sizes reaches every collective (gather's and the v forms'
  // sizes differ by rank).
  bool nonblocking_across_nodes = false;
};
// As this process's environment sets them (read once; negative values count as 0).
const MpiLayerSettings& mpi_layer_settings();

struct EnvironmentVariable {
  const char* name;
  std::string default_value;
  const char* meaning;
  const char* group;  // "tunable", "launcher" (set by shmcoll-run) or "MPI layer"
};

std::vector<EnvironmentVariable> environment_variables();

}  // namespace shmcoll::detail
