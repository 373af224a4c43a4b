// shmcoll-run: exit status rules, the failing rank named on stderr, and SIGINT stopping all.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_support.hpp"

namespace {

// The launcher's exit status and stderr.
shmcoll::testing::CommandResult launch(const std::string& args) {
  return shmcoll::testing::run_command(std::string(SHMCOLL_RUN) + " " + args,
                                       shmcoll::testing::Capture::stderr_only);
}

const std::string child = LAUNCHER_CHILD;

TEST(Launcher, AllRanksSucceedGivesZero) {
  EXPECT_EQ(launch("-n 4 " + child + " allreduce").status, 0);
  EXPECT_EQ(launch("-n 1 " + child + " allreduce").status, 0);
  EXPECT_EQ(launch("-n 3 --bind-to core " + child + " allreduce").status, 0);
}

TEST(Launcher, FirstFailingRanksStatusIsReturnedAndNamed) {
  const auto result = launch("-n 3 " + child + " exit-rank 1 7");
  EXPECT_EQ(result.status, 7) << result.output;
  EXPECT_NE(result.output.find("rank 1"), std::string::npos) << result.output;
}

TEST(Launcher, KilledRankGives128PlusSignalAndOthersSeePeerFailure) {
  const auto shm_before = shmcoll::testing::dev_shm_entries();
  const auto result = launch("-n 4 " + child + " kill-rank 2");
  EXPECT_EQ(result.status, 128 + SIGKILL) << result.output;
  EXPECT_NE(result.output.find("shmcoll-run: rank 2"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("SIGKILL"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("peer_failed"), std::string::npos) << result.output;
  EXPECT_EQ(shmcoll::testing::dev_shm_entries(), shm_before);
}

TEST(Launcher, MapByPackageSpreadsRanksOverASyntheticMachine) {
  // 2 packages x 2 NUMA nodes x 2 cores: packages alternate, then NUMA nodes inside each.
  const std::string topology = "--topology 'synthetic:pack:2 numa:2 core:2 pu:1' ";
  auto result = launch("-n 8 --bind-to core --map-by package " + topology + child +
                       " expect-cores 0,4,2,6,1,5,3,7");
  EXPECT_EQ(result.status, 0) << result.output;
  result =
      launch("-n 4 --bind-to core --map-by numa " + topology + child + " expect-cores 0,2,4,6");
  EXPECT_EQ(result.status, 0) << result.output;
  result = launch("-n 10 --bind-to core " + topology + child + " expect-cores 0,1,2,3,4,5,6,7,0,1");
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("10 ranks on 8 cores: oversubscribed"), std::string::npos)
      << result.output;
  EXPECT_NE(launch("-n 2 --map-by socket " + child + " allreduce").status, 0);
  EXPECT_NE(launch("-n 2 --placement nearby " + child + " allreduce").status, 0);
}

TEST(Launcher, SecondAttachIsRefused) {
  EXPECT_EQ(launch("-n 2 " + child + " attach-twice").status, 0);
}

TEST(Launcher, MissingProgramIsReported) {
  const auto result = launch("-n 2 /nonexistent/program");
  EXPECT_EQ(result.status, 127);
  EXPECT_NE(result.output.find("cannot execute"), std::string::npos) << result.output;
}

TEST(Launcher, BadArgumentsAreRejected) {
  EXPECT_NE(launch("-n 0 " + child + " allreduce").status, 0);
  EXPECT_NE(launch("--bind-to nowhere -n 2 " + child + " allreduce").status, 0);
}

TEST(Launcher, SigintAndSigtermStopEveryRank) {
  for (const int signal : {SIGINT, SIGTERM}) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("shmcoll-stop-" + std::to_string(getpid()));
    const auto shm_before = shmcoll::testing::dev_shm_entries();
    const auto launch = shmcoll::testing::launch_in_background(
        SHMCOLL_RUN, {"-n", "3", child, "barrier-forever", dir.string()}, 3, dir);
    ASSERT_EQ(launch.ranks.size(), 3u);
    kill(launch.launcher, signal);
    double seconds = 0;
    const int status = shmcoll::testing::wait_for_launcher(launch.launcher, 5.0, seconds);
    ASSERT_NE(status, -1) << "launcher hangs after signal " << signal;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << status;
    for (pid_t pid : launch.ranks) {
      EXPECT_TRUE(shmcoll::testing::process_gone(pid)) << "rank process " << pid << " survived";
    }
    EXPECT_EQ(shmcoll::testing::dev_shm_entries(), shm_before);
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
