#include "mpi_contender.hpp"

#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "native_bench.hpp"
#include "subprocess.hpp"

namespace bench {

namespace {

namespace fs = std::filesystem;

// Each MPI's launcher, as the build found it (cmake/shmcoll_mpis.cmake).
#ifndef SHMCOLL_MPIRUN_OPENMPI
#define SHMCOLL_MPIRUN_OPENMPI "mpirun.openmpi"
#endif
#ifndef SHMCOLL_MPIRUN_MPICH
#define SHMCOLL_MPIRUN_MPICH "mpirun.mpich"
#endif

std::vector<std::string> launcher(const std::string& mpi, int ranks) {
  const bool fits = ranks_fit_cores(ranks);
  if (mpi == "openmpi") {
    return {SHMCOLL_MPIRUN_OPENMPI, "--oversubscribe", "--bind-to", fits ? "core" : "none", "-np",
            std::to_string(ranks)};
  }
  return {SHMCOLL_MPIRUN_MPICH, "-bind-to", fits ? "core" : "none", "-np", std::to_string(ranks)};
}

}  // namespace

std::vector<MpiContender> mpi_contenders(const std::vector<std::string>& mpis, int ranks) {
  const fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  std::vector<MpiContender> contenders;
  for (const std::string& mpi : mpis) {
    if (mpi != "openmpi" && mpi != "mpich") {
      throw std::invalid_argument("--vs: unknown MPI " + mpi + " (openmpi, mpich)");
    }
    const fs::path harness = bin / ("mpi_coll_bench_" + mpi);
    const fs::path layer = bin.parent_path() / "lib" / ("libshmcoll_mpi_" + mpi + ".so");
    if (!fs::exists(harness) || !fs::exists(layer)) {
      throw std::invalid_argument("--vs: " + mpi + " was not found when shmcoll was built (no " +
                                  harness.string() + " or " + layer.string() + ")");
    }
    std::vector<std::string> command = launcher(mpi, ranks);
    command.push_back(harness.string());
    contenders.push_back({mpi, command});
    command = launcher(mpi, ranks);
    command.insert(command.end(), {"env", "LD_PRELOAD=" + layer.string(), harness.string()});
    contenders.push_back({mpi + "+layer", command});
  }
  return contenders;
}

Row run_mpi(const MpiContender& contender, const std::string& coll, std::size_t bytes, int samples,
            bool vary_data, bool single_call, bool written) {
  std::vector<std::string> argv = contender.command;
  argv.insert(argv.end(), {coll, std::to_string(bytes), std::to_string(samples)});
  if (vary_data) argv.push_back("--vary-data");
  if (single_call) argv.push_back("--single");
  if (written) argv.push_back("--written");
  // Open MPI refuses to start as root unless told that it is meant.
  const Finished run =
      run_program(argv, {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  const std::string failed = contender.name + ": " + argv[0] + " running " + coll + " at " +
                             std::to_string(bytes) + " bytes ";
  if (run.status != 0) {
    throw std::runtime_error(failed + "exited with status " + std::to_string(run.status) +
                             (run.status == 127 ? " (is it installed?)" : ""));
  }
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string hash, tag;
    std::size_t reported = 0;
    if (!(words >> hash >> tag >> reported) || hash != "#" || tag != "samples") continue;
    Row row{bytes, {}};
    for (double micros; words >> micros;) row.samples.push_back(micros * 1e-6);
    if (static_cast<int>(row.samples.size()) == samples) return row;
  }
  throw std::runtime_error(failed + "printed no samples line");
}

}  // namespace bench
