// Filling a slot without disturbing its readers' caches.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "coll/blocks.hpp"
#include "util/copy.hpp"

namespace shmcoll::coll {

// Copies `bytes` into a slot, a 4 KiB block at a time, leaving the blocks that already hold the
// same bytes untouched: a store takes the line from every reader's cache, so the readers of data
// that has not changed since the slot's last use (a parameter broadcast every step, a benchmark's
// loop over one buffer) find it in their own caches, one copy instead of a transfer between
// cores. A block that differs usually does in its first bytes, where the compare stops; data that
// changes every call measured no slower (shmcoll-bench -n 2 --coll bcast --vary-data).
// Returns whether it stored anything. `streaming`: the stores bypass this core's caches
// (copy_streaming), for a chunk of a stream that another core reads next.
inline bool store_changes(std::byte* slot, const std::byte* data, std::size_t bytes,
                          bool streaming = false) {
  constexpr std::size_t kBlock = 4096;
  bool stored = false;
  for (std::size_t at = 0; at < bytes; at += kBlock) {
    const std::size_t n = std::min(kBlock, bytes - at);
    if (std::memcmp(slot + at, data + at, n) != 0) {
      if (streaming) {
        copy_streaming(slot + at, data + at, n);
      } else {
        copy_bytes(slot + at, data + at, n);
      }
      stored = true;
    }
  }
  if (streaming && stored) finish_streaming();
  return stored;
}

// The packed bytes [offset, offset + limit) of `block`, into a slot: a contiguous run through
// store_changes, anything else packed. Returns whether the slot may have changed.
inline bool pack_into_slot(const Block& block, std::size_t offset, std::size_t limit,
                           std::byte* slot, bool streaming = false) {
  if (!block.type->is_contiguous()) {
    block.type->pack_range(block.base, block.count, offset, limit, slot);
    return true;
  }
  const std::size_t total = block.bytes();
  if (offset >= total) return false;
  return store_changes(slot, block.base + block.type->lb() + offset,
                       std::min(limit, total - offset), streaming);
}

}  // namespace shmcoll::coll
