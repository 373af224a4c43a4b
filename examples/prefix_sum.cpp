// A parallel prefix sum: the array is split into blocks, one per rank. Each rank sums its block,
// exscan gives it the total of all blocks before it (its offset), and a local pass finishes the
// job. scan (inclusive) then tells each rank the running total up to its block's end.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "example_main.hpp"

int main(int argc, char** argv) {
  return example::main(argc, argv, "Prefix sums of a distributed array with exscan and scan.",
                       [](shmcoll::Team& team) {
    constexpr std::int64_t kPerRank = 1'000'000;
    const std::int64_t first_index = team.rank() * kPerRank;
    std::vector<std::int64_t> values(kPerRank);
    for (std::int64_t i = 0; i < kPerRank; ++i) values[i] = (first_index + i) % 7;  // any data

    std::int64_t block_sum = 0;
    for (std::int64_t value : values) block_sum += value;
    std::int64_t offset = 0;  // exscan leaves rank 0's result untouched: 0 is right for it
    team.exscan(&block_sum, &offset, 1, shmcoll::Dtype::i64, shmcoll::Op::sum);

    std::vector<std::int64_t> prefix(kPerRank);
    std::int64_t running = offset;
    for (std::int64_t i = 0; i < kPerRank; ++i) prefix[i] = running += values[i];

    std::int64_t through_me = 0;
    team.scan(&block_sum, &through_me, 1, shmcoll::Dtype::i64, shmcoll::Op::sum);
    if (prefix.back() != through_me) throw std::runtime_error("the prefix does not add up");
    // Check against the formula: the sum of (k % 7) for k < n.
    const std::int64_t n = first_index + kPerRank;
    if (through_me != n / 7 * 21 + (n % 7) * (n % 7 - 1) / 2) {
      throw std::runtime_error("the prefix sum is wrong");
    }
    std::printf("rank %d: elements %lld-%lld, prefix at its last element %lld\n", team.rank(),
                static_cast<long long>(first_index), static_cast<long long>(n - 1),
                static_cast<long long>(through_me));
  });
}
