#include "shm/peer_watch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace shmcoll::shm {

namespace {

struct ProcessStat {
  bool readable = false;
  char state = '?';
  std::uint64_t start_ticks = 0;
};

// Fields 3 (state) and 22 (starttime) of /proc/<pid>/stat; the command name (field 2) may hold
// spaces and parentheses, so fields are counted from its last ')'.
// pid 0: this process (/proc/self/stat).
ProcessStat read_stat(pid_t pid) {
  char path[32];
  if (pid == 0) {
    std::snprintf(path, sizeof path, "/proc/self/stat");
  } else {
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  }
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char text[1024];
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return {};
  text[got] = '\0';
  const char* at = std::strrchr(text, ')');
  if (at == nullptr) return {};
  ProcessStat stat;
  unsigned long long start = 0;
  // After ") ": state, then fields 4..21 skipped, then starttime (field 22).
  if (std::sscanf(
          at + 1,
          " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
          &stat.state, &start) != 2) {
    return {};
  }
  stat.readable = true;
  stat.start_ticks = start;
  return stat;
}

}  // namespace

std::uint64_t own_start_ticks() {
  const ProcessStat by_pid = read_stat(getpid());
  const ProcessStat by_self = read_stat(0);
  return by_pid.readable && by_self.readable && by_pid.start_ticks == by_self.start_ticks
             ? by_pid.start_ticks
             : 0;
}

bool process_has_exited(pid_t pid, std::uint64_t start_ticks) {
  const ProcessStat stat = read_stat(pid);
  if (!stat.readable) return ::kill(pid, 0) != 0 && errno == ESRCH;
  if (stat.state == 'Z' || stat.state == 'X') return true;
  return start_ticks != 0 && stat.start_ticks != start_ticks;
}

}  // namespace shmcoll::shm
