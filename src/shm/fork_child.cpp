#include "shm/fork_child.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace shmcoll::shm {

namespace {

std::byte* pointer(std::uintptr_t a) {
  return reinterpret_cast<std::byte*>(a);
}

// Whether the pages now sit at `begin`.
bool map_in_child(std::uintptr_t begin, std::size_t bytes, int prot, int flags, int fd,
                  std::uint64_t offset) {
  return syscall(SYS_mmap, begin, bytes, prot, flags | MAP_FIXED, fd, offset) == long(begin);
}

}  // namespace

bool view_privately_in_child(std::uintptr_t begin, std::uintptr_t end, int prot, int fd,
                             std::uint64_t offset) {
  return map_in_child(begin, end - begin, prot, MAP_PRIVATE, fd, offset);
}

// By the kernel's copy where allowed, else by the CPU (a seccomp profile may refuse
// process_vm_readv): a moved memfd is never cut short, so no page of it raises SIGBUS.
bool copy_privately_in_child(std::uintptr_t begin, std::uintptr_t end, int prot) {
  const std::size_t bytes = end - begin;
  const long copy = syscall(SYS_mmap, 0, bytes, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (copy < 0) return false;
  const iovec to{pointer(std::uintptr_t(copy)), bytes}, from{pointer(begin), bytes};
  const ssize_t copied = process_vm_readv(getpid(), &to, 1, &from, 1, 0);
  if (copied < 0 && (errno == EPERM || errno == ENOSYS)) {
    std::memcpy(pointer(std::uintptr_t(copy)), pointer(begin), bytes);
  } else if (copied != ssize_t(bytes)) {
    syscall(SYS_munmap, copy, bytes);
    return false;
  }
  if (prot != (PROT_READ | PROT_WRITE)) syscall(SYS_mprotect, copy, bytes, prot);
  if (syscall(SYS_mremap, copy, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, begin) ==
      long(begin)) {
    return true;
  }
  syscall(SYS_munmap, copy, bytes);
  return false;
}

void refuse_in_child(std::uintptr_t begin, std::uintptr_t end) {
  if (!map_in_child(begin, end - begin, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) {
    syscall(SYS_munmap, begin, end - begin);
  }
  char message[200];
  const int length = std::snprintf(
      message, sizeof message,
      "shmcoll: this forked child could not get its own copy of %zu bytes of shared pages "
      "(MPI_Alloc_mem memory) at %p; they are inaccessible here\n",
      std::size_t(end - begin), static_cast<void*>(pointer(begin)));
  if (length > 0 && write(STDERR_FILENO, message, std::size_t(length)) < 0) {
  }
}

}  // namespace shmcoll::shm
