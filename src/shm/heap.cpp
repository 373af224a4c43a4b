#include "shm/heap.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "util/fail.hpp"

namespace shmcoll::shm {

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
