// What a forked child of a process holding shared pages (MPI_Alloc_mem memory) may rely on
// (issue 57, row 3; docs/limits.md): it views them copy on write from before fork returns, so
// its writes never reach the parent, with or without the kernel's cross-memory copy (a seccomp
// profile may refuse it); it keeps that view when the parent frees the memory (zeros where it had
// not written, never SIGBUS); a discarding madvise leaves it zeros, as on private memory.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "shm/shared_pages.hpp"
#include "test_support.hpp"

namespace {

constexpr std::size_t kBytes = std::size_t{4} << 20;

bool all_are(const std::byte* data, std::size_t bytes, std::byte value) {
  return std::all_of(data, data + bytes, [&](std::byte b) { return b == value; });
}

// Runs `body` in a process of its own (so that a seccomp filter or a freed allocation stays
// there) and returns its exit status: 0 when all went well.
int in_a_process(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// In the process that allocated: `memory` filled with 0x11, a child forked that runs `child` on
// it; its exit status (0: all well), or 100 + what went wrong here.
int fork_child_of_allocation(bool refused, const std::function<int(std::byte*, int)>& child,
                             const std::function<void(std::byte*)>& meanwhile = {}) {
  if (refused && !shmcoll::testing::refuse_cross_memory_copies()) return 100;
  auto* memory = static_cast<std::byte*>(shmcoll::shm::allocate_shared_pages(kBytes));
  if (!memory) return 101;
  std::fill(memory, memory + kBytes, std::byte{0x11});
  int go[2];
  if (pipe(go) != 0) return 102;
  const pid_t pid = fork();
  if (pid == 0) {
    close(go[1]);
    _exit(child(memory, go[0]));
  }
  close(go[0]);
  if (meanwhile) meanwhile(memory);
  if (write(go[1], "g", 1) != 1) return 103;
  close(go[1]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 104;
  if (!WIFEXITED(status)) return 105;  // killed: SIGBUS or SIGSEGV
  if (WEXITSTATUS(status) != 0) return WEXITSTATUS(status);
  // The child wrote 0x22 everywhere; none of it may show here (unless freed meanwhile).
  if (!meanwhile && !all_are(memory, kBytes, std::byte{0x11})) return 106;
  return 0;
}

int wait_for_go(int go) {
  char byte;
  return read(go, &byte, 1) == 1 ? 0 : 1;
}

class ForkedChild : public ::testing::TestWithParam<bool> {};

TEST_P(ForkedChild, SeesTheContentsAtForkAndItsWritesNeverReachTheParent) {
  const int status = in_a_process([&] {
    return fork_child_of_allocation(GetParam(), [](std::byte* memory, int go) {
      if (!all_are(memory, kBytes, std::byte{0x11})) return 1;
      std::fill(memory, memory + kBytes, std::byte{0x22});
      return wait_for_go(go) != 0 || !all_are(memory, kBytes, std::byte{0x22}) ? 2 : 0;
    });
  });
  EXPECT_EQ(status, 0) << "1: the child lost the contents, 2: the child lost its writes, 106: "
                          "the child's writes reached the parent, 105: the child was killed";
}

TEST_P(ForkedChild, KeepsItsViewWhenTheParentFreesTheMemory) {
  const int status = in_a_process([&] {
    return fork_child_of_allocation(
        GetParam(),
        [](std::byte* memory, int go) {
          std::fill(memory, memory + kBytes / 2, std::byte{0x22});
          if (wait_for_go(go) != 0) return 1;
          // Its own half stays; the other shows what the memory holds now: zeros, not SIGBUS.
          if (!all_are(memory, kBytes / 2, std::byte{0x22})) return 2;
          return all_are(memory + kBytes / 2, kBytes / 2, std::byte{0}) ? 0 : 3;
        },
        [](std::byte* memory) {
          usleep(50'000);  // either way, before or after the child writes its half
          shmcoll::shm::free_shared_pages(memory);
        });
  });
  EXPECT_EQ(status, 0) << "2: the child lost its writes, 3: not zeros after the free, 105: the "
                          "child was killed (SIGBUS)";
}

TEST_P(ForkedChild, ReadsZerosWhereItDiscardsPages) {
  const int status = in_a_process([&] {
    return fork_child_of_allocation(GetParam(), [](std::byte* memory, int) {
      std::fill(memory, memory + kBytes, std::byte{0x22});
      if (madvise(memory, kBytes, MADV_DONTNEED) != 0) return 1;
      return all_are(memory, kBytes, std::byte{0}) ? 0 : 2;
    });
  });
  EXPECT_EQ(status, 0) << "2: discarded pages of the child's view are not zeros";
}

INSTANTIATE_TEST_SUITE_P(CrossMemoryCopies, ForkedChild, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "refused" : "allowed"; });

}  // namespace
