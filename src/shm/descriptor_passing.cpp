#include "shm/descriptor_passing.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <thread>

namespace shmcoll::shm {

namespace {

// A stopped or busy owner costs a peer this long once, then that call takes the copy path.
constexpr int kSecondsToAnswer = 2;
constexpr int kWaitingPeers = 64;

struct SocketName {
  sockaddr_un address{};
  socklen_t length = 0;
};

// In the abstract namespace: nothing to clean up after a killed rank, and no file to squat on
// between runs. A process that takes a rank's name first only keeps that rank from sharing: peers
// check whom they reached.
SocketName socket_name(pid_t pid) {
  SocketName name;
  name.address.sun_family = AF_UNIX;
  const int written = std::snprintf(name.address.sun_path + 1, sizeof name.address.sun_path - 1,
                                    "shmcoll-pages.%d", int(pid));
  name.length = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + std::size_t(written));
  return name;
}

void set_time_limit(int socket) {
  const timeval limit{kSecondsToAnswer, 0};
  setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
}

void answer(int connection, DescriptorLookup lookup) {
  std::uint64_t key = 0;
  if (recv(connection, &key, sizeof key, MSG_WAITALL) != ssize_t(sizeof key)) return;
  const int fd = key != 0 ? lookup(key) : -1;
  char found = fd >= 0 ? 1 : 0;
  iovec data{&found, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(rights), &fd, sizeof fd);
  }
  sendmsg(connection, &message, MSG_NOSIGNAL);
  if (fd >= 0) close(fd);
}

void serve(int listening, DescriptorLookup lookup) {
  for (;;) {
    const int connection = accept4(listening, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) return;
      // Out of descriptors or memory: the peer will take the copy path; do not spin meanwhile.
      if (errno != EINTR && errno != ECONNABORTED) usleep(10000);
      continue;
    }
    set_time_limit(connection);
    answer(connection, lookup);
    close(connection);
  }
}

struct Server {
  pid_t pid = 0;  // the process that listens (a forked child starts its own)
  int listening = -1;
};
Server server;

}  // namespace

int new_private_memfd(const char* name) {
  // A memfd's mode is 0777 until fchmod; meanwhile the process is not dumpable, which closes its
  // /proc/<pid>/fd to other processes of the user. Nothing is written to it before.
  const bool dumpable = prctl(PR_GET_DUMPABLE) == 1;
  if (dumpable) prctl(PR_SET_DUMPABLE, 0);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd >= 0 && fchmod(fd, 0) != 0) {
    close(fd);
    fd = -1;
  }
  if (dumpable) prctl(PR_SET_DUMPABLE, 1);
  return fd;
}

std::uint64_t new_memfd_key() {
  std::uint64_t key = 0;
  while (key == 0) {
    if (getrandom(&key, sizeof key, 0) != ssize_t(sizeof key)) key = 0;
  }
  return key;
}

bool serve_descriptors(DescriptorLookup lookup) {
  if (server.pid == getpid()) return true;
  if (server.listening >= 0) close(server.listening);  // a forked child's copy of its parent's
  server.listening = -1;
  const int listening = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listening < 0) return false;
  const SocketName name = socket_name(getpid());
  if (bind(listening, reinterpret_cast<const sockaddr*>(&name.address), name.length) != 0 ||
      listen(listening, kWaitingPeers) != 0) {
    close(listening);
    return false;
  }
  // The thread takes no signal of the program's.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  bool started = true;
  try {
    std::thread(serve, listening, lookup).detach();
  } catch (const std::system_error&) {
    started = false;
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (!started) {
    close(listening);
    return false;
  }
  server = {getpid(), listening};
  return true;
}

int fetch_descriptor(std::int32_t pid, std::uint64_t key, std::string& why) {
  const int connection = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const auto fail = [&](const std::string& what) {
    why = what + " (process " + std::to_string(pid) + ")";
    if (connection >= 0) close(connection);
    return -1;
  };
  if (connection < 0) return fail(std::string("socket: ") + std::strerror(errno));
  set_time_limit(connection);
  const SocketName name = socket_name(pid);
  if (connect(connection, reinterpret_cast<const sockaddr*>(&name.address), name.length) != 0) {
    return fail(std::string("connect to its memfd server: ") + std::strerror(errno));
  }
  ucred them{};
  socklen_t size = sizeof them;
  if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &them, &size) != 0 || them.pid != pid) {
    return fail("its memfd server's name is held by another process");
  }
  if (send(connection, &key, sizeof key, MSG_NOSIGNAL) != ssize_t(sizeof key)) {
    return fail(std::string("send to its memfd server: ") + std::strerror(errno));
  }
  char found = 0;
  iovec data{&found, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t got = recvmsg(connection, &message, MSG_CMSG_CLOEXEC);
  int fd = -1;
  if (got == 1 && found == 1 && !(message.msg_flags & MSG_CTRUNC)) {
    const cmsghdr* rights = CMSG_FIRSTHDR(&message);
    if (rights && rights->cmsg_level == SOL_SOCKET && rights->cmsg_type == SCM_RIGHTS &&
        rights->cmsg_len == CMSG_LEN(sizeof(int))) {
      std::memcpy(&fd, CMSG_DATA(rights), sizeof fd);
    }
  }
  if (fd < 0) {
    return fail(got < 0 ? std::string("no answer from its memfd server: ") + std::strerror(errno)
                        : std::string("its memfd server does not share that memory"));
  }
  close(connection);
  return fd;
}

}  // namespace shmcoll::shm
