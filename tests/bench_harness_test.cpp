// shmcoll-bench itself: --check must catch a wrong result, and --json/--csv must hold every
// collective and size of the sweep (the plots and the side-by-side tables read them).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "test_support.hpp"

namespace {

using BenchRun = shmcoll::testing::CommandResult;

// The harness's exit status and everything it printed.
BenchRun bench(const std::string& args) {
  return shmcoll::testing::run_command(std::string(SHMCOLL_BENCH) + " " + args,
                                       shmcoll::testing::Capture::both);
}

std::string temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + std::to_string(getpid()));
}

TEST(BenchHarness, CheckPassesCorrectResults) {
  const BenchRun run =
      bench("-n 3 --coll allreduce,scan,alltoallv --sizes 48,4K --iters 2 --check");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("all results correct"), std::string::npos) << run.output;
}

TEST(BenchHarness, CheckCatchesAnInjectedWrongResult) {
  for (const char* coll : {"allreduce", "reduce_scatter", "gatherv", "alltoallw"}) {
    const BenchRun run =
        bench(std::string("-n 2 --coll ") + coll + " --sizes 64 --iters 2 --check --inject-error");
    EXPECT_EQ(run.status, 1) << coll << "\n" << run.output;
    EXPECT_NE(run.output.find("MISMATCHES"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("wrong elements"), std::string::npos) << run.output;
  }
}

TEST(BenchHarness, JsonAndCsvHoldEverySize) {
  const std::string json_path = temp_path("bench-json-"), csv_path = temp_path("bench-csv-");
  const BenchRun run = bench("-n 2 --coll bcast,allgather --min 8 --max 1K --iters 2 --json " +
                             json_path + " --csv " + csv_path);
  ASSERT_EQ(run.status, 0) << run.output;
  const std::set<std::size_t> sizes = {8, 16, 32, 64, 128, 256, 512, 1024};

  const auto doc = nlohmann::json::parse(std::ifstream(json_path));
  EXPECT_EQ(doc["ranks"], 2);
  EXPECT_GT(doc["references"]["line_exchange_us"].get<double>(), 0);
  ASSERT_EQ(doc["collectives"].size(), 2u);
  for (const auto& collective : doc["collectives"]) {
    std::set<std::size_t> seen;
    for (const auto& row : collective["rows"]) {
      seen.insert(row["bytes"].get<std::size_t>());
      EXPECT_LE(row["min_us"].get<double>(), row["median_us"].get<double>());
      EXPECT_LE(row["median_us"].get<double>(), row["max_us"].get<double>());
      EXPECT_GT(row["algbw_gbps"].get<double>(), 0);
    }
    EXPECT_EQ(seen, sizes) << collective["name"];
  }

  std::ifstream csv(csv_path);
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("collective,ranks,dtype,op,bytes,median_us", 0), 0u) << line;
  std::set<std::string> rows;
  while (std::getline(csv, line)) rows.insert(line.substr(0, line.find(',', line.find(',') + 1)));
  int lines = 0;
  std::ifstream again(csv_path);
  while (std::getline(again, line)) ++lines;
  EXPECT_EQ(lines, 1 + 2 * static_cast<int>(sizes.size()));
  EXPECT_EQ(rows, (std::set<std::string>{"allgather,2", "bcast,2"}));
  std::filesystem::remove(json_path);
  std::filesystem::remove(csv_path);
}

TEST(BenchHarness, BadArgumentsAreRefusedByName) {
  EXPECT_EQ(bench("--coll nonsense").status, 2);
  const BenchRun run = bench("--min 1K");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.output.find("--min and --max"), std::string::npos) << run.output;
}

}  // namespace
