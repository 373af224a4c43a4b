// What a forked child does to the pages its process shares (shared_pages.cpp's atfork handler),
// before fork returns in it. Each changes the child's mappings with system calls made directly:
// the MPIs' memory hooks patch this library's calls to mmap and mremap (UCX's mremap drops
// MREMAP_FIXED's new address, so the call moved the pages elsewhere and the check passed: issue
// 57, row 3), and a forked child of an MPI process calls no MPI, so they have nothing to track.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shmcoll::shm {

// The child's copy on write of allocated shared pages [begin, end), `offset` into memfd `fd`: a
// private mapping of the same memfd, which costs nothing until the child writes a page, then
// copies just that page (docs/limits.md: what the child sees). False where it cannot be made.
bool view_privately_in_child(std::uintptr_t begin, std::uintptr_t end, int prot, int fd,
                             std::uint64_t offset);

// Moved pages (the program's own memory, where it opted in): a private anonymous copy of their
// contents, made now, as the memory was before its move. False where it cannot be made.
bool copy_privately_in_child(std::uintptr_t begin, std::uintptr_t end, int prot);

// Where neither works (out of memory): the child must not share the parent's pages, so it gets
// none at [begin, end), and says so on stderr. Touching them kills it with SIGSEGV, loudly; a
// child that only execs, or never touches them, runs on.
void refuse_in_child(std::uintptr_t begin, std::uintptr_t end);

}  // namespace shmcoll::shm
