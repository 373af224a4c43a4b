// Who gets a rank's shared pages (shm/descriptor_passing.hpp): only a member of one of its teams
// that names the memfd's key, never through /proc/<pid>/fd; members at once, whatever else is
// connected to the owner's server; and an owner that did not answer is not waited for again at
// every use.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "allowed_child.hpp"
#include "shm/descriptor_passing.hpp"
#include "shm/shared_pages.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::shm::shared_pages_for;
using shmcoll::shm::SharedPages;
using shmcoll::testing::fork_allowed_child;

// Issue 43, row 15: another process of the same user could open a rank's memfd through
// /proc/<pid>/fd, read-write, which only ptrace-read permission guards. Now that path is closed,
// and the memory reaches only a process that names its key.
TEST(SharedPages, OnlyAProcessThatNamesItsKeyGetsTheMemory) {
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  auto* memory = static_cast<std::uint32_t*>(shmcoll::shm::allocate_shared_pages(kBytes));
  ASSERT_NE(memory, nullptr);
  for (std::size_t i = 0; i < kBytes / 4; ++i) memory[i] = std::uint32_t(i * 2654435761u);
  const auto pages = shared_pages_for(reinterpret_cast<std::byte*>(memory), kBytes, false);
  ASSERT_TRUE(pages);
  const pid_t owner = getpid();
  shmcoll::shm::AllowedPeers allowed;
  const pid_t outsider = fork_allowed_child(allowed);
  if (outsider == 0) {
    // As root, the permission to override file modes would open anything: a user has none.
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2] = {};
    if (syscall(SYS_capget, &header, caps) == 0) {
      for (const int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}) {
        caps[cap / 32].effective &= ~(1u << (cap % 32));
      }
      syscall(SYS_capset, &header, caps);
    }
    const std::string path = "/proc/" + std::to_string(owner) + "/fd/" + std::to_string(pages->fd);
    if (open(path.c_str(), O_RDONLY | O_CLOEXEC) >= 0) _exit(1);
    std::string why;
    if (shmcoll::shm::fetch_descriptor(owner, pages->key ^ 1, why) >= 0) _exit(2);
    SharedPages named = *pages;
    const auto* mapped =
        reinterpret_cast<const std::uint32_t*>(shmcoll::shm::map_peer_pages(owner, named, why));
    if (!mapped) _exit(3);
    for (std::size_t i = 0; i < kBytes / 4; ++i) {
      if (mapped[i] != std::uint32_t(i * 2654435761u)) _exit(4);
    }
    _exit(0);
  }
  ASSERT_GT(outsider, 0);
  int status = 0;
  ASSERT_EQ(waitpid(outsider, &status, 0), outsider);
  ASSERT_TRUE(WIFEXITED(status));
  const char* failures[] = {"", "the memfd opened through /proc/<pid>/fd",
                            "the owner handed its memfd out for a wrong key",
                            "the owner did not hand its memfd out for its key",
                            "the memfd handed out holds other bytes"};
  EXPECT_EQ(WEXITSTATUS(status), 0) << failures[std::min(WEXITSTATUS(status), 4)];
  shmcoll::shm::free_shared_pages(memory);
}

// A connection to `pid`'s memfd server, as anyone on the node can make one; -1 where none.
int connect_to_server_of(pid_t pid) {
  const int connection = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const int written = std::snprintf(address.sun_path + 1, sizeof address.sun_path - 1,
                                    "shmcoll-pages.%d", int(pid));
  const auto length = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + std::size_t(written));
  if (connect(connection, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    close(connection);
    return -1;
  }
  return connection;
}

// Issue 57, row 2: the server answered one connection at a time, waiting up to 2 s for each to
// name its key, and answered anyone: a few idle connections from any user held a team's peer
// up for seconds, on every call. Now a process that is not a member of the owner's teams is hung
// up on unread, even with the right key, and members are answered whatever else is connected.
TEST(SharedPages, TheMemfdServerAnswersMembersAtOnceAndNobodyElse) {
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  auto* memory = static_cast<std::byte*>(shmcoll::shm::allocate_shared_pages(kBytes));
  ASSERT_NE(memory, nullptr);
  std::memset(memory, 9, kBytes);
  const auto pages = shared_pages_for(memory, kBytes, false);
  ASSERT_TRUE(pages);
  const pid_t owner = getpid();
  int held[2];
  ASSERT_EQ(pipe(held), 0);
  const pid_t stranger = fork();
  if (stranger == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(10);
    int idle[8];
    for (int& connection : idle) connection = connect_to_server_of(owner);
    const int asking = connect_to_server_of(owner);
    if (asking < 0 || idle[7] < 0) _exit(11);
    if (write(held[1], "h", 1) != 1) _exit(12);
    const std::uint64_t key = pages->key;
    send(asking, &key, sizeof key, MSG_NOSIGNAL);
    const timeval limit{3, 0};
    setsockopt(asking, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    char found = 0;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    iovec data{&found, 1};
    msghdr message{};
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const bool handed = recvmsg(asking, &message, 0) == 1 && found == 1;
    sleep(3);  // the idle connections stay open meanwhile
    _exit(handed ? 1 : 0);
  }
  ASSERT_GT(stranger, 0);
  char byte;
  ASSERT_EQ(read(held[0], &byte, 1), 1);
  shmcoll::shm::AllowedPeers allowed;
  const pid_t member = fork_allowed_child(allowed);
  if (member == 0) {
    const double start = shmcoll::testing::monotonic_seconds();
    std::string why;
    for (int call = 0; call < 3; ++call) {
      int fd = shmcoll::shm::fetch_descriptor(owner, pages->key, why);
      if (fd < 0) _exit(1);
      close(fd);
    }
    _exit(shmcoll::testing::monotonic_seconds() - start < 1.0 ? 0 : 2);
  }
  ASSERT_GT(member, 0);
  int status = 0;
  ASSERT_EQ(waitpid(member, &status, 0), member);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "a member was not answered (1) or waited a second or more (2) behind idle strangers";
  ASSERT_EQ(waitpid(stranger, &status, 0), stranger);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "exit " << WEXITSTATUS(status) << " (1: a stranger that named the key got the memfd)";
  close(held[0]);
  close(held[1]);
  shmcoll::shm::free_shared_pages(memory);
}

// An owner that does not answer (stopped) costs a peer its wait once; the next uses of the same
// memory take the copy path at once instead of waiting again.
TEST(SharedPages, AnOwnerThatDidNotAnswerIsNotWaitedForAgainOnTheNextUse) {
  struct Posted {
    SharedPages pages;
    std::atomic<int> ready;
  };
  auto* posted = shmcoll::testing::shared_block<Posted>();
  const pid_t peer = getpid();
  const pid_t owner = fork();
  if (owner == 0) {
    shmcoll::shm::AllowedPeers allowed({peer});
    auto* memory = static_cast<std::byte*>(shmcoll::shm::allocate_shared_pages(1 << 20));
    const auto pages = memory ? shared_pages_for(memory, 1 << 20, false) : std::nullopt;
    if (!pages) _exit(1);
    posted->pages = *pages;
    posted->ready = 1;
    raise(SIGSTOP);
    _exit(0);
  }
  ASSERT_GT(owner, 0);
  int status = 0;
  ASSERT_EQ(waitpid(owner, &status, WUNTRACED), owner);
  ASSERT_TRUE(WIFSTOPPED(status)) << "the owner could not allocate shared pages";
  std::string why;
  const double first = shmcoll::testing::monotonic_seconds();
  EXPECT_EQ(shmcoll::shm::map_peer_pages(owner, posted->pages, why), nullptr);
  const double second = shmcoll::testing::monotonic_seconds();
  EXPECT_EQ(shmcoll::shm::map_peer_pages(owner, posted->pages, why), nullptr);
  const double third = shmcoll::testing::monotonic_seconds();
  EXPECT_GT(second - first, 1.0) << "the stopped owner answered";
  EXPECT_LT(third - second, 0.1) << "the next use waited again: " << why;
  kill(owner, SIGKILL);
  waitpid(owner, &status, 0);
  munmap(posted, sizeof *posted);
}

}  // namespace
