// Team::allocate's heap: first fit, alignment, coalescing, named errors; and the direct path it
// enables, checked on real forked processes beside the copy path.
#include "shm/heap.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <numeric>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

TEST(Heap, AllocatesAlignedFirstFitAndCoalescesOnFree) {
  alignas(4096) static std::byte memory[1 << 16];
  shmcoll::shm::Heap heap(memory, sizeof memory);
  void* a = heap.allocate(100, 64);
  void* b = heap.allocate(1000, 256);
  void* c = heap.allocate(5000, 64);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 256, 0u);
  EXPECT_TRUE(heap.contains(c, 5000));
  EXPECT_FALSE(heap.contains(memory + sizeof memory - 10, 11));
  heap.deallocate(b);
  void* reused = heap.allocate(900, 64);  // first fit reuses the hole before c
  EXPECT_LT(reused, c);
  heap.deallocate(a);
  heap.deallocate(reused);
  heap.deallocate(c);
  // Everything coalesced again: the whole heap fits in one piece.
  void* all = heap.allocate(sizeof memory, 64);
  EXPECT_EQ(all, static_cast<void*>(memory));
  heap.deallocate(all);
}

TEST(Heap, ErrorsNameTheProblem) {
  alignas(4096) static std::byte memory[8192];
  shmcoll::shm::Heap heap(memory, sizeof memory);
  try {
    heap.allocate(10000, 64);
    FAIL() << "an allocation larger than the heap was accepted";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), shmcoll::Errc::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("SHMCOLL_HEAP_BYTES"), std::string::npos);
  }
  EXPECT_THROW(heap.allocate(8, 3), shmcoll::Error);
  int outside = 0;
  EXPECT_THROW(heap.deallocate(&outside), shmcoll::Error);
}

struct Shared {
  std::atomic<int> failures;
};

// Sizes near SIZE_MAX: padding plus length once wrapped, so a huge request "fit" and handed out
// memory that a later allocation got again.
TEST(Heap, HugeRequestsAreRefusedWithoutCorruptingTheFreeList) {
  alignas(4096) static std::byte memory[16384];
  shmcoll::shm::Heap heap(memory, sizeof memory);
  void* small = heap.allocate(3, 1);
  for (std::size_t bytes : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 60, SIZE_MAX / 2}) {
    try {
      heap.allocate(bytes, 64);
      FAIL() << bytes << " bytes were accepted";
    } catch (const shmcoll::Error& error) {
      EXPECT_EQ(error.code(), shmcoll::Errc::invalid_argument);
      EXPECT_NE(std::string(error.what()).find(std::to_string(bytes) + " bytes"), std::string::npos)
          << error.what();
    }
  }
  void* page = heap.allocate(4096, 64);
  EXPECT_NE(page, small);
  EXPECT_FALSE(heap.contains(small, 1) && page == small);
  heap.deallocate(page);
  heap.deallocate(small);
  void* all = heap.allocate(sizeof memory, 64);  // the free list is whole again
  EXPECT_EQ(all, memory);
}

// Team::allocate<T>(n) with n * sizeof(T) beyond size_t: an error naming the count, not a 1-byte
// block with a span of n elements.
TEST(Heap, ElementCountsThatOverflowAreRefusedByName) {
  auto* failures = shmcoll::testing::shared_block<Shared>();
  shmcoll::run(1, {}, [&](shmcoll::Team& team) {
    for (std::size_t count : {std::size_t{1} << 61, SIZE_MAX / 4, SIZE_MAX}) {
      try {
        team.allocate<double>(count);
        failures->failures.fetch_add(1);
      } catch (const shmcoll::Error& error) {
        const std::string what = error.what();
        if (error.code() != shmcoll::Errc::invalid_argument ||
            what.find("count " + std::to_string(count)) == std::string::npos) {
          failures->failures.fetch_add(1);
        }
      }
    }
    const auto fits = team.allocate<double>(100);  // and the heap still works
    fits[99] = 1.0;
    team.deallocate(fits);
  });
  EXPECT_EQ(failures->failures.load(), 0);
}

// Scatter, gather, allgather and alltoall(v) of blocks around the direct threshold from heap
// memory, at 2 and 3 ranks, against values computed from the inputs; and in-place alltoall from
// heap memory, which must not read directly.
TEST(Heap, DirectReadsGiveTheSameResultsAsCopies) {
  shmcoll::testing::ScopedEnv direct("SHMCOLL_DIRECT_MIN", "4096");
  for (int p : {2, 3}) {
    auto* shared = shmcoll::testing::shared_block<Shared>();
    shmcoll::run(p, {}, [&](shmcoll::Team& team) {
      const int me = team.rank();
      auto value = [](int rank, std::size_t i) { return std::int32_t(rank * 100000 + i); };
      for (std::size_t count : {std::size_t{500}, std::size_t{1024}, std::size_t{300000}}) {
        const auto n = std::int64_t(count);
        const std::span<std::int32_t> send = team.allocate<std::int32_t>(count * p);
        for (std::size_t i = 0; i < count * p; ++i) send[i] = value(me, i);
        std::vector<std::int32_t> recv(count * p, -1);
        int bad = 0;
        team.alltoall(send.data(), n, shmcoll::Dtype::i32, recv.data(), n, shmcoll::Dtype::i32);
        for (std::size_t i = 0; i < count * p; ++i) {
          bad += recv[i] != value(int(i / count), me * count + i % count);
        }
        team.allgather(send.data(), n, shmcoll::Dtype::i32, recv.data(), n, shmcoll::Dtype::i32);
        for (std::size_t i = 0; i < count * p; ++i)
          bad += recv[i] != value(int(i / count), i % count);
        team.scatter(send.data(), n, shmcoll::Dtype::i32, recv.data(), n, shmcoll::Dtype::i32, 1);
        for (std::size_t i = 0; i < count; ++i) bad += recv[i] != value(1, me * count + i);
        team.gather(send.data(), n, shmcoll::Dtype::i32, recv.data(), n, shmcoll::Dtype::i32, 0);
        for (std::size_t i = 0; me == 0 && i < count * p; ++i) {
          bad += recv[i] != value(int(i / count), i % count);
        }
        // In place from heap memory: what arrives lands where a peer would otherwise be reading.
        team.alltoall(shmcoll::in_place, 0, shmcoll::Dtype::i32, send.data(), n,
                      shmcoll::Dtype::i32);
        for (std::size_t i = 0; i < count * p; ++i) {
          bad += send[i] != value(int(i / count), me * count + i % count);
        }
        team.deallocate(send);
        shared->failures.fetch_add(bad);
      }
    });
    EXPECT_EQ(shared->failures.load(), 0) << "p = " << p;
  }
}

}  // namespace
