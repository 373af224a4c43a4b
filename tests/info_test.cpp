// shmcoll-info: its environment list is exactly the set of variables the sources read, its JSON
// holds every section, and the library reports its version at run time.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "shmcoll/shmcoll.h"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

// Every "SHMCOLL_..." string literal in the library's and the programs' sources: the names of
// the environment variables they read (they name no other strings so).
std::set<std::string> variables_in_sources() {
  const std::regex literal("\"(SHMCOLL_[A-Z0-9_]+)\"");
  std::set<std::string> names;
  for (const char* dir : {"src", "tools", "bench"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             std::string(SHMCOLL_SOURCE_DIR) + "/" + dir)) {
      const std::string ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".c") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string source = text.str();
      for (std::sregex_iterator it(source.begin(), source.end(), literal), end; it != end; ++it) {
        names.insert((*it)[1]);
      }
    }
  }
  return names;
}

nlohmann::json info_json(const std::string& arguments = "") {
  const auto result = shmcoll::testing::run_command(
      std::string(SHMCOLL_INFO) + " --json " + arguments, shmcoll::testing::Capture::stdout_only);
  EXPECT_EQ(result.status, 0) << result.output;
  return nlohmann::json::parse(result.output);
}

TEST(Info, ListsExactlyTheEnvironmentVariablesTheSourcesRead) {
  std::set<std::string> listed;
  const nlohmann::json info = info_json();
  for (const auto& variable : info["environment"]) {
    listed.insert(variable["name"].get<std::string>());
    EXPECT_FALSE(variable["meaning"].get<std::string>().empty()) << variable["name"];
  }
  EXPECT_EQ(listed, variables_in_sources());
  EXPECT_GE(listed.size(), 25u);  // the scan found the sources
}

TEST(Info, ShowsCurrentValuesVersionSimdTopologyAndSelection) {
  shmcoll::testing::ScopedEnv timeout("SHMCOLL_TIMEOUT", "2s");
  const nlohmann::json info = info_json("-n 4");
  EXPECT_EQ(info["version"], shmcoll::version());
  EXPECT_FALSE(info["simd"].get<std::string>().empty());
  EXPECT_GE(info["topology"]["cores"].get<int>(), 1);
  bool found = false;
  for (const auto& variable : info["environment"]) {
    if (variable["name"] == "SHMCOLL_TIMEOUT") found = variable["current"] == "2s";
  }
  EXPECT_TRUE(found) << "SHMCOLL_TIMEOUT's current value is not shown";
  EXPECT_EQ(info["selection"]["ranks"], 4);
  const auto& allreduce = info["selection"]["algorithms"]["allreduce (commutative op)"];
  ASSERT_EQ(allreduce.size(), info["selection"]["bytes"].size());
  EXPECT_EQ(allreduce[0], "allreduce_inline");  // 8 bytes fit a message line
}

TEST(Info, VersionIsQueryableAtRunTimeFromCppAndC) {
  EXPECT_STREQ(shmcoll::version(), SHMCOLL_EXPECTED_VERSION);
  EXPECT_STREQ(shmcoll_version(), SHMCOLL_EXPECTED_VERSION);
}

}  // namespace
