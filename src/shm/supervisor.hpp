// Watches the member processes of a team from their parent (shmcoll::run's rank 0, or the
// shmcoll-run launcher). A member that dies or exits non-zero aborts the team at once, so every
// survivor's wait fails instead of hanging.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "shm/segment.hpp"

namespace shmcoll::shm {

struct MemberExit {
  int rank = -1;
  pid_t pid = 0;
  bool signaled = false;
  int value = 0;                        // exit status, or the signal number when signaled
  bool signaled_by_supervisor = false;  // it ended after the supervisor signalled every member

  bool failed() const { return signaled || value != 0; }
  // The status a shell would report: the exit status, or 128 + signal.
  int shell_status() const { return signaled ? 128 + value : value; }
  // `ended_team`: the team's abort word names this member (a peer found it dead, late or in
  // another call), so when the supervisor's own signal ended it, that is not why it failed.
  std::string describe(bool ended_team = false) const;
};

// In a freshly forked member: it is killed when the process that forked it (`parent`) ends,
// however that ends (PR_SET_PDEATHSIG, which survives exec); if `parent` has ended already,
// it exits at once.
void end_with_parent(pid_t parent);

class Supervisor {
 public:
  explicit Supervisor(const Segment& segment) : segment_(segment) {}
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  void watch(int rank, pid_t pid);
  // Closes every member's pidfd and forgets it. A process forked after some watch() calls calls
  // this at once: the pidfds it inherited are the parent's to use (else the k-th forked rank
  // would hold k-1 of them: p^2/2 in all).
  void forget_members();
  // Reaps every watched member, in the order they exit. When `interrupt_fd` turns readable (a
  // signalfd for SIGINT/SIGTERM), members get SIGTERM at once, then SIGKILL `grace_ms` later.
  // With `end_job_on_failure` (the launcher, as mpirun), a member that fails ends the job: the
  // others get SIGTERM `grace_ms` later and SIGKILL `grace_ms` after that. SIGTERM comes with
  // SIGCONT, so a stopped member (SIGSTOP, a debugger) receives it too.
  std::vector<MemberExit> reap_all(int interrupt_fd = -1, long grace_ms = 1000,
                                   bool end_job_on_failure = false);
  // The exit that ended the team: the rank named by the abort word if it failed, else the first
  // failure; nullptr when all succeeded.
  static const MemberExit* first_failure(const std::vector<MemberExit>& exits, int aborted_by);

 private:
  struct Member {
    int rank;
    pid_t pid;
    int pidfd;
  };
  void signal_all(int signal) const;
  const Segment& segment_;
  std::vector<Member> members_;
};

}  // namespace shmcoll::shm
