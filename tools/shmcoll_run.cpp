// shmcoll-run: starts N copies of a program as one team.
//
// Creates the team's segment (already unlinked), forks N children that exec PROGRAM with
// SHMCOLL_RANK, SHMCOLL_SIZE and SHMCOLL_SEGMENT_FD set, and supervises them: a rank that dies
// or exits non-zero aborts the team so the others fail instead of hanging; SIGINT/SIGTERM stop
// every rank. Exit status: 0 when all ranks exit 0, else the first failing rank's status.
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
#include "coll/tunables.hpp"
#include "shm/segment.hpp"
#include "shm/supervisor.hpp"
#include "topo/binding.hpp"

namespace {

[[noreturn]] void exec_rank(const std::vector<std::string>& command, int rank, int size,
                            int segment_fd, bool bind, const sigset_t& original_mask) {
  sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  if (bind) shmcoll::topo::bind_process_to_core(rank);
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
      "Example: shmcoll-run -n 4 --bind-to core ./my_program --size 1M"};
  int ranks = 0;
  std::string bind_to = "none";
  std::vector<std::string> command;
  app.add_option("-n,--np", ranks, "number of ranks")->required()->check(CLI::Range(1, 4096));
  app.add_option("--bind-to", bind_to, "core: rank i on core i (mod cores); none: unbound")
      ->check(CLI::IsMember({"core", "none"}));
  app.add_option("program", command, "the program and its arguments")->required();
  app.prefix_command();  // everything from PROGRAM on belongs to the program
  CLI11_PARSE(app, argc, argv);

  try {
    const auto size = static_cast<std::uint32_t>(ranks);
    if (bind_to == "core" && ranks > shmcoll::topo::core_count()) {
      std::fprintf(stderr, "shmcoll-run: %d ranks on %d cores: oversubscribed\n", ranks,
                   shmcoll::topo::core_count());
    }
    const auto tunables = shmcoll::coll::Tunables::from_env(size);
    int segment_fd = -1;
    shmcoll::shm::Segment segment =
        shmcoll::shm::Segment::create_unlinked(size, tunables.slot_bytes, &segment_fd);

    sigset_t stop_signals, original_mask;
    sigemptyset(&stop_signals);
    for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, signal);
    sigprocmask(SIG_BLOCK, &stop_signals, &original_mask);
    const int signal_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC);

    shmcoll::shm::Supervisor supervisor(segment);
    std::fflush(nullptr);
    for (int rank = 0; rank < ranks; ++rank) {
      const pid_t pid = fork();
      if (pid == 0) exec_rank(command, rank, ranks, segment_fd, bind_to == "core", original_mask);
      if (pid < 0) {
        std::perror("shmcoll-run: fork");
        segment.abort(size);
        break;
      }
      supervisor.watch(rank, pid);
    }
    ::close(segment_fd);

    const auto exits = supervisor.reap_all(signal_fd);
    const shmcoll::shm::MemberExit* failure =
        shmcoll::shm::Supervisor::first_failure(exits, segment.aborted_by());
    if (!failure) return static_cast<int>(exits.size()) == ranks ? 0 : 1;
    std::fprintf(stderr, "shmcoll-run: %s\n", failure->describe().c_str());
    return failure->shell_status();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "shmcoll-run: %s\n", error.what());
    return 1;
  }
}
