// SHMCOLL_MPI_VERBOSE=1: what went through shmcoll and what through PMPI, per collective.
#include <cstdio>
#include <cstdlib>

#include "api/environment.hpp"
#include "mpi/layer.hpp"
#include "shm/process_memory.hpp"

namespace shmcoll::mpi {

namespace {

struct Tally {
  long calls = 0;
  long bytes = 0;
  double seconds = 0;
};
struct Row {
  Tally shmcoll, pmpi, failed;
  long pmpi_because[static_cast<int>(PmpiReason::count)] = {};
};

Row rows[kStatisticsRows];
thread_local PmpiReason pending_reason = PmpiReason::unexplained;  // the current call's

const char* reason_text(PmpiReason reason) {
  switch (reason) {
    case PmpiReason::null_handle:
      return "a null handle (the MPI reports the error)";
    case PmpiReason::warming_up:
      return "the communicator's first calls, before it proved busy (SHMCOLL_MPI_TEAM_AFTER_CALLS, "
             "SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS)";
    case PmpiReason::one_rank:
      return "a communicator of one rank (the MPI's own copy)";
    case PmpiReason::layer_off:
      return "the layer is off (SHMCOLL_MPI_DISABLE)";
    case PmpiReason::intercommunicator:
      return "an intercommunicator";
    case PmpiReason::team_cap:
      return "SHMCOLL_MPI_MAX_TEAMS communicators held a team at this one's last check";
    case PmpiReason::no_team:
      return "a member could not join a team (said on stderr)";
    case PmpiReason::team_ended:
      return "the communicator's team ended (a mismatch or dead peer)";
    case PmpiReason::node_by_node_off:
      return "the communicator spans nodes and node by node is off (SHMCOLL_MPI_NODE_BY_NODE=0)";
    case PmpiReason::one_rank_per_node:
      return "the communicator spans nodes with one rank on each (nothing to share in a node)";
    case PmpiReason::too_large_for_nodes:
      return "node by node, the blocks together pass 2 GiB (MPI's int counts)";
    case PmpiReason::order_across_nodes:
      return "a non-commutative op across nodes that do not hold their ranks in order";
    case PmpiReason::nonblocking_across_nodes:
      return "a nonblocking call spanning nodes (node by node needs "
             "SHMCOLL_MPI_NONBLOCKING_ACROSS_NODES=1 and MPI_THREAD_MULTIPLE)";
    case PmpiReason::persistent_across_nodes:
      return "a persistent call on a communicator spanning nodes";
    case PmpiReason::handle_across_nodes:
      return "a nonblocking call spanning nodes on a derived datatype or user op (freed before "
             "its leaders' MPI step may run)";
    case PmpiReason::datatype_unknown:
      return "a datatype the layer could not decode";
    case PmpiReason::op_refused:
      return "an op the MPI does not define on the datatype";
    case PmpiReason::derived_type:
      return "a predefined op on a derived datatype";
    case PmpiReason::user_op_derived:
      return "a user op on a derived datatype";
    case PmpiReason::not_reducible:
      return "a datatype with no element type to reduce";
    case PmpiReason::unexplained:
    case PmpiReason::count:
      break;
  }
  return "unexplained";
}

bool verbose() {
  static const bool on = [] {
    const char* text = std::getenv(detail::kMpiVerboseEnv);
    return text && *text && *text != '0';
  }();
  return on;
}

const char* row_name(int row) {
  return row == kReduceLocalRow ? "reduce_local" : collective_name(static_cast<Collective>(row));
}

}  // namespace

void note_pmpi_reason(PmpiReason reason) {
  pending_reason = reason;
}

CallTimer::CallTimer(int row) : row_(row) {
  if (!verbose()) return;
  pending_reason = PmpiReason::unexplained;
  start_ = std::chrono::steady_clock::now();
}

CallTimer::~CallTimer() {
  if (!verbose()) return;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
  SharedTables lock;
  Row& row = rows[row_];
  Tally& tally = outcome_ == Outcome::shmcoll  ? row.shmcoll
                 : outcome_ == Outcome::failed ? row.failed
                                               : row.pmpi;
  ++tally.calls;
  if (outcome_ == Outcome::pmpi) ++row.pmpi_because[static_cast<int>(pending_reason)];
  tally.bytes += static_cast<long>(bytes_);
  tally.seconds += took.count();
}

void print_statistics() {
  if (!verbose()) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  std::fprintf(
      stderr,
      "shmcoll MPI layer, rank 0: collective, calls through shmcoll / PMPI / failed in "
      "shmcoll, bytes through shmcoll, time in shmcoll and PMPI (s); below a row, why its calls "
      "went to PMPI\n");
  for (int which = 0; which < kStatisticsRows; ++which) {
    const Row& row = rows[which];
    if (row.shmcoll.calls + row.pmpi.calls + row.failed.calls == 0) continue;
    std::fprintf(
        stderr,
        "shmcoll:   %-20s shmcoll %8ld  pmpi %8ld  failed %4ld  bytes %12ld  time %.6f / %.6f\n",
        row_name(which), row.shmcoll.calls, row.pmpi.calls, row.failed.calls, row.shmcoll.bytes,
        row.shmcoll.seconds, row.pmpi.seconds);
    for (int reason = 0; reason < static_cast<int>(PmpiReason::count); ++reason) {
      if (row.pmpi_because[reason] == 0) continue;
      std::fprintf(stderr, "shmcoll:     - %ld to PMPI: %s\n", row.pmpi_because[reason],
                   reason_text(static_cast<PmpiReason>(reason)));
    }
  }
  const TeamCounts teams = team_counts();
  std::fprintf(stderr,
               "shmcoll:   communicator teams: %ld made (%.3f ms each), %ld taken from the pool "
               "of freed ones, at most %.1f MiB of /dev/shm held at once\n",
               teams.made, teams.made ? teams.making_seconds * 1e3 / teams.made : 0.0, teams.reused,
               static_cast<double>(teams.peak_shm_bytes) / (1 << 20));
  const shm::ProcessCopyCounts copies = shm::process_copy_counts();
  std::fprintf(stderr,
               "shmcoll:   single copy by the kernel (process_vm_readv/writev, blocks from "
               "SHMCOLL_CMA_MIN): %llu blocks read out of senders' memory, %llu writes into "
               "roots', %llu copies refused (those calls went through the slots, and the team's "
               "later ones too)\n",
               static_cast<unsigned long long>(copies.blocks_read),
               static_cast<unsigned long long>(copies.writes),
               static_cast<unsigned long long>(copies.refused));
  const WaitCounts waits = world_wait_counts();
  std::fprintf(stderr,
               "shmcoll:   waits on MPI_COMM_WORLD's team: %llu yields, %llu futex sleeps\n",
               static_cast<unsigned long long>(waits.yields),
               static_cast<unsigned long long>(waits.futex_sleeps));
}

}  // namespace shmcoll::mpi
