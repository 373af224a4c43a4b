// The collectives with the richer operators, on real forked processes: pair types with
// MAXLOC/MINLOC, 16-bit floats, complex, logical and bitwise operations, and a non-commutative user
// operation that must be applied in rank order by every algorithm.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Op;
using shmcoll::testing::matrix_product;
using shmcoll::testing::multiply_2x2;
using shmcoll::testing::ScopedEnv;
using shmcoll::testing::shared_block;

constexpr std::size_t kSlotBytes = 4096;  // small slots, so modest counts span several chunks

struct Failures {
  int count;
};

// Runs allreduce and reduce (root: the last rank) of `count` elements and compares every rank's
// result with `want(i)`, computed from all ranks' inputs in rank order.
template <typename T>
int check(shmcoll::Team& team, const char* what, std::size_t count, const Op& op,
          const std::function<T(int rank, std::size_t i)>& input,
          const std::function<bool(const T& got, std::size_t i)>& correct) {
  std::unique_ptr<T[]> send(new T[count]()),
      recv(new T[count]());  // std::vector<bool> has no data()
  for (std::size_t i = 0; i < count; ++i) send[i] = input(team.rank(), i);
  int failures = 0;
  const auto verify = [&](const char* call) {
    for (std::size_t i = 0; i < count; ++i) {
      if (!correct(recv[i], i)) {
        std::fprintf(stderr, "%s %s count %zu rank %d of %d: element %zu is wrong\n", call, what,
                     count, team.rank(), team.size(), i);
        return 1;
      }
    }
    return 0;
  };
  const auto n = static_cast<std::int64_t>(count);
  team.allreduce(send.get(), recv.get(), n, shmcoll::dtype_of<T>(), op);
  failures += verify("allreduce");
  const int root = team.size() - 1;
  team.reduce(send.get(), recv.get(), n, shmcoll::dtype_of<T>(), op, root);
  if (team.rank() == root) failures += verify("reduce");
  return failures;
}

std::uint64_t matrix_entry(int rank, std::size_t i) {
  const std::size_t m = i / 4, e = i % 4;
  return e == 3 ? 1 : (m * 13 + static_cast<std::size_t>(rank) * 5 + e) % 7;
}

int every_operator(shmcoll::Team& team) {
  const int p = team.size();
  int failures = 0;
  for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1500}}) {
    // MAXLOC and MINLOC over few distinct values: ties go to the lowest rank's index.
    const auto pair_input = [](int rank, std::size_t i) {
      return shmcoll::double_int{double((rank * 7 + i) % 3), rank};
    };
    for (Op op : {Op::maxloc, Op::minloc}) {
      failures += check<shmcoll::double_int>(
          team, shmcoll::op_name(op), count, op, pair_input,
          [&](const shmcoll::double_int& got, std::size_t i) {
            shmcoll::double_int best = pair_input(0, i);
            for (int r = 1; r < p; ++r) {
              const auto x = pair_input(r, i);
              if (op == Op::maxloc ? x.value > best.value : x.value < best.value) best = x;
            }
            return got.value == best.value && got.index == best.index;
          });
    }
    // bfloat16 sums: computed in float, rounded once.
    const auto half_input = [](int rank, std::size_t i) {
      return shmcoll::to_bfloat16(rank == 0 ? 1.0f : float((i + rank) % 2) / 256);
    };
    failures += check<shmcoll::bfloat16>(team, "bf16 sum", count, Op::sum, half_input,
                                         [&](const shmcoll::bfloat16& got, std::size_t i) {
                                           float acc = 0;
                                           for (int r = 0; r < p; ++r)
                                             acc += shmcoll::to_float(half_input(r, i));
                                           return got.bits == shmcoll::to_bfloat16(acc).bits;
                                         });
    // Complex products, each component rounded once.
    const auto complex_input = [](int rank, std::size_t i) {
      return std::complex<double>(1.0 + rank * 0.25, double(i % 3) - 1.0);
    };
    failures += check<std::complex<double>>(
        team, "complex prod", count, Op::prod, complex_input,
        [&](const std::complex<double>& got, std::size_t i) {
          std::complex<double> acc = complex_input(0, i);
          for (int r = 1; r < p; ++r) {
            const auto b = complex_input(r, i);
            acc = {std::fma(acc.real(), b.real(), -(acc.imag() * b.imag())),
                   std::fma(acc.real(), b.imag(), acc.imag() * b.real())};
          }
          return got == acc;
        });
    // Logical and bitwise.
    failures += check<bool>(
        team, "bool lor", count, Op::lor,
        [](int rank, std::size_t i) { return (rank + i) % 5 == 0; },
        [&](const bool& got, std::size_t i) {
          bool any = false;
          for (int r = 0; r < p; ++r) any = any || (r + i) % 5 == 0;
          return got == any;
        });
    const auto byte_input = [](int rank, std::size_t i) {
      return std::byte((rank * 37 + i) & 0xff);
    };
    failures += check<std::byte>(team, "byte bxor", count, Op::bxor, byte_input,
                                 [&](const std::byte& got, std::size_t i) {
                                   std::byte x{0};
                                   for (int r = 0; r < p; ++r) x ^= byte_input(r, i);
                                   return got == x;
                                 });
    // The user operation: matrix products in rank order.
    const Op product = Op::create(matrix_product, false);
    const std::size_t matrices = 4 * count;
    failures += check<std::uint64_t>(team, "user matrix product", matrices, product, matrix_entry,
                                     [&](const std::uint64_t& got, std::size_t i) {
                                       const std::size_t m = i / 4 * 4;
                                       std::uint64_t acc[4] = {1, 0, 0, 1};
                                       for (int r = 0; r < p; ++r) {
                                         const std::uint64_t x[4] = {
                                             matrix_entry(r, m), matrix_entry(r, m + 1),
                                             matrix_entry(r, m + 2), matrix_entry(r, m + 3)};
                                         multiply_2x2(acc, x, acc);
                                       }
                                       return got == acc[i % 4];
                                     });
  }
  return failures;
}

class OpsOnTeams : public ::testing::TestWithParam<int> {};

TEST_P(OpsOnTeams, EveryAlgorithmAppliesEveryOperatorInRankOrder) {
  for (const auto& [allreduce_algorithm, reduce_algorithm] :
       {std::pair{"allreduce_inline", "reduce_inline"},
        std::pair{"allreduce_arrivals", "reduce_inline"},
        std::pair{"allreduce_all_read", "reduce_root_reads"},
        std::pair{"allreduce_slices", "reduce_slices"}}) {
    ScopedEnv allreduce("SHMCOLL_ALLREDUCE_ALGORITHM", allreduce_algorithm);
    ScopedEnv reduce("SHMCOLL_REDUCE_ALGORITHM", reduce_algorithm);
    SCOPED_TRACE(allreduce_algorithm);
    auto* failures = shared_block<Failures>();
    shmcoll::Options options;
    options.slot_bytes = kSlotBytes;
    ASSERT_NO_THROW(shmcoll::run(GetParam(), options, [&](shmcoll::Team& team) {
      __atomic_add_fetch(&failures->count, every_operator(team), __ATOMIC_RELAXED);
    }));
    EXPECT_EQ(failures->count, 0) << "see stderr for the first wrong element of each case";
  }
}

INSTANTIATE_TEST_SUITE_P(TeamSizes, OpsOnTeams, ::testing::Values(1, 2, 3, 5, 8),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

}  // namespace
