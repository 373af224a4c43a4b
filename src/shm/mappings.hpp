// What the kernel says of this process's memory: its mappings (/proc/self/maps and smaps), a
// page's NUMA policy, whether pages are present and shared (/proc/self/pagemap). Read by the
// shared pages (shared_pages.cpp) before they move a buffer's pages and whenever they hand moved
// pages out again.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace shmcoll::shm {

// One line of /proc/self/maps.
struct Mapping {
  std::uintptr_t begin = 0, end = 0;
  char perms[5] = {};
  std::uint64_t offset = 0;  // in the file mapped
  std::uint64_t inode = 0;
  const char* path = "";  // valid during the callback only
};

// Calls fn(mapping) for each line of /proc/self/maps until it returns false. Reads with a stack
// buffer and no allocation: it also runs in a forked child (shared_pages.cpp's fork_child).
template <typename Fn>
bool for_each_mapping(Fn&& fn) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[8192];
  std::size_t held = 0;
  bool more = true;
  while (more) {
    const ssize_t got = read(fd, buffer + held, sizeof buffer - 1 - held);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    held += static_cast<std::size_t>(got);
    buffer[held] = '\0';
    char* line = buffer;
    while (char* newline = static_cast<char*>(std::memchr(line, '\n', held - (line - buffer)))) {
      *newline = '\0';
      Mapping m;
      unsigned long begin = 0, end = 0, offset = 0, inode = 0;
      int path_at = 0;
      if (std::sscanf(line, "%lx-%lx %4s %lx %*x:%*x %lu %n", &begin, &end, m.perms, &offset,
                      &inode, &path_at) >= 5) {
        m.begin = begin;
        m.end = end;
        m.offset = offset;
        m.inode = inode;
        m.path = path_at > 0 ? line + path_at : "";
        if (!fn(m)) {
          more = false;
          break;
        }
      }
      line = newline + 1;
    }
    held -= static_cast<std::size_t>(line - buffer);
    std::memmove(buffer, line, held);
  }
  close(fd);
  return true;
}

// The mapping's protection, as mmap takes it.
int prot_of(const Mapping& m);

// The NUMA policy mode of the page at `page` (-1: unknown).
int policy_at(std::uintptr_t page);

// vm.overcommit_memory=2: the kernel refuses to commit more than it can back.
bool strict_overcommit();

// Whether [begin, end) is all private anonymous read-write memory (the heap counts; the stack
// and anything named does not) or shared read-write mappings whose name contains `moved_name`
// (pages moved before).
bool private_anonymous(std::uintptr_t begin, std::uintptr_t end, const char* moved_name);

// Whether the mappings over [begin, end) hold nothing a move would drop (docs/limits.md): a lock,
// huge pages or the advice for them, DONTFORK, WIPEONFORK, DONTDUMP, userfaultfd, KSM merging,
// a protection key. Read from /proc/self/smaps (only on a move, which costs far more).
bool keeps_nothing_a_move_drops(std::uintptr_t begin, std::uintptr_t end);

// Whether [begin, end) overlaps the calling thread's stack (the main thread's is also refused by
// name in the maps; other threads' stacks look like any anonymous memory).
bool on_my_stack(std::uintptr_t begin, std::uintptr_t end);

// Whether every page of [begin, end) (page-aligned) is present and a page of a file or of shared
// memory, from /proc/self/pagemap: what pages moved onto a memfd, and mapped populated, are
// until the program unmaps, replaces or discards any of them (or the kernel swaps one out). A
// private page in their place, fresh or copied, is not.
bool pages_present_and_shared(std::uintptr_t begin, std::uintptr_t end);

}  // namespace shmcoll::shm
