// shmcoll::run: the fork API.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <thread>
#include <vector>

#include "api/team_state.hpp"
#include "shm/supervisor.hpp"
#include "topo/topology.hpp"
#include "util/fail.hpp"

namespace shmcoll {

namespace {

// What every rank of one run() shares, decided in the parent before the fork.
struct Plan {
  const topo::Topology& topology;
  std::vector<int> cores;  // per rank, empty when unbound
  Placement placement;
  coll::Tunables tunables;
};

void run_rank(shm::Segment segment, int rank, const Plan& plan,
              const std::function<void(Team&)>& fn) {
  const int core = plan.cores.empty() ? -1 : plan.cores[static_cast<std::size_t>(rank)];
  detail::bind_rank(plan.topology, core);
  const detail::RankSetup setup{detail::locate_rank(plan.topology, core), plan.placement};
  Team team = detail::TeamAccess::make(std::move(segment), static_cast<std::uint32_t>(rank),
                                       plan.tunables, setup);
  fn(team);
}

[[noreturn]] void child_main(shm::Segment segment, int rank, const Plan& plan,
                             const std::function<void(Team&)>& fn) {
  int status = 0;
  try {
    run_rank(std::move(segment), rank, plan, fn);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "shmcoll rank %d: %s\n", rank, error.what());
    status = 1;
  } catch (...) {
    std::fprintf(stderr, "shmcoll rank %d: unknown exception\n", rank);
    status = 1;
  }
  std::fflush(nullptr);
  _exit(status);  // not exit(): the parent's atexit handlers and static objects are not ours
}

}  // namespace

void run(int n, const Options& options, const std::function<void(Team&)>& fn) {
  if (n < 1) fail(Errc::invalid_argument, "run: n must be at least 1, got ", n);
  if (!fn) fail(Errc::invalid_argument, "run: fn is empty");
  const auto size = static_cast<std::uint32_t>(n);
  const topo::Topology& topology = topo::Topology::shared(options.topology);
  const Plan plan{topology, detail::plan_cores(topology, n, options, "shmcoll::run"),
                  detail::placement_from(options), coll::Tunables::from_env()};
  int fd = -1;
  shm::Segment segment = shm::Segment::create_unlinked(
      size, detail::segment_sizes_for(options, plan.tunables, size), &fd);
  // Outlives rank 0's team.
  shm::Segment watch_segment = shm::Segment::from_fd_closing(fd, size);

  shm::Supervisor supervisor(watch_segment);
  std::fflush(nullptr);  // or children would flush the parent's buffered output again
  const pid_t parent = getpid();
  for (int rank = 1; rank < n; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      shm::end_with_parent(parent);  // rank 0 is the team's parent: nobody outlives it
      supervisor.forget_members();
      watch_segment = shm::Segment{};
      child_main(std::move(segment), rank, plan, fn);
    }
    if (pid < 0) {
      const int saved = errno;
      watch_segment.abort(static_cast<std::uint32_t>(rank));
      supervisor.reap_all();
      errno = saved;
      fail_errno("run: fork of rank ", rank);
    }
    supervisor.watch(rank, pid);
  }

  std::vector<shm::MemberExit> exits;
  std::exception_ptr monitor_error;
  std::thread monitor([&] {
    try {
      exits = supervisor.reap_all();
    } catch (...) {
      monitor_error = std::current_exception();
    }
  });
  // Rank 0 is the caller's own process: a binding it gets as rank 0 ends with the call.
  const std::vector<unsigned> callers_cpus =
      plan.cores.empty() ? std::vector<unsigned>{} : topology.process_cpus();
  std::exception_ptr rank0_error;
  try {
    run_rank(std::move(segment), 0, plan, fn);
  } catch (...) {
    rank0_error = std::current_exception();
    watch_segment.abort(0);
  }
  if (!callers_cpus.empty()) topology.bind_to_cpus(callers_cpus);
  monitor.join();

  if (monitor_error) std::rethrow_exception(monitor_error);
  const int culprit = watch_segment.aborted_by();
  const shm::MemberExit* failure = shm::Supervisor::first_failure(exits, culprit);
  if (rank0_error && (!failure || culprit == 0)) std::rethrow_exception(rank0_error);
  if (failure) fail(Errc::rank_failed, "run: ", failure->describe());
}

}  // namespace shmcoll
