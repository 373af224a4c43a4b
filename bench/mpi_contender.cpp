#include "mpi_contender.hpp"

#include <filesystem>
#include <regex>
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

// Open MPI's options that force one of its intra-node components, as each one's documentation
// says: xhc by a priority above the others' (docs/tuning-apps/collectives/xhc.rst); acoll by its
// README's component list and priority, with its communicator-size threshold (16 by default: it
// declines smaller communicators) lowered to 2 so that it serves the sizes measured here.
std::vector<std::string> forcing_options(const std::string& component) {
  if (component == "xhc") return {"--mca", "coll_xhc_priority", "100"};
  std::vector<std::string> acoll = {"--mca", "coll", "acoll,tuned,libnbc,basic"};
  acoll.insert(acoll.end(), {"--mca", "coll_acoll_priority", "40"});
  acoll.insert(acoll.end(), {"--mca", "coll_acoll_comm_size_thresh", "2"});
  return acoll;
}

Finished run_as_root_too(const std::vector<std::string>& argv) {
  // Open MPI refuses to start as root unless told that it is meant.
  return run_program(argv, {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
}

}  // namespace

std::vector<MpiContender> mpi_contenders(const std::vector<std::string>& names, int ranks) {
  const fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  std::vector<MpiContender> contenders;
  for (const std::string& name : names) {
    if (name != "openmpi" && name != "mpich" && name != "xhc" && name != "acoll") {
      throw std::invalid_argument("--vs: unknown contender " + name +
                                  " (openmpi, mpich, xhc, acoll)");
    }
    const bool component = name == "xhc" || name == "acoll";
    const std::string mpi = component ? "openmpi" : name;
    const fs::path harness = bin / ("mpi_coll_bench_" + mpi);
    const fs::path layer = bin.parent_path() / "lib" / ("libshmcoll_mpi_" + mpi + ".so");
    if (!fs::exists(harness) || !fs::exists(layer)) {
      throw std::invalid_argument("--vs: " + mpi + " was not found when shmcoll was built (no " +
                                  harness.string() + " or " + layer.string() + ")");
    }
    std::vector<std::string> command = launcher(mpi, ranks);
    if (component) {
      const std::vector<std::string> forcing = forcing_options(name);
      command.insert(command.end(), forcing.begin(), forcing.end());
      command.push_back(harness.string());
      contenders.push_back({name, command, name});
      continue;
    }
    command.push_back(harness.string());
    contenders.push_back({mpi, command, ""});
    command = launcher(mpi, ranks);
    command.insert(command.end(), {"env", "LD_PRELOAD=" + layer.string(), harness.string()});
    contenders.push_back({mpi + "+layer", command, ""});
  }
  return contenders;
}

std::string serving_component(const MpiContender& contender, const std::string& coll) {
  std::vector<std::string> argv = contender.command;
  const std::string harness = argv.back();
  argv.pop_back();
  argv.insert(argv.end(), {"--mca", "coll_base_verbose", "10", harness, coll, "8", "1"});
  // Open MPI says it on stderr, which run_program passes through: merged into what it reads.
  argv.insert(argv.begin(), {"sh", "-c", "exec \"$0\" \"$@\" 2>&1"});
  const Finished run = run_as_root_too(argv);
  // coll/base/coll_base_comm_select.c, at verbosity 10, for MPI_COMM_WORLD.
  const std::regex said("communicator MPI_COMM_WORLD rank 0 " + coll + " -> ([a-z0-9_]+)");
  std::smatch match;
  if (run.status == 0 && std::regex_search(run.output, match, said)) return match[1];
  throw std::runtime_error(contender.name + ": Open MPI did not say which component serves " +
                           coll + " (status " + std::to_string(run.status) +
                           "; is it Open MPI 5 or later, with coll/" + contender.forced_component +
                           "?)");
}

Row run_mpi(const MpiContender& contender, const std::string& coll, std::size_t bytes, int samples,
            bool vary_data, bool single_call, bool written) {
  std::vector<std::string> argv = contender.command;
  argv.insert(argv.end(), {coll, std::to_string(bytes), std::to_string(samples)});
  if (vary_data) argv.push_back("--vary-data");
  if (single_call) argv.push_back("--single");
  if (written) argv.push_back("--written");
  const Finished run = run_as_root_too(argv);
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
