#include "shm/descriptor_passing.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <system_error>
#include <thread>

namespace shmcoll::shm {

namespace {

// A stopped owner costs a peer this long once (then that call takes the copy path, and later
// calls ask again only after a while: shared_pages.cpp); a client that names no key in this long
// is hung up on.
constexpr int kSecondsToAnswer = 2;
constexpr int kWaitingPeers = 64;         // the listening backlog
constexpr std::size_t kMostClients = 64;  // served at once; more wait in the backlog

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

long long now_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000LL + now.tv_nsec / 1'000'000;
}

// The members of this process's teams, with a count for each naming (AllowedPeers).
struct Allowed {
  std::mutex mutex;
  std::vector<std::int32_t> pids;
};
Allowed& allowed() {
  static Allowed* list = new Allowed;  // never destroyed: the server thread reads it to the end
  return *list;
}

bool is_allowed(std::int32_t pid) {
  if (pid == getpid()) return true;
  Allowed& list = allowed();
  std::lock_guard lock(list.mutex);
  return std::find(list.pids.begin(), list.pids.end(), pid) != list.pids.end();
}

// Sends the answer for `key`: a byte (1: found), with a duplicate of the descriptor where found.
// A fresh connection's buffer takes it whole, so this never waits.
void answer(int connection, std::uint64_t key, DescriptorLookup lookup) {
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
  sendmsg(connection, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (fd >= 0) close(fd);
}

// A connection from a team member, until it has named its key (or its time is up).
struct Client {
  int connection;
  long long deadline_ms;
  std::size_t got = 0;
  std::byte key[sizeof(std::uint64_t)] = {};
};

// Reads what `client` sent; true once it is done with (answered, gone or misbehaving).
bool read_key(Client& client, DescriptorLookup lookup) {
  const ssize_t got = recv(client.connection, client.key + client.got,
                           sizeof client.key - client.got, MSG_DONTWAIT);
  if (got < 0) return errno != EAGAIN && errno != EINTR;
  if (got == 0) return true;
  client.got += std::size_t(got);
  if (client.got < sizeof client.key) return false;
  std::uint64_t key = 0;
  std::memcpy(&key, client.key, sizeof key);
  answer(client.connection, key, lookup);
  return true;
}

// Takes every waiting connection (while fewer than kMostClients are open): a member of one of
// this process's teams becomes a client; anyone else is hung up on unread. False when the
// process is out of descriptors (the connection waits in the backlog meanwhile).
bool accept_members(int listening, std::vector<Client>& clients) {
  while (clients.size() < kMostClients) {
    const int connection = accept4(listening, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (connection < 0) return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED;
    ucred them{};
    socklen_t size = sizeof them;
    if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &them, &size) != 0 ||
        !is_allowed(them.pid)) {
      close(connection);
      continue;
    }
    clients.push_back({connection, now_ms() + kSecondsToAnswer * 1000LL});
  }
  return true;
}

// The server's thread: every client at once, none waited on while others queue.
void serve(int listening, DescriptorLookup lookup) {
  std::vector<Client> clients;
  std::vector<pollfd> polled;
  for (;;) {
    polled.clear();
    polled.push_back({listening, short(clients.size() < kMostClients ? POLLIN : 0), 0});
    long long first_deadline = -1;
    for (const Client& client : clients) {
      polled.push_back({client.connection, POLLIN, 0});
      if (first_deadline < 0 || client.deadline_ms < first_deadline)
        first_deadline = client.deadline_ms;
    }
    const int wait_ms = first_deadline < 0 ? -1 : int(std::max(0LL, first_deadline - now_ms()));
    if (poll(polled.data(), polled.size(), wait_ms) < 0) continue;  // EINTR; nothing else here
    if (polled[0].revents & POLLNVAL) return;
    const long long now = now_ms();
    for (std::size_t i = clients.size(); i-- > 0;) {
      Client& client = clients[i];
      const bool done =
          polled[i + 1].revents != 0 ? read_key(client, lookup) : now >= client.deadline_ms;
      if (!done) continue;
      close(client.connection);
      clients.erase(clients.begin() + std::ptrdiff_t(i));
    }
    // Out of descriptors: the peers will take the copy path; do not spin meanwhile.
    if ((polled[0].revents & POLLIN) && !accept_members(listening, clients)) usleep(10000);
  }
}

struct Server {
  pid_t pid = 0;  // the process that listens (a forked child starts its own)
  int listening = -1;
};
Server server;

}  // namespace

AllowedPeers::AllowedPeers(std::vector<std::int32_t> pids) : pids_(std::move(pids)) {
  Allowed& list = allowed();
  std::lock_guard lock(list.mutex);
  list.pids.insert(list.pids.end(), pids_.begin(), pids_.end());
}

AllowedPeers& AllowedPeers::operator=(AllowedPeers&& other) noexcept {
  if (this != &other) {
    AllowedPeers gone(std::move(*this));
    pids_ = std::move(other.pids_);
    other.pids_.clear();
  }
  return *this;
}

AllowedPeers::~AllowedPeers() {
  if (pids_.empty()) return;
  Allowed& list = allowed();
  std::lock_guard lock(list.mutex);
  for (const std::int32_t pid : pids_) {
    const auto at = std::find(list.pids.begin(), list.pids.end(), pid);
    if (at != list.pids.end()) list.pids.erase(at);
  }
}

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
  const int listening = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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
