// Sample sort: every rank holds random keys. The ranks agree on p-1 splitters from a sample of
// everyone's keys (allgather), each sends every key to the rank whose range holds it (alltoall of
// counts, then alltoallv of keys), and sorts what it received. Rank r then holds the r-th range.
#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "example_main.hpp"

int main(int argc, char** argv) {
  return example::main(argc, argv, "Sort random keys across ranks: splitters, alltoallv, sort.",
                       [](shmcoll::Team& team) {
    const int p = team.size();
    constexpr int kKeysPerRank = 200'000;
    constexpr int kSamplesPerRank = 64;
    const shmcoll::Datatype key_type{shmcoll::Dtype::u64};

    std::mt19937_64 random(99 + team.rank());
    std::vector<std::uint64_t> keys(kKeysPerRank);
    for (auto& key : keys) key = random();
    std::sort(keys.begin(), keys.end());

    // Splitters: every rank's regular sample, gathered everywhere and sorted alike.
    std::vector<std::uint64_t> sample(kSamplesPerRank), samples(kSamplesPerRank * p);
    for (int i = 0; i < kSamplesPerRank; ++i) sample[i] = keys[i * kKeysPerRank / kSamplesPerRank];
    team.allgather(sample.data(), kSamplesPerRank, key_type, samples.data(), kSamplesPerRank,
                   key_type);
    std::sort(samples.begin(), samples.end());
    std::vector<std::uint64_t> splitters;  // rank r takes keys in [splitters[r-1], splitters[r])
    for (int r = 1; r < p; ++r) splitters.push_back(samples[r * kSamplesPerRank]);

    // My keys are sorted, so each destination's keys are one run.
    std::vector<std::int64_t> send_counts(p), send_displs(p), recv_counts(p), recv_displs(p);
    for (int r = 0, start = 0; r < p; ++r) {
      const int end = r + 1 < p ? int(std::lower_bound(keys.begin(), keys.end(), splitters[r]) -
                                      keys.begin())
                                : kKeysPerRank;
      send_displs[r] = start;
      send_counts[r] = end - start;
      start = end;
    }
    const shmcoll::Datatype count_type{shmcoll::Dtype::i64};
    team.alltoall(send_counts.data(), 1, count_type, recv_counts.data(), 1, count_type);
    std::int64_t total = 0;
    for (int r = 0; r < p; ++r) {
      recv_displs[r] = total;
      total += recv_counts[r];
    }
    std::vector<std::uint64_t> mine(static_cast<std::size_t>(total));
    team.alltoallv(keys.data(), send_counts, send_displs, key_type, mine.data(), recv_counts,
                   recv_displs, key_type);
    std::sort(mine.begin(), mine.end());

    // Check: no key lost, and every rank's range ends before the next one's begins.
    std::int64_t count = total;
    team.allreduce(shmcoll::in_place, &count, 1, shmcoll::Dtype::i64, shmcoll::Op::sum);
    if (count != std::int64_t{kKeysPerRank} * p) throw std::runtime_error("keys were lost");
    std::uint64_t bounds[2] = {mine.empty() ? ~0ull : mine.front(), mine.empty() ? 0 : mine.back()};
    std::vector<std::uint64_t> all_bounds(2 * p);
    team.allgather(bounds, 2, key_type, all_bounds.data(), 2, key_type);
    for (int r = 0; r + 1 < p; ++r) {
      if (all_bounds[2 * r + 1] > all_bounds[2 * (r + 1)]) throw std::runtime_error("not sorted");
    }
    std::printf("rank %d holds %lld sorted keys\n", team.rank(), static_cast<long long>(total));
  });
}
