#include "bench_report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace bench {

namespace {

bool reduces(const std::string& collective) {
  return collective.starts_with("reduce") || collective == "allreduce" ||
         collective.ends_with("scan");
}

std::ofstream open_for_writing(const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  return out;
}

}  // namespace

Stats stats_of(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), samples.back()};
}

double bus_factor(const std::string& collective, int ranks) {
  const double n = ranks;
  if (collective == "allreduce") return 2 * (n - 1) / n;
  if (collective.starts_with("reduce_scatter")) return (n - 1) / n;
  // A block per rank pair: a root or every rank moves n - 1 blocks.
  if (collective.starts_with("scatter") || collective.starts_with("gather") ||
      collective.starts_with("allgather") || collective.starts_with("alltoall")) {
    return n - 1;
  }
  return 1;  // bcast, reduce, scan, exscan: the whole vector crosses one link
}

void print_table(const Sweep& sweep, const RunInfo& info) {
  const bool reduction = reduces(sweep.collective);
  std::printf("\n# shmcoll %s, %d ranks, %s%s%s, median of %d samples (each the slowest rank)\n",
              sweep.collective.c_str(), info.ranks, info.dtype.c_str(), reduction ? " " : "",
              reduction ? info.op.c_str() : "", info.iters);
  std::printf("%10s %12s %10s %10s %10s %10s %12s %14s\n", "bytes", "median_us", "min_us", "max_us",
              "algbw_GB/s", "busbw_GB/s", "memcpy_us", "x_line_floor");
  const double factor = bus_factor(sweep.collective, info.ranks);
  for (const Row& row : sweep.rows) {
    const Stats s = stats_of(row.samples);
    const double algbw = s.median > 0 ? row.bytes / s.median / 1e9 : 0.0;
    std::printf("%10zu %12.3f %10.3f %10.3f %10.2f %10.2f %12.3f %14.2f\n", row.bytes,
                s.median * 1e6, s.min * 1e6, s.max * 1e6, algbw, algbw * factor,
                info.refs.memcpy_seconds(row.bytes) * 1e6,
                s.median / info.refs.line_exchange_seconds);
  }
}

void write_json(const std::string& path, const RunInfo& info, const std::vector<Sweep>& sweeps) {
  nlohmann::json root = {{"ranks", info.ranks},
                         {"dtype", info.dtype},
                         {"op", info.op},
                         {"samples", info.iters},
                         {"references",
                          {{"line_round_trip_us", info.refs.line_round_trip_seconds * 1e6},
                           {"line_exchange_us", info.refs.line_exchange_seconds * 1e6}}},
                         {"collectives", nlohmann::json::array()}};
  for (const Sweep& sweep : sweeps) {
    nlohmann::json rows = nlohmann::json::array();
    const double factor = bus_factor(sweep.collective, info.ranks);
    for (const Row& row : sweep.rows) {
      const Stats s = stats_of(row.samples);
      const double algbw = s.median > 0 ? row.bytes / s.median / 1e9 : 0.0;
      rows.push_back({{"bytes", row.bytes},
                      {"median_us", s.median * 1e6},
                      {"min_us", s.min * 1e6},
                      {"max_us", s.max * 1e6},
                      {"algbw_gbps", algbw},
                      {"busbw_gbps", algbw * factor},
                      {"memcpy_us", info.refs.memcpy_seconds(row.bytes) * 1e6}});
    }
    root["collectives"].push_back({{"name", sweep.collective}, {"rows", rows}});
  }
  open_for_writing(path) << root.dump(2) << '\n';
}

void write_csv(const std::string& path, const RunInfo& info, const std::vector<Sweep>& sweeps) {
  auto out = open_for_writing(path);
  out << "collective,ranks,dtype,op,bytes,median_us,min_us,max_us,algbw_gbps,busbw_gbps,"
         "memcpy_us,line_exchange_us\n";
  char line[512];
  for (const Sweep& sweep : sweeps) {
    const double factor = bus_factor(sweep.collective, info.ranks);
    for (const Row& row : sweep.rows) {
      const Stats s = stats_of(row.samples);
      const double algbw = s.median > 0 ? row.bytes / s.median / 1e9 : 0.0;
      std::snprintf(line, sizeof line, "%s,%d,%s,%s,%zu,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n",
                    sweep.collective.c_str(), info.ranks, info.dtype.c_str(), info.op.c_str(),
                    row.bytes, s.median * 1e6, s.min * 1e6, s.max * 1e6, algbw, algbw * factor,
                    info.refs.memcpy_seconds(row.bytes) * 1e6,
                    info.refs.line_exchange_seconds * 1e6);
      out << line;
    }
  }
}

}  // namespace bench
