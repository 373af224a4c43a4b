// A rank's heap inside the segment (Team::allocate): first fit over a free list, private to the
// owning rank (only it allocates there; peers only read blocks the collectives point them to).
#pragma once

#include <cstddef>
#include <map>

namespace shmcoll::shm {

class Heap {
 public:
  Heap(std::byte* base, std::size_t bytes);

  // `bytes` aligned to `alignment` (a power of two up to a page); fails with invalid_argument
  // naming the heap's size and what is free when nothing fits.
  void* allocate(std::size_t bytes, std::size_t alignment);
  // Memory from allocate(); anything else is invalid_argument.
  void deallocate(void* memory);
  // Whether [memory, memory + bytes) lies inside this heap.
  bool contains(const void* memory, std::size_t bytes) const;
  std::size_t offset_of(const void* memory) const {
    return static_cast<std::size_t>(static_cast<const std::byte*>(memory) - base_);
  }

 private:
  std::byte* base_;
  std::size_t bytes_;
  std::map<std::size_t, std::size_t> free_;         // offset -> length, coalesced
  std::map<std::size_t, std::size_t> allocations_;  // offset handed out -> length
};

}  // namespace shmcoll::shm
