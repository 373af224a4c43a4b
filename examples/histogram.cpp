// A histogram too big for one rank to own: every rank counts its samples into all bins, then one
// reduce_scatter adds the counts up and leaves each rank the totals of its own range of bins.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "example_main.hpp"

int main(int argc, char** argv) {
  return example::main(argc, argv,
                       "Histogram of normal samples; reduce_scatter gives each rank its bins.",
                       [](shmcoll::Team& team) {
    constexpr int kBins = 1000;
    constexpr int kSamplesPerRank = 500'000;
    const int ranks = team.size();
    // Bins are dealt out in ranges, the first kBins % ranks ranks taking one more.
    std::vector<std::int64_t> bins_of(ranks, kBins / ranks);
    for (int r = 0; r < kBins % ranks; ++r) ++bins_of[r];

    std::vector<std::int64_t> counts(kBins, 0);
    std::mt19937_64 random(7 + team.rank());
    std::normal_distribution<double> sample(kBins / 2.0, kBins / 8.0);
    for (int i = 0; i < kSamplesPerRank; ++i) {
      const double value = sample(random);
      if (value >= 0 && value < kBins) ++counts[static_cast<int>(value)];
    }
    std::vector<std::int64_t> mine(bins_of[team.rank()]);
    team.reduce_scatter(counts.data(), mine.data(), bins_of, shmcoll::Dtype::i64,
                        shmcoll::Op::sum);

    // Check: the totals of all ranks' bins add up to every sample that fell inside.
    std::int64_t local_inside = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    std::int64_t sums[2] = {std::accumulate(mine.begin(), mine.end(), std::int64_t{0}),
                            local_inside};
    team.allreduce(shmcoll::in_place, sums, 2, shmcoll::Dtype::i64, shmcoll::Op::sum);
    if (sums[0] != sums[1]) throw std::runtime_error("the bins lost samples");
    const int first = std::accumulate(bins_of.begin(), bins_of.begin() + team.rank(), 0);
    const auto peak = std::max_element(mine.begin(), mine.end());
    std::printf("rank %d owns bins %d-%d; its fullest is bin %d with %lld samples\n", team.rank(),
                first, first + static_cast<int>(mine.size()) - 1,
                first + static_cast<int>(peak - mine.begin()), static_cast<long long>(*peak));
  });
}
