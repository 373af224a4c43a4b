// One shmcoll team per communicator whose members share the node, cached as an attribute and
// freed with the communicator. Creation is collective: rank 0 makes a segment name and hands it
// out with PMPI_Bcast, everyone joins, and a PMPI_Allreduce agrees whether all succeeded, so
// every member takes the same path for the communicator's whole life.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mpi/layer.hpp"

namespace shmcoll::mpi {

namespace {

// A communicator's entry: a team, or a decision (made once, by all members) to use PMPI.
struct CachedTeam {
  std::optional<Team> team;
};

int keyval = MPI_KEYVAL_INVALID;
int teams_alive = 0;
int thread_level = MPI_THREAD_SINGLE;

int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::atoi(text) : fallback;
}

// SHMCOLL_MPI_MAX_TEAMS: communicators past this many get PMPI (each team holds 2 slots per rank).
int team_cap() {
  static const int cap = env_int("SHMCOLL_MPI_MAX_TEAMS", 16);
  return cap;
}

int delete_cached(MPI_Comm, int, void* value, void*) {
  auto* cached = static_cast<CachedTeam*>(value);
  if (cached->team) --teams_alive;
  delete cached;
  return MPI_SUCCESS;
}

// Whether every member of `comm` shares this node (SHMCOLL_MPI_FAKE_NODES=k splits the ranks of
// MPI_COMM_WORLD into k pretend nodes, so the multi-node path can be tested on one machine).
bool on_one_node(MPI_Comm comm) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  MPI_Comm node = MPI_COMM_NULL;
  const int fake_nodes = env_int("SHMCOLL_MPI_FAKE_NODES", 0);
  if (fake_nodes > 1) {
    int world_rank = 0, world_size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const int per_node = (world_size + fake_nodes - 1) / fake_nodes;
    PMPI_Comm_split(comm, world_rank / per_node, 0, &node);
  } else {
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  }
  int node_size = 0;
  PMPI_Comm_size(node, &node_size);
  PMPI_Comm_free(&node);
  return node_size == size;
}

std::optional<Team> create_team(MPI_Comm comm) {
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  // Everyone must agree to try: the cap counts this process's teams, which differ by rank.
  int willing = teams_alive < team_cap() ? 1 : 0, all_willing = 0;
  PMPI_Allreduce(&willing, &all_willing, 1, MPI_INT, MPI_MIN, comm);
  if (!all_willing || !on_one_node(comm)) return std::nullopt;

  char name[256] = {};
  if (rank == 0) {
    const std::string made = Team::unique_segment_name();
    std::snprintf(name, sizeof name, "%s", made.c_str());
  }
  PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
  std::optional<Team> team;
  try {
    Options options;
    options.heap_bytes = 4096;  // MPI programs bring their own buffers
    team.emplace(Team::join(name, rank, size, options));
  } catch (const Error& error) {
    std::fprintf(stderr, "shmcoll: rank %d: no shared-memory team (%s); using MPI\n", rank,
                 error.what());
  }
  int joined = team ? 1 : 0, all_joined = 0;
  PMPI_Allreduce(&joined, &all_joined, 1, MPI_INT, MPI_MIN, comm);
  if (!all_joined) return std::nullopt;
  return team;
}

}  // namespace

bool layer_disabled() {
  static const bool disabled = env_int("SHMCOLL_MPI_DISABLE", 0) != 0;
  // Concurrent collectives on one communicator from several threads cannot share its rounds.
  return disabled || thread_level == MPI_THREAD_MULTIPLE;
}

void set_thread_level(int provided) {
  thread_level = provided;
}

Team* team_of(MPI_Comm comm) {
  if (layer_disabled() || comm == MPI_COMM_NULL) return nullptr;
  if (keyval == MPI_KEYVAL_INVALID) {
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cached, &keyval, nullptr);
  }
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, keyval, &value, &found);
  if (found) {
    auto* cached = static_cast<CachedTeam*>(value);
    return cached->team ? &*cached->team : nullptr;
  }
  auto* cached = new CachedTeam;
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (!inter) cached->team = create_team(comm);
  if (cached->team) ++teams_alive;
  PMPI_Comm_set_attr(comm, keyval, cached);
  return cached->team ? &*cached->team : nullptr;
}

void release_world_teams() {
  if (keyval == MPI_KEYVAL_INVALID) return;
  for (MPI_Comm comm : {MPI_COMM_WORLD, MPI_COMM_SELF}) {
    void* value = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(comm, keyval, &value, &found);
    if (found) PMPI_Comm_delete_attr(comm, keyval);
  }
  PMPI_Comm_free_keyval(&keyval);
}

}  // namespace shmcoll::mpi
