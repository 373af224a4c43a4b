// Reference lines measured in the same run as the collectives: the cost of moving one cache line
// between two cores (the small-message floor) and memcpy of a message's bytes.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "bench_timing.hpp"

namespace bench {

struct References {
  double line_round_trip_seconds = 0;  // ping-pong: A writes, B answers, A sees the answer
  double line_exchange_seconds = 0;    // both write their line, then read the other's
  std::map<std::size_t, double> memcpy_by_size;
  double memcpy_seconds(std::size_t bytes) const {
    auto found = memcpy_by_size.find(bytes);
    return found == memcpy_by_size.end() ? 0.0 : found->second;
  }
};

// Forks one helper process bound to the second core; medians of repeated measurements.
References measure_references(const std::vector<std::size_t>& memcpy_sizes);
// The line exchange alone (about 50 ms), for a collective's sweep: this VM's cross-core latency
// changes by up to 5x within minutes, so the floor must be measured next to what it is compared
// with.
double measure_line_exchange();

}  // namespace bench
