// Copying bulk data between user buffers and the segment. glibc 2.36 copies 2 KiB to about half
// an L2 cache with `rep movsb`, and on AMD EPYC (this VM; Zen's "fast short rep mov") that runs
// 12-14x slower when the destination sits 4-24 bytes past the source on a 64-byte line, which is
// what copying between a page-aligned slot and a malloc'd or calloc'd buffer (16 bytes past a
// page) gives: 256 KiB took 88 us against 7.1 aligned, and a 512 KiB bcast through the MPI
// layer 179 us against Open MPI's 39. copy_bytes moves that range with vector loads and stores
// aligned on the destination instead; below and above it, it is memcpy (which keeps its
// non-temporal stores for large copies).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace shmcoll {

inline constexpr std::size_t kVectorCopyMin = 2048;
inline constexpr std::size_t kVectorCopyEnd = std::size_t{1} << 20;

// [kVectorCopyMin, kVectorCopyEnd) bytes, through vector registers (AVX2 where the CPU has it).
void copy_through_vectors(void* to, const void* from, std::size_t bytes);

// memcpy's contract, with non-temporal stores: the bytes go to memory, not into this core's
// caches. For data that another core reads next and that will not fit the caches on the way: a
// line another core reads out of this one's cache after it was written costs a transfer between
// the cores' caches, which on this project's AMD family 26 VM ran slower than memory (2 processes
// streaming 4 MiB through two 512 KiB buffers, one copying in, the other reducing out: 629-652 us
// with ordinary stores, 369-388 with these). The stores are weakly ordered: finish_streaming
// before publishing what they wrote.
void copy_streaming(void* to, const void* from, std::size_t bytes);
void finish_streaming();

// Asks for the first lines of `bytes` at `from` (at most kPrefetchHeadLines) ahead of a read that
// must first wait for a flag elsewhere: a block in a peer's slot, whose lines would otherwise be
// fetched only after the flag's, one transfer after another (2 ranks, one call after a barrier,
// scatterv of 64-128 B through the root's slot: 0.22-0.32 us before, 0.15-0.19 after).
inline constexpr std::size_t kPrefetchHeadLines = 4;
inline void prefetch_head(const void* from, std::size_t bytes) {
  constexpr std::size_t kCacheLine = 64;
  const auto* at = static_cast<const char*>(from);
  const std::size_t lines = std::min(kPrefetchHeadLines, (bytes + kCacheLine - 1) / kCacheLine);
  for (std::size_t line = 0; line < lines; ++line) __builtin_prefetch(at + line * kCacheLine);
}

// memcpy's contract: `to` and `from` do not overlap.
inline void copy_bytes(void* to, const void* from, std::size_t bytes) {
  if (bytes >= kVectorCopyMin && bytes < kVectorCopyEnd) {
    copy_through_vectors(to, from, bytes);
  } else {
    std::memcpy(to, from, bytes);
  }
}

}  // namespace shmcoll
