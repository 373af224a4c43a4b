// Whether another member process is still alive, without holding anything open: a member is
// named by its pid and the time it started (clock ticks after boot, from /proc), so a pid that
// the kernel recycled for another process never passes for the member. A team of p ranks thus
// costs no file descriptor per peer (p-1 pidfds per rank ran into the usual limit of 1,024 open
// files at 1,024 ranks, and p^2 of them system-wide).
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace shmcoll::shm {

// When this process started, in clock ticks after boot, as peers will read it from
// /proc/<pid>/stat; 0 when /proc cannot tell, or shows another PID namespace than ours (there
// /proc/<pid> is not this process, and peers fall back on whether the pid exists at all).
std::uint64_t own_start_ticks();

// True when the process that was `pid` and started at `start_ticks` has exited (or is a zombie).
// With start_ticks 0 (unknown), only a pid that no longer exists counts as exited.
bool process_has_exited(pid_t pid, std::uint64_t start_ticks);

}  // namespace shmcoll::shm
