// shmcoll-bench itself: --check must catch a wrong result (also in --vary-data's rotating slots),
// --json/--csv must hold every collective and size of the sweep, --plot must draw a PNG, and --vs
// must run every MPI contender at every size, and its children must die with it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

TEST(BenchHarness, CheckPassesWithVaryingData) {
  const BenchRun run = bench(
      "-n 3 --coll bcast,reduce_scatter,scatterv,alltoallw --sizes 24,8K --iters 2 --check "
      "--vary-data");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("all results correct"), std::string::npos) << run.output;
}

TEST(BenchHarness, CheckCatchesAnInjectedWrongResult) {
  for (const char* vary : {"", " --vary-data"}) {
    for (const char* coll : {"allreduce", "reduce_scatter", "gatherv", "alltoallw"}) {
      const BenchRun run = bench(std::string("-n 2 --coll ") + coll +
                                 " --sizes 64 --iters 2 --check --inject-error" + vary);
      EXPECT_EQ(run.status, 1) << coll << vary << "\n" << run.output;
      EXPECT_NE(run.output.find("MISMATCHES"), std::string::npos) << run.output;
      EXPECT_NE(run.output.find("wrong elements"), std::string::npos) << run.output;
    }
  }
}

// The lines of a table that do not depend on timing: headers without the method's wording or
// the measured references, and each row's size.
std::vector<std::string> table_shape(const std::string& output) {
  std::vector<std::string> shape;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first == "bytes" || first == "#") {
      if (line.find(" samples (") == std::string::npos &&
          line.find("references:") == std::string::npos) {
        shape.push_back(line);
      }
    } else if (!first.empty() && std::isdigit(static_cast<unsigned char>(first[0]))) {
      shape.push_back("row " + first);
    }
  }
  return shape;
}

// OSU's and IMB's method (--method single): the same table, rows and check as the batch method.
TEST(BenchHarness, SingleCallMethodPrintsTheSameTableAndChecks) {
  const std::string args = "-n 3 --coll allreduce,gatherv,bcast --sizes 48,8K --iters 5 --check";
  const BenchRun batch = bench(args + " --method batch");
  const BenchRun single = bench(args + " --method single");
  ASSERT_EQ(batch.status, 0) << batch.output;
  ASSERT_EQ(single.status, 0) << single.output;
  EXPECT_NE(single.output.find("all results correct"), std::string::npos) << single.output;
  EXPECT_NE(single.output.find("each one call after a barrier"), std::string::npos)
      << single.output;
  EXPECT_EQ(table_shape(single.output), table_shape(batch.output)) << single.output;
  const BenchRun wrong =
      bench("-n 2 --coll alltoallw --sizes 64 --iters 3 --check --inject-error --method single");
  EXPECT_EQ(wrong.status, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("MISMATCHES"), std::string::npos) << wrong.output;
}

// A PNG file: its signature, and more than an empty canvas.
void expect_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(8, '\0');
  in.read(head.data(), 8);
  EXPECT_EQ(head, "\x89PNG\r\n\x1a\n") << path;
  EXPECT_GT(std::filesystem::file_size(path), 20'000u) << path;
}

TEST(BenchHarness, PlotDrawsAPng) {
  const std::string png = temp_path("bench-plot-") + ".png";
  const BenchRun run = bench(
      "-n 2 --coll barrier,allreduce,gather --min 8 --max 64K --iters 2 "
      "--plot " +
      png);
  ASSERT_EQ(run.status, 0) << run.output;
  expect_png(png);
  std::filesystem::remove(png);
}

#ifdef SHMCOLL_BENCH_MPIS
// Every MPI this build has a harness for, each alone and with the layer, at every size, beside
// shmcoll: in the table, the JSON and the plot.
TEST(BenchHarness, SideBySideWithEachMpi) {
  const std::string mpis = SHMCOLL_BENCH_MPIS;
  const std::string json_path = temp_path("bench-vs-"), png = temp_path("bench-vs-") + ".png";
  const BenchRun run = bench("-n 2 --coll allreduce,scatter --sizes 8,1K --iters 3 --vs " + mpis +
                             " --check --json " + json_path + " --plot " + png);
  ASSERT_EQ(run.status, 0) << run.output;
  std::set<std::string> expected = {"shmcoll"};
  std::stringstream names(mpis);
  for (std::string mpi; std::getline(names, mpi, ',');) {
    expected.insert({mpi, mpi + "+layer"});
    EXPECT_NE(run.output.find("x_" + mpi + "+layer"), std::string::npos) << run.output;
  }
  const auto doc = nlohmann::json::parse(std::ifstream(json_path));
  std::map<std::string, std::set<std::string>> contenders;
  for (const auto& sweep : doc["collectives"]) {
    contenders[sweep["name"]].insert(sweep["contender"].get<std::string>());
    std::set<std::size_t> sizes;
    for (const auto& row : sweep["rows"]) {
      sizes.insert(row["bytes"].get<std::size_t>());
      EXPECT_GT(row["median_us"].get<double>(), 0) << sweep["contender"];
    }
    EXPECT_EQ(sizes, (std::set<std::size_t>{8, 1024})) << sweep["contender"];
  }
  EXPECT_EQ(contenders["allreduce"], expected);
  EXPECT_EQ(contenders["scatter"], expected);
  expect_png(png);
  std::filesystem::remove(json_path);
  std::filesystem::remove(png);
}
#endif

#ifdef SHMCOLL_BENCH_MPIS
TEST(BenchHarness, SingleCallMethodSideBySideWithEachMpi) {
  const BenchRun run = bench("-n 2 --coll reduce --sizes 8,64K --iters 5 --method single --vs " +
                             std::string(SHMCOLL_BENCH_MPIS));
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("each one call after a barrier"), std::string::npos) << run.output;
  const auto shape = table_shape(run.output);
  EXPECT_EQ(std::count(shape.begin(), shape.end(), "row 65536"), 1) << run.output;
}
#endif

#ifdef SHMCOLL_BENCH_MPIS
// Open MPI with coll/xhc forced runs only the collectives Open MPI says xhc serves (bcast, not
// alltoall, in Open MPI main), and says which it leaves out; an Open MPI that does not say (4.1)
// is refused by name, never measured as if xhc ran.
TEST(BenchHarness, ComponentContendersRunOnlyWhatTheComponentServes) {
  if (std::string(SHMCOLL_BENCH_MPIS).find("openmpi") == std::string::npos) {
    GTEST_SKIP() << "no Open MPI in this build";
  }
  const std::string json_path = temp_path("bench-xhc-");
  const BenchRun run =
      bench("-n 2 --coll bcast,alltoall --sizes 8 --iters 3 --vs xhc --json " + json_path);
  if (run.status == 2) {
    EXPECT_NE(run.output.find("xhc: Open MPI did not say which component serves bcast"),
              std::string::npos)
        << run.output;
    return;
  }
  ASSERT_EQ(run.status, 0) << run.output;
  const auto doc = nlohmann::json::parse(std::ifstream(json_path));
  std::map<std::string, std::set<std::string>> contenders;
  for (const auto& sweep : doc["collectives"]) {
    contenders[sweep["name"]].insert(sweep["contender"].get<std::string>());
  }
  std::filesystem::remove(json_path);
  EXPECT_EQ(contenders["alltoall"], std::set<std::string>{"shmcoll"});
  EXPECT_NE(run.output.find("# xhc: Open MPI serves alltoall by "), std::string::npos)
      << run.output;
  const bool bcast_left_out =
      run.output.find("# xhc: Open MPI serves bcast by ") != std::string::npos;
  EXPECT_EQ(contenders["bcast"].count("xhc"), bcast_left_out ? 0u : 1u) << run.output;
}
#endif

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
    EXPECT_GT(collective["line_exchange_us"].get<double>(), 0) << collective["name"];
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
  EXPECT_EQ(line.rfind("collective,contender,ranks,dtype,op,bytes,median_us", 0), 0u) << line;
  std::set<std::string> rows;
  while (std::getline(csv, line)) rows.insert(line.substr(0, line.find(',', line.find(',') + 1)));
  int lines = 0;
  std::ifstream again(csv_path);
  while (std::getline(again, line)) ++lines;
  EXPECT_EQ(lines, 1 + 2 * static_cast<int>(sizes.size()));
  EXPECT_EQ(rows, (std::set<std::string>{"allgather,shmcoll", "bcast,shmcoll"}));
  std::filesystem::remove(json_path);
  std::filesystem::remove(csv_path);
}

TEST(BenchHarness, BadArgumentsAreRefusedByName) {
  EXPECT_EQ(bench("--coll nonsense").status, 2);
  const std::pair<const char*, const char*> cases[] = {
      {"--min 1K", "--min and --max"},
      {"--vs lam", "--vs: unknown contender lam"},
      {"--vs openmpi --dtype f64", "--vs: the MPI harness measures"},
      {"--vary-data --heap", "--vary-data and --heap"},
  };
  for (const auto& [args, message] : cases) {
    const BenchRun run = bench(args);
    EXPECT_EQ(run.status, 2) << args;
    EXPECT_NE(run.output.find(message), std::string::npos) << args << "\n" << run.output;
  }
}

// The first children of the benchmark (its reference measurement's spinning partner, then a
// team's ranks) die with it when it is killed at any moment, never left spinning as orphans.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> found;
  std::ifstream list("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (pid_t child = 0; list >> child;) found.push_back(child);
  return found;
}

bool alive(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/stat");
  std::string skipped, state;
  // pid (comm) state: a zombie is dead, waiting for its new parent's wait.
  return status >> skipped >> skipped >> state && state != "Z";
}

TEST(BenchHarness, ItsChildrenDieWhenItIsKilled) {
  const pid_t bench_pid = fork();
  if (bench_pid == 0) {
    execl(SHMCOLL_BENCH, SHMCOLL_BENCH, "-n", "2", "--coll", "bcast", "--sizes", "8", "--iters",
          "2", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::vector<pid_t> children;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (children.empty() && std::chrono::steady_clock::now() < give_up) {
    children = children_of(bench_pid);
  }
  kill(bench_pid, SIGKILL);
  waitpid(bench_pid, nullptr, 0);
  ASSERT_FALSE(children.empty()) << "the benchmark never forked";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (const pid_t child : children) {
    while (alive(child) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(alive(child)) << "child " << child << " outlived the killed benchmark";
    if (alive(child)) kill(child, SIGKILL);
  }
}

}  // namespace
