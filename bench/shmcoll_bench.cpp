// shmcoll-bench: OSU-style latency tables for shmcoll's collectives on N forked ranks, alone or
// side by side with Open MPI and MPICH (--vs), with reference lines, JSON/CSV and plots.
//
// Methods, the same for every contender (mpi_coll_bench.c is the MPI side). --method batch (the
// default): per size 5 warm-up
// calls, then 10 timed calls size a batch of back-to-back calls lasting about 200 us
// (harness_method.h); rank 0's batch length is agreed, one batch runs untimed, then --iters
// samples. A sample is one batch between barriers: each rank times its batch, and the sample is
// the slowest rank's time per call. --method single, as OSU and IMB users measure: after the
// warm-up, each sample is one call after a barrier, the slowest rank's time, on buffers fresh
// from calloc that the harness never writes. We report the
// median and min/max of the samples, with two reference lines measured in the same run: the
// cache-line exchange between two ranks (the small-message floor) and memcpy of the same bytes.
// With --vs the contenders take turns at every size, so drift on this shared machine hits all
// alike.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "bench_plot.hpp"
#include "bench_report.hpp"
#include "coll/machine_tuning.hpp"
#include "mpi_contender.hpp"
#include "native_bench.hpp"

namespace {

// The contenders that run `coll`: a contender that forces an Open MPI component (xhc, acoll) runs
// only the collectives that component serves, as Open MPI reports it; the others always run.
std::vector<bench::MpiContender> contenders_serving(const std::vector<bench::MpiContender>& mpis,
                                                    const std::string& coll) {
  std::vector<bench::MpiContender> serving;
  for (const bench::MpiContender& mpi : mpis) {
    if (!mpi.forced_component.empty()) {
      const std::string component = bench::serving_component(mpi, coll);
      if (component != mpi.forced_component) {
        std::printf("# %s: Open MPI serves %s by %s, not %s: not measured\n", mpi.name.c_str(),
                    coll.c_str(), component.c_str(), mpi.forced_component.c_str());
        continue;
      }
    }
    serving.push_back(mpi);
  }
  return serving;
}

using shmcoll::Dtype;
using shmcoll::Op;

std::size_t parse_size(const std::string& text) {
  std::size_t pos = 0;
  std::size_t value = std::stoull(text, &pos);
  const std::string suffix = text.substr(pos);
  if (suffix == "K" || suffix == "k")
    value <<= 10;
  else if (suffix == "M" || suffix == "m")
    value <<= 20;
  else if (suffix == "G" || suffix == "g")
    value <<= 30;
  else if (!suffix.empty())
    throw std::invalid_argument("bad size suffix in " + text);
  return value;
}

// On a terminal, one line on stderr that rewrites itself: a bar of the sizes done so far for this
// collective, and the collective, size and contender running now.
void show_progress(const std::string& coll, std::size_t bytes, const std::string& contender,
                   std::size_t done, std::size_t total) {
  static const bool terminal = isatty(STDERR_FILENO) != 0;
  if (!terminal) return;
  constexpr std::size_t kWidth = 20;
  const std::size_t filled = kWidth * done / total;
  std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu %s %zu bytes, %s", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done + 1, total, coll.c_str(), bytes,
               contender.c_str());
}

void clear_progress() {
  if (isatty(STDERR_FILENO) != 0) std::fprintf(stderr, "\r\033[K");
}

struct Sizes {
  std::string list, min, max;
};

std::vector<std::size_t> sizes_of(const Sizes& given) {
  if (given.min.empty() != given.max.empty()) {
    throw std::invalid_argument("--min and --max go together");
  }
  std::vector<std::size_t> sizes;
  if (given.min.empty()) {
    for (const auto& size : CLI::detail::split(given.list, ',')) sizes.push_back(parse_size(size));
    return sizes;
  }
  const std::size_t low = parse_size(given.min), high = parse_size(given.max);
  if (low == 0 || low > high)
    throw std::invalid_argument("--min must be at least 1 and at most --max");
  for (std::size_t size = low; size <= high; size *= 2) sizes.push_back(size);
  return sizes;
}

std::vector<std::string> collectives_of(const std::string& list) {
  const auto& known = bench::collective_names();
  std::vector<std::string> names;
  for (const auto& name : CLI::detail::split(list, ',')) {
    if (name == "all") {
      names.insert(names.end(), known.begin(), known.end());
    } else if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw std::invalid_argument("--coll: unknown collective " + name);
    } else {
      names.push_back(name);
    }
  }
  return names;
}

// The harness fills and checks plain arithmetic types with sum, prod, min and max.
void parse_dtype_and_op(const std::string& dtype, const std::string& op,
                        bench::NativeConfig& config) {
  bool known_dtype = false, known_op = false;
  for (int d = 0; d <= static_cast<int>(Dtype::f64); ++d) {
    if (dtype == shmcoll::dtype_name(static_cast<Dtype>(d)))
      config.dtype = static_cast<Dtype>(d), known_dtype = true;
  }
  for (int o = 0; o <= static_cast<int>(Op::max); ++o) {
    const Op candidate(static_cast<Op::Kind>(o));
    if (op == shmcoll::op_name(candidate)) config.op = candidate, known_op = true;
  }
  if (!known_dtype) throw std::invalid_argument("--dtype: unknown type " + dtype);
  if (!known_op) throw std::invalid_argument("--op: unknown operation " + op);
}

std::string command_line(int argc, char** argv) {
  std::string line = "shmcoll-bench";
  for (int a = 1; a < argc; ++a) line += std::string(" ") + argv[a];
  return line;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The SHMCOLL_* variables this run was started with, and the values the machine's tuning file
// gives the rest, sorted, for the JSON: a run's setting is part of what it measured.
std::vector<std::pair<std::string, std::string>> shmcoll_tunables(
    const shmcoll::coll::MachineTuning& tuning) {
  std::vector<std::pair<std::string, std::string>> set;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::size_t equals = text.find('=');
    if (text.rfind("SHMCOLL_", 0) == 0 && equals != std::string::npos) {
      set.emplace_back(text.substr(0, equals), text.substr(equals + 1));
    }
  }
  for (const auto& [name, value] : tuning.values) {
    if (std::getenv(name.c_str()) == nullptr) set.emplace_back(name, value + " (tuning file)");
  }
  std::sort(set.begin(), set.end());
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Latency of shmcoll collectives on N forked ranks, alone or beside Open MPI and MPICH, with "
      "reference lines.\n"
      "Examples: shmcoll-bench -n 2 --coll allreduce --sizes 8,1K,1M --check\n"
      "          shmcoll-bench -n 2 --coll allreduce,alltoall --min 8 --max 4M --vs openmpi,mpich "
      "--plot out.png"};
  // A later option wins, so scripts with defaults (tools/run-demo) can pass the user's on.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  bench::NativeConfig config;
  std::string colls = "allreduce", dtype = "f32", op = "sum", vs, json_path, csv_path, plot_path,
              label;
  Sizes sizes{"8,64,1K,8K,64K,256K,1M,4M", "", ""};
  app.add_option("-n,--np", config.ranks, "ranks")->check(CLI::Range(1, 256));
  app.add_option("--coll", colls,
                 "comma list of collectives (barrier, bcast, reduce, allreduce, "
                 "reduce_scatter[_block], scan, exscan, scatter[v], gather[v], allgather[v], "
                 "alltoall[v|w]), or all; sizes are vectors for reductions, blocks per rank pair "
                 "otherwise");
  app.add_option("--sizes", sizes.list, "comma list of message sizes in bytes (K, M suffixes)");
  app.add_option("--min", sizes.min, "smallest size of a power-of-two sweep (with --max)");
  app.add_option("--max", sizes.max, "largest size of a power-of-two sweep (with --min)");
  app.add_option("--dtype", dtype, "i8..i64, u8..u64, f32, f64");
  app.add_option("--op", op, "sum, prod, min, max");
  app.add_option("--iters", config.iters, "samples per size")->check(CLI::Range(1, 100000));
  std::string method = "batch";
  app.add_option("--method", method,
                 "batch: a sample is a batch of back-to-back calls between barriers (per call); "
                 "single: a sample is one call after a barrier, on buffers fresh from calloc, as "
                 "OSU and IMB measure (use more --iters)")
      ->check(CLI::IsMember({"batch", "single"}));
  app.add_flag("--written", config.written,
               "with --method single: write the buffers once before timing, as OSU does, so "
               "send pages hold data rather than the kernel's zero page");
  app.add_flag("--check", config.check, "verify every shmcoll result; exit 1 on a mismatch");
  app.add_flag("--heap", config.heap,
               "send buffers from Team::allocate, so receivers may copy straight out of them");
  app.add_flag("--vary-data", config.vary_data,
               "each call of a batch uses the next of several buffers (32 MiB in all), each with "
               "different values, so no call finds the last one's data in cache");
  app.add_option("--vs", vs,
                 "comma list of MPIs (openmpi, mpich) to run beside shmcoll, each alone and with "
                 "shmcoll's layer preloaded, taking turns at every size (f32 sum only); xhc and "
                 "acoll: Open MPI alone with that component forced (Open MPI 6, its main branch), "
                 "on the collectives Open MPI says it serves");
  app.add_option("--json", json_path, "also write every row to this JSON file");
  app.add_option("--label", label,
                 "a name for this run's setting, recorded in the JSON (tables of several settings "
                 "tell runs apart by it)");
  app.add_option("--csv", csv_path, "also write every row to this CSV file");
  app.add_option("--plot", plot_path,
                 "also draw latency and bandwidth per collective (PNG, gnuplot)");
  app.add_option("--bind-to", config.bind_to,
                 "core, none, or auto: each rank on its own core when the ranks fit the cores "
                 "(shmcoll only; where ranks' memory lives is SHMCOLL_PLACEMENT)")
      ->check(CLI::IsMember({"auto", "core", "none"}));
  app.add_flag("--inject-error", config.inject_error,
               "corrupt one result element before --check reads it (tests the harness)");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::vector<std::string> collectives = collectives_of(colls);
    const std::vector<std::size_t> message_sizes = sizes_of(sizes);
    parse_dtype_and_op(dtype, op, config);
    config.single_call = method == "single";
    if (config.written && !config.single_call) {
      throw std::invalid_argument(
          "--written applies to --method single (the batch method always writes its buffers)");
    }
    if (config.heap && config.vary_data) {
      throw std::invalid_argument("--vary-data and --heap cannot be combined");
    }
    std::vector<bench::MpiContender> mpis;
    if (!vs.empty()) {
      if (dtype != "f32" || op != "sum") {
        throw std::invalid_argument("--vs: the MPI harness measures --dtype f32 --op sum only");
      }
      mpis = bench::mpi_contenders(CLI::detail::split(vs, ','), config.ranks);
    }
    if (!plot_path.empty()) bench::require_gnuplot();

    const bench::References refs = bench::measure_references(message_sizes);
    std::printf("# references: cache-line round trip %.3f us, two-rank line exchange %.3f us\n",
                refs.line_round_trip_seconds * 1e6, refs.line_exchange_seconds * 1e6);
    const auto tuning = shmcoll::coll::MachineTuning::load();
    std::printf("# tuning: %s\n", tuning.status.c_str());
    const bench::RunInfo info{config.ranks,
                              shmcoll::dtype_name(config.dtype),
                              shmcoll::op_name(config.op),
                              config.iters,
                              refs,
                              config.single_call,
                              command_line(argc, argv),
                              utc_now(),
                              label,
                              config.bind_to,
                              static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)),
                              shmcoll_tunables(tuning)};
    std::vector<bench::Sweep> sweeps;
    int mismatches = 0;
    for (const std::string& coll : collectives) {
      const std::vector<std::size_t> coll_sizes =
          coll == "barrier" ? std::vector<std::size_t>{0} : message_sizes;
      const double floor = bench::measure_line_exchange();
      std::vector<bench::Sweep> group{{coll, "shmcoll", floor, {}}};
      const std::vector<bench::MpiContender> serving = contenders_serving(mpis, coll);
      for (const auto& mpi : serving) group.push_back({coll, mpi.name, floor, {}});
      for (std::size_t s = 0; s < coll_sizes.size(); ++s) {
        const std::size_t bytes = coll_sizes[s];
        show_progress(coll, bytes, "shmcoll", s, coll_sizes.size());
        group[0].rows.push_back(bench::run_native(config, coll, bytes, mismatches));
        for (std::size_t m = 0; m < serving.size(); ++m) {
          show_progress(coll, bytes, serving[m].name, s, coll_sizes.size());
          try {
            group[m + 1].rows.push_back(bench::run_mpi(serving[m], coll, bytes, config.iters,
                                                       config.vary_data, config.single_call,
                                                       config.written));
          } catch (const std::runtime_error& failed) {
            // A forced component that fails at a size (xhc's reduce without XPMEM crashes from
            // 8 KiB) is a finding to report, not a reason to lose the other contenders' sweep.
            if (serving[m].forced_component.empty()) throw;
            clear_progress();
            std::printf("# %s: not measured at %zu bytes: %s\n", serving[m].name.c_str(), bytes,
                        failed.what());
          }
        }
      }
      clear_progress();
      if (mpis.empty())
        bench::print_table(group[0], info);
      else
        bench::print_comparison(group, info);
      std::fflush(stdout);
      sweeps.insert(sweeps.end(), group.begin(), group.end());
    }
    if (!json_path.empty()) bench::write_json(json_path, info, sweeps);
    if (!csv_path.empty()) bench::write_csv(csv_path, info, sweeps);
    if (!plot_path.empty()) bench::write_plot(plot_path, info, sweeps);
    if (config.check) {
      std::printf("# check: %s\n", mismatches == 0 ? "all results correct" : "MISMATCHES");
      return mismatches == 0 ? 0 : 1;
    }
    return 0;
  } catch (const std::exception& error) {
    clear_progress();
    std::fprintf(stderr, "shmcoll-bench: %s\n", error.what());
    return 2;
  }
}
