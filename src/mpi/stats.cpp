// SHMCOLL_MPI_VERBOSE=1: what went through shmcoll and what through PMPI, per collective.
#include <cstdio>
#include <cstdlib>

#include "api/environment.hpp"
#include "mpi/layer.hpp"

namespace shmcoll::mpi {

namespace {

struct Tally {
  long calls = 0;
  long bytes = 0;
  double seconds = 0;
};
struct Row {
  Tally shmcoll, pmpi, failed;
};

Row rows[kStatisticsRows];

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

CallTimer::CallTimer(int row) : row_(row) {
  if (verbose()) start_ = std::chrono::steady_clock::now();
}

CallTimer::~CallTimer() {
  if (!verbose()) return;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
  Row& row = rows[row_];
  Tally& tally = outcome_ == Outcome::shmcoll  ? row.shmcoll
                 : outcome_ == Outcome::failed ? row.failed
                                               : row.pmpi;
  ++tally.calls;
  tally.bytes += static_cast<long>(bytes_);
  tally.seconds += took.count();
}

void print_statistics() {
  if (!verbose()) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  std::fprintf(stderr,
               "shmcoll MPI layer, rank 0: collective, calls through shmcoll / PMPI / failed in "
               "shmcoll, bytes through shmcoll, time in shmcoll and PMPI (s)\n");
  for (int which = 0; which < kStatisticsRows; ++which) {
    const Row& row = rows[which];
    if (row.shmcoll.calls + row.pmpi.calls + row.failed.calls == 0) continue;
    std::fprintf(
        stderr,
        "shmcoll:   %-20s shmcoll %8ld  pmpi %8ld  failed %4ld  bytes %12ld  time %.6f / %.6f\n",
        row_name(which), row.shmcoll.calls, row.pmpi.calls, row.failed.calls, row.shmcoll.bytes,
        row.shmcoll.seconds, row.pmpi.seconds);
  }
  const WaitCounts waits = world_wait_counts();
  std::fprintf(stderr,
               "shmcoll:   waits on MPI_COMM_WORLD's team: %llu yields, %llu futex sleeps\n",
               static_cast<unsigned long long>(waits.yields),
               static_cast<unsigned long long>(waits.futex_sleeps));
}

}  // namespace shmcoll::mpi
