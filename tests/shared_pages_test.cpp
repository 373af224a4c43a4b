// One copy from ordinary buffers (shm/shared_pages.hpp): which memory moves onto shared pages and
// when, that it keeps its contents, that unmapped, replaced, discarded and forked memory behaves
// as private memory does; and collectives on real forked ranks whose program frees, reallocates,
// remaps, forks and unmaps its buffers between calls.
#include "shm/shared_pages.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <numaif.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "allowed_child.hpp"
#include "shm/descriptor_passing.hpp"
#include "shm/mappings.hpp"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::shm::shared_pages_for;
using shmcoll::shm::SharedPages;
using shmcoll::testing::fork_allowed_child;
using shmcoll::testing::map_private;
constexpr std::size_t kPage = 4096;

void fill(std::byte* data, std::size_t bytes, unsigned seed) {
  for (std::size_t i = 0; i < bytes; ++i) data[i] = std::byte((i * 131 + seed * 7) >> 3);
}

// Whether data[0, bytes) holds what fill(.., seed) wrote, from byte `from` of the filled range.
bool holds(const std::byte* data, std::size_t bytes, unsigned seed, std::size_t from = 0) {
  for (std::size_t i = 0; i < bytes; ++i) {
    if (data[i] != std::byte(((i + from) * 131 + seed * 7) >> 3)) return false;
  }
  return true;
}

// Whether the page at `address` is in a shared mapping of moved pages (a forked child's view of
// them is a private one, named alike).
bool in_moved_mapping(const void* address) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  for (std::string line; std::getline(maps, line);) {
    unsigned long begin = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) == 3 && begin <= at &&
        at < end) {
      return perms[3] == 's' && line.find("shmcoll-pages") != std::string::npos;
    }
  }
  return false;
}

// A buffer that does not start or end on a page, moved (its second use). Each at pages no
// earlier one used, since uses are counted by address.
struct MovedBuffer {
  static constexpr std::size_t kMapped = 64 * kPage;
  static inline int made = 0;
  const std::size_t skipped = std::size_t(made++ % 32) * kPage;
  std::byte* reservation = map_private(kMapped + 32 * kPage);
  std::byte* mapping = reservation + skipped;
  std::byte* data = mapping + 100;
  std::size_t bytes = kMapped - 300;
  SharedPages pages;
  explicit MovedBuffer(unsigned seed) {
    fill(data, bytes, seed);
    EXPECT_FALSE(shared_pages_for(data, bytes, true)) << "moved on its first use";
    const auto moved = shared_pages_for(data, bytes, true);
    EXPECT_TRUE(moved) << "not moved on its second use";
    if (moved) pages = *moved;
  }
  ~MovedBuffer() { munmap(reservation, kMapped + 32 * kPage); }
};

TEST(SharedPages, MovesAPrivateBufferOnItsSecondUseKeepingItsContents) {
  MovedBuffer buffer(1);
  EXPECT_EQ(buffer.pages.begin, buffer.mapping + kPage);
  EXPECT_EQ(buffer.pages.bytes, buffer.kMapped - 2 * kPage);
  EXPECT_TRUE(holds(buffer.data, buffer.bytes, 1));
  EXPECT_TRUE(in_moved_mapping(buffer.mapping + kPage));
  EXPECT_FALSE(in_moved_mapping(buffer.mapping)) << "a page shared with other data moved";
  const auto again = shared_pages_for(buffer.data, buffer.bytes, true);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->key, buffer.pages.key);
  const auto part = shared_pages_for(buffer.data + 5 * kPage, 3 * kPage, true);
  ASSERT_TRUE(part) << "a part of a moved buffer is shared too";
  EXPECT_EQ(part->key, buffer.pages.key);
}

// MPI_Alloc_mem's memory commits a page when it is first touched, as private memory does: a
// sparse window or hash table is not committed whole.
TEST(SharedPages, AllocatedMemoryCommitsOnlyThePagesTouched) {
  if (std::ifstream("/proc/sys/vm/overcommit_memory").get() == '2') {
    GTEST_SKIP() << "strict overcommit: every page is allocated up front there";
  }
  constexpr std::size_t kBytes = std::size_t{1} << 30;
  auto* memory = static_cast<std::byte*>(shmcoll::shm::allocate_shared_pages(kBytes));
  ASSERT_NE(memory, nullptr);
  auto resident_pages = [&] {
    std::vector<unsigned char> resident(kBytes / kPage);
    EXPECT_EQ(mincore(memory, kBytes, resident.data()), 0);
    return std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; });
  };
  EXPECT_EQ(resident_pages(), 0) << "pages committed before any touch";
  memory[kBytes / 2] = std::byte{1};
  memory[kBytes - 1] = std::byte{2};
  EXPECT_EQ(resident_pages(), 2);
  EXPECT_TRUE(shmcoll::shm::free_shared_pages(memory));
}

// Freed, allocated memory is released at once, though a peer keeps a mapping of it cached (and
// another process holds its descriptor open); the peer, holding that empty view, can still fork.
TEST(SharedPages, FreedAllocationsReleaseTheirMemoryThoughPeersMappedThem) {
  constexpr std::size_t kBytes = 16 << 20;
  auto* memory = static_cast<std::byte*>(shmcoll::shm::allocate_shared_pages(kBytes));
  ASSERT_NE(memory, nullptr);
  fill(memory, kBytes, 3);
  const auto pages = shared_pages_for(memory, kBytes, false);
  ASSERT_TRUE(pages);
  std::string why;
  ASSERT_NE(shmcoll::shm::map_peer_pages(getpid(), *pages, why), nullptr) << why;
  const int held = open(("/proc/self/fd/" + std::to_string(pages->fd)).c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  struct stat about {};
  ASSERT_EQ(fstat(held, &about), 0);
  EXPECT_GE(std::size_t(about.st_blocks) * 512, kBytes);
  EXPECT_TRUE(shmcoll::shm::free_shared_pages(memory));
  ASSERT_EQ(fstat(held, &about), 0);
  EXPECT_EQ(about.st_blocks, 0) << "a freed allocation's pages stay allocated";
  close(held);
  // This process keeps its (now empty) view of them cached: a fork still works.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a forked child died: " << status;
}

// Whether the mapping holding `at` shows `flag` among its VmFlags.
bool has_vm_flag(const std::byte* at, const std::string& flag) {
  std::ifstream smaps("/proc/self/smaps");
  const auto address = reinterpret_cast<unsigned long>(at);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 &&
        line.find(':') > line.find(' ')) {
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return (line + " ").find(" " + flag + " ") != std::string::npos;
    }
  }
  return false;
}

// Opted in, a move still refuses memory whose mapping holds what a move would drop: a lock, huge
// page advice, DONTFORK, WIPEONFORK, DONTDUMP (that memory keeps two copies, as it was).
TEST(SharedPages, NeverMovesLockedHugePageOrForkAdvisedMemory) {
  struct Kind {
    const char* name;
    const char* vm_flag;  // as /proc/self/smaps shows it
    std::function<int(std::byte*, std::size_t)> set;
  };
  const Kind kinds[] = {
      {"mlock", "lo", [](std::byte* p, std::size_t n) { return mlock(p, n); }},
      {"MADV_HUGEPAGE", "hg",
       [](std::byte* p, std::size_t n) { return madvise(p, n, MADV_HUGEPAGE); }},
      {"MADV_DONTFORK", "dc",
       [](std::byte* p, std::size_t n) { return madvise(p, n, MADV_DONTFORK); }},
      {"MADV_WIPEONFORK", "wf",
       [](std::byte* p, std::size_t n) { return madvise(p, n, MADV_WIPEONFORK); }},
      {"MADV_DONTDUMP", "dd",
       [](std::byte* p, std::size_t n) { return madvise(p, n, MADV_DONTDUMP); }},
  };
  constexpr std::size_t kBytes = 64 * kPage;
  for (const auto& [name, vm_flag, set] : kinds) {
    std::byte* memory = map_private(kBytes);
    if (set(memory, kBytes) != 0 || !has_vm_flag(memory, vm_flag)) {
      munmap(memory, kBytes);
      continue;  // not to be had here (a lock beyond RLIMIT_MEMLOCK, or under ASan, whose mlock
                 // does nothing)
    }
    fill(memory, kBytes, 4);
    for (int use = 0; use < 3; ++use) {
      EXPECT_FALSE(shared_pages_for(memory, kBytes, true)) << name << " memory moved";
    }
    EXPECT_FALSE(in_moved_mapping(memory)) << name;
    EXPECT_TRUE(holds(memory, kBytes, 4)) << name;
    munmap(memory, kBytes);
  }
}

TEST(SharedPages, AllocatedMemoryIsSharedFromItsFirstUseUntilFreed) {
  using shmcoll::shm::allocate_shared_pages;
  using shmcoll::shm::free_shared_pages;
  constexpr std::size_t kBytes = 40 * kPage + 10;  // rounded up to whole pages
  auto* memory = static_cast<std::byte*>(allocate_shared_pages(kBytes));
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(memory) % kPage, 0u);
  EXPECT_TRUE(in_moved_mapping(memory));
  for (std::size_t i = 0; i < 41 * kPage; ++i) ASSERT_EQ(memory[i], std::byte{0}) << i;
  fill(memory, kBytes, 9);
  const auto first = shared_pages_for(memory + 100, kBytes - 300, false);
  ASSERT_TRUE(first) << "not shared on its first use";
  EXPECT_EQ(first->begin, memory);
  EXPECT_EQ(first->bytes, 41 * kPage);
  // More moved buffers than a process keeps registrations for do not push it out.
  {
    std::vector<std::unique_ptr<MovedBuffer>> others;
    for (int i = 0; i < 20; ++i) others.push_back(std::make_unique<MovedBuffer>(10 + i));
  }
  const auto later = shared_pages_for(memory, kBytes, false);
  ASSERT_TRUE(later);
  EXPECT_EQ(later->key, first->key);
  EXPECT_TRUE(holds(memory, kBytes, 9));

  EXPECT_FALSE(free_shared_pages(memory + kPage)) << "freed by an address inside it";
  EXPECT_TRUE(free_shared_pages(memory));
  EXPECT_FALSE(in_moved_mapping(memory)) << "still mapped after its free";
  EXPECT_FALSE(free_shared_pages(memory)) << "freed twice";

  std::vector<void*> live;  // each holds a descriptor: there is a most
  while (live.size() <= shmcoll::shm::kMostAllocations) {
    void* one = allocate_shared_pages(kPage);
    if (one == nullptr) break;
    live.push_back(one);
  }
  EXPECT_EQ(live.size(), shmcoll::shm::kMostAllocations);
  for (void* one : live) EXPECT_TRUE(free_shared_pages(one));
  EXPECT_EQ(allocate_shared_pages(0), nullptr);
}

TEST(SharedPages, NeverMovesTheStackFilesOrSharedMemory) {
  std::vector<std::byte> stack_ish(1);  // keeps the frame honest
  alignas(4096) std::byte on_stack[16 * kPage];
  fill(on_stack, sizeof on_stack, 2);
  void* shared =
      mmap(nullptr, 16 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  FILE* file = std::tmpfile();
  ASSERT_EQ(ftruncate(fileno(file), 16 * kPage), 0);
  void* file_mapped =
      mmap(nullptr, 16 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(file), 0);
  for (int use = 0; use < 4; ++use) {
    EXPECT_FALSE(shared_pages_for(on_stack, sizeof on_stack, true)) << "the stack moved";
    EXPECT_FALSE(shared_pages_for(static_cast<std::byte*>(shared), 16 * kPage, true));
    EXPECT_FALSE(shared_pages_for(static_cast<std::byte*>(file_mapped), 16 * kPage, true));
    EXPECT_FALSE(shared_pages_for(on_stack + 10, kPage, true)) << "less than a whole page moved";
  }
  EXPECT_TRUE(holds(on_stack, sizeof on_stack, 2));
  munmap(shared, 16 * kPage);
  munmap(file_mapped, 16 * kPage);
  std::fclose(file);
}

TEST(SharedPages, UnmappedOrReplacedPagesAreNotHandedOutAgain) {
  MovedBuffer whole(3), last_page(3);  // both first, so each first use is at a new address
  for (MovedBuffer* buffer : {&whole, &last_page}) {
    const bool only_the_last_page = buffer == &last_page;
    std::byte* replaced = only_the_last_page ? const_cast<std::byte*>(buffer->pages.begin) +
                                                   buffer->pages.bytes - kPage
                                             : buffer->mapping;
    const std::size_t replaced_bytes = only_the_last_page ? kPage : buffer->kMapped;
    ASSERT_EQ(munmap(replaced, replaced_bytes), 0);
    ASSERT_EQ(map_private(replaced_bytes, replaced), replaced);
    fill(buffer->data, buffer->bytes, 4);  // new contents, same addresses
    const auto now = shared_pages_for(buffer->data, buffer->bytes, true);
    if (now) {
      EXPECT_NE(now->key, buffer->pages.key) << "stale pages handed out";
      EXPECT_FALSE(only_the_last_page) << "moved again over pages that are partly moved already";
    }
    EXPECT_TRUE(holds(buffer->data, buffer->bytes, 4));
  }
}

// Issue 43 rows 1 and 8: staleness is judged on every page, by what the pages are (present
// shared memory), not by a NUMA policy mark programs set too: a middle range replaced by fresh
// memory, and a whole buffer replaced by a numa_alloc_local-style mapping (MPOL_LOCAL), are both
// found stale.
TEST(SharedPages, ReplacedMiddlePagesAndLocalPolicyMemoryAreFoundStale) {
  MovedBuffer middle(7), local(7);
  std::byte* middle_pages = const_cast<std::byte*>(middle.pages.begin) + 16 * kPage;
  ASSERT_NE(mmap(middle_pages, 8 * kPage, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            MAP_FAILED);
  ASSERT_EQ(munmap(local.mapping, local.kMapped), 0);
  ASSERT_EQ(mmap(local.mapping, local.kMapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0),
            local.mapping);
  ASSERT_EQ(mbind(local.mapping, local.kMapped, MPOL_LOCAL, nullptr, 0, 0), 0);
  for (MovedBuffer* buffer : {&middle, &local}) {
    fill(buffer->data, buffer->bytes, 8);
    const auto now = shared_pages_for(buffer->data, buffer->bytes, true);
    EXPECT_FALSE(now && now->key == buffer->pages.key)
        << (buffer == &middle ? "a buffer whose middle was replaced" : "a numa_alloc_local buffer")
        << " handed out as the old moved pages";
    EXPECT_TRUE(holds(buffer->data, buffer->bytes, 8));
  }
}

TEST(SharedPages, DiscardedPagesReadAsZerosAsPrivateMemoryDoes) {
  MovedBuffer buffer(5);
  std::byte* page = const_cast<std::byte*>(buffer.pages.begin) + 4 * kPage;
  ASSERT_EQ(madvise(page, 2 * kPage, MADV_DONTNEED), 0);
  for (std::size_t i = 0; i < 2 * kPage; ++i) ASSERT_EQ(page[i], std::byte{0}) << i;
  EXPECT_TRUE(holds(buffer.data, std::size_t(page - buffer.data), 5));
  const std::size_t after = std::size_t(page - buffer.data) + 2 * kPage;
  for (std::size_t i = after; i < buffer.bytes; ++i) {
    ASSERT_EQ(buffer.data[i], std::byte((i * 131 + 5 * 7) >> 3)) << i;
  }
  EXPECT_FALSE(shared_pages_for(buffer.data, buffer.bytes, true) &&
               shared_pages_for(buffer.data, buffer.bytes, true)->key == buffer.pages.key)
      << "a registration with discarded pages is still handed out";
}

TEST(SharedPages, AForkedChildGetsPrivateCopiesAndAPeerReadsTheSharedOnes) {
  MovedBuffer buffer(6);
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t parent = getpid();
  shmcoll::shm::AllowedPeers allowed;
  const pid_t child = fork_allowed_child(allowed);
  if (child == 0) {
    int failures = 0;
    if (!holds(buffer.data, buffer.bytes, 6)) failures |= 1;
    if (in_moved_mapping(buffer.pages.begin)) failures |= 2;  // the child's pages are private
    std::string why;
    const std::byte* peer = shmcoll::shm::map_peer_pages(parent, buffer.pages, why);
    if (!peer) failures |= 4;
    fill(buffer.data, buffer.bytes, 7);  // the parent must not see this
    char go;
    if (write(to_parent[1], "r", 1) != 1 || read(to_child[0], &go, 1) != 1) failures |= 8;
    if (!holds(buffer.data, buffer.bytes, 7)) failures |= 16;  // nor the child the parent's
    const std::size_t head = std::size_t(buffer.pages.begin - buffer.data);
    for (std::size_t i = 0; peer && i < buffer.pages.bytes; ++i) {
      if (peer[i] != std::byte(((i + head) * 131 + 8 * 7) >> 3)) {  // the parent's refill
        failures |= 32;
        break;
      }
    }
    _exit(failures);
  }
  ASSERT_GT(child, 0);
  char ready;
  ASSERT_EQ(read(to_parent[0], &ready, 1), 1);
  EXPECT_TRUE(holds(buffer.data, buffer.bytes, 6)) << "the child's write reached the parent";
  fill(buffer.data, buffer.bytes, 8);
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: contents lost at fork, 2: child still shares, 4: peer cannot map, 16: parent's "
         "write reached the child, 32: peer does not see the parent's writes";
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
}

// Issue 43 row 10: what a peer keeps mapped of others' pages (which keeps them alive after their
// owner frees them) is bounded in bytes, not only in count: of four 96 MiB allocations mapped one
// after the other, at most the last two (256 MiB) stay mapped. Sparse memfds: nothing is touched.
TEST(SharedPages, APeerKeepsABoundedNumberOfBytesOfOthersPagesMapped) {
  constexpr std::size_t kBytes = std::size_t{96} << 20;
  std::vector<void*> allocations;
  std::vector<SharedPages> pages;
  std::vector<std::uint64_t> inodes;
  for (int i = 0; i < 4; ++i) {
    allocations.push_back(shmcoll::shm::allocate_shared_pages(kBytes));
    ASSERT_NE(allocations.back(), nullptr);
    const auto shared =
        shared_pages_for(static_cast<std::byte*>(allocations.back()), kBytes, false);
    ASSERT_TRUE(shared);
    pages.push_back(*shared);
    struct stat about {};
    ASSERT_EQ(fstat(shared->fd, &about), 0);
    inodes.push_back(about.st_ino);
  }
  const pid_t parent = getpid();
  shmcoll::shm::AllowedPeers allowed;
  const pid_t child = fork_allowed_child(allowed);
  if (child == 0) {
    std::string why;
    for (const SharedPages& theirs : pages) {
      if (!shmcoll::shm::map_peer_pages(parent, theirs, why)) _exit(100);
    }
    int still_mapped = 0;  // mappings of the parent's allocations other than the inherited ones
    shmcoll::shm::for_each_mapping([&](const shmcoll::shm::Mapping& m) {
      for (std::size_t i = 0; i < pages.size(); ++i) {
        still_mapped +=
            m.inode == inodes[i] && m.begin != reinterpret_cast<std::uintptr_t>(pages[i].begin);
      }
      return true;
    });
    _exit(still_mapped);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 100) << "the peer could not map the pages";
  EXPECT_LE(WEXITSTATUS(status), 2) << "mappings a peer keeps of 4 x 96 MiB";
  for (void* allocation : allocations) shmcoll::shm::free_shared_pages(allocation);
}

TEST(SharedPages, APeerMapsPagesNamedJustBeforeTheirRegistrationWasForgotten) {
  // A call of another thread, or a nonblocking one, may name pages to a peer while this thread's
  // calls make the process forget them (here: more buffers moved than it keeps registrations).
  MovedBuffer buffer(40);
  std::vector<std::unique_ptr<MovedBuffer>> others;
  for (int i = 0; i < 20; ++i) others.push_back(std::make_unique<MovedBuffer>(41 + i));
  ASSERT_FALSE(shared_pages_for(buffer.data, buffer.bytes, true)) << "still registered";
  const pid_t parent = getpid();
  shmcoll::shm::AllowedPeers allowed;
  const pid_t child = fork_allowed_child(allowed);
  if (child == 0) {
    std::string why;
    const std::byte* peer = shmcoll::shm::map_peer_pages(parent, buffer.pages, why);
    const std::size_t head = std::size_t(buffer.pages.begin - buffer.data);
    _exit(peer && holds(peer, buffer.pages.bytes, 40, head) ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the peer could not map or read pages named to it before they were forgotten";
}

}  // namespace
