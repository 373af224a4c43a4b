// The MPI contenders of shmcoll-bench --vs: the same harness (mpi_coll_bench.c) compiled against
// each MPI, started with that MPI's own launcher, once with the MPI's collectives and once with
// shmcoll's layer (libshmcoll_mpi_<mpi>.so) preloaded. Each run measures one size, so shmcoll-bench
// can alternate the contenders size by size. Where the build's Open MPI has them (Open MPI 6, its
// main branch: tools/build-ompi-main), its intra-node components xhc and acoll are contenders too:
// Open MPI alone, with that component forced the way its documentation says.
#pragma once

#include <string>
#include <vector>

#include "bench_report.hpp"

namespace bench {

struct MpiContender {
  std::string name;                  // "openmpi", "openmpi+layer", "mpich", "mpich+layer", "xhc"...
  std::vector<std::string> command;  // launcher, its options, and the harness program
  std::string forced_component;      // Open MPI's coll component it forces (xhc, acoll), or empty
};

// The contenders for each name (openmpi, mpich: each alone and with the layer; xhc, acoll: Open
// MPI with that component forced), found beside this program (bin/mpi_coll_bench_<mpi>,
// lib/libshmcoll_mpi_<mpi>.so). Throws std::invalid_argument naming --vs for an unknown name or
// one this build has no harness for.
std::vector<MpiContender> mpi_contenders(const std::vector<std::string>& names, int ranks);

// The Open MPI coll component that serves `coll` on MPI_COMM_WORLD for this contender, as Open MPI
// itself reports it (coll_base_verbose). Throws std::runtime_error when Open MPI does not say (not
// an Open MPI that reports it, or a component it does not know).
std::string serving_component(const MpiContender& contender, const std::string& coll);

// One size of one collective (f32, sum), `samples` samples. Throws std::runtime_error naming the
// contender when the run fails.
Row run_mpi(const MpiContender& contender, const std::string& coll, std::size_t bytes, int samples,
            bool vary_data, bool single_call, bool written);

}  // namespace bench
