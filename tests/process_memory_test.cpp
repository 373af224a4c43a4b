// One copy out of a sender's own memory with the kernel's cross-memory copy
// (shm/process_memory.hpp, the exchange engine's in_process mode): a note is honoured only by the
// process that wrote it, the data-movement collectives give what the inputs say with every block
// read that way, and a rank the kernel refuses (as Docker's default seccomp profile refuses
// process_vm_readv) sends the call back through the slots, on every rank, for good, while the team
// goes on.
#include "shm/process_memory.hpp"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::shm::process_note;
using shmcoll::shm::ProcessNote;
using shmcoll::shm::read_process_memory;
using shmcoll::testing::ScopedEnv;

struct Posted {
  ProcessNote note;
  std::atomic<int> stage;  // 1: posted; 2: read, the child may go
  std::byte data[8192];    // what the child wrote
};

// Whether this process may use process_vm_readv at all (a seccomp profile, such as Docker's
// default without CAP_SYS_PTRACE, refuses it even on the process itself).
bool cross_memory_reads_allowed() {
  int source = 1, target = 0;
  iovec to{&target, sizeof target}, from{&source, sizeof source};
  return process_vm_readv(getpid(), &to, 1, &from, 1, 0) == ssize_t(sizeof target);
}

TEST(ProcessMemory, ANoteIsHonouredOnlyByTheProcessThatWroteIt) {
  if (!cross_memory_reads_allowed()) GTEST_SKIP() << "process_vm_readv is refused here";
  auto* posted = shmcoll::testing::shared_block<Posted>();
  const ProcessNote mine = process_note(posted->data, 1);  // the parent draws its token first
  const pid_t child = fork();
  if (child == 0) {
    std::vector<std::byte> block(sizeof posted->data);
    for (std::size_t i = 0; i < block.size(); ++i) block[i] = std::byte(i * 7 + 3);
    std::memcpy(posted->data, block.data(), block.size());
    posted->note = process_note(block.data(), block.size());
    posted->stage = 1;
    while (posted->stage.load() != 2) usleep(100);
    _exit(0);
  }
  while (posted->stage.load() != 1) usleep(100);
  const ProcessNote note = posted->note;
  EXPECT_NE(note.token, mine.token) << "a forked child kept its parent's token";
  std::vector<std::byte> got(note.bytes);
  EXPECT_TRUE(read_process_memory(child, note, 0, got.data(), got.size()));
  EXPECT_EQ(std::memcmp(got.data(), posted->data, got.size()), 0);
  EXPECT_TRUE(read_process_memory(child, note, 100, got.data(), 50));
  EXPECT_EQ(std::memcmp(got.data(), posted->data + 100, 50), 0);
  // Another process at that pid (as in another pid namespace): here, this one.
  EXPECT_FALSE(read_process_memory(getpid(), note, 0, got.data(), got.size()));
  ProcessNote forged = note;
  forged.token ^= 2;
  EXPECT_FALSE(read_process_memory(child, forged, 0, got.data(), got.size()));
  EXPECT_FALSE(read_process_memory(child, note, 1, got.data(), got.size())) << "past the block";
  posted->stage = 2;
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(read_process_memory(child, note, 0, got.data(), got.size())) << "after its exit";
}

// The checks of ranks forked by shmcoll::run, counted where the parent reads them once the ranks
// have exited (a rank's own gtest failures do not reach it).
struct Failures {
  std::atomic<int> count;
  void expect(bool good, int rank, const std::string& what) {
    if (!good) count.fetch_add(1);
    EXPECT_TRUE(good) << "rank " << rank << ": " << what;
  }
};

// Every block of scatter, allgather and alltoall (and a column-typed receive, read through the
// staging buffer) read out of the sender's memory, and every gather's and gatherv's written into
// its root's (a gatherv into a layout with gaps through the slots); then rank 1 is refused the
// kernel's copies, and every call still delivers, on and on.
TEST(ProcessMemory, CollectivesReadSendersMemoryAndFallBackWhereTheKernelRefuses) {
  ScopedEnv cma("SHMCOLL_CMA_MIN", "65536");
  // 3 ranks' blocks take rounds in the slots (a gather's are written into its root only then,
  // where ranks share CPUs)
  ScopedEnv slot("SHMCOLL_SLOT_BYTES", "131072");
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::run(3, {}, [&](shmcoll::Team& team) {
    using shmcoll::Dtype;
    const int me = team.rank(), size = team.size();
    constexpr std::size_t kBlock = 256 << 10, kWords = kBlock / 8;
    std::vector<std::uint64_t> send(size * kWords), recv(size * kWords);
    const auto value = [](int from, int to, std::size_t i, int call) {
      return std::uint64_t(from) << 48 | std::uint64_t(to) << 40 | std::uint64_t(call) << 32 | i;
    };
    const auto expect = [&](bool good, const std::string& what) {
      failures->expect(good, me, what);
    };
    const shmcoll::Datatype bytes(Dtype::u8);
    for (int call = 0; call < 6; ++call) {
      if (call == 3 && me == 1) {
        ASSERT_TRUE(shmcoll::testing::refuse_cross_memory_copies());
      }
      const std::string when = " (call " + std::to_string(call) + ")";
      for (int to = 0; to < size; ++to) {
        for (std::size_t i = 0; i < kWords; ++i) send[to * kWords + i] = value(me, to, i, call);
      }
      team.alltoall(send.data(), kBlock, bytes, recv.data(), kBlock, bytes);
      bool good = true;
      for (int from = 0; from < size; ++from) {
        for (std::size_t i = 0; i < kWords; ++i)
          good &= recv[from * kWords + i] == value(from, me, i, call);
      }
      expect(good, "alltoall" + when);
      team.allgather(send.data(), kBlock, bytes, recv.data(), kBlock, bytes);
      good = true;
      for (int from = 0; from < size; ++from) {
        for (std::size_t i = 0; i < kWords; ++i)
          good &= recv[from * kWords + i] == value(from, 0, i, call);
      }
      expect(good, "allgather" + when);
      team.scatter(send.data(), kBlock, bytes, recv.data(), kBlock, bytes, 2);
      good = true;
      for (std::size_t i = 0; i < kWords; ++i) good &= recv[i] == value(2, me, i, call);
      expect(good, "scatter" + when);
      for (const int root : {0, 1}) {  // rank 1 writes, or is written into
        std::fill(recv.begin(), recv.end(), 0);
        team.gather(send.data(), kBlock, bytes, recv.data(), kBlock, bytes, root);
        good = true;
        for (int from = 0; from < size && me == root; ++from) {
          for (std::size_t i = 0; i < kWords; ++i)
            good &= recv[from * kWords + i] == value(from, 0, i, call);
        }
        expect(good, "gather at root " + std::to_string(root) + when);
      }
      // gatherv: rank r's (r + 1) * 128 KiB, in reverse rank order at the root, written into
      // the root's buffer; then into every other word of the root's (its layout has gaps: it
      // declines, and the call goes again through the slots).
      for (const int root : {0, 1}) {
        std::vector<std::int64_t> counts(size), displs(size);
        std::int64_t at = 0;
        for (int r = size - 1; r >= 0; --r) {
          counts[r] = (r + 1) * std::int64_t(kBlock / 2);
          displs[r] = at;
          at += counts[r];
        }
        std::fill(recv.begin(), recv.end(), 0);
        team.gatherv(send.data(), counts[me], bytes, recv.data(), counts, displs, bytes, root);
        good = true;
        for (int from = 0; from < size && me == root; ++from) {
          for (std::size_t i = 0; i < std::size_t(counts[from]) / 8; ++i)
            good &= recv[displs[from] / 8 + i] == value(from, int(i / kWords), i % kWords, call);
        }
        expect(good, "gatherv at root " + std::to_string(root) + when);
      }
      {
        constexpr std::size_t kColumn = kWords / 4;  // 64 KiB a rank
        const shmcoll::Datatype column =
            shmcoll::Datatype::vector(kColumn, 1, 2, shmcoll::Datatype(Dtype::u64));
        const std::vector<std::int64_t> counts(size, 1), displs = {0, 1, 2};
        std::fill(recv.begin(), recv.end(), 0);
        team.gatherv(send.data(), kColumn, shmcoll::Datatype(Dtype::u64), recv.data(), counts,
                     displs, column, 0);
        good = true;
        const std::size_t extent = 2 * kColumn - 1;
        for (int from = 0; from < size && me == 0; ++from) {
          for (std::size_t i = 0; i < kColumn; ++i) {
            good &= recv[from * extent + 2 * i] == value(from, 0, i, call);
            if (i + 1 < kColumn) good &= recv[from * extent + 2 * i + 1] == 0;
          }
        }
        expect(good, "gatherv into columns" + when);
      }
      // Rank 0's blocks as every other word of the receivers' buffers.
      const shmcoll::Datatype every_other =
          shmcoll::Datatype::vector(kWords, 1, 2, shmcoll::Datatype(Dtype::u64));
      std::fill(recv.begin(), recv.end(), 0);
      team.scatter(send.data(), kWords, shmcoll::Datatype(Dtype::u64), recv.data(), 1, every_other,
                   0);
      good = true;
      for (std::size_t i = 0; i < kWords; ++i) {
        good &= recv[2 * i] == value(0, me, i, call) && recv[2 * i + 1] == 0;
      }
      expect(good, "scatter into a column" + when);
    }
    // Rank 2 wrote its block into both roots of the gather and of the gatherv in calls 0 to 2,
    // by the kernel, not the slots.
    if (me == 2) {
      expect(shmcoll::shm::process_copy_counts().writes >= 12,
             "gathers and gathervs written in place");
    }
  });
  EXPECT_EQ(failures->count.load(), 0);
}

// A gatherv whose blocks its senders write into the root's buffer checks their lengths: a root
// that expects more than a sender sends, or less (nothing at all, or a block too short for the
// kernel's copy), fails with "mismatched counts", and the team with it, never a hang; where the
// lengths agree, the same gatherv delivers (the team's next call).
TEST(ProcessMemory, AGathervWrittenIntoItsRootChecksTheSendersLengths) {
  ScopedEnv cma("SHMCOLL_CMA_MIN", "65536");
  ScopedEnv slot("SHMCOLL_SLOT_BYTES", "65536");  // written even where ranks share CPUs
  constexpr std::int64_t kBlock = 256 << 10;
  auto* failures = shmcoll::testing::shared_block<Failures>();
  auto* codes = shmcoll::testing::shared_block<std::atomic<int>>();
  const shmcoll::Datatype bytes(shmcoll::Dtype::u8);
  for (const std::int64_t expected_of_1 :
       {kBlock + 8, std::int64_t{0}, kBlock - 8, std::int64_t{4096}, kBlock}) {
    const bool fails = expected_of_1 != kBlock;
    auto gatherv = [&](shmcoll::Team& team) {
      const int me = team.rank();
      std::vector<std::uint8_t> send(kBlock, std::uint8_t(me + 1));
      std::vector<std::uint8_t> recv(4 * kBlock, 0xee);
      const std::vector<std::int64_t> counts = {kBlock, expected_of_1, kBlock};
      const std::vector<std::int64_t> displs = {0, kBlock, 3 * kBlock};
      try {
        team.gatherv(send.data(), kBlock, bytes, recv.data(), counts, displs, bytes, 0);
      } catch (const shmcoll::Error& error) {
        if (me == 0 && error.code() == shmcoll::Errc::invalid_argument &&
            std::string(error.what()).find("mismatched counts") != std::string::npos) {
          codes->fetch_add(1);
        }
        throw;
      }
      if (me != 0) return;
      for (int from = 0; from < 3; ++from) {
        const auto first = recv.begin() + displs[from];
        const bool delivered = std::all_of(first, first + counts[from], [&](std::uint8_t b) {
          return b == std::uint8_t(from + 1);
        });
        failures->expect(delivered, me, "block of rank " + std::to_string(from));
      }
      failures->expect(std::all_of(recv.begin() + 2 * kBlock, recv.begin() + 3 * kBlock,
                                   [](std::uint8_t b) { return b == 0xee; }),
                       me, "bytes between the blocks");
    };
    if (fails) {
      EXPECT_THROW(shmcoll::run(3, {}, gatherv), shmcoll::Error) << expected_of_1;
      EXPECT_EQ(codes->exchange(0), 1)
          << "the root did not fail with mismatched counts, expecting " << expected_of_1;
    } else {
      shmcoll::run(3, {}, gatherv);
    }
  }
  EXPECT_EQ(failures->count.load(), 0);
}

// A bcast beyond one slot is read out of its root's memory by the kernel's copy (into a
// contiguous buffer, whose last half the root writes itself, and into every other word of one
// through the staging buffer, which the reader reads whole); then rank 1 is refused the kernel's
// copies (its reads and, as a root, its writes), and every bcast still delivers, through the slots.
TEST(ProcessMemory, BcastReadsTheRootsMemoryAndFallsBackWhereTheKernelRefuses) {
  ScopedEnv cma("SHMCOLL_CMA_MIN", "65536");
  ScopedEnv slot("SHMCOLL_SLOT_BYTES", "262144");
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::run(2, {}, [&](shmcoll::Team& team) {
    using shmcoll::Dtype;
    const int me = team.rank();
    constexpr std::size_t kWords = (1 << 20) / 8;
    std::vector<std::uint64_t> data(kWords), column(2 * kWords);
    const auto value = [](int root, std::size_t i, int call) {
      return std::uint64_t(root) << 48 | std::uint64_t(call) << 32 | i;
    };
    const auto expect = [&](bool good, const std::string& what) {
      failures->expect(good, me, what);
    };
    const shmcoll::Datatype word(Dtype::u64);
    const shmcoll::Datatype every_other = shmcoll::Datatype::vector(kWords, 1, 2, word);
    std::uint64_t read_before_refusal = 0, written_before_refusal = 0;
    for (int call = 0; call < 6; ++call) {
      if (call == 3) {
        read_before_refusal = shmcoll::shm::process_copy_counts().blocks_read;
        written_before_refusal = shmcoll::shm::process_copy_counts().writes;
        if (me == 1) {
          ASSERT_TRUE(shmcoll::testing::refuse_cross_memory_copies());
        }
      }
      const std::string when = " (call " + std::to_string(call) + ")";
      for (const int root : {0, 1}) {
        for (std::size_t i = 0; i < kWords; ++i) data[i] = me == root ? value(root, i, call) : 0;
        team.bcast(data.data(), kWords, word, root);
        bool good = true;
        for (std::size_t i = 0; i < kWords; ++i) good &= data[i] == value(root, i, call);
        expect(good, "bcast from root " + std::to_string(root) + when);
        // The root's contiguous words into every other word of the others' buffers.
        std::fill(column.begin(), column.end(), 0);
        if (me == root) {
          for (std::size_t i = 0; i < kWords; ++i) column[2 * i] = data[i] = value(root, i, call);
          team.bcast(data.data(), kWords, word, root);
        } else {
          team.bcast(column.data(), 1, every_other, root);
        }
        good = true;
        for (std::size_t i = 0; i < kWords; ++i) {
          good &= column[2 * i] == value(root, i, call) && column[2 * i + 1] == 0;
        }
        expect(good, "bcast into a column from root " + std::to_string(root) + when);
      }
    }
    // Calls 0 to 2: each rank read the 6 bcasts whose root was the other out of its memory.
    expect(read_before_refusal >= 6, "bcasts read out of the root's memory");
    // ... and, as the root of 3 of them into a contiguous buffer, wrote its share into the other's.
    expect(written_before_refusal >= 3, "root's shares written into the reader's buffer");
  });
  EXPECT_EQ(failures->count.load(), 0);
}

// Where ranks share CPUs, a scatter's blocks that take more than one round through the slots are
// read out of the root's memory by the kernel's copy, with the copy left off otherwise
// (SHMCOLL_CMA_MIN=0), a scatterv's too; a one-round block still goes through the slots; then
// rank 1 is refused the kernel's copies, and every scatter still delivers, through the slots.
TEST(ProcessMemory, AScatterWhereRanksShareCpusIsReadOutOfTheRootsMemory) {
  ScopedEnv cma("SHMCOLL_CMA_MIN", "0");
  ScopedEnv slot("SHMCOLL_SLOT_BYTES", "262144");  // 3 ranks: 128 KiB a block a round
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::Options options;
  options.processes_share_cpus = true;
  shmcoll::run(3, options, [&](shmcoll::Team& team) {
    using shmcoll::Dtype;
    const int me = team.rank(), size = team.size();
    constexpr std::size_t kWords = (256 << 10) / 8;
    std::vector<std::uint64_t> send(size * kWords), recv(kWords);
    const auto value = [](int to, std::size_t i, int call) {
      return std::uint64_t(to) << 40 | std::uint64_t(call) << 32 | i;
    };
    const auto expect = [&](bool good, const std::string& what) {
      failures->expect(good, me, what);
    };
    const shmcoll::Datatype word(Dtype::u64);
    const std::vector<std::int64_t> counts(size, kWords);
    std::vector<std::int64_t> offsets(size);
    for (int to = 0; to < size; ++to) offsets[to] = std::int64_t((size - 1 - to) * kWords);
    std::uint64_t read_before = 0, read_one_round = 0, read_before_refusal = 0;
    for (int call = 0; call < 6; ++call) {
      const int root = call % size;
      if (call == 3) {
        read_before_refusal = shmcoll::shm::process_copy_counts().blocks_read;
        if (me == 1) {
          ASSERT_TRUE(shmcoll::testing::refuse_cross_memory_copies());
        }
      }
      const std::string when =
          " (call " + std::to_string(call) + ", root " + std::to_string(root) + ")";
      for (int to = 0; to < size; ++to) {
        for (std::size_t i = 0; i < kWords; ++i) send[to * kWords + i] = value(to, i, call);
      }
      std::fill(recv.begin(), recv.end(), 0);
      team.scatter(send.data(), kWords, word, recv.data(), kWords, word, root);
      bool good = true;
      for (std::size_t i = 0; i < kWords; ++i) good &= recv[i] == value(me, i, call);
      expect(good, "scatter" + when);
      // The blocks in reverse order: rank r's at (size - 1 - r) blocks.
      for (int to = 0; to < size; ++to) {
        for (std::size_t i = 0; i < kWords; ++i) {
          send[offsets[to] + i] = value(to, i, call + 100);
        }
      }
      std::fill(recv.begin(), recv.end(), 0);
      team.scatterv(send.data(), counts, offsets, word, recv.data(), kWords, word, root);
      good = true;
      for (std::size_t i = 0; i < kWords; ++i) good &= recv[i] == value(me, i, call + 100);
      expect(good, "scatterv" + when);
      if (call == 0) {
        read_before = shmcoll::shm::process_copy_counts().blocks_read;
        // A block of one round (64 KiB) goes through the slots.
        team.scatter(send.data(), kWords / 4, word, recv.data(), kWords / 4, word, root);
        read_one_round = shmcoll::shm::process_copy_counts().blocks_read;
      }
    }
    if (me != 0) expect(read_before >= 2, "call 0's scatter and scatterv read by the kernel");
    expect(read_one_round == read_before, "a one-round scatter through the slots");
    // Calls 0 to 2: a reader of 2 scatters and 2 scatterv.
    expect(read_before_refusal >= 4, "scatters read out of the root's memory");
  });
  EXPECT_EQ(failures->count.load(), 0);
}

}  // namespace
