// shmcoll-bench --plot: per collective, latency (log-log) and bus bandwidth against message size
// for every contender, with the reference lines of the same run (memcpy of the message; the
// two-rank cache-line exchange). Drawn by gnuplot (Debian's gnuplot-nox), as a PNG.
#pragma once

#include <string>
#include <vector>

#include "bench_report.hpp"

namespace bench {

// Throws std::runtime_error when gnuplot is missing or fails, naming --plot.
void require_gnuplot();
void write_plot(const std::string& png_path, const RunInfo& info, const std::vector<Sweep>& sweeps);

}  // namespace bench
