// What shmcoll-bench reports: the OSU-style table on stdout (one contender) or the side-by-side
// table (with --vs), and the same numbers as JSON or CSV for scripts and plots. Every format
// carries the same rows and the same reference lines.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "bench_reference.hpp"

namespace bench {

struct Row {
  std::size_t bytes;
  std::vector<double> samples;  // seconds per call, each the slowest rank's
};

struct Sweep {
  std::string collective;
  std::string contender;         // "shmcoll", or an MPI contender's name (mpi_contender.hpp)
  double line_exchange_seconds;  // the floor, measured just before this collective's sweep
  std::vector<Row> rows;
};

// An MPI's own collectives, as opposed to shmcoll natively or through its MPI layer.
bool is_plain_mpi(const std::string& contender);

struct RunInfo {
  int ranks;
  std::string dtype, op;
  int iters;
  References refs;
  bool single_call = false;  // samples are single calls between barriers, not batches
  std::string command;       // how this run was started, for whoever reads its JSON
  std::string started;       // when, UTC (ISO 8601)
  std::string label;         // the setting this run stands for in a table (--label), or empty
  std::string bind_to;       // how ranks were bound (--bind-to)
  int online_cpus = 0;       // the machine's, so a table says what it was measured on
  std::vector<std::pair<std::string, std::string>> tunables;  // the SHMCOLL_* variables set
};
// How one sample was taken, for table headers.
const char* sample_description(const RunInfo& info);

struct Stats {
  double median, min, max;
  double p99;  // the 99th percentile: a call the machine held back shows here, not in the median
};
Stats stats_of(std::vector<double> samples);

// nccl-tests' bus bandwidth: algorithm bandwidth (bytes / time) times the share of the bytes
// each rank must send or receive over the busiest link, so that every collective's figure
// compares with the hardware's peak. Sizes follow this harness: the vector for reductions, the
// block per rank pair for data movement.
double bus_factor(const std::string& collective, int ranks);

// What every format reports for one row: the sample statistics and both bandwidths (GB/s).
struct Figures {
  Stats seconds;
  double algbw_gbps, busbw_gbps;
};
Figures figures_of(const Row& row, const std::string& collective, int ranks);

void print_table(const Sweep& sweep, const RunInfo& info);
// One collective, every contender's sweep over the same sizes (shmcoll's first): each median,
// and each non-MPI contender's speed-up over the faster plain MPI.
void print_comparison(const std::vector<Sweep>& contenders, const RunInfo& info);
// Throws std::runtime_error naming the file when it cannot be written.
void write_json(const std::string& path, const RunInfo& info, const std::vector<Sweep>& sweeps);
void write_csv(const std::string& path, const RunInfo& info, const std::vector<Sweep>& sweeps);

}  // namespace bench
