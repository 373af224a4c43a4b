// Bad arguments give shmcoll::Error(invalid_argument) naming the argument and rank, before any
// data moves, and leave the team usable.
#include <gtest/gtest.h>

#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Errc;
using shmcoll::Op;

struct Failures {
  int count;
};

// Returns 0 when `call` throws invalid_argument whose message contains every word in `words`.
template <typename Call>
int expect_rejected(Call&& call, std::initializer_list<const char*> words) {
  try {
    call();
  } catch (const shmcoll::Error& error) {
    if (error.code() != Errc::invalid_argument) {
      std::fprintf(stderr, "wrong code: %s\n", error.what());
      return 1;
    }
    for (const char* word : words) {
      if (std::string(error.what()).find(word) == std::string::npos) {
        std::fprintf(stderr, "message \"%s\" does not name \"%s\"\n", error.what(), word);
        return 1;
      }
    }
    return 0;
  }
  std::fprintf(stderr, "call was accepted\n");
  return 1;
}

TEST(Errors, BadArgumentsAreRejectedByNameAndTheTeamStaysUsable) {
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::run(3, {}, [&](shmcoll::Team& team) {
    std::vector<float> a(16, 1.0f), b(16);
    int bad = 0;
    // Every rank makes the same bad call, so no rank enters a collective the others skip.
    bad += expect_rejected([&] { team.allreduce(a.data(), b.data(), -1, Dtype::f32, Op::sum); },
                           {"count", "-1", "rank"});
    bad += expect_rejected([&] { team.allreduce(nullptr, b.data(), 4, Dtype::f32, Op::sum); },
                           {"sendbuf", "null"});
    bad += expect_rejected([&] { team.allreduce(a.data(), nullptr, 4, Dtype::f32, Op::sum); },
                           {"recvbuf", "null"});
    bad += expect_rejected([&] { team.reduce(a.data(), b.data(), 4, Dtype::f32, Op::sum, 3); },
                           {"root", "3"});
    bad += expect_rejected([&] { team.bcast(a.data(), 4, Dtype::f32, -1); }, {"root", "-1"});
    bad += expect_rejected(
        [&] { team.allreduce(a.data(), b.data(), 4, static_cast<Dtype>(42), Op::sum); },
        {"dtype", "42"});
    bad += expect_rejected(
        [&] { team.allreduce(a.data(), b.data(), 4, Dtype::f32, Op(static_cast<Op::Kind>(99))); },
        {"op", "99"});
    bad += expect_rejected([&] { team.allreduce(a.data(), b.data(), 4, Dtype::f32, Op::band); },
                           {"allreduce", "rank", "band", "f32", "not defined"});
    bad += expect_rejected([&] { team.reduce(a.data(), b.data(), 4, Dtype::f32, Op::maxloc, 0); },
                           {"reduce", "maxloc", "f32", "pair types"});
    bad += expect_rejected([&] { team.allreduce(a.data(), a.data() + 2, 4, Dtype::f32, Op::sum); },
                           {"overlap"});
    bad += expect_rejected(
        [&] { team.allreduce(a.data(), b.data(), std::int64_t{1} << 62, Dtype::f64, Op::sum); },
        {"more bytes than any address space"});
    if (team.rank() != 0) {
      bad += expect_rejected(
          [&] { team.reduce(shmcoll::in_place, b.data(), 4, Dtype::f32, Op::sum, 0); },
          {"in_place", "root"});
    }
    // Still usable: a real collective after all the rejected ones.
    team.allreduce(a.data(), b.data(), 16, Dtype::f32, Op::sum);
    for (float value : b) bad += value != 3.0f;
    __atomic_add_fetch(&failures->count, bad, __ATOMIC_RELAXED);
  });
  EXPECT_EQ(failures->count, 0);
}

TEST(Errors, BadArgumentsOfTheOtherCollectivesAreRejectedByName) {
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::run(3, {}, [&](shmcoll::Team& team) {
    std::vector<int> a(64, 1), b(64);
    const std::vector<std::int64_t> three = {1, 1, 1}, two = {1, 1}, negative = {1, -2, 1};
    const std::vector<std::int64_t> displs = {0, 1, 2};
    const shmcoll::Datatype i32 = Dtype::i32;
    const std::vector<shmcoll::Datatype> types(3, i32);
    int bad = 0;
    bad +=
        expect_rejected([&] { team.reduce_scatter(a.data(), b.data(), two, Dtype::i32, Op::sum); },
                        {"reduce_scatter", "recvcounts", "2 entries", "3 ranks"});
    bad += expect_rejected(
        [&] { team.reduce_scatter(a.data(), b.data(), negative, Dtype::i32, Op::sum); },
        {"recvcounts[1]", "-2"});
    bad += expect_rejected(
        [&] { team.reduce_scatter_block(a.data(), b.data(), -1, Dtype::i32, Op::sum); },
        {"reduce_scatter_block", "-1"});
    bad += expect_rejected([&] { team.scan(a.data(), nullptr, 4, Dtype::i32, Op::sum); },
                           {"scan", "recvbuf", "null"});
    bad += expect_rejected([&] { team.exscan(a.data(), b.data(), 4, Dtype::f32, Op::bor); },
                           {"exscan", "bor"});
    bad += expect_rejected([&] { team.scatter(a.data(), 1, i32, b.data(), 1, i32, 5); },
                           {"scatter", "root", "5"});
    bad += expect_rejected([&] { team.gather(a.data(), -3, i32, b.data(), 1, i32, 0); },
                           {"gather", "sendcount", "-3"});
    bad += expect_rejected([&] { team.allgather(a.data(), 1, i32, nullptr, 1, i32); },
                           {"allgather", "recvbuf", "null"});
    bad += expect_rejected([&] { team.allgatherv(a.data(), 1, i32, b.data(), three, two, i32); },
                           {"allgatherv", "displs", "2 entries"});
    bad += expect_rejected(
        [&] { team.alltoallv(a.data(), three, displs, i32, b.data(), negative, displs, i32); },
        {"alltoallv", "recvcounts[1]"});
    bad += expect_rejected(
        [&] {
          team.alltoallw(a.data(), three, displs, {types.data(), 2}, b.data(), three, displs,
                         types);
        },
        {"alltoallw", "sendtypes", "2 entries"});
    if (team.rank() != 0) {
      bad += expect_rejected([&] { team.scatter(a.data(), 1, i32, shmcoll::in_place, 1, i32, 0); },
                             {"scatter", "recvbuf", "in_place", "root (0)"});
      bad += expect_rejected(
          [&] { team.gatherv(shmcoll::in_place, 1, i32, b.data(), three, displs, i32, 0); },
          {"gatherv", "sendbuf", "in_place"});
    }
    // Still usable.
    team.allgather(a.data(), 2, i32, b.data(), 2, i32);
    for (int i = 0; i < 6; ++i) bad += b[i] != 1;
    __atomic_add_fetch(&failures->count, bad, __ATOMIC_RELAXED);
  });
  EXPECT_EQ(failures->count, 0);
}

// Buffers the standard forbids: send and receive sides that overlap without in_place, receive
// blocks that overlap each other, and blocks no address space can hold.
TEST(Errors, AliasedOverlappingAndUnaddressableBuffersAreRejected) {
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::run(3, {}, [&](shmcoll::Team& team) {
    std::vector<int> a(64, 1), b(64);
    const std::vector<std::int64_t> ones = {1, 1, 1}, apart = {0, 1, 2};
    const shmcoll::Datatype i32 = Dtype::i32;
    const std::vector<shmcoll::Datatype> types(3, i32);
    int bad = 0;
    bad += expect_rejected([&] { team.alltoall(b.data(), 1, i32, b.data() + 1, 1, i32); },
                           {"alltoall", "sendbuf and recvbuf overlap", "in_place"});
    bad += expect_rejected([&] { team.allgather(b.data() + 2, 1, i32, b.data(), 1, i32); },
                           {"allgather", "overlap"});
    bad += expect_rejected(
        [&] {
          team.alltoallv(a.data(), ones, apart, i32, b.data(), ones,
                         std::vector<std::int64_t>{0, 2, 2}, i32);
        },
        {"alltoallv", "recvbuf blocks of ranks 1 and 2 overlap"});
    bad += expect_rejected(
        [&] {
          team.allgatherv(a.data(), 1, i32, b.data(), ones, std::vector<std::int64_t>{1, 0, 1},
                          i32);
        },
        {"allgatherv", "ranks 0 and 2 overlap"});
    bad += expect_rejected(
        [&] {
          team.alltoallw(a.data(), ones, apart, types, b.data(), ones,
                         std::vector<std::int64_t>{0, std::int64_t{1} << 60, 8}, types);
        },
        {"alltoallw", "rdispls[1]", "address space"});
    const shmcoll::Datatype huge = shmcoll::Datatype::resized(i32, 0, std::int64_t{1} << 55);
    bad += expect_rejected([&] { team.alltoall(a.data(), 1, i32, b.data(), 1, huge); },
                           {"alltoall", "recvcount", "address space"});
    if (team.rank() == 0) {  // only the root's receive side is significant
      bad += expect_rejected([&] { team.gather(b.data() + 1, 1, i32, b.data(), 1, i32, 0); },
                             {"gather", "overlap"});
      bad += expect_rejected([&] { team.scatter(a.data(), 2, i32, a.data() + 3, 2, i32, 0); },
                             {"scatter", "overlap"});
    }
    // Still usable, and the same buffers with in_place are fine.
    for (int i = 0; i < 3; ++i) b[i] = team.rank() * 10 + i;
    team.alltoall(shmcoll::in_place, 0, i32, b.data(), 1, i32);
    for (int i = 0; i < 3; ++i) bad += b[i] != i * 10 + team.rank();
    __atomic_add_fetch(&failures->count, bad, __ATOMIC_RELAXED);
  });
  EXPECT_EQ(failures->count, 0);
}

// A null buffer (MPI_BOTTOM) is the program's way to name variables by absolute address: taken
// wherever the type's displacements are such addresses, one variable's as well as several
// (issue 45), with send and receive variables interleaved in memory; rejected by name where the
// type's data would start in the first page.
TEST(Errors, NullBuffersWithAbsoluteAddressesAreTakenAndOthersRejected) {
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::run(3, {}, [&](shmcoll::Team& team) {
    const int me = team.rank(), size = team.size();
    const shmcoll::Datatype i32 = Dtype::i32;
    const auto at = [](const void* variable) {
      return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(variable));
    };
    const auto variable_at = [&](const int* variable, std::int64_t count) {
      const std::int64_t lengths[] = {count}, addresses[] = {at(variable)};
      const shmcoll::Datatype types[] = {i32};
      return shmcoll::Datatype::structure(lengths, addresses, types);
    };
    // Send and receive variables side by side, so the two sides' hulls cross.
    std::vector<int> memory(4 * size * 8, -1);
    std::vector<shmcoll::Datatype> send_types, recv_types;
    for (int peer = 0; peer < size; ++peer) {
      int* send = memory.data() + 16 * peer;
      for (int i = 0; i < 8; ++i) send[i] = 100 * me + 10 * peer + i;
      send_types.push_back(variable_at(send, 8));
      recv_types.push_back(variable_at(send + 8, 8));
    }
    const std::vector<std::int64_t> ones(size, 1), zeros(size, 0);
    int bad = 0;
    team.alltoallw(nullptr, ones, zeros, send_types, nullptr, ones, zeros, recv_types);
    for (int peer = 0; peer < size; ++peer) {
      for (int i = 0; i < 8; ++i) {
        if (memory[16 * peer + 8 + i] != 100 * peer + 10 * me + i) ++bad;
      }
    }
    int value = me == 1 ? 42 : 0;
    team.bcast(nullptr, 1, variable_at(&value, 1), 1);
    if (value != 42) ++bad;
    bad += expect_rejected([&] { team.bcast(nullptr, 4, i32, 0); },
                           {"bcast", "buffer is null", "address 0"});
    const shmcoll::Datatype column = shmcoll::Datatype::vector(2, 1, 4, i32);
    bad += expect_rejected([&] { team.allgather(nullptr, 1, column, memory.data(), 1, column); },
                           {"allgather", "sendbuf is null"});
    if (bad != 0) __atomic_add_fetch(&failures->count, bad, __ATOMIC_RELAXED);
  });
  EXPECT_EQ(failures->count, 0);
}

TEST(Errors, AMovedFromTeamRefusesEveryCall) {
  auto* failures = shmcoll::testing::shared_block<Failures>();
  shmcoll::run(2, {}, [&](shmcoll::Team& team) {
    shmcoll::Team kept = std::move(team);
    int bad = 0;
    bad += team.rank() != -1 || team.size() != -1;
    bad += expect_rejected([&] { team.barrier(); }, {"barrier", "moved from"});
    std::int32_t value = 1;
    bad += expect_rejected([&] { team.bcast(&value, 1, Dtype::i32, 0); }, {"bcast", "moved from"});
    bad += expect_rejected([&] { team.allocate<int>(4); }, {"allocate", "moved from"});
    kept.allreduce(shmcoll::in_place, &value, 1, Dtype::i32, Op::sum);  // the team lives on
    bad += value != 2;
    __atomic_add_fetch(&failures->count, bad, __ATOMIC_RELAXED);
  });
  EXPECT_EQ(failures->count, 0);
}

TEST(Errors, RunRejectsBadTeamSize) {
  try {
    shmcoll::run(0, {}, [](shmcoll::Team&) {});
    FAIL() << "run(0) was accepted";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("n must be at least 1"), std::string::npos);
  }
}

// Slot and heap sizes whose segment layout would wrap: an error naming the size before anything
// is created (2^63-byte slots once made 2 * slot = 0 and prefaulting wrote 2^63 bytes).
TEST(Errors, SegmentSizesBeyondAnAddressSpaceAreRejectedByName) {
  struct Case {
    std::size_t slot_bytes, heap_bytes;
    const char* named;
  };
  for (const Case& bad :
       {Case{std::size_t{1} << 63, 0, "slot_bytes"}, Case{SIZE_MAX, 0, "slot_bytes"},
        Case{SIZE_MAX - 4095, 0, "slot_bytes"}, Case{4096, SIZE_MAX, "heap_bytes"},
        Case{std::size_t{1} << 55, std::size_t{1} << 55, "heap_bytes"}}) {
    shmcoll::Options options;
    options.slot_bytes = bad.slot_bytes;
    options.heap_bytes = bad.heap_bytes;
    try {
      shmcoll::run(2, options, [](shmcoll::Team&) {});
      FAIL() << "slot_bytes " << bad.slot_bytes << ", heap_bytes " << bad.heap_bytes
             << " were accepted";
    } catch (const shmcoll::Error& error) {
      EXPECT_EQ(error.code(), Errc::invalid_argument) << error.what();
      EXPECT_NE(std::string(error.what()).find(bad.named), std::string::npos) << error.what();
    }
  }
}

TEST(Errors, AttachOutsideTheLauncherSaysHowToStart) {
  unsetenv("SHMCOLL_RANK");
  try {
    shmcoll::Team::attach();
    FAIL() << "attach without shmcoll-run was accepted";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("shmcoll-run"), std::string::npos);
  }
}

}  // namespace
