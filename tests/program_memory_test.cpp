// The first promise, for memory: with the defaults the library never changes a program's
// mappings. Each rank allocates its buffers as real programs do (malloc, huge pages, mlock, an
// interior NUMA binding, MPOL_LOCAL as numa_alloc_local sets it, wipe-on-fork), writes them, and
// runs 100 calls of each collective from and into them, 4 KiB-64 MiB; what /proc/self/smaps and
// numa_maps say of those buffers is then exactly what it said before, no memfd of the library's
// was mapped meanwhile, and fork still copies on write and wipes what asked to be wiped.
#include <gtest/gtest.h>
#include <numaif.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kHuge = 2 << 20;
constexpr std::size_t kLargest = 64 << 20;

struct Failures {
  std::atomic<int> count;
  char first[2048];
};

void note_failure(Failures* failures, const std::string& what) {
  if (failures->count.fetch_add(1) == 0) {
    std::snprintf(failures->first, sizeof failures->first, "%s", what.c_str());
  }
}

// A program's buffer of kLargest bytes, allocated one way.
struct ProgramBuffer {
  const char* how;
  std::byte* data;
  std::uintptr_t begin() const { return reinterpret_cast<std::uintptr_t>(data); }
  std::uintptr_t end() const { return begin() + kLargest; }
};

std::byte* map_anonymous(std::size_t bytes) {
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return memory == MAP_FAILED ? nullptr : static_cast<std::byte*>(memory);
}

// The buffers, allocated as programs do; what could not be had here (mlock beyond the limit) is
// allocated plainly, still compared.
std::vector<ProgramBuffer> allocate_program_buffers() {
  std::vector<ProgramBuffer> buffers;
  // glibc serves this from its own mmap, 16 bytes past a page.
  buffers.push_back({"malloc", static_cast<std::byte*>(std::malloc(kLargest))});
  // Aligned on a huge page, so that its first touches may take huge pages whole.
  std::byte* huge_reservation = map_anonymous(kLargest + kHuge);
  auto* huge = reinterpret_cast<std::byte*>(
      (reinterpret_cast<std::uintptr_t>(huge_reservation) + kHuge - 1) & ~(kHuge - 1));
  const std::size_t before_huge = std::size_t(huge - huge_reservation);
  if (before_huge > 0) munmap(huge_reservation, before_huge);
  munmap(huge + kLargest, kHuge - before_huge);
  madvise(huge, kLargest, MADV_HUGEPAGE);
  buffers.push_back({"MADV_HUGEPAGE", huge});
  std::byte* locked = map_anonymous(kLargest);
  if (mlock(locked, kLargest) != 0) std::perror("mlock (compared unlocked)");
  buffers.push_back({"mlock", locked});
  // The middle half bound to node 0: the mapping splits in three, with its own policy.
  std::byte* bound = map_anonymous(kLargest);
  const unsigned long node0 = 1;
  mbind(bound + kLargest / 4, kLargest / 2, MPOL_BIND, &node0, sizeof node0 * 8, 0);
  buffers.push_back({"interior MPOL_BIND", bound});
  std::byte* local = map_anonymous(kLargest);  // numa_alloc_local's policy
  mbind(local, kLargest, MPOL_LOCAL, nullptr, 0, 0);
  buffers.push_back({"MPOL_LOCAL", local});
  std::byte* wiped = map_anonymous(kLargest);
  madvise(wiped, kLargest, MADV_WIPEONFORK);
  madvise(wiped, kLargest, MADV_DONTDUMP);
  buffers.push_back({"MADV_WIPEONFORK", wiped});
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    std::memset(buffers[i].data, int(i + 1), kLargest);
  }
  return buffers;
}

void free_program_buffers(const std::vector<ProgramBuffer>& buffers) {
  std::free(buffers[0].data);
  for (std::size_t i = 1; i < buffers.size(); ++i) munmap(buffers[i].data, kLargest);
}

bool overlaps(std::uintptr_t begin, std::uintptr_t end, const std::vector<ProgramBuffer>& buffers) {
  return std::any_of(buffers.begin(), buffers.end(),
                     [&](const ProgramBuffer& b) { return begin < b.end() && end > b.begin(); });
}

// What the kernel says of the mappings that hold the buffers: each smaps header line (range,
// permissions, inode, name) with the fields a program's choices set (VmFlags, Locked), and its
// huge pages; each numa_maps policy.
struct Snapshot {
  std::vector<std::string> mappings;
  std::vector<std::uint64_t> huge_kib;
  std::vector<std::string> policies;
  int library_memfds = 0;  // mappings of the library's memfds, anywhere in the process
};

Snapshot snapshot(const std::vector<ProgramBuffer>& buffers) {
  Snapshot shot;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    char dash = 0;
    std::istringstream fields(line);
    if (line.find("shmcoll-pages") != std::string::npos) ++shot.library_memfds;
    if ((fields >> std::hex >> begin >> dash >> end) && dash == '-' && line.find(':') != 0 &&
        std::isxdigit(static_cast<unsigned char>(line[0]))) {
      inside = overlaps(begin, end, buffers);
      if (inside) shot.mappings.push_back(line);
      continue;
    }
    if (!inside) continue;
    if (line.rfind("VmFlags:", 0) == 0 || line.rfind("Locked:", 0) == 0) {
      shot.mappings.back() += " | " + line;
    } else if (line.rfind("AnonHugePages:", 0) == 0) {
      shot.huge_kib.push_back(std::strtoull(line.c_str() + 14, nullptr, 10));
    }
  }
  std::ifstream numa_maps("/proc/self/numa_maps");
  while (std::getline(numa_maps, line)) {
    const unsigned long begin = std::strtoul(line.c_str(), nullptr, 16);
    if (!overlaps(begin, begin + 1, buffers)) continue;
    std::istringstream fields(line);
    std::string address, policy;
    fields >> address >> policy;
    shot.policies.push_back(address + " " + policy);
  }
  return shot;
}

std::string differences(const Snapshot& before, const Snapshot& after) {
  std::string found;
  if (after.library_memfds > before.library_memfds)
    found += "a memfd of the library's was mapped\n";
  if (before.mappings != after.mappings) {
    found += "mappings before:\n";
    for (const auto& m : before.mappings) found += "  " + m + "\n";
    found += "after:\n";
    for (const auto& m : after.mappings) found += "  " + m + "\n";
  }
  if (before.policies != after.policies) found += "NUMA policies changed\n";
  // khugepaged may collapse more pages meanwhile; fewer means the library took them.
  for (std::size_t i = 0; i < before.huge_kib.size() && i < after.huge_kib.size(); ++i) {
    if (after.huge_kib[i] < before.huge_kib[i]) {
      found += "huge pages lost: " + std::to_string(before.huge_kib[i]) + " -> " +
               std::to_string(after.huge_kib[i]) + " KiB\n";
    }
  }
  return found;
}

// Every collective 100 times, sizes cycling 4 KiB-64 MiB, buffers taken in turn; results
// checked at a few places.
void run_collectives(shmcoll::Team& team, const std::vector<ProgramBuffer>& buffers,
                     Failures* failures) {
  const std::size_t sizes[] = {4 << 10, 64 << 10, 1 << 20, 4 << 20, kLargest};
  const int p = team.size(), me = team.rank();
  const shmcoll::Datatype bytes_type(shmcoll::Dtype::u8);
  auto check = [&](bool good, const char* what, std::size_t bytes) {
    if (!good) note_failure(failures, std::string(what) + " wrong at " + std::to_string(bytes));
  };
  for (int call = 0; call < 100; ++call) {
    const std::size_t bytes = sizes[call % 5];
    const auto n = std::int64_t(bytes);
    std::byte* send = buffers[std::size_t(call) % buffers.size()].data;
    std::byte* recv = buffers[std::size_t(call + 1) % buffers.size()].data;
    const int root = call % p;
    team.bcast(send, n, shmcoll::Dtype::u8, root);
    team.reduce(send, me == root ? recv : nullptr, n / 8, shmcoll::Dtype::u64, shmcoll::Op::max,
                root);
    team.allreduce(send, recv, n / 8, shmcoll::Dtype::u64, shmcoll::Op::max);
    check(recv[bytes - 1] == send[bytes - 1], "allreduce", bytes);
    const std::int64_t block = n / p;
    team.scatter(send, block, bytes_type, recv, block, bytes_type, root);
    team.gather(send, block, bytes_type, recv, block, bytes_type, root);
    team.allgather(send, block, bytes_type, recv, block, bytes_type);
    check(recv[0] == send[0], "allgather", bytes);
    team.alltoall(send, block, bytes_type, recv, block, bytes_type);
  }
}

void expect_fork_as_without_the_library(const std::vector<ProgramBuffer>& buffers,
                                        Failures* failures) {
  const std::byte copied = buffers[0].data[kLargest / 2];
  const pid_t child = fork();
  if (child == 0) {
    // Copy on write: the child's write is its own. Wipe on fork: the child sees zeros.
    buffers[0].data[kLargest / 2] = std::byte{0x5a};
    const bool wiped = buffers.back().data[kPage] == std::byte{0};
    _exit(wiped ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    note_failure(failures, "a wipe-on-fork buffer reached the child");
  }
  if (buffers[0].data[kLargest / 2] != copied) {
    note_failure(failures, "the child's write reached the parent");
  }
}

}  // namespace

TEST(ProgramMemory, MappingsPoliciesHugePagesLocksAndForkAreAsWithoutTheLibrary) {
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::run(2, {}, [&](shmcoll::Team& team) {
    const std::vector<ProgramBuffer> buffers = allocate_program_buffers();
    const Snapshot before = snapshot(buffers);
    run_collectives(team, buffers, failures);
    team.barrier();
    const std::string changed = differences(before, snapshot(buffers));
    if (!changed.empty()) {
      note_failure(failures, "rank " + std::to_string(team.rank()) + ":\n" + changed);
    }
    expect_fork_as_without_the_library(buffers, failures);
    free_program_buffers(buffers);
  });
  EXPECT_EQ(failures->count.load(), 0) << failures->first;
}
