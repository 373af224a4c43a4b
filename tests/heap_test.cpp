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
