// Every environment variable shmcoll reads, with its default and meaning, in one list:
// shmcoll-info prints it, and a test checks it against the names the sources read.
#pragma once

#include <vector>

namespace shmcoll::detail {

// Read by the MPI layer (src/mpi), listed here because shmcoll-info does not load MPI.
inline constexpr const char* kMpiDisableEnv = "SHMCOLL_MPI_DISABLE";
inline constexpr const char* kMpiVerboseEnv = "SHMCOLL_MPI_VERBOSE";
inline constexpr const char* kMpiMaxTeamsEnv = "SHMCOLL_MPI_MAX_TEAMS";
inline constexpr const char* kMpiFakeNodesEnv = "SHMCOLL_MPI_FAKE_NODES";
inline constexpr const char* kMpiPoolTeamsEnv = "SHMCOLL_MPI_POOL_TEAMS";
inline constexpr const char* kMpiTeamAfterCallsEnv = "SHMCOLL_MPI_TEAM_AFTER_CALLS";

struct EnvironmentVariable {
  const char* name;
  const char* default_value;
  const char* meaning;
  const char* group;  // "tunable", "launcher" (set by shmcoll-run) or "MPI layer"
};

std::vector<EnvironmentVariable> environment_variables();

}  // namespace shmcoll::detail
