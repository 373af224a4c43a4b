#include "shm/heap.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "shm/layout.hpp"
#include "shm/segment.hpp"
#include "util/fail.hpp"

namespace shmcoll::shm {

namespace {

// Backs the pages of [memory, memory + length) now, so a /dev/shm too small for them is an error
// here instead of a SIGBUS at the program's first store. Kernels before 5.14 lack
// MADV_POPULATE_WRITE (EINVAL): there the pages are backed at first touch, as before.
void back_pages(std::byte* memory, std::size_t length, std::size_t bytes) {
  const auto first = reinterpret_cast<std::uintptr_t>(memory) / kPageBytes * kPageBytes;
  const auto end = (reinterpret_cast<std::uintptr_t>(memory) + length + kPageBytes - 1) /
                   kPageBytes * kPageBytes;
  if (madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE) == 0 ||
      errno == EINVAL) {
    return;
  }
  const int error = errno;
  // What the populate backed before it failed would stay taken from everyone else: free the
  // pages wholly inside the block (its first and last page may hold other blocks' data).
  const auto inner_first =
      (reinterpret_cast<std::uintptr_t>(memory) + kPageBytes - 1) / kPageBytes * kPageBytes;
  const auto inner_end =
      (reinterpret_cast<std::uintptr_t>(memory) + length) / kPageBytes * kPageBytes;
  if (inner_end > inner_first) {
    madvise(reinterpret_cast<void*>(inner_first), inner_end - inner_first, MADV_REMOVE);
  }
  fail(Errc::out_of_memory, "allocate: ", bytes, " bytes: backing them failed (",
       populate_failure(error), "); the allocation ", shared_memory_shortage(end - first));
}

}  // namespace

Heap::Heap(std::byte* base, std::size_t bytes) : base_(base), bytes_(bytes) {
  if (bytes > 0) free_[0] = bytes;
}

void* Heap::allocate(std::size_t bytes, std::size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 4096) {
    fail(Errc::invalid_argument, "allocate: alignment ", alignment,
         " is not a power of two up to 4096");
  }
  const std::size_t length = bytes == 0 ? 1 : bytes;
  std::size_t largest = 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const auto [offset, size] = *it;
    const auto address = reinterpret_cast<std::uintptr_t>(base_ + offset);
    const std::size_t pad = (alignment - address % alignment) % alignment;
    largest = std::max(largest, size);
    if (size < pad || size - pad < length) continue;  // (pad + length may not be representable)
    back_pages(base_ + offset + pad, length, bytes);
    free_.erase(it);
    if (pad > 0) free_[offset] = pad;
    if (size > pad + length) free_[offset + pad + length] = size - pad - length;
    allocations_[offset + pad] = length;
    return base_ + offset + pad;
  }
  fail(Errc::invalid_argument, "allocate: ", bytes, " bytes do not fit this rank's heap of ",
       bytes_, " bytes (largest free run ", largest,
       "); raise Options::heap_bytes or SHMCOLL_HEAP_BYTES");
}

void Heap::deallocate(void* memory) {
  if (memory == nullptr) return;
  const auto found =
      contains(memory, 0) ? allocations_.find(offset_of(memory)) : allocations_.end();
  if (found == allocations_.end()) {
    fail(Errc::invalid_argument, "deallocate: ", memory, " was not returned by allocate");
  }
  std::size_t offset = found->first, length = found->second;
  allocations_.erase(found);
  // Coalesce with the free runs on both sides.
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + length) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      offset = previous->first;
      length += previous->second;
      free_.erase(previous);
    }
  }
  free_[offset] = length;
}

bool Heap::contains(const void* memory, std::size_t bytes) const {
  const auto* p = static_cast<const std::byte*>(memory);
  return p >= base_ && p <= base_ + bytes_ && bytes <= static_cast<std::size_t>(base_ + bytes_ - p);
}

}  // namespace shmcoll::shm
