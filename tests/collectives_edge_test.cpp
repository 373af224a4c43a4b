// Targeted cases beside the differential tester: counts on both sides of the message-line and
// slot-region boundaries, multi-MiB messages, exscan's rank 0, in-place reduce_scatter with
// uneven counts, and alltoallw with mixed derived types reading overlapping send regions.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Datatype;
using shmcoll::Dtype;
using shmcoll::Op;
using shmcoll::Team;

struct Shared {
  std::atomic<int> failures;
};

#define EXPECT_IN_RANK(condition, what)                                                         \
  do {                                                                                          \
    if (!(condition)) {                                                                         \
      std::fprintf(stderr, "rank %d: %s: %s failed (line %d)\n", team.rank(), what, #condition, \
                   __LINE__);                                                                   \
      shared->failures.fetch_add(1);                                                            \
    }                                                                                           \
  } while (0)

std::int32_t value(int rank, std::size_t index) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(rank) * 1000003u +
                                   static_cast<std::uint32_t>(index) * 7u);
}

std::vector<std::int32_t> values(int rank, std::size_t count) {
  std::vector<std::int32_t> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = value(rank, i);
  return out;
}

// Element counts (i32) of the calls in pieces: 280 KB and 64 KB, nine pieces each (chunks.hpp),
// the last one short.
constexpr std::size_t kInPiecesCounts[] = {70'001, 16'001};

std::int32_t wrapping_sum(int first_rank, int last_rank, std::size_t index) {
  std::uint32_t sum = 0;
  for (int r = first_rank; r < last_rank; ++r) sum += static_cast<std::uint32_t>(value(r, index));
  return static_cast<std::int32_t>(sum);
}

// allgather, alltoall, reduce_scatter_block, scan, scatter and gather of `count` i32 each.
void exercise_counts(Team& team, std::size_t count, Shared* shared) {
  const int p = team.size(), me = team.rank(), root = p - 1;
  const auto n = static_cast<std::int64_t>(count);
  const std::vector<std::int32_t> mine = values(me, count * p);
  std::vector<std::int32_t> recv(count * p, -1);

  team.allgather(mine.data(), n, Dtype::i32, recv.data(), n, Dtype::i32);
  for (std::size_t i = 0; i < count * p; ++i) {
    EXPECT_IN_RANK(recv[i] == value(int(i / count), i % count), "allgather");
  }
  team.alltoall(mine.data(), n, Dtype::i32, recv.data(), n, Dtype::i32);
  for (std::size_t i = 0; i < count * p; ++i) {
    EXPECT_IN_RANK(recv[i] == value(int(i / count), me * count + i % count), "alltoall");
  }
  team.reduce_scatter_block(mine.data(), recv.data(), n, Dtype::i32, Op::sum);
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_IN_RANK(recv[i] == wrapping_sum(0, p, me * count + i), "reduce_scatter_block");
  }
  team.scan(mine.data(), recv.data(), n, Dtype::i32, Op::sum);
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_IN_RANK(recv[i] == wrapping_sum(0, me + 1, i), "scan");
  }
  team.scatter(mine.data(), n, Dtype::i32, recv.data(), n, Dtype::i32, root);
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_IN_RANK(recv[i] == value(root, me * count + i), "scatter");
  }
  team.gather(mine.data(), n, Dtype::i32, recv.data(), n, Dtype::i32, root);
  if (me == root) {
    for (std::size_t i = 0; i < count * p; ++i) {
      EXPECT_IN_RANK(recv[i] == value(int(i / count), i % count), "gather");
    }
  }
}

TEST(CollectiveEdges, CountsAtLineAndRegionBoundaries) {
  // One-page slots: at 3 ranks a personalized region is 2048 bytes (512 i32); a message line
  // carries 104 bytes (26 i32) of a reduction, 96 (24 i32) of an exchange at 2 ranks.
  for (int p : {2, 3}) {
    auto* shared = shmcoll::testing::shared_block<Shared>();
    shmcoll::Options options;
    options.slot_bytes = 4096;
    shmcoll::run(p, options, [&](Team& team) {
      for (std::size_t count :
           {11, 12, 13, 23, 24, 25, 26, 27, 511, 512, 513, 1023, 1024, 1025, 3000}) {
        exercise_counts(team, count, shared);
      }
    });
    EXPECT_EQ(shared->failures.load(), 0) << "p = " << p;
  }
}

// A scatter whose blocks all fit one message line goes in that line; one whose blocks overflow
// it but each fit one fills the lines of several rounds (up to 8). At 3 ranks a line holds 2
// regions of 48 bytes, so blocks of 13-24 i32 span 2 lines; at 5, 4 regions of 24 bytes (7-24 i32:
// 2-4 lines); at 8, 7 regions of 8 bytes (3-24 i32: 2-7 lines); at 16, 15 regions of 0 bytes (1-12
// i32: 2-8 lines; longer ones go through the slots). Many calls in a row with changing roots and
// counts, scatter and scatterv, the receivers through a strided type: the root runs ahead and its
// lines are reused while readers lag.
TEST(CollectiveEdges, ScattersSpanningSeveralMessageLines) {
  for (int p : {3, 5, 8, 16}) {
    auto* shared = shmcoll::testing::shared_block<Shared>();
    shmcoll::run(p, {}, [&](Team& team) {
      const int me = team.rank();
      const Datatype every_other = Datatype::resized(Dtype::i32, 0, 8);  // one i32 in 8 bytes
      for (int call = 0; call < 200; ++call) {
        const int root = call % p;
        const std::size_t count = 1 + std::size_t(call * 7) % 26;  // 1..26 i32 per rank
        const auto n = static_cast<std::int64_t>(count);
        const std::vector<std::int32_t> mine = values(root * 100 + call, count * p);
        std::vector<std::int32_t> recv(2 * count, -1);
        if (call % 2 == 0) {
          team.scatter(mine.data(), n, Dtype::i32, recv.data(), n, every_other, root);
        } else {
          std::vector<std::int64_t> counts(p, n), displs(p);
          for (int r = 0; r < p; ++r) displs[r] = r * n;
          team.scatterv(mine.data(), counts, displs, Dtype::i32, recv.data(), n, Dtype::i32, root);
        }
        for (std::size_t i = 0; i < count; ++i) {
          const std::int32_t want = value(root * 100 + call, me * count + i);
          if (call % 2 == 0) {
            EXPECT_IN_RANK(recv[2 * i] == want && recv[2 * i + 1] == -1, "scatter");
          } else {
            EXPECT_IN_RANK(recv[i] == want, "scatterv");
          }
        }
      }
    });
    EXPECT_EQ(shared->failures.load(), 0) << "p = " << p;
  }
}

// A scatterv whose blocks together stay within 4 KiB goes through the root's slot, each block
// placed by a table at its head; a larger one through the exchange (the root decides, and says
// which way). Uneven counts with zeros, the total crossing 4 KiB back and forth, the root moving
// and running ahead of readers that receive through a strided type.
TEST(CollectiveEdges, ScattervOfSmallAndLargeUnevenBlocks) {
  for (int p : {2, 4, 7}) {
    auto* shared = shmcoll::testing::shared_block<Shared>();
    shmcoll::run(p, {}, [&](Team& team) {
      const int me = team.rank();
      const Datatype every_other = Datatype::resized(Dtype::i32, 0, 8);  // one i32 in 8 bytes
      for (int call = 0; call < 300; ++call) {
        const int root = call % p;
        const std::size_t scale = call % 3 == 2 ? 400 : 1;  // 400 i32 a unit: past 4 KiB
        std::vector<std::int64_t> counts(p), displs(p);
        std::int64_t total = 0;
        for (int r = 0; r < p; ++r) {
          counts[r] = static_cast<std::int64_t>(((r + call) % 4) * scale);  // 0-3 units
          displs[r] = total;
          total += counts[r];
        }
        const std::vector<std::int32_t> all = values(root * 100 + call, std::size_t(total));
        const std::int64_t n = counts[me];
        std::vector<std::int32_t> recv(2 * std::size_t(n) + 2, -1);
        team.scatterv(all.data(), counts, displs, Dtype::i32, recv.data(), n, every_other, root);
        bool same = recv[2 * std::size_t(n)] == -1;
        for (std::int64_t i = 0; i < n; ++i) {
          same = same && recv[2 * i] == all[displs[me] + i] && recv[2 * i + 1] == -1;
        }
        EXPECT_IN_RANK(same, "scatterv");
      }
    });
    EXPECT_EQ(shared->failures.load(), 0) << "p = " << p;
  }
}

// A receiver that is sent other than it expects fails with "mismatched counts" in every v form
// and on every path: the rooted v forms and alltoallv, blocks in a message line, in the root's
// slot, in slots over rounds and read from the sender's memory, and a block sent empty. Between
// rank 0 (the root) and rank 1, one side names `short_count` elements and the other `short_count
// + extra`: rank 1 expects more than it is sent, or less (MPI's truncation error; a receiver
// that expects nothing does not wait for the block, so that case is not caught there). Every
// other pair agrees.
TEST(CollectiveEdges, AReceiverSentOtherThanItExpectsFails) {
  enum Form { scatterv, gatherv, alltoallv };
  struct Case {
    Form form;
    std::int64_t short_count;
    std::int64_t extra;
  };
  const Case cases[] = {{scatterv, 1, 2},       {scatterv, 3000, 1},    {scatterv, 0, 3000},
                        {scatterv, 1 << 18, 1}, {gatherv, 1, 2},        {gatherv, 3000, 1},
                        {gatherv, 0, 5},        {alltoallv, 1, 2},      {alltoallv, 3000, 1},
                        {alltoallv, 0, 3000},   {alltoallv, 1 << 18, 1}};
  for (const bool receiver_expects_more : {true, false}) {
    for (const Case& c : cases) {
      if (!receiver_expects_more && c.short_count == 0) continue;
      constexpr int kRanks = 3;
      auto* codes = shmcoll::testing::shared_block<std::atomic<int>>();
      const std::int64_t most = c.short_count + c.extra;
      // What rank 0 and rank 1 send each other, and what the receiver of that expects.
      const std::int64_t sent = receiver_expects_more ? c.short_count : most;
      const std::int64_t expected = receiver_expects_more ? most : c.short_count;
      auto run = [&](Team& team) {
        const int me = team.rank();
        // counts[r]: what r is sent by rank 0, or sends to it.
        std::vector<std::int64_t> counts(kRanks, most), displs(kRanks);
        counts[1] = sent;
        for (int r = 0; r < kRanks; ++r) displs[r] = r * most;
        std::vector<std::int32_t> send(std::size_t(kRanks * most), 1), recv(send.size());
        if (c.form == scatterv) {
          team.scatterv(send.data(), counts, displs, Dtype::i32, recv.data(),
                        me == 1 ? expected : counts[me], Dtype::i32, 0);
        } else if (c.form == gatherv) {
          std::vector<std::int64_t> recvcounts = counts;
          recvcounts[1] = expected;
          team.gatherv(send.data(), counts[me], Dtype::i32, recv.data(), recvcounts, displs,
                       Dtype::i32, 0);
        } else {
          // Rank 0 sends counts[r] to r, and rank r expects counts[r] of it, but rank 1
          // `expected`; every other pair exchanges `most`.
          std::vector<std::int64_t> sendcounts(kRanks, most), recvcounts(kRanks, most);
          if (me == 0) sendcounts[1] = sent;
          if (me == 1) recvcounts[0] = expected;
          team.alltoallv(send.data(), sendcounts, displs, Dtype::i32, recv.data(), recvcounts,
                         displs, Dtype::i32);
        }
      };
      const int detector = c.form == gatherv ? 0 : 1;
      const auto described = [&] {
        return "form " + std::to_string(c.form) + ", sent " + std::to_string(sent) + ", expected " +
               std::to_string(expected);
      };
      EXPECT_THROW(shmcoll::run(kRanks, {},
                                [&](Team& team) {
                                  try {
                                    run(team);
                                  } catch (const shmcoll::Error& error) {
                                    if (team.rank() == detector &&
                                        error.code() == shmcoll::Errc::invalid_argument &&
                                        std::string(error.what()).find("mismatched counts") !=
                                            std::string::npos) {
                                      codes->fetch_add(1);
                                    }
                                    throw;
                                  }
                                }),
                   shmcoll::Error)
          << described();
      EXPECT_EQ(codes->load(), 1) << described();
    }
  }
}

TEST(CollectiveEdges, MultiMebibyteMessages) {
  for (int p : {2, 3}) {
    auto* shared = shmcoll::testing::shared_block<Shared>();
    shmcoll::run(p, {}, [&](Team& team) { exercise_counts(team, (3 << 18) + 1, shared); });
    EXPECT_EQ(shared->failures.load(), 0) << "p = " << p;
  }
}

// A slot block that already holds a call's bytes is left as it is (coll/store.hpp): calls on one
// buffer whose data changes in a single element, at the start, the middle or the end of a 4 KiB
// block, or not at all, must each deliver exactly the new data.
TEST(CollectiveEdges, RepeatedCallsDeliverEachChangedElement) {
  for (int p : {2, 3}) {
    auto* shared = shmcoll::testing::shared_block<Shared>();
    shmcoll::run(p, {}, [&](Team& team) {
      constexpr std::size_t kCount = 100'000;  // 400 KB: several 4 KiB blocks, a slot or two
      const int me = team.rank(), root = p - 1;
      std::vector<std::int32_t> data = values(root, kCount), gathered(kCount * p), mine(kCount);
      const std::size_t changed[] = {0, 1023, 1024, 50'000, kCount - 1, kCount};  // kCount: none
      for (std::size_t at : changed) {
        std::vector<std::int32_t> want = values(root, kCount);
        if (at < kCount) want[at] = -7 - static_cast<std::int32_t>(at);
        if (me == root) data = want;
        team.bcast(data.data(), kCount, Dtype::i32, root);
        EXPECT_IN_RANK(data == want, "bcast after a change of one element");
        mine = values(me, kCount);
        if (at < kCount) mine[at] = -7 - me;
        team.allgather(mine.data(), kCount, Dtype::i32, gathered.data(), kCount, Dtype::i32);
        for (int r = 0; r < p; ++r) {
          bool same = true;
          for (std::size_t i = 0; i < kCount; ++i) {
            const std::int32_t expect = at < kCount && i == at ? -7 - r : value(r, i);
            same = same && gathered[r * kCount + i] == expect;
          }
          EXPECT_IN_RANK(same, "allgather after a change of one element");
        }
      }
    });
    EXPECT_EQ(shared->failures.load(), 0) << "p = " << p;
  }
}

// A bcast that fits one slot moves in pieces after a call whose data did not change
// (bcast.cpp): calls that repeat their data, then change it in the last piece, the first piece,
// everywhere or in the middle, each checked, with the root moving and a strided receive type on
// some ranks.
TEST(CollectiveEdges, BcastInPiecesDeliversEveryChange) {
  for (int p : {2, 3}) {
    auto* shared = shmcoll::testing::shared_block<Shared>();
    shmcoll::run(p, {}, [&](Team& team) {
      const int me = team.rank();
      const Datatype every_other = Datatype::resized(Dtype::i32, 0, 8);
      for (const std::size_t count : kInPiecesCounts) {
        // Changes (count: none; 1: everything) after runs of unchanged calls, long enough for
        // each of the two slots to see the same data twice.
        const std::size_t unchanged = count;
        const std::size_t changed_at[] = {
            unchanged, unchanged, unchanged, unchanged, unchanged, count - 1, unchanged,
            unchanged, unchanged, unchanged, 0,         unchanged, unchanged, unchanged,
            unchanged, 1,         unchanged, unchanged, unchanged, unchanged, count * 4 / 7};
        int call = 0;
        for (int root = 0; root < p; ++root) {
          std::vector<std::int32_t> want = values(root, count);
          for (std::size_t at : changed_at) {
            if (at < count) want[at] = -7 - call;
            if (at == 1) want = values(root + 100 + call, count);  // everything changes
            const bool strided = me != root && me % 2 == 1;
            std::vector<std::int32_t> data(strided ? 2 * count : count, -1);
            if (me == root) data = want;
            team.bcast(data.data(), count, strided ? every_other : Datatype(Dtype::i32), root);
            bool same = true;
            for (std::size_t i = 0; i < count; ++i) {
              same = same && data[strided ? 2 * i : i] == want[i] &&
                     (!strided || data[2 * i + 1] == -1);
            }
            EXPECT_IN_RANK(same, (std::string("bcast call ") + std::to_string(call)).c_str());
            ++call;
          }
        }
      }
    });
    EXPECT_EQ(shared->failures.load(), 0) << "p = " << p;
  }
}

// A reduce that fits one slot moves in pieces where ranks do not share CPUs, each sender filling
// its slot whole or piece by piece as its data last changed or not (reduce.cpp): calls that
// repeat their data, then change it on one rank or on all, in the last piece, the first, the
// middle or everywhere, the root moving and reducing in place on every other call, each checked
// against the sum of the inputs.
TEST(CollectiveEdges, ReduceInPiecesSumsEveryChange) {
  for (int p : {2, 3}) {
    auto* shared = shmcoll::testing::shared_block<Shared>();
    shmcoll::run(p, {}, [&](Team& team) {
      const int me = team.rank();
      for (const std::size_t count : kInPiecesCounts) {
        const std::size_t unchanged = count;
        const std::size_t everywhere = count + 1;
        const std::size_t changed_at[] = {
            unchanged, unchanged, unchanged, unchanged,  count - 1, unchanged, unchanged,
            unchanged, unchanged, 0,         unchanged,  unchanged, unchanged, count * 4 / 7,
            unchanged, unchanged, unchanged, everywhere, unchanged, everywhere};
        std::vector<std::vector<std::int32_t>> data(p);
        for (int r = 0; r < p; ++r) data[r] = values(r, count);
        int call = 0;
        for (int root = 0; root < p; ++root) {
          for (std::size_t at : changed_at) {
            // Odd calls change one rank's element (the one after the root), even calls every
            // rank's.
            for (int r = 0; r < p; ++r) {
              if (call % 2 == 1 && r != (root + 1) % p) continue;
              if (at < count) data[r][at] = -7 - call - r;
              if (at == everywhere) data[r] = values(r + 100 + call, count);
            }
            std::vector<std::int32_t> want(count);
            for (std::size_t i = 0; i < count; ++i) {
              std::uint32_t sum = 0;
              for (int r = 0; r < p; ++r) sum += static_cast<std::uint32_t>(data[r][i]);
              want[i] = static_cast<std::int32_t>(sum);
            }
            const bool in_place = me == root && call % 2 == 1;
            std::vector<std::int32_t> recv =
                in_place ? data[me] : std::vector<std::int32_t>(count, -1);
            const void* send = in_place ? shmcoll::in_place : data[me].data();
            team.reduce(send, me == root ? recv.data() : nullptr, count, Dtype::i32, Op::sum, root);
            EXPECT_IN_RANK(me != root || recv == want,
                           (std::string("reduce call ") + std::to_string(call)).c_str());
            ++call;
          }
        }
      }
    });
    EXPECT_EQ(shared->failures.load(), 0) << "p = " << p;
  }
}

TEST(CollectiveEdges, ExscanLeavesRankZeroUntouched) {
  auto* shared = shmcoll::testing::shared_block<Shared>();
  shmcoll::run(3, {}, [&](Team& team) {
    const int me = team.rank();
    for (std::size_t count : {std::size_t{5}, std::size_t{100000}}) {
      const std::vector<std::int32_t> mine = values(me, count);
      std::vector<std::int32_t> recv(count, -7);
      team.exscan(mine.data(), recv.data(), std::int64_t(count), Dtype::i32, Op::sum);
      std::vector<std::int32_t> in_place = mine;
      team.exscan(shmcoll::in_place, in_place.data(), std::int64_t(count), Dtype::i32, Op::sum);
      for (std::size_t i = 0; i < count; ++i) {
        EXPECT_IN_RANK(recv[i] == (me == 0 ? -7 : wrapping_sum(0, me, i)), "exscan");
        EXPECT_IN_RANK(in_place[i] == (me == 0 ? mine[i] : wrapping_sum(0, me, i)),
                       "exscan in place");
      }
    }
  });
  EXPECT_EQ(shared->failures.load(), 0);
}

TEST(CollectiveEdges, InPlaceReduceScatterWithUnevenCounts) {
  auto* shared = shmcoll::testing::shared_block<Shared>();
  shmcoll::Options options;
  options.slot_bytes = 4096;  // 1000 i32 take four rounds of 256
  shmcoll::run(4, options, [&](Team& team) {
    const std::vector<std::int64_t> counts = {0, 7, 1000, 3};
    const std::size_t offsets[] = {0, 0, 7, 1007}, total = 1010;
    const int me = team.rank();
    std::vector<std::int32_t> data = values(me, total);
    team.reduce_scatter(shmcoll::in_place, data.data(), counts, Dtype::i32, Op::sum);
    for (std::int64_t i = 0; i < counts[me]; ++i) {
      EXPECT_IN_RANK(data[i] == wrapping_sum(0, 4, offsets[me] + std::size_t(i)),
                     "in-place reduce_scatter");
    }
  });
  EXPECT_EQ(shared->failures.load(), 0);
}

TEST(CollectiveEdges, AlltoallwWithMixedDerivedTypesAndOverlappingSendRegions) {
  auto* shared = shmcoll::testing::shared_block<Shared>();
  const Datatype i32 = Dtype::i32;
  // Three ways to read 6 i32 from the same memory, and three to lay them out.
  const std::vector<Datatype> send_types = {
      Datatype::contiguous(6, i32), Datatype::vector(3, 2, 4, i32), Datatype::vector(6, 1, 2, i32)};
  const std::int64_t struct_lengths[] = {2, 1}, struct_displs[] = {8, 0};
  const Datatype struct_types[] = {i32, i32};
  const std::vector<Datatype> recv_types = {
      i32, Datatype::structure(struct_lengths, struct_displs, struct_types),
      Datatype::resized(Datatype::contiguous(2, i32), 0, 12)};
  const std::vector<std::int64_t> recv_counts = {6, 2, 3};  // 6 i32 each
  shmcoll::run(3, {}, [&](Team& team) {
    const int me = team.rank();
    // Every peer's block starts at byte 0 (or 4) of the same send buffer: the regions overlap.
    const std::vector<std::int32_t> send = values(me, 32);
    const std::vector<std::int64_t> send_counts = {1, 1, 1}, sdispls = {0, 4, 0};
    const std::vector<Datatype> my_send_types = {send_types[me], send_types[(me + 1) % 3],
                                                 send_types[(me + 2) % 3]};
    const std::vector<std::int64_t> rdispls = {0, 40, 80};  // bytes
    std::vector<std::int32_t> recv(36, -1);
    team.alltoallw(send.data(), send_counts, sdispls, my_send_types, recv.data(), recv_counts,
                   rdispls, recv_types);
    for (int source = 0; source < 3; ++source) {
      // What `source` sent me: its type for me is send_types[(source + me) % 3].
      const std::vector<std::int32_t> theirs = values(source, 32);
      std::vector<std::int32_t> stream(6);
      send_types[(source + me) % 3].pack(
          reinterpret_cast<const std::byte*>(theirs.data()) + sdispls[me], 1, stream.data());
      std::vector<std::int32_t> want(36, -1);
      recv_types[source].unpack(stream.data(), recv_counts[source],
                                reinterpret_cast<std::byte*>(want.data()) + rdispls[source]);
      for (std::size_t i = std::size_t(rdispls[source] / 4);
           i < std::size_t(rdispls[source] / 4) + 10; ++i) {
        EXPECT_IN_RANK(recv[i] == want[i], "alltoallw");
      }
    }
  });
  EXPECT_EQ(shared->failures.load(), 0);
}

}  // namespace
