#include "shm/supervisor.hpp"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>

#include "util/fail.hpp"

namespace shmcoll::shm {

std::string MemberExit::describe(bool ended_team) const {
  std::string text = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") ";
  const char* name = signaled ? sigabbrev_np(value) : nullptr;
  if (ended_team && signaled && signaled_by_supervisor) {
    return text +
           "failed while it still ran (its peers found it late, with SHMCOLL_TIMEOUT, or in "
           "another call: their messages say which); the launcher then ended it with SIG" +
           (name ? name : "?");
  }
  if (signaled) {
    return text + "was killed by signal " + std::to_string(value) + " (SIG" + (name ? name : "?") +
           ")" + (signaled_by_supervisor ? ", sent by the launcher to end the job" : "");
  }
  return text + "exited with status " + std::to_string(value);
}

void end_with_parent(pid_t parent) {
  // The check after prctl closes the race with a parent that died before it: the member was
  // then adopted by another process, and no signal will come.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(128 + SIGKILL);
}

Supervisor::~Supervisor() {
  forget_members();
}

namespace {

// The supervisor holds one pidfd per member: beyond the usual soft limit of 1,024 open files
// at about as many ranks, so it raises its soft limit to the hard one when it runs out.
void allow_more_open_files() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

void Supervisor::watch(int rank, pid_t pid) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0 && errno == EMFILE) {
    allow_more_open_files();
    pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  }
  if (pidfd < 0) fail_errno("pidfd_open for rank ", rank, " (pid ", pid, ")");
  members_.push_back({rank, pid, pidfd});
}

void Supervisor::forget_members() {
  for (Member& member : members_) {
    if (member.pidfd >= 0) ::close(member.pidfd);
    member.pidfd = -1;
  }
  members_.clear();
}

void Supervisor::signal_all(int signal) const {
  for (const Member& member : members_) {
    if (member.pidfd >= 0) syscall(SYS_pidfd_send_signal, member.pidfd, signal, nullptr, 0);
  }
}

std::vector<MemberExit> Supervisor::reap_all(int interrupt_fd, long grace_ms,
                                             bool end_job_on_failure) {
  using Clock = std::chrono::steady_clock;
  const auto grace = std::chrono::milliseconds(std::max(0L, grace_ms));
  std::vector<MemberExit> exits;
  // Ending the job: SIGTERM (and SIGCONT) to every member left at terminate_at, SIGKILL from
  // kill_at on.
  std::optional<Clock::time_point> terminate_at, kill_at;
  while (exits.size() < members_.size()) {
    std::vector<pollfd> fds;
    std::vector<Member*> owners;
    for (Member& member : members_) {
      if (member.pidfd < 0) continue;
      fds.push_back({member.pidfd, POLLIN, 0});
      owners.push_back(&member);
    }
    if (interrupt_fd >= 0 && !terminate_at) fds.push_back({interrupt_fd, POLLIN, 0});
    int timeout_ms = -1;
    if (const auto next = kill_at ? kill_at : terminate_at) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now());
      timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 100));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      fail_errno("poll on member processes");
    }
    const auto now = Clock::now();
    if (terminate_at && !kill_at && now >= *terminate_at) {
      signal_all(SIGTERM);
      signal_all(SIGCONT);
      kill_at = now + grace;
    }
    if (kill_at && now >= *kill_at) signal_all(SIGKILL);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      if (i >= owners.size()) {                       // the interrupt descriptor
        segment_.abort(segment_.layout().team_size);  // no rank failed: the launcher stops all
        signal_all(SIGTERM);
        signal_all(SIGCONT);
        terminate_at = now;
        kill_at = now + grace;
        continue;
      }
      Member& member = *owners[i];
      siginfo_t info{};
      if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(member.pidfd), &info, WEXITED) !=
          0) {
        fail_errno("waitid for rank ", member.rank);
      }
      MemberExit exit{member.rank, member.pid, info.si_code != CLD_EXITED, info.si_status,
                      kill_at.has_value()};
      if (exit.failed()) {
        segment_.abort(static_cast<std::uint32_t>(member.rank));
        if (end_job_on_failure && !terminate_at) terminate_at = now + grace;
      }
      exits.push_back(exit);
      ::close(member.pidfd);
      member.pidfd = -1;
    }
  }
  return exits;
}

const MemberExit* Supervisor::first_failure(const std::vector<MemberExit>& exits, int aborted_by) {
  const MemberExit* first = nullptr;
  for (const MemberExit& exit : exits) {
    if (!exit.failed()) continue;
    if (exit.rank == aborted_by) return &exit;
    if (!first) first = &exit;
  }
  return first;
}

}  // namespace shmcoll::shm
