#include "shm/peer_watch.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace shmcoll::shm {

namespace {

int pidfd_open(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

PeerWatch::PeerWatch(PeerWatch&& other) noexcept : pidfds_(std::move(other.pidfds_)) {}

PeerWatch& PeerWatch::operator=(PeerWatch&& other) noexcept {
  if (this != &other) {
    close_all();
    pidfds_ = std::move(other.pidfds_);
  }
  return *this;
}

PeerWatch::~PeerWatch() {
  close_all();
}

void PeerWatch::close_all() {
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
  pidfds_.clear();
}

void PeerWatch::open_all(const Segment& segment, std::uint32_t self) {
  const std::uint32_t size = segment.layout().team_size;
  pidfds_.assign(size, -1);
  for (std::uint32_t rank = 0; rank < size; ++rank) {
    const pid_t pid = segment.profile(rank).pid.load(std::memory_order_acquire);
    if (rank != self && pid > 0) pidfds_[rank] = pidfd_open(pid);
  }
}

bool PeerWatch::has_exited(const Segment& segment, std::uint32_t rank) {
  if (pidfds_.empty()) pidfds_.assign(segment.layout().team_size, -1);
  if (pidfds_[rank] < 0) {
    const pid_t pid = segment.profile(rank).pid.load(std::memory_order_acquire);
    if (pid <= 0) return false;  // not attached yet: the supervisor or a timeout must judge
    pidfds_[rank] = pidfd_open(pid);
    if (pidfds_[rank] < 0) return errno == ESRCH;
  }
  pollfd probe{pidfds_[rank], POLLIN, 0};
  return poll(&probe, 1, 0) > 0;
}

}  // namespace shmcoll::shm
