// A forked child's view of shared pages where the MPI underneath hooks mremap as UCX's memory
// hooks do (issue 57, row 3: UCX's mremap drops MREMAP_FIXED's new address, so the call moved the
// child's copy elsewhere, returned 0, and the child went on sharing the parent's pages). This
// program's mremap does the same to every caller in the process; the child's writes must still
// not reach the parent. Exits 0 when they do not.
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstddef>
#include <cstdio>

#include "shm/shared_pages.hpp"

extern "C" void* mremap(void* old_address, std::size_t old_size, std::size_t new_size, int flags,
                        ...) {
  return reinterpret_cast<void*>(syscall(SYS_mremap, old_address, old_size, new_size, flags, 0));
}

int main() {
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  auto* memory = static_cast<std::byte*>(shmcoll::shm::allocate_shared_pages(kBytes));
  if (!memory) {
    std::fprintf(stderr, "no shared pages here\n");
    return 2;
  }
  std::fill(memory, memory + kBytes, std::byte{0x11});
  const pid_t child = fork();
  if (child == 0) {
    std::fill(memory, memory + kBytes, std::byte{0x22});
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const auto changed =
      std::count_if(memory, memory + kBytes, [](std::byte b) { return b != std::byte{0x11}; });
  std::printf("%td of %zu bytes of the parent's memory changed by the child's writes\n", changed,
              kBytes);
  return changed == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
