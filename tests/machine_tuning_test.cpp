// The tuning file (tools/shmcoll-tune): its values stand in for the built-in defaults on the kind
// of machine it was measured on, nowhere else, and never over the environment; a malformed one is
// an error naming the file and line.
#include "coll/machine_tuning.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "coll/tunables.hpp"
#include "shmcoll/shmcoll.hpp"

namespace {

using shmcoll::coll::machine_kind;
using shmcoll::coll::MachineTuning;
using shmcoll::coll::Tunables;

class TuningFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "shmcoll-tuning-" + std::to_string(getpid());
    setenv("SHMCOLL_TUNING", path_.c_str(), 1);
    unsetenv("SHMCOLL_CMA_MIN");
    unsetenv("SHMCOLL_STREAM_MIN");
  }
  void TearDown() override {
    std::remove(path_.c_str());
    unsetenv("SHMCOLL_TUNING");
    unsetenv("SHMCOLL_CMA_MIN");
  }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  // The error from_env gives, or "" when there is none.
  static std::string error_of_from_env() {
    try {
      Tunables::from_env();
    } catch (const shmcoll::Error& error) {
      EXPECT_EQ(error.code(), shmcoll::Errc::invalid_argument);
      return error.what();
    }
    return "";
  }
  std::string path_;
};

TEST_F(TuningFile, StandsInForTheDefaultsOnItsKindOfMachine) {
  write("# a comment\nmachine=" + machine_kind() +
        "\nSHMCOLL_CMA_MIN=256K\nSHMCOLL_STREAM_MIN=0\n");
  const Tunables tunables = Tunables::from_env();
  EXPECT_EQ(tunables.team.cma_min, 256u << 10);
  EXPECT_EQ(tunables.team.stream_min, 0u);
  EXPECT_NE(MachineTuning::load().status.find("applied"), std::string::npos);
}

TEST_F(TuningFile, TheEnvironmentWinsOverIt) {
  write("machine=" + machine_kind() + "\nSHMCOLL_CMA_MIN=262144\n");
  setenv("SHMCOLL_CMA_MIN", "1M", 1);
  const Tunables tunables = Tunables::from_env();
  EXPECT_EQ(tunables.team.cma_min, 1u << 20);
  EXPECT_EQ(tunables.team.stream_min, 4096u);  // not in the file: the built-in default
}

TEST_F(TuningFile, IsIgnoredOnAnotherKindOfMachine) {
  write("machine=Some Other CPU; 384 CPUs\nSHMCOLL_CMA_MIN=262144\nSHMCOLL_STREAM_MIN=0\n");
  const Tunables tunables = Tunables::from_env();
  EXPECT_EQ(tunables.team.cma_min, 0u);
  EXPECT_EQ(tunables.team.stream_min, 4096u);
  const std::string status = MachineTuning::load().status;
  EXPECT_NE(status.find("not applied"), std::string::npos) << status;
  EXPECT_NE(status.find("Some Other CPU"), std::string::npos) << status;
}

TEST_F(TuningFile, MissingOrTurnedOffAppliesNothing) {
  EXPECT_EQ(Tunables::from_env().team.cma_min, 0u);  // no file written
  write("machine=" + machine_kind() + "\nSHMCOLL_CMA_MIN=262144\n");
  setenv("SHMCOLL_TUNING", "none", 1);
  EXPECT_EQ(Tunables::from_env().team.cma_min, 0u);
  EXPECT_TRUE(MachineTuning::load().path.empty());
}

TEST_F(TuningFile, AMalformedFileIsAnErrorNamingFileAndLine) {
  write("machine=" + machine_kind() + "\nSHMCOLL_SLOT_BYTES=1M\n");
  std::string error = error_of_from_env();
  EXPECT_NE(error.find(path_ + ", line 2"), std::string::npos) << error;
  EXPECT_NE(error.find("SHMCOLL_SLOT_BYTES"), std::string::npos) << error;

  write("machine=" + machine_kind() + "\nSHMCOLL_CMA_MIN=lots\n");
  error = error_of_from_env();
  EXPECT_NE(error.find(path_), std::string::npos) << error;
  EXPECT_NE(error.find("SHMCOLL_CMA_MIN=\"lots\""), std::string::npos) << error;

  write("just words\n");
  error = error_of_from_env();
  EXPECT_NE(error.find("line 1"), std::string::npos) << error;
}

TEST(MachineKind, NamesTheCpuAndItsCount) {
  const std::string kind = machine_kind();
  EXPECT_NE(kind.find(std::to_string(sysconf(_SC_NPROCESSORS_CONF)) + " CPUs"), std::string::npos)
      << kind;
}

}  // namespace
