// One copy from memory peers can map: memory the library hands out as shared pages from the
// start (MPI_Alloc_mem: allocate_shared_pages), and, only where the program opted in
// (SHMCOLL_MOVE_PAGES=1: `may_move`), the whole pages of a private buffer that a rank sends from
// again and again, moved in place onto a memfd: same addresses, same contents, but now shared
// memory, which peers map once (its memfd handed to them by key: descriptor_passing.hpp) and
// copy from directly on every later call, one copy instead of two. Moving changes the program's own
// mappings (what its locks, huge pages, NUMA policies, pinned device registrations, mremap and fork
// see: docs/limits.md lists the price), so by default nothing moves.
//
// What keeps moved pages correct while the program goes on using its memory as private:
//   - only whole pages inside the buffer move (never the stack, file mappings, memory already
//     shared or with a NUMA policy of the program's), and only while the caller guarantees
//     that nobody writes them: a send buffer during its collective;
//   - moved pages are mapped populated, so every one of them is a present page of shared memory
//     (/proc/self/pagemap) until the program unmaps, remaps, trims off its heap or replaces any
//     of them, whatever call did it (glibc's free calls munmap internally, where no hook
//     reaches): before every use every page is checked, and a registration with a private page
//     in its range is stale (as one whose page the kernel swapped out: harmlessly, it is moved
//     again or takes the copy path);
//   - madvise that discards pages (MADV_DONTNEED, MADV_FREE, MADV_REMOVE) is intercepted: on
//     moved pages it maps fresh zero pages, as on private memory, rather than keep the contents;
//   - a forked child views every shared page copy on write before fork returns in it: its
//     writes never reach the parent, and a fork costs what it costs without them (pages it has
//     not written show the memfd's contents, the parent's later writes included: limits.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace shmcoll::shm {

// Pages of a sender's address space shared through its memfd: [begin, begin + bytes) is the
// memfd's [0, bytes), `fd` its descriptor in the sender. `key` names it to a peer, which asks the
// sender for it by that key: random, never reused, and known only to those the team's notes tell.
struct SharedPages {
  const std::byte* begin = nullptr;
  std::size_t bytes = 0;
  std::int32_t fd = -1;
  std::uint64_t key = 0;
};

// Calls of a buffer before its pages are moved: moving costs about a copy and a half of the pages
// (0.55 ms per MiB here) and pays from the ~20th call, so buffers used once never pay it.
inline constexpr unsigned kUsesBeforeSharing = 2;

// The shared pages holding every whole page of [data, data + bytes); nullopt when they are not
// shared (yet) or cannot be. With `may_move`, counts this as one use of the buffer and moves its
// pages on its kUsesBeforeSharing-th use; without it, only memory that is shared pages already
// (allocated, or moved before) is found. The caller guarantees no thread writes the buffer
// during the call.
std::optional<SharedPages> shared_pages_for(const std::byte* data, std::size_t bytes,
                                            bool may_move);

// A peer's shared pages mapped read-only into this process (kept for later calls; the least
// recently used of many are unmapped); nullptr, with the reason in `why`, when they cannot be.
const std::byte* map_peer_pages(std::int32_t pid, const SharedPages& theirs, std::string& why);
// The same, writable: for writing into a peer's receive buffer during its collective.
std::byte* map_peer_pages_to_write(std::int32_t pid, const SharedPages& theirs, std::string& why);

// Memory that is shared pages from the start, for programs that ask for fast memory
// (MPI_Alloc_mem): page-aligned, zero-filled, each page allocated when first touched, as private
// memory is (all up front only under strict overcommit, where a later touch could otherwise die
// of SIGBUS), and handed out by shared_pages_for from its first use, with no move. nullptr when
// the memory is not there or kMostAllocations are live (the caller then allocates as it would
// have).
void* allocate_shared_pages(std::size_t bytes);
// Frees memory allocate_shared_pages returned; false, with nothing done, for any other address.
bool free_shared_pages(void* begin);
// Live allocations at once: each holds a descriptor.
inline constexpr std::size_t kMostAllocations = 64;

// How many registrations this process holds (tests).
std::size_t shared_page_registrations();

}  // namespace shmcoll::shm
