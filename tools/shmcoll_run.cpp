// shmcoll-run: starts N copies of a program as one team.
//
// Creates the team's segment (already unlinked), forks N children that exec PROGRAM with
// SHMCOLL_RANK, SHMCOLL_SIZE and SHMCOLL_SEGMENT_FD set, and supervises them: a rank that dies
// or exits non-zero aborts the team so the others fail instead of hanging; SIGINT/SIGTERM stop
// every rank. Once a rank fails, the others get SIGTERM after SHMCOLL_KILL_GRACE, then SIGKILL;
// ranks end with the launcher however it ends (PR_SET_PDEATHSIG). Exit status: 0 when all ranks
// exit 0, else the first failing rank's status.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/launch_env.hpp"
#include "api/rank_setup.hpp"
#include "api/team_state.hpp"
#include "coll/tunables.hpp"
#include "shm/placement.hpp"
#include "shm/segment.hpp"
#include "shm/supervisor.hpp"
#include "topo/mapping.hpp"
#include "topo/topology.hpp"

namespace {

[[noreturn]] void exec_rank(const std::vector<std::string>& command, int rank, int size,
                            int segment_fd, const shmcoll::topo::Topology& topology, int core,
                            const sigset_t& original_mask, pid_t launcher) {
  sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  shmcoll::shm::end_with_parent(launcher);
  shmcoll::detail::bind_rank(topology, core);
  if (core >= 0) {
    setenv(shmcoll::detail::kCoreEnv, std::to_string(core).c_str(), 1);
  } else {
    unsetenv(shmcoll::detail::kCoreEnv);
  }
  int inherited = dup(segment_fd);  // a descriptor without O_CLOEXEC survives exec
  setenv(shmcoll::detail::kRankEnv, std::to_string(rank).c_str(), 1);
  setenv(shmcoll::detail::kSizeEnv, std::to_string(size).c_str(), 1);
  setenv(shmcoll::detail::kSegmentFdEnv, std::to_string(inherited).c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "shmcoll-run: rank %d: cannot execute %s: %s\n", rank, argv[0],
               std::strerror(errno));
  _exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Start N copies of PROGRAM as one shmcoll team.\n"
      "Example: shmcoll-run -n 4 --bind-to core --map-by package ./my_program --size 1M"};
  int ranks = 0;
  std::string bind_to = "none";
  std::string map_by = "core";
  std::string topology_spec;
  std::string placement;
  std::vector<std::string> command;
  app.add_option("-n,--np", ranks, "number of ranks")->required()->check(CLI::Range(1, 4096));
  app.add_option("--bind-to", bind_to, "core: each rank bound to the core --map-by gives it; none")
      ->check(CLI::IsMember({"core", "none"}));
  app.add_option("--map-by", map_by,
                 "core: compact, in hwloc order; package: round robin across packages, then "
                 "their NUMA nodes (spread); numa: round robin across NUMA nodes")
      ->check(CLI::IsMember({"core", "package", "numa"}));
  app.add_option("--topology", topology_spec,
                 "plan as on another machine: synthetic:<hwloc description> or xml:<file> (sets "
                 "SHMCOLL_TOPOLOGY; nothing is bound)");
  app.add_option("--placement", placement,
                 "rank memory: local, interleave, node:<n> or none (sets SHMCOLL_PLACEMENT)");
  app.add_option("program", command, "the program and its arguments")->required();
  app.prefix_command();  // everything from PROGRAM on belongs to the program
  CLI11_PARSE(app, argc, argv);

  try {
    const auto size = static_cast<std::uint32_t>(ranks);
    if (!topology_spec.empty()) setenv(shmcoll::topo::Topology::kEnv, topology_spec.c_str(), 1);
    if (!placement.empty()) {
      shmcoll::Placement::parse(placement);  // a typo fails here, not in every rank
      setenv(shmcoll::shm::kPlacementEnv, placement.c_str(), 1);
    }
    shmcoll::Options options;
    options.bind = bind_to == "core" ? shmcoll::Binding::core : shmcoll::Binding::none;
    options.map_by = shmcoll::topo::map_by_from_name(map_by);
    const shmcoll::topo::Topology& topology = shmcoll::topo::Topology::shared();
    const std::vector<int> cores =
        shmcoll::detail::plan_cores(topology, ranks, options, "shmcoll-run");
    const auto tunables = shmcoll::coll::Tunables::from_env();
    int segment_fd = -1;
    shmcoll::shm::Segment segment = shmcoll::shm::Segment::create_unlinked(
        size, shmcoll::detail::segment_sizes_for({}, tunables, static_cast<std::uint32_t>(size)),
        &segment_fd);

    sigset_t stop_signals, original_mask;
    sigemptyset(&stop_signals);
    for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, signal);
    sigprocmask(SIG_BLOCK, &stop_signals, &original_mask);
    const int signal_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC);

    shmcoll::shm::Supervisor supervisor(segment);
    std::fflush(nullptr);
    const pid_t launcher = getpid();
    for (int rank = 0; rank < ranks; ++rank) {
      const pid_t pid = fork();
      if (pid == 0) {
        const int core = cores.empty() ? -1 : cores[static_cast<std::size_t>(rank)];
        exec_rank(command, rank, ranks, segment_fd, topology, core, original_mask, launcher);
      }
      if (pid < 0) {
        std::perror("shmcoll-run: fork");
        segment.abort(size);
        break;
      }
      supervisor.watch(rank, pid);
    }
    ::close(segment_fd);

    const auto exits = supervisor.reap_all(signal_fd, tunables.kill_grace_ms, true);
    const int culprit = segment.aborted_by();
    const shmcoll::shm::MemberExit* failure =
        shmcoll::shm::Supervisor::first_failure(exits, culprit);
    if (!failure) return static_cast<int>(exits.size()) == ranks ? 0 : 1;
    std::fprintf(stderr, "shmcoll-run: %s\n", failure->describe(failure->rank == culprit).c_str());
    return failure->shell_status();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "shmcoll-run: %s\n", error.what());
    return 1;
  }
}
