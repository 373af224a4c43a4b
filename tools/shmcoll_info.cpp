// shmcoll-info: what this shmcoll is and what it will do here, as ompi_info tells of Open MPI:
// version and build, the SIMD level the reductions run at, the machine, every environment
// variable (default, current value, meaning) and which algorithm each collective picks by size.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/environment.hpp"
#include "api/rank_setup.hpp"
#include "coll/machine_tuning.hpp"
#include "coll/tunables.hpp"
#include "ops/reduce.hpp"
#include "shm/layout.hpp"
#include "shmcoll/shmcoll.hpp"
#include "topo/cpu_budget.hpp"
#include "topo/topology.hpp"
#include "topo/tree.hpp"

namespace {

using nlohmann::ordered_json;
using shmcoll::coll::Algorithm;
using shmcoll::coll::algorithm_name;

// Sizes at which the selection table shows each choice; the inline algorithms end at 104 bytes,
// the small and tree ones at 16 KiB by default.
constexpr std::size_t kSizes[] = {8, 104, 105, 1024, 16384, 16385, 262144, 4194304};

struct Selection {
  const char* collective;
  std::vector<std::string> algorithms;  // one per kSizes entry
};

std::vector<Selection> selection_table(int ranks) {
  const shmcoll::topo::Topology& topology = shmcoll::topo::Topology::shared();
  const auto tunables = shmcoll::coll::Tunables::from_env();
  shmcoll::Options options;  // what shmcoll-run does by default: one rank per core, compact
  options.bind = shmcoll::Binding::core;
  const auto where = shmcoll::detail::planned_locations(
      topology, shmcoll::detail::plan_cores(topology, ranks, options, "shmcoll-info"), ranks);
  const auto shape =
      shmcoll::coll::TreeShape::of(shmcoll::topo::Tree::build(where, tunables.team.hierarchy()));
  std::vector<Selection> table = {{"barrier", {}},
                                  {"bcast", {}},
                                  {"reduce (commutative op)", {}},
                                  {"reduce (non-commutative op)", {}},
                                  {"allreduce (commutative op)", {}},
                                  {"allreduce (non-commutative op)", {}},
                                  {"scan, exscan", {}}};
  for (std::size_t bytes : kSizes) {
    auto add = [&](std::size_t row, Algorithm algorithm) {
      table[row].algorithms.push_back(algorithm_name(algorithm));
    };
    add(0, shmcoll::coll::select_barrier(tunables.team, shape));
    add(1, shmcoll::coll::select_bcast(tunables.team, shape, bytes));
    add(2, shmcoll::coll::select_reduce(tunables.team, shape, bytes, true));
    add(3, shmcoll::coll::select_reduce(tunables.team, shape, bytes, false));
    add(4, shmcoll::coll::select_allreduce(tunables.team, shape, bytes, true));
    add(5, shmcoll::coll::select_allreduce(tunables.team, shape, bytes, false));
    add(6, shmcoll::coll::select_scan(tunables.team, shape, bytes));
  }
  return table;
}

ordered_json describe(int ranks) {
  ordered_json info;
  info["version"] = shmcoll::version();
  info["build"] = {{"type", SHMCOLL_BUILD_TYPE},
                   {"compiler", SHMCOLL_COMPILER},
                   {"mpi_layers", SHMCOLL_MPI_LAYERS}};
  info["simd"] = shmcoll::ops::simd_level();
  const shmcoll::topo::Topology& topology = shmcoll::topo::Topology::shared();
  info["topology"] = {{"source", topology.spec().empty() ? "this machine" : topology.spec()},
                      {"packages", topology.count(shmcoll::topo::Level::package)},
                      {"numa_nodes", topology.count(shmcoll::topo::Level::numa)},
                      {"cores", topology.core_count()},
                      {"summary", topology.summary()}};
  const auto tuning = shmcoll::coll::MachineTuning::load();
  info["tuning"] = {{"machine", shmcoll::coll::machine_kind()},
                    {"file", tuning.path},
                    {"status", tuning.status},
                    {"values", tuning.values}};
  const auto budget = shmcoll::topo::CpuBudget::of_this_process();
  const auto tunables = shmcoll::coll::Tunables::from_env();
  const bool shared = ranks > budget.usable();
  info["cpus"] = {{"affinity_mask", budget.allowed.count()},
                  {"cgroup_quota",
                   budget.quota_cpus > 0 ? ordered_json(budget.quota_cpus) : ordered_json(nullptr)},
                  {"usable", budget.usable()},
                  {"unbound_ranks_share_cpus", shared},
                  {"spin_ns", tunables.spin_for(shared)},
                  {"yield_ns", tunables.yield_for(shared)}};
  // What a team of `ranks` holds in /dev/shm (slots can shrink where /dev/shm is short; a heap
  // takes pages only as it is written).
  const auto segment = [&](std::size_t heap_bytes) {
    return shmcoll::shm::SegmentLayout::compute(static_cast<std::uint32_t>(ranks),
                                                tunables.slot_bytes_for(ranks), heap_bytes)
        .total_bytes;
  };
  info["dev_shm"] = {
      {"ranks", ranks},
      {"team_bytes", segment(tunables.heap_bytes)},
      {"mpi_communicator_team_bytes", segment(shmcoll::detail::kMpiTeamHeapBytes)},
      {"mpi_most_teams_per_process", shmcoll::detail::mpi_layer_settings().max_teams},
      {"mpi_pool_teams_per_process", shmcoll::detail::mpi_layer_settings().pool_teams}};
  ordered_json variables = ordered_json::array();
  for (const auto& variable : shmcoll::detail::environment_variables()) {
    const char* current = std::getenv(variable.name);
    variables.push_back({{"name", variable.name},
                         {"group", variable.group},
                         {"default", variable.default_value},
                         {"current", current ? ordered_json(current) : ordered_json(nullptr)},
                         {"meaning", variable.meaning}});
  }
  info["environment"] = variables;
  ordered_json selection;
  selection["ranks"] = ranks;
  selection["bytes"] = kSizes;
  for (const Selection& row : selection_table(ranks)) {
    selection["algorithms"][row.collective] = row.algorithms;
  }
  info["selection"] = selection;
  return info;
}

void print_text(const ordered_json& info) {
  std::printf("shmcoll %s\n", info["version"].get<std::string>().c_str());
  std::printf("  build:     %s, %s, MPI layers: %s\n",
              info["build"]["type"].get<std::string>().c_str(),
              info["build"]["compiler"].get<std::string>().c_str(),
              info["build"]["mpi_layers"].get<std::string>().c_str());
  std::printf("  SIMD:      %s (reduction kernels, chosen when the library loads)\n",
              info["simd"].get<std::string>().c_str());
  std::printf(
      "  topology:  %s, %d cores\n    %s\n", info["topology"]["source"].get<std::string>().c_str(),
      info["topology"]["cores"].get<int>(), info["topology"]["summary"].get<std::string>().c_str());
  std::printf("  tuning:    %s\n    (this machine: %s)\n",
              info["tuning"]["status"].get<std::string>().c_str(),
              info["tuning"]["machine"].get<std::string>().c_str());
  const auto& cpus = info["cpus"];
  const std::string quota = cpus["cgroup_quota"].is_null()
                                ? std::string("no cgroup quota")
                                : "cgroup quota " + std::to_string(cpus["cgroup_quota"].get<int>());
  std::printf(
      "  CPUs:      %d usable (affinity mask %zu, %s): %d unbound ranks %s, waits spin %ld ns, "
      "then yield %ld ns\n",
      cpus["usable"].get<int>(), cpus["affinity_mask"].get<std::size_t>(), quota.c_str(),
      info["selection"]["ranks"].get<int>(),
      cpus["unbound_ranks_share_cpus"].get<bool>() ? "share them" : "each get one",
      cpus["spin_ns"].get<long>(), cpus["yield_ns"].get<long>());
  const auto& shm = info["dev_shm"];
  const auto mib = [&](const char* key) { return shm[key].get<double>() / (1 << 20); };
  std::printf(
      "  /dev/shm:  a team of %d ranks maps %.1f MiB (its heaps take pages as written); an MPI "
      "communicator's team %.1f MiB, at most %d alive and %d kept per process (%.1f MiB)\n",
      shm["ranks"].get<int>(), mib("team_bytes"), mib("mpi_communicator_team_bytes"),
      shm["mpi_most_teams_per_process"].get<int>(), shm["mpi_pool_teams_per_process"].get<int>(),
      mib("mpi_communicator_team_bytes") * (shm["mpi_most_teams_per_process"].get<int>() +
                                            shm["mpi_pool_teams_per_process"].get<int>()));
  std::printf("\nEnvironment (default; current value when set)\n");
  for (const auto& variable : info["environment"]) {
    const std::string current =
        variable["current"].is_null() ? "" : " = " + variable["current"].get<std::string>();
    std::printf("  %-28s [%s] default %s%s\n      %s\n",
                variable["name"].get<std::string>().c_str(),
                variable["group"].get<std::string>().c_str(),
                variable["default"].get<std::string>().c_str(), current.c_str(),
                variable["meaning"].get<std::string>().c_str());
  }
  const auto& selection = info["selection"];
  std::printf("\nAlgorithm selection for %d ranks (one per core, compact), by message bytes\n",
              selection["ranks"].get<int>());
  std::printf("  %-31s", "");
  for (const auto& bytes : selection["bytes"]) std::printf(" %18zu", bytes.get<std::size_t>());
  std::printf("\n");
  for (const auto& [collective, algorithms] : selection["algorithms"].items()) {
    std::printf("  %-31s", collective.c_str());
    for (const auto& algorithm : algorithms) {
      std::printf(" %18s", algorithm.get<std::string>().c_str());
    }
    std::printf("\n");
  }
  std::printf(
      "\nData movement (scatter, gather, allgather, alltoall and their v/w forms) always runs the "
      "exchange engine; blocks from Team::allocate of at least SHMCOLL_DIRECT_MIN bytes are read "
      "directly.\n");
}

// Every environment variable as a markdown table: docs/tunables.md holds this output (a test
// compares the two), so the page and this program cannot drift apart.
void print_variables_markdown() {
  std::printf("| variable | default | meaning | read by |\n|---|---|---|---|\n");
  for (const auto& variable : shmcoll::detail::environment_variables()) {
    std::printf("| `%s` | %s | %s | %s |\n", variable.name, variable.default_value.c_str(),
                variable.meaning, variable.group);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "What this shmcoll is and what it will do on this machine: version, build, SIMD level, "
      "topology, every environment variable with its default and current value, and the "
      "algorithm each collective picks by message size.\n"
      "Example: shmcoll-info -n 8 --json"};
  int ranks = 0;
  bool json = false;
  app.add_option("-n,--np", ranks, "team size for the selection table (default: one per core)")
      ->check(CLI::Range(1, 65536));
  app.add_flag("--json", json, "print everything as one JSON object, for scripts");
  bool variables_markdown = false;
  app.add_flag("--variables-markdown", variables_markdown,
               "print only the environment variables, as the markdown table of docs/tunables.md");
  bool machine = false;
  app.add_flag("--machine", machine,
               "print only this machine's kind, as a tuning file names it (tools/shmcoll-tune)");
  bool tuning_file = false;
  app.add_flag("--tuning-file", tuning_file,
               "print only the path of the tuning file the library reads (empty line: none)");
  CLI11_PARSE(app, argc, argv);
  if (machine) {
    std::printf("%s\n", shmcoll::coll::machine_kind().c_str());
    return 0;
  }
  if (tuning_file) {
    std::printf("%s\n", shmcoll::coll::tuning_file_path().c_str());
    return 0;
  }
  if (variables_markdown) {
    print_variables_markdown();
    return 0;
  }
  try {
    if (ranks == 0) ranks = shmcoll::topo::Topology::shared().core_count();
    const ordered_json info = describe(ranks);
    if (json) {
      std::printf("%s\n", info.dump(2).c_str());
    } else {
      print_text(info);
    }
  } catch (const shmcoll::Error& error) {
    std::fprintf(stderr, "shmcoll-info: %s\n", error.what());
    return 1;
  }
  return 0;
}
