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

bool is_plain_mpi(const std::string& contender) {
  return contender != "shmcoll" && contender.find('+') == std::string::npos;
}

Stats stats_of(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), samples.back(),
          samples[(samples.size() - 1) * 99 / 100]};
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

Figures figures_of(const Row& row, const std::string& collective, int ranks) {
  const Stats s = stats_of(row.samples);
  const double algbw = s.median > 0 ? row.bytes / s.median / 1e9 : 0.0;
  return {s, algbw, algbw * bus_factor(collective, ranks)};
}

const char* sample_description(const RunInfo& info) {
  return info.single_call ? "each one call after a barrier, the slowest rank's"
                          : "each a batch per call, the slowest rank's";
}

void print_table(const Sweep& sweep, const RunInfo& info) {
  const bool reduction = reduces(sweep.collective);
  std::printf("\n# %s %s, %d ranks, %s%s%s, median of %d samples (%s)\n", sweep.contender.c_str(),
              sweep.collective.c_str(), info.ranks, info.dtype.c_str(), reduction ? " " : "",
              reduction ? info.op.c_str() : "", info.iters, sample_description(info));
  std::printf("%10s %12s %10s %10s %10s %10s %12s %14s\n", "bytes", "median_us", "min_us", "max_us",
              "algbw_GB/s", "busbw_GB/s", "memcpy_us", "x_line_floor");
  for (const Row& row : sweep.rows) {
    const Figures f = figures_of(row, sweep.collective, info.ranks);
    const Stats& s = f.seconds;
    std::printf("%10zu %12.3f %10.3f %10.3f %10.2f %10.2f %12.3f %14.2f\n", row.bytes,
                s.median * 1e6, s.min * 1e6, s.max * 1e6, f.algbw_gbps, f.busbw_gbps,
                info.refs.memcpy_seconds(row.bytes) * 1e6, s.median / sweep.line_exchange_seconds);
  }
}

void print_comparison(const std::vector<Sweep>& contenders, const RunInfo& info) {
  const std::string& collective = contenders.front().collective;
  const bool reduction = reduces(collective);
  std::printf(
      "\n# %s, %d ranks, %s%s%s: median us of %d samples (%s) per contender;\n"
      "# x_C = the faster plain MPI's median / C's (above 1: C is faster); x_floor = shmcoll / "
      "the\n"
      "# two-rank cache-line exchange (%.3f us, measured just before this collective)\n",
      collective.c_str(), info.ranks, info.dtype.c_str(), reduction ? " " : "",
      reduction ? info.op.c_str() : "", info.iters, sample_description(info),
      contenders.front().line_exchange_seconds * 1e6);
  std::printf("%10s", "bytes");
  for (const Sweep& sweep : contenders) std::printf(" %14s", sweep.contender.c_str());
  for (const Sweep& sweep : contenders) {
    if (!is_plain_mpi(sweep.contender)) std::printf(" %16s", ("x_" + sweep.contender).c_str());
  }
  std::printf(" %9s %11s\n", "x_floor", "memcpy_us");
  for (std::size_t r = 0; r < contenders.front().rows.size(); ++r) {
    const std::size_t bytes = contenders.front().rows[r].bytes;
    std::vector<double> medians;  // 0 where a contender has no row of this size (it failed)
    double best_mpi = 0;
    std::printf("%10zu", bytes);
    for (const Sweep& sweep : contenders) {
      const auto row = std::find_if(sweep.rows.begin(), sweep.rows.end(),
                                    [&](const Row& candidate) { return candidate.bytes == bytes; });
      const double median = row == sweep.rows.end() ? 0 : stats_of(row->samples).median;
      medians.push_back(median);
      if (median == 0) {
        std::printf(" %14s", "-");
        continue;
      }
      std::printf(" %14.3f", median * 1e6);
      if (is_plain_mpi(sweep.contender) && (best_mpi == 0 || median < best_mpi)) best_mpi = median;
    }
    for (std::size_t c = 0; c < contenders.size(); ++c) {
      if (is_plain_mpi(contenders[c].contender)) continue;
      if (best_mpi == 0 || medians[c] == 0) {
        std::printf(" %16s", "-");
      } else {
        std::printf(" %16.2f", best_mpi / medians[c]);
      }
    }
    std::printf(" %9.2f %11.3f\n", medians.front() / contenders.front().line_exchange_seconds,
                info.refs.memcpy_seconds(bytes) * 1e6);
  }
}

void write_json(const std::string& path, const RunInfo& info, const std::vector<Sweep>& sweeps) {
  nlohmann::json root = {{"ranks", info.ranks},
                         {"dtype", info.dtype},
                         {"op", info.op},
                         {"samples", info.iters},
                         {"method", info.single_call ? "single" : "batch"},
                         {"command", info.command},
                         {"started", info.started},
                         {"label", info.label},
                         {"bind_to", info.bind_to},
                         {"online_cpus", info.online_cpus},
                         {"tunables", nlohmann::json::object()},
                         {"references",
                          {{"line_round_trip_us", info.refs.line_round_trip_seconds * 1e6},
                           {"line_exchange_us", info.refs.line_exchange_seconds * 1e6}}},
                         {"collectives", nlohmann::json::array()}};
  for (const auto& [name, value] : info.tunables) root["tunables"][name] = value;
  for (const Sweep& sweep : sweeps) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Row& row : sweep.rows) {
      const Figures f = figures_of(row, sweep.collective, info.ranks);
      rows.push_back({{"bytes", row.bytes},
                      {"median_us", f.seconds.median * 1e6},
                      {"min_us", f.seconds.min * 1e6},
                      {"max_us", f.seconds.max * 1e6},
                      {"p99_us", f.seconds.p99 * 1e6},
                      {"algbw_gbps", f.algbw_gbps},
                      {"busbw_gbps", f.busbw_gbps},
                      {"memcpy_us", info.refs.memcpy_seconds(row.bytes) * 1e6}});
    }
    root["collectives"].push_back({{"name", sweep.collective},
                                   {"contender", sweep.contender},
                                   {"line_exchange_us", sweep.line_exchange_seconds * 1e6},
                                   {"rows", rows}});
  }
  open_for_writing(path) << root.dump(2) << '\n';
}

void write_csv(const std::string& path, const RunInfo& info, const std::vector<Sweep>& sweeps) {
  auto out = open_for_writing(path);
  out << "collective,contender,ranks,dtype,op,bytes,median_us,min_us,max_us,algbw_gbps,busbw_gbps,"
         "memcpy_us,line_exchange_us\n";
  char line[512];
  for (const Sweep& sweep : sweeps) {
    for (const Row& row : sweep.rows) {
      const Figures f = figures_of(row, sweep.collective, info.ranks);
      const Stats& s = f.seconds;
      std::snprintf(line, sizeof line, "%s,%s,%d,%s,%s,%zu,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n",
                    sweep.collective.c_str(), sweep.contender.c_str(), info.ranks,
                    info.dtype.c_str(), info.op.c_str(), row.bytes, s.median * 1e6, s.min * 1e6,
                    s.max * 1e6, f.algbw_gbps, f.busbw_gbps,
                    info.refs.memcpy_seconds(row.bytes) * 1e6, sweep.line_exchange_seconds * 1e6);
      out << line;
    }
  }
}

}  // namespace bench
