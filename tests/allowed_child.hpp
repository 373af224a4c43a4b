// For tests whose forked children map their parent's shared pages as a team's members do: the
// parent's memfd server answers only the members of its teams (shm/descriptor_passing.hpp).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include "shm/descriptor_passing.hpp"

namespace shmcoll::testing {

// Forks a child that this process's memfd server answers, as it answers the members of its
// teams (descriptor_passing.hpp); the child goes on once `allowed` names it, which keeps it so.
inline pid_t fork_allowed_child(shmcoll::shm::AllowedPeers& allowed) {
  int go[2];
  if (pipe(go) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(99);
    close(go[0]);
    return 0;
  }
  close(go[0]);
  if (child > 0) allowed = shmcoll::shm::AllowedPeers({child});
  if (write(go[1], "g", 1) != 1) return -1;
  close(go[1]);
  return child;
}

}  // namespace shmcoll::testing
