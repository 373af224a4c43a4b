#include "bench_plot.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "subprocess.hpp"

namespace bench {

namespace {

namespace fs = std::filesystem;

// Gnuplot takes single-quoted strings literally except for the quote itself, doubled.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The collectives in the order they were run, each with its contenders' sweeps.
std::vector<std::vector<const Sweep*>> by_collective(const std::vector<Sweep>& sweeps) {
  std::vector<std::vector<const Sweep*>> groups;
  for (const Sweep& sweep : sweeps) {
    if (sweep.rows.empty() || sweep.rows.front().bytes == 0) continue;  // barrier: no sizes
    if (groups.empty() || groups.back().front()->collective != sweep.collective)
      groups.emplace_back();
    groups.back().push_back(&sweep);
  }
  return groups;
}

// One hue per MPI, dashed when shmcoll's layer is preloaded into it; shmcoll bold.
std::string style(const std::string& contender) {
  std::string look = "lw 1.5 lc '#555555'";
  if (contender == "shmcoll") look = "lw 2.5 lc '#1f3a93'";
  if (contender.starts_with("openmpi")) look = "lw 1.5 lc '#2ca02c'";
  if (contender.starts_with("mpich")) look = "lw 1.5 lc '#d62728'";
  if (!is_plain_mpi(contender) && contender != "shmcoll") look += " dt 2";
  return look + " title " + quoted(contender);
}

std::string data_file(const fs::path& dir, const std::string& name) {
  return (dir / name).string();
}

}  // namespace

void require_gnuplot() {
  if (run_program({"gnuplot", "--version"}).status != 0) {
    throw std::runtime_error("--plot needs gnuplot (Debian package gnuplot-nox)");
  }
}

void write_plot(const std::string& png_path, const RunInfo& info,
                const std::vector<Sweep>& sweeps) {
  const auto groups = by_collective(sweeps);
  if (groups.empty()) throw std::runtime_error("--plot: no collective with sizes to plot");
  char dir_template[] = "/tmp/shmcoll-plot-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) throw std::runtime_error("--plot: cannot make a temp dir");
  const fs::path dir = dir_template;

  std::ofstream refs(dir / "refs.dat");
  for (const auto& [bytes, seconds] : info.refs.memcpy_by_size) {
    if (bytes > 0 && seconds > 0) {
      refs << bytes << ' ' << seconds * 1e6 << ' ' << bytes / seconds / 1e9 << '\n';
    }
  }
  refs.close();

  std::ostringstream script;
  script << "set terminal pngcairo size 1400," << 380 * groups.size() << " font ',10'\n"
         << "set output " << quoted(png_path) << "\n"
         << "set multiplot layout " << groups.size() << ",2 title "
         << quoted(std::to_string(info.ranks) + " ranks, " + info.dtype + " " + info.op +
                   ", median of " + std::to_string(info.iters) +
                   " samples per point; x: message bytes (the vector for reductions, the block "
                   "per rank pair otherwise)")
         << "\nset logscale x 2\nset logscale y 10\nset xtics 1,4\nset format x '%.0b%B'\n"
         << "set grid\nset xrange [" << groups.front().front()->rows.front().bytes / 1.5 << ":"
         << groups.front().front()->rows.back().bytes * 1.5 << "]\n"
         << "set key outside bottom center horizontal font ',9'\n"
         << "set termoption noenhanced\nset style data linespoints\nset pointsize 0.6\n";
  int file_number = 0;
  for (const auto& group : groups) {
    std::vector<std::string> files;
    const double floor_us = group.front()->line_exchange_seconds * 1e6;
    double fastest = floor_us * 1e-6;  // the latency axis starts below both
    for (const Sweep* sweep : group) {
      files.push_back(data_file(dir, std::to_string(file_number++) + ".dat"));
      std::ofstream out(files.back());
      for (const Row& row : sweep->rows) {
        const Figures f = figures_of(row, sweep->collective, info.ranks);
        fastest = std::min(fastest, f.seconds.median);
        out << row.bytes << ' ' << f.seconds.median * 1e6 << ' ' << f.busbw_gbps << '\n';
      }
    }
    const std::string& name = group.front()->collective;
    const std::string refs_file = quoted(data_file(dir, "refs.dat"));
    // Not down to memcpy of a few bytes, which would squeeze every contender into the top.
    script << "set title " << quoted(name + ": latency") << "\nset yrange [" << fastest * 1e6 / 3
           << ":*]\nset ylabel 'us per call'\nplot ";
    for (std::size_t i = 0; i < group.size(); ++i) {
      script << quoted(files[i]) << " using 1:2 " << style(group[i]->contender) << ", ";
    }
    script << refs_file << " using 1:2 with lines dt 2 lc 'gray40' title 'memcpy of the bytes', "
           << floor_us << " with lines dt 3 lc 'black' title 'cache-line exchange'\n";
    script << "set title " << quoted(name + ": bus bandwidth") << "\nset yrange [*:*]\n"
           << "set ylabel 'GB/s (nccl-tests bus bandwidth)'\nplot ";
    for (std::size_t i = 0; i < group.size(); ++i) {
      script << quoted(files[i]) << " using 1:3 " << style(group[i]->contender) << ", ";
    }
    script << refs_file << " using 1:3 with lines dt 2 lc 'gray40' title 'memcpy'\n";
  }
  script << "unset multiplot\n";
  const fs::path script_path = dir / "plot.gp";
  std::ofstream(script_path) << script.str();
  const Finished gnuplot = run_program({"gnuplot", script_path.string()});
  fs::remove_all(dir);
  if (gnuplot.status != 0) {
    throw std::runtime_error("--plot: gnuplot failed with status " +
                             std::to_string(gnuplot.status) + " writing " + png_path);
  }
}

}  // namespace bench
