// The MPI contenders of shmcoll-bench --vs: the same harness (mpi_coll_bench.c) compiled against
// each MPI, started with that MPI's own launcher, once with the MPI's collectives and once with
// shmcoll's layer (libshmcoll_mpi_<mpi>.so) preloaded. Each run measures one size, so shmcoll-bench
// can alternate the contenders size by size.
#pragma once

#include <string>
#include <vector>

#include "bench_report.hpp"

namespace bench {

struct MpiContender {
  std::string name;                  // "openmpi", "openmpi+layer", "mpich", "mpich+layer"
  std::vector<std::string> command;  // launcher, its options, and the harness program
};

// The contenders for each MPI named (openmpi, mpich), found beside this program
// (bin/mpi_coll_bench_<mpi>, lib/libshmcoll_mpi_<mpi>.so). Throws std::invalid_argument naming
// --vs for an unknown MPI or one this build has no harness for.
std::vector<MpiContender> mpi_contenders(const std::vector<std::string>& mpis, int ranks);

// One size of one collective (f32, sum), `samples` samples. Throws std::runtime_error naming the
// contender when the run fails.
Row run_mpi(const MpiContender& contender, const std::string& coll, std::size_t bytes, int samples,
            bool vary_data, bool single_call, bool written);

}  // namespace bench
