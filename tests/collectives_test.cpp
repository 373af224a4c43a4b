// Every collective against a sequential reference, on real forked processes, for team sizes that
// fit and that oversubscribe the machine.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "shm/layout.hpp"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Op;
using shmcoll::testing::ScopedEnv;
using shmcoll::testing::shared_block;

constexpr std::size_t kSlotBytes = 4096;  // small slots: chunking is exercised at small counts

struct Failures {
  int count;
};

// Inputs every rank can recompute for every peer. Integers cover wraparound (i8 sums of 8 ranks
// overflow); floats stay small integers so any summation order is exact.
template <typename T>
T input(int rank, std::size_t i, Op op) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == Op::prod) return static_cast<T>(1 + (rank + i) % 2);
    return static_cast<T>((rank * 3 + i) % 11) - T(5);
  } else {
    return static_cast<T>(static_cast<std::uint64_t>(rank * 37 + i * 11 + 101));
  }
}

// The reference, written independently of the library: C-style wrapping integer arithmetic.
template <typename T>
T combine(T a, T b, Op op) {
  using U = std::conditional_t<std::is_integral_v<T>, std::uint64_t, T>;
  switch (op.kind()) {
    case Op::sum:
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case Op::prod:
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case Op::min:
      return a < b ? a : b;
    case Op::max:
      return a < b ? b : a;
    default:
      ADD_FAILURE() << "no reference for op " << shmcoll::op_name(op);
  }
  return a;
}

template <typename T>
T expected(int ranks, std::size_t i, Op op) {
  T acc = input<T>(0, i, op);
  for (int r = 1; r < ranks; ++r) acc = combine(acc, input<T>(r, i, op), op);
  return acc;
}

template <typename T>
int report_mismatches(const char* what, const std::vector<T>& got, const std::vector<T>& want,
                      int rank, std::size_t count, int root, bool in_place) {
  if (count == 0 || std::memcmp(got.data(), want.data(), count * sizeof(T)) == 0) return 0;
  std::size_t first = 0;
  while (std::memcmp(&got[first], &want[first], sizeof(T)) == 0) ++first;
  std::fprintf(stderr, "%s rank %d count %zu root %d in_place %d: element %zu is %g, want %g\n",
               what, rank, count, root, in_place, first, static_cast<double>(got[first]),
               static_cast<double>(want[first]));
  return 1;
}

template <typename T>
int check_allreduce(shmcoll::Team& team, std::size_t count, Op op, bool in_place) {
  std::vector<T> send(count), recv(count, T(99)), want(count);
  for (std::size_t i = 0; i < count; ++i) {
    send[i] = input<T>(team.rank(), i, op);
    want[i] = expected<T>(team.size(), i, op);
  }
  if (in_place) {
    recv = send;
    team.allreduce(shmcoll::in_place, recv.data(), static_cast<std::int64_t>(count),
                   shmcoll::dtype_of<T>(), op);
  } else {
    team.allreduce(send.data(), recv.data(), static_cast<std::int64_t>(count),
                   shmcoll::dtype_of<T>(), op);
  }
  return report_mismatches("allreduce", recv, want, team.rank(), count, -1, in_place);
}

template <typename T>
int check_reduce(shmcoll::Team& team, std::size_t count, Op op, int root, bool in_place) {
  std::vector<T> send(count), recv(count, T(99)), want(count);
  for (std::size_t i = 0; i < count; ++i) {
    send[i] = input<T>(team.rank(), i, op);
    want[i] = expected<T>(team.size(), i, op);
  }
  const auto n = static_cast<std::int64_t>(count);
  if (in_place && team.rank() == root) {
    recv = send;
    team.reduce(shmcoll::in_place, recv.data(), n, shmcoll::dtype_of<T>(), op, root);
  } else {
    // Non-roots pass no receive buffer at all: it is not significant there.
    team.reduce(send.data(), team.rank() == root ? recv.data() : nullptr, n, shmcoll::dtype_of<T>(),
                op, root);
  }
  if (team.rank() != root) return 0;
  return report_mismatches("reduce", recv, want, team.rank(), count, root, in_place);
}

template <typename T>
int check_bcast(shmcoll::Team& team, std::size_t count, int root) {
  std::vector<T> data(count, T(99)), want(count);
  for (std::size_t i = 0; i < count; ++i) want[i] = input<T>(root, i, Op::sum);
  if (team.rank() == root) data = want;
  team.bcast(data.data(), static_cast<std::int64_t>(count), shmcoll::dtype_of<T>(), root);
  return report_mismatches("bcast", data, want, team.rank(), count, root, false);
}

// Zero, tiny, both sides of the message-line payload, and both sides of the slot size.
std::vector<std::size_t> interesting_counts(std::size_t element_bytes) {
  const std::size_t slot = kSlotBytes / element_bytes;
  const std::size_t message = shmcoll::shm::kMessageBytes / element_bytes;
  return {0, 1, 7, message, message + 1, slot - 1, slot, slot + 1, 3 * slot + 5};
}

// Counts x roots x in-place for one element type and op.
template <typename T>
int sweep(shmcoll::Team& team, Op op) {
  int failures = 0;
  for (std::size_t count : interesting_counts(sizeof(T))) {
    for (bool in_place : {false, true}) {
      failures += check_allreduce<T>(team, count, op, in_place);
      for (int root = 0; root < team.size(); ++root) {
        failures += check_reduce<T>(team, count, op, root, in_place);
      }
    }
    for (int root = 0; root < team.size(); ++root) failures += check_bcast<T>(team, count, root);
  }
  return failures;
}

// Every type with every op at a few counts, root 0 and the last rank.
template <typename T>
int type_matrix(shmcoll::Team& team) {
  int failures = 0;
  for (Op op : {Op::sum, Op::prod, Op::min, Op::max}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{33}, kSlotBytes / sizeof(T) + 3}) {
      failures += check_allreduce<T>(team, count, op, false);
      failures += check_reduce<T>(team, count, op, team.size() - 1, true);
    }
  }
  return failures;
}

class Collectives : public ::testing::TestWithParam<int> {
 protected:
  void run_on_team(const std::function<int(shmcoll::Team&)>& body) {
    auto* failures = shared_block<Failures>();
    shmcoll::Options options;
    options.slot_bytes = kSlotBytes;
    ASSERT_NO_THROW(shmcoll::run(GetParam(), options, [&](shmcoll::Team& team) {
      __atomic_add_fetch(&failures->count, body(team), __ATOMIC_RELAXED);
    }));
    EXPECT_EQ(failures->count, 0) << "see stderr for the first wrong element of each case";
  }
};

TEST_P(Collectives, MatchReferenceAtEveryCountRootAndInPlaceWithEachAlgorithm) {
  // Inline applies where the payload fits a message line; larger counts then go by size.
  struct Choice {
    const char* allreduce;
    const char* reduce;
    const char* bcast;
  };
  const Choice algorithms[] = {{"allreduce_inline", "reduce_inline", "bcast_inline"},
                               {"allreduce_arrivals", "reduce_inline", "bcast_inline"},
                               {"allreduce_all_read", "reduce_root_reads", "bcast_pipelined"},
                               {"allreduce_slices", "reduce_slices", "bcast_pipelined"}};
  for (const auto& [allreduce_algorithm, reduce_algorithm, bcast_algorithm] : algorithms) {
    ScopedEnv allreduce("SHMCOLL_ALLREDUCE_ALGORITHM", allreduce_algorithm);
    ScopedEnv reduce("SHMCOLL_REDUCE_ALGORITHM", reduce_algorithm);
    ScopedEnv bcast("SHMCOLL_BCAST_ALGORITHM", bcast_algorithm);
    SCOPED_TRACE(allreduce_algorithm);
    run_on_team([](shmcoll::Team& team) {
      return sweep<float>(team, Op::sum) + sweep<std::int8_t>(team, Op::sum) +
             sweep<double>(team, Op::max);
    });
  }
}

TEST_P(Collectives, EveryTypeWithEveryOpWrapsIntegersAsC) {
  run_on_team([](shmcoll::Team& team) {
    return type_matrix<std::int8_t>(team) + type_matrix<std::int16_t>(team) +
           type_matrix<std::int32_t>(team) + type_matrix<std::int64_t>(team) +
           type_matrix<std::uint8_t>(team) + type_matrix<std::uint16_t>(team) +
           type_matrix<std::uint32_t>(team) + type_matrix<std::uint64_t>(team) +
           type_matrix<float>(team) + type_matrix<double>(team);
  });
}

TEST_P(Collectives, BarrierHoldsEveryoneUntilAllArrive) {
  struct Arrivals {
    int before[16];
  };
  auto* arrivals = shared_block<Arrivals>();
  run_on_team([&](shmcoll::Team& team) {
    int failures = 0;
    for (int step = 1; step <= 50; ++step) {
      __atomic_store_n(&arrivals->before[team.rank()], step, __ATOMIC_RELEASE);
      team.barrier();
      for (int r = 0; r < team.size(); ++r) {
        if (__atomic_load_n(&arrivals->before[r], __ATOMIC_ACQUIRE) < step) ++failures;
      }
      team.barrier();  // nobody starts the next step before all have checked
    }
    return failures;
  });
}

INSTANTIATE_TEST_SUITE_P(TeamSizes, Collectives, ::testing::Values(1, 2, 3, 4, 7, 8),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// Allreduce of values whose sum depends on the order: every rank must hold the same bits, and a
// second run must reproduce them.
TEST(Reproducibility, AllreduceIsBitwiseIdenticalOnEveryRankAndAcrossRuns) {
  struct Hashes {
    std::uint64_t by_rank[2][8];
  };
  auto* hashes = shared_block<Hashes>();
  for (int run = 0; run < 2; ++run) {
    shmcoll::run(8, {}, [&](shmcoll::Team& team) {
      std::vector<double> data(100'000);
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = 1.0 / (1.0 + i + 977.0 * team.rank());
      team.allreduce_in_place(std::span<double>(data), Op::sum);
      std::uint64_t hash = 1469598103934665603ull;
      for (double value : data) {
        std::uint64_t bits;
        std::memcpy(&bits, &value, sizeof bits);
        hash = (hash ^ bits) * 1099511628211ull;
      }
      hashes->by_rank[run][team.rank()] = hash;
    });
  }
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(hashes->by_rank[0][rank], hashes->by_rank[0][0]) << "rank " << rank;
    EXPECT_EQ(hashes->by_rank[1][rank], hashes->by_rank[0][0]) << "second run, rank " << rank;
  }
}

}  // namespace
