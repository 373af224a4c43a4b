// One copy from ordinary buffers (shm/shared_pages.hpp): which memory moves onto shared pages and
// when, that it keeps its contents, that unmapped, replaced, discarded and forked memory behaves
// as private memory does; and collectives on real forked ranks whose program frees, reallocates,
// remaps, forks and unmaps its buffers between calls.
#include "shm/shared_pages.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::shm::shared_pages_for;
using shmcoll::shm::SharedPages;
constexpr std::size_t kPage = 4096;

std::byte* map_private(std::size_t bytes, void* at = nullptr) {
  void* memory = mmap(at, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
  EXPECT_NE(memory, MAP_FAILED);
  return static_cast<std::byte*>(memory);
}

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

// Whether the page at `address` is one of the moved pages' mappings.
bool in_moved_mapping(const void* address) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  for (std::string line; std::getline(maps, line);) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &begin, &end) == 2 && begin <= at && at < end) {
      return line.find("shmcoll-pages") != std::string::npos;
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
  EXPECT_EQ(again->inode, buffer.pages.inode);
  const auto part = shared_pages_for(buffer.data + 5 * kPage, 3 * kPage, true);
  ASSERT_TRUE(part) << "a part of a moved buffer is shared too";
  EXPECT_EQ(part->inode, buffer.pages.inode);
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
  EXPECT_EQ(later->inode, first->inode);
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
      EXPECT_NE(now->inode, buffer->pages.inode) << "stale pages handed out";
      EXPECT_FALSE(only_the_last_page) << "moved again over pages that are partly moved already";
    }
    EXPECT_TRUE(holds(buffer->data, buffer->bytes, 4));
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
               shared_pages_for(buffer.data, buffer.bytes, true)->inode == buffer.pages.inode)
      << "a registration with discarded pages is still handed out";
}

TEST(SharedPages, AForkedChildGetsPrivateCopiesAndAPeerReadsTheSharedOnes) {
  MovedBuffer buffer(6);
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t parent = getpid();
  const pid_t child = fork();
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

TEST(SharedPages, APeerMapsPagesNamedJustBeforeTheirRegistrationWasForgotten) {
  // A call of another thread, or a nonblocking one, may name pages to a peer while this thread's
  // calls make the process forget them (here: more buffers moved than it keeps registrations).
  MovedBuffer buffer(40);
  std::vector<std::unique_ptr<MovedBuffer>> others;
  for (int i = 0; i < 20; ++i) others.push_back(std::make_unique<MovedBuffer>(41 + i));
  ASSERT_FALSE(shared_pages_for(buffer.data, buffer.bytes, true)) << "still registered";
  const pid_t parent = getpid();
  const pid_t child = fork();
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

// The collectives on ordinary buffers whose program, between calls, rewrites them, frees and
// allocates them again (often at the same address), reallocates them, moves them with mremap,
// forks a child that writes them, or unmaps them and maps new memory at the same address.
struct Shared {
  std::atomic<int> failures;
  std::atomic<int> ranks_that_shared;
};

std::int32_t value(int rank, int round, std::size_t index) {
  return std::int32_t(std::uint32_t(rank) * 1000003u + std::uint32_t(round) * 7919u +
                      std::uint32_t(index));
}

// A program's buffer, from malloc or mmap, and what the program does to it between calls.
std::int32_t sum_of(int round, std::size_t index, int ranks) {
  std::uint32_t sum = 0;
  for (int rank = 0; rank < ranks; ++rank) sum += std::uint32_t(value(rank, round, index));
  return std::int32_t(sum);
}

class ProgramBuffer {
 public:
  explicit ProgramBuffer(std::size_t bytes) : bytes_(bytes), data_(allocate(bytes)) {}
  ~ProgramBuffer() { release(); }
  std::int32_t* data() { return reinterpret_cast<std::int32_t*>(data_ + kOffset); }

  void disturb(int step) {
    switch (step % 7) {
      case 1:  // free, then malloc again (often the same address)
        release();
        mapped_ = false;
        data_ = allocate(bytes_);
        break;
      case 2:  // realloc larger and back, as glibc does: mremap where it can, else copy
        if (mapped_) {
          void* grown = mremap(data_, bytes_, bytes_ + 8 * kPage, MREMAP_MAYMOVE);
          if (grown == MAP_FAILED) {  // moved pages split the mapping: copy, as realloc does
            grown = mmap(nullptr, bytes_ + 8 * kPage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            std::memcpy(grown, data_, bytes_);
            munmap(data_, bytes_);
          }
          data_ = static_cast<std::byte*>(mremap(grown, bytes_ + 8 * kPage, bytes_, 0));
        } else {
          data_ = static_cast<std::byte*>(std::realloc(data_, 2 * bytes_));
          data_ = static_cast<std::byte*>(std::realloc(data_, bytes_));
        }
        break;
      case 3: {  // a child that writes the buffer and exits
        const pid_t child = fork();
        if (child == 0) {
          std::memset(data_, 0x77, bytes_);
          _exit(0);
        }
        waitpid(child, nullptr, 0);
        break;
      }
      case 4:  // from malloc to its own mapping
        release();
        mapped_ = true;
        data_ = allocate(bytes_);
        break;
      case 5:  // unmap, and map new memory at the same address
        if (mapped_) {
          std::byte* at = data_;
          munmap(data_, bytes_);
          data_ = map_private(bytes_, at);
        }
        break;
      case 6:  // discard pages, as allocators do
        madvise(reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(data_) + 3 * kPage) &
                                             ~(kPage - 1)),
                5 * kPage, MADV_DONTNEED);
        break;
      default:
        break;
    }
  }

 private:
  static constexpr std::size_t kOffset = 40;  // blocks start inside a page
  std::byte* allocate(std::size_t bytes) {
    return mapped_ ? map_private(bytes) : static_cast<std::byte*>(std::malloc(bytes));
  }
  void release() {
    if (mapped_) {
      munmap(data_, bytes_);
    } else {
      std::free(data_);
    }
  }
  std::size_t bytes_;
  bool mapped_ = false;
  std::byte* data_;
};

void exercise_changing_buffers(int p);

// 2 ranks: the reductions read each other's buffers (allreduce_all_read, reduce_root_reads); 3:
// the exchange engine with more than one peer.
TEST(SharedPages, CollectivesStayCorrectWhileTheProgramChangesItsBuffers) {
  for (const int p : {2, 3}) exercise_changing_buffers(p);
}

void exercise_changing_buffers(int p) {
  auto* shared = shmcoll::testing::shared_block<Shared>();
  constexpr std::size_t count = (96 << 10) / 4 + 3;  // blocks of 96 KiB and 12 bytes
  // Shared from 64 KiB, not 256; a slot of 128 KiB, so that bcast (from a slot up) shares too.
  setenv("SHMCOLL_SHARE_PAGES_MIN", "65536", 1);
  setenv("SHMCOLL_MOVE_PAGES", "1", 1);
  setenv("SHMCOLL_SLOT_BYTES", "131072", 1);
  shmcoll::run(p, {}, [&](shmcoll::Team& team) {
    const int me = team.rank();
    const auto n = std::int64_t(count);
    const std::size_t bytes = count * p * 4 + 2 * kPage;
    ProgramBuffer send(bytes), recv(bytes);
    const shmcoll::Op matrix = shmcoll::Op::create(shmcoll::testing::matrix_product, false);
    bool shared_at_some_point = false;
    auto check = [&](const char* what, bool ok) {
      if (ok) return;
      std::fprintf(stderr, "rank %d: %s wrong\n", me, what);
      shared->failures.fetch_add(1);
    };
    for (int round = 0; round < 42; ++round) {
      if (round % 3 == 0) {  // every disturbance of each buffer, some calls apart
        send.disturb(round / 3);
        recv.disturb(round / 3 + 4);
      }
      for (std::size_t i = 0; i < count * p; ++i) send.data()[i] = value(me, round, i);
      const int root = round % p;
      using shmcoll::Dtype;

      team.allgather(send.data(), n, Dtype::i32, recv.data(), n, Dtype::i32);
      bool ok = true;
      for (std::size_t i = 0; i < count * p; ++i) {
        ok = ok && recv.data()[i] == value(int(i / count), round, i % count);
      }
      check("allgather", ok);

      team.alltoall(send.data(), n, Dtype::i32, recv.data(), n, Dtype::i32);
      ok = true;
      for (std::size_t i = 0; i < count * p; ++i) {
        ok = ok && recv.data()[i] == value(int(i / count), round, me * count + i % count);
      }
      check("alltoall", ok);

      team.scatter(send.data(), n, Dtype::i32, recv.data(), n, Dtype::i32, root);
      ok = true;
      for (std::size_t i = 0; i < count; ++i) {
        ok = ok && recv.data()[i] == value(root, round, me * count + i);
      }
      check("scatter", ok);

      team.gather(send.data(), n, Dtype::i32, recv.data(), n, Dtype::i32, root);
      ok = true;
      for (std::size_t i = 0; i < count * p && me == root; ++i) {
        ok = ok && recv.data()[i] == value(int(i / count), round, i % count);
      }
      check("gather", ok);

      team.bcast(me == root ? static_cast<void*>(send.data()) : recv.data(), n * p, Dtype::i32,
                 root);
      ok = true;
      for (std::size_t i = 0; i < count * p && me != root; ++i) {
        ok = ok && recv.data()[i] == value(root, round, i);
      }
      check("bcast", ok);

      // Reductions read every buffer where it is: sums, then 2x2 matrix products in rank order
      // (a user operation, not commutative, that sees 32-byte units).
      team.allreduce(send.data(), recv.data(), n * p, Dtype::i32, shmcoll::Op::sum);
      ok = true;
      for (std::size_t i = 0; i < count * p; ++i) ok = ok && recv.data()[i] == sum_of(round, i, p);
      check("allreduce", ok);

      const bool in_place = me == root && round % 2 == 1;
      if (in_place) std::memcpy(recv.data(), send.data(), count * p * 4);
      team.reduce(in_place ? shmcoll::in_place : send.data(), recv.data(), n * p, Dtype::i32,
                  shmcoll::Op::sum, root);
      ok = true;
      for (std::size_t i = 0; i < count * p && me == root; ++i) {
        ok = ok && recv.data()[i] == sum_of(round, i, p);
      }
      check(in_place ? "reduce in place" : "reduce", ok);

      const std::int64_t matrices = std::int64_t(count * p * 4 / 32);
      auto* product = reinterpret_cast<std::uint64_t*>(recv.data());
      team.allreduce(send.data(), product, matrices * 4, Dtype::u64, matrix);
      std::vector<std::uint64_t> expected(std::size_t(matrices) * 4);
      for (int rank = 0; rank < p; ++rank) {
        std::vector<std::int32_t> theirs(count * p);
        for (std::size_t i = 0; i < count * p; ++i) theirs[i] = value(rank, round, i);
        const auto* in = reinterpret_cast<const std::uint64_t*>(theirs.data());
        if (rank == 0) {
          std::memcpy(expected.data(), in, expected.size() * 8);
        } else {
          shmcoll::testing::matrix_product(expected.data(), const_cast<std::uint64_t*>(in),
                                           expected.size(), Dtype::u64);
          std::memcpy(expected.data(), in, expected.size() * 8);
        }
      }
      check("allreduce of matrices",
            std::memcmp(product, expected.data(), expected.size() * 8) == 0);
      shared_at_some_point = shared_at_some_point || shmcoll::shm::shared_page_registrations() > 0;
    }
    if (shared_at_some_point) shared->ranks_that_shared.fetch_add(1);
  });
  unsetenv("SHMCOLL_SHARE_PAGES_MIN");
  unsetenv("SHMCOLL_MOVE_PAGES");
  unsetenv("SHMCOLL_SLOT_BYTES");
  EXPECT_EQ(shared->failures.load(), 0);
  EXPECT_EQ(shared->ranks_that_shared.load(), p) << "the one-copy path was not taken";
  munmap(shared, sizeof(Shared));
}

}  // namespace

// A rank that cannot reach a peer's shared pages (here: at its descriptor limit, so it cannot
// open the peer's memfd) takes the copy path with every other rank, in every collective that reads
// or writes shared pages, and the team goes on; once it can, the pages are shared again.
TEST(SharedPages, ARankThatCannotReachAPeersPagesTakesTheCopyPathAndTheTeamGoesOn) {
#ifdef __SANITIZE_ADDRESS__
  // UBSan's vptr check opens /proc/self/maps, which fails at the descriptor limit set here, and
  // reports every virtual call then as invalid: the release run checks this.
  GTEST_SKIP() << "no descriptor to spare for the sanitizers";
#endif
  auto* shared = shmcoll::testing::shared_block<Shared>();
  setenv("SHMCOLL_SHARE_PAGES_MIN", "65536", 1);
  setenv("SHMCOLL_SLOT_BYTES", "131072", 1);  // bcast reads shared pages from a slot's length up
  shmcoll::run(2, {}, [&](shmcoll::Team& team) {
    using shmcoll::Dtype;
    const int me = team.rank(), peer = 1 - me;
    constexpr std::size_t kBlock = 256 << 10, kCount = 2 * kBlock / 8;
    auto* send = static_cast<std::uint64_t*>(shmcoll::shm::allocate_shared_pages(2 * kBlock));
    auto* recv = static_cast<std::uint64_t*>(shmcoll::shm::allocate_shared_pages(2 * kBlock));
    const auto value = [](int rank, std::size_t i) { return std::uint64_t(rank) * 1000003 + i; };
    const auto fill_send = [&] {
      for (std::size_t i = 0; i < kCount; ++i) send[i] = value(me, i);
    };
    const auto expect = [&](bool good, const std::string& what) {
      if (!good) shared->failures.fetch_add(1);
      EXPECT_TRUE(good) << "rank " << me << ": " << what;
    };
    const auto holds = [&](const std::uint64_t* data, std::size_t from, std::size_t n, int rank,
                           std::size_t first) {
      for (std::size_t i = 0; i < n; ++i) {
        if (data[from + i] != value(rank, first + i)) return false;
      }
      return true;
    };
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    for (const bool at_the_limit : {true, false}) {
      if (me == 1 && at_the_limit) {  // every open now fails with EMFILE
        const int lowest_free = dup(0);
        close(lowest_free);
        const rlimit none_left{rlim_t(lowest_free), limit.rlim_max};
        setrlimit(RLIMIT_NOFILE, &none_left);
      }
      const std::string when = at_the_limit ? " (at the limit)" : "";
      const shmcoll::Datatype bytes(Dtype::u8);
      fill_send();
      team.allreduce(send, recv, kCount, Dtype::u64, shmcoll::Op::sum);
      bool good = true;
      for (std::size_t i = 0; i < kCount; ++i) good &= recv[i] == value(0, i) + value(1, i);
      expect(good, "allreduce" + when);
      std::fill_n(recv, kCount, 0);
      team.reduce(send, me == 0 ? recv : nullptr, kCount, Dtype::u64, shmcoll::Op::max, 0);
      if (me == 0) expect(holds(recv, 0, kCount, 1, 0), "reduce" + when);
      team.gather(send, kBlock, bytes, recv, kBlock, bytes, 0);
      if (me == 0) {
        expect(holds(recv, 0, kBlock / 8, 0, 0) && holds(recv, kBlock / 8, kBlock / 8, 1, 0),
               "gather" + when);
      }
      team.allgather(send, kBlock, bytes, recv, kBlock, bytes);
      expect(holds(recv, kBlock / 8, kBlock / 8, 1, 0), "allgather" + when);
      team.alltoall(send, kBlock, bytes, recv, kBlock, bytes);
      expect(holds(recv, std::size_t(peer) * kBlock / 8, kBlock / 8, peer, me * kBlock / 8),
             "alltoall" + when);
      team.scatter(send, kBlock, bytes, recv, kBlock, bytes, 0);
      expect(holds(recv, 0, kBlock / 8, 0, me * kBlock / 8), "scatter" + when);
      team.bcast(send, 2 * kBlock, Dtype::u8, 0);
      expect(holds(send, 0, kCount, 0, 0), "bcast" + when);
      if (me == 1 && at_the_limit) setrlimit(RLIMIT_NOFILE, &limit);
    }
    shmcoll::shm::free_shared_pages(send);
    shmcoll::shm::free_shared_pages(recv);
  });
  unsetenv("SHMCOLL_SHARE_PAGES_MIN");
  unsetenv("SHMCOLL_SLOT_BYTES");
  EXPECT_EQ(shared->failures.load(), 0);
}
