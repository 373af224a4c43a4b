// The clock and the median every benchmark here reports with (header-only, so the small
// benchmark programs that link only the library share them too).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace bench {

// Seconds on the monotonic clock, for every timing in the benchmarks.
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The upper median of `samples` (which must not be empty).
inline double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace bench
