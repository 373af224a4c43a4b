// Monte Carlo estimate of pi: each rank throws its own random darts at the unit square, one
// allreduce adds up the hits, and every rank then knows the estimate.
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>

#include "example_main.hpp"

int main(int argc, char** argv) {
  return example::main(argc, argv, "Estimate pi with random darts and one allreduce.",
                       [](shmcoll::Team& team) {
    constexpr std::uint64_t kDartsPerRank = 2'000'000;
    std::mt19937_64 random(12345 + team.rank());  // a different stream on every rank
    std::uniform_real_distribution<double> coordinate(0.0, 1.0);
    std::uint64_t counts[2] = {0, kDartsPerRank};  // hits inside the quarter circle, darts
    for (std::uint64_t i = 0; i < kDartsPerRank; ++i) {
      const double x = coordinate(random), y = coordinate(random);
      counts[0] += x * x + y * y <= 1.0;
    }
    // Both counters in one call; in_place: the sums replace this rank's counts.
    team.allreduce(shmcoll::in_place, counts, 2, shmcoll::Dtype::u64, shmcoll::Op::sum);
    const double pi = 4.0 * static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
    if (team.rank() == 0) {
      std::printf("pi ~ %.6f from %llu darts on %d ranks (error %.1e)\n", pi,
                  static_cast<unsigned long long>(counts[1]), team.size(), std::abs(pi - M_PI));
    }
    if (std::abs(pi - M_PI) > 0.01) throw std::runtime_error("the estimate is far off");
  });
}
