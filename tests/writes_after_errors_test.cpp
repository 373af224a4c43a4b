// No write into a rank's memory outlives the call that allowed it, errors included (issue 57, row
// 1): where peers write into a rank's receive buffer (a gather's senders, through the kernel's
// copy or its shared pages; a reduce's ranks, each reducing a slice into the root's shared
// pages), a member that leaves the call with an error first waits for the pieces under way, and
// no piece begins after. And the writers, whose own part went well, report the failure too, as
// do readers of a buffer whose owner failed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "shm/shared_pages.hpp"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::testing::monotonic_seconds;
using shmcoll::testing::ScopedEnv;
using shmcoll::testing::shared_block;

struct Outcome {
  std::atomic<int> failed[3];            // 1: that rank's call threw
  std::atomic<long> changed_after_call;  // bytes of the root's buffer changed after its call
};

// Fills `bytes` at `data` with `value` from the end towards the start: a writer still going
// forwards meets the fill and overwrites what it filled.
void fill_backwards(std::byte* data, std::size_t bytes, std::byte value) {
  constexpr std::size_t kStep = std::size_t{1} << 20;
  for (std::size_t end = bytes; end > 0;) {
    const std::size_t begin = end > kStep ? end - kStep : 0;
    std::memset(data + begin, int(value), end - begin);
    end = begin;
  }
}

long count_not(const std::byte* data, std::size_t bytes, std::byte value) {
  return long(std::count_if(data, data + bytes, [&](std::byte b) { return b != value; }));
}

// A gather whose blocks the kernel copies into the root's buffer: rank 2 dies once rank 1's
// block has begun to arrive (it watches the root's buffer, shared for the test), so the root's
// wait fails while rank 1 is still writing. The root then refills its buffer and looks again
// later: nothing may change. Before the fix, rank 1 went on writing for tens of milliseconds.
TEST(WritesAfterErrors, AGatherRootThatFailsWaitsForTheKernelCopiesIntoItsBuffer) {
  constexpr std::size_t kBlock = std::size_t{256} << 20;
  auto* outcome = shared_block<Outcome>();
  void* shared =
      mmap(nullptr, 3 * kBlock, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* root_buffer = static_cast<std::byte*>(shared);
  try {
    shmcoll::run(3, {}, [&](shmcoll::Team& team) {
      const int me = team.rank();
      if (me == 2) {
        volatile std::byte* first_of_rank_1 = root_buffer + kBlock;
        while (*first_of_rank_1 == std::byte{0}) {
        }
        _exit(3);
      }
      std::vector<std::byte> send(kBlock, std::byte(0x11 * (me + 1)));
      try {
        team.gather(send.data(), kBlock, shmcoll::Datatype(shmcoll::Dtype::u8), root_buffer, kBlock,
                    shmcoll::Datatype(shmcoll::Dtype::u8), 0);
      } catch (const shmcoll::Error&) {
        outcome->failed[me] = 1;
      }
      if (me != 0) return;
      fill_backwards(root_buffer + kBlock, kBlock, std::byte{0xee});
      usleep(300'000);
      outcome->changed_after_call = count_not(root_buffer + kBlock, kBlock, std::byte{0xee});
    });
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), shmcoll::Errc::rank_failed) << error.what();
  }
  EXPECT_EQ(outcome->failed[0].load(), 1) << "the root's gather did not fail";
  EXPECT_EQ(outcome->failed[1].load(), 1) << "rank 1 reported success for the failed gather";
  EXPECT_EQ(outcome->changed_after_call.load(), 0)
      << "bytes of the root's buffer written after its gather returned";
  munmap(shared, 3 * kBlock);
}

// Which rank this process is, for the operation below.
int this_rank = -1;

// Rank 0 fails its part of the reduction (20 ms in); rank 1, which writes its slice into rank
// 0's receive buffer, takes 200 ms over its first piece, then writes it.
void slow_sum_failing_on_rank_0(const void* in, void* inout, std::size_t len, shmcoll::Dtype) {
  static bool first = true;
  if (this_rank == 0) {
    usleep(20'000);
    throw std::runtime_error("rank 0's operation fails");
  }
  if (std::exchange(first, false)) usleep(200'000);
  const auto* a = static_cast<const std::uint64_t*>(in);
  auto* b = static_cast<std::uint64_t*>(inout);
  for (std::size_t i = 0; i < len; ++i) b[i] += a[i];
}

// A reduce in which each rank reduces a slice straight into the root's shared receive buffer
// (MPI_Alloc_mem memory: every buffer here is shared pages): the root's own operation fails
// while rank 1 is inside its piece. The root returns only once that piece is written; rank 1
// begins no other, and fails too.
TEST(WritesAfterErrors, AReduceRootThatFailsWaitsForTheSliceWrittenIntoItsPages) {
  constexpr std::size_t kWords = std::size_t{1} << 20, kBytes = kWords * 8;
  ScopedEnv algorithm("SHMCOLL_REDUCE_ALGORITHM", "reduce_slices");
  auto* outcome = shared_block<Outcome>();
  shmcoll::run(2, {}, [&](shmcoll::Team& team) {
    const int me = this_rank = team.rank();
    auto* send = static_cast<std::uint64_t*>(shmcoll::shm::allocate_shared_pages(kBytes));
    auto* recv = static_cast<std::uint64_t*>(shmcoll::shm::allocate_shared_pages(kBytes));
    ASSERT_TRUE(send && recv);
    std::fill(send, send + kWords, std::uint64_t(me + 1));
    const shmcoll::Op op = shmcoll::Op::create(slow_sum_failing_on_rank_0, true);
    double returned = 0;
    team.barrier();  // both buffers allocated and written
    try {
      team.reduce(send, recv, std::int64_t(kWords), shmcoll::Dtype::u64, op, 0);
    } catch (const std::exception&) {
      outcome->failed[me] = 1;
      returned = monotonic_seconds();
    }
    if (me == 0) {
      auto* bytes = reinterpret_cast<std::byte*>(recv);
      fill_backwards(bytes, kBytes, std::byte{0xee});
      usleep(400'000);
      outcome->changed_after_call = count_not(bytes, kBytes, std::byte{0xee});
      EXPECT_GT(returned, 0.0);
    }
    shmcoll::shm::free_shared_pages(send);
    shmcoll::shm::free_shared_pages(recv);
  });
  EXPECT_EQ(outcome->failed[0].load(), 1) << "the root's reduce did not fail";
  EXPECT_EQ(outcome->failed[1].load(), 1) << "rank 1 reported success for the failed reduce";
  EXPECT_EQ(outcome->changed_after_call.load(), 0)
      << "bytes of the root's buffer written after its reduce returned";
}

// The other way round: a rank that reads a peer's buffer in place (a scatter's block, by the
// kernel's copy) while that peer leaves with an error fails its call too, since the peer's
// program may rewrite the buffer under the read. Rank 1 is stopped right after its read began, so
// the root's wait times out; once the root has returned and reused its buffer, rank 1 goes on and
// must fail, though every round it waits for is published.
TEST(WritesAfterErrors, AReaderWhoseOwnerFailedReportsTheFailure) {
  constexpr std::size_t kBlock = std::size_t{64} << 20;
  ScopedEnv timeout("SHMCOLL_TIMEOUT", "500ms");
  auto* outcome = shared_block<Outcome>();
  auto* reader_pid = shared_block<std::atomic<pid_t>>();
  auto* root_filled = shared_block<std::atomic<bool>>();
  void* shared = mmap(nullptr, kBlock, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* reader_buffer = static_cast<std::byte*>(shared);
  try {
    shmcoll::run(2, {}, [&](shmcoll::Team& team) {
      const int me = team.rank();
      if (me == 1) *reader_pid = getpid();
      std::vector<std::byte> send(me == 0 ? 2 * kBlock : 0, std::byte{0x33});
      std::vector<std::byte> own(me == 0 ? kBlock : 0);
      // Filling 192 MiB may take longer than the timeout where a page's first touch is slow:
      // the reader waits for it outside the team, so only the scatter is timed.
      if (me == 0) *root_filled = true;
      while (!*root_filled) usleep(1000);
      team.barrier();
      // The root stops the reader once its block begins to arrive, and lets it go once its own
      // call has failed.
      std::thread stopper;
      if (me == 0) {
        stopper = std::thread([&] {
          volatile std::byte* first = reader_buffer;
          while (*first == std::byte{0}) {
          }
          kill(*reader_pid, SIGSTOP);
        });
      }
      const shmcoll::Datatype bytes(shmcoll::Dtype::u8);
      try {
        team.scatter(send.data(), kBlock, bytes, me == 0 ? own.data() : reader_buffer, kBlock,
                     bytes, 0);
      } catch (const shmcoll::Error&) {
        outcome->failed[me] = 1;
      }
      if (me == 0) {
        stopper.join();
        std::fill(send.begin(), send.end(), std::byte{0});  // the program reuses its buffer
        kill(*reader_pid, SIGCONT);
      }
    });
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), shmcoll::Errc::timeout) << error.what();
  }
  EXPECT_EQ(outcome->failed[0].load(), 1) << "the root's scatter did not time out";
  EXPECT_EQ(outcome->failed[1].load(), 1) << "the reader reported success for the failed scatter";
  munmap(shared, kBlock);
}

}  // namespace
