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

// Ranks end with their launcher however it ends: SIGKILL (the OOM killer, `timeout -s KILL`, a
// cancelled CI job) leaves no rank running a second later, and nothing in /dev/shm.
TEST(Launcher, RanksEndWithAKilledLauncher) {
  const auto shm_before = shmcoll::testing::dev_shm_entries();
  const auto dir =
      std::filesystem::temp_directory_path() / ("shmcoll-orphans-" + std::to_string(getpid()));
  for (int trial = 0; trial < 20; ++trial) {
    const auto launch = shmcoll::testing::launch_in_background(
        SHMCOLL_RUN, {"-n", "8", child, "barrier-forever", dir.string()}, 8, dir);
    ASSERT_EQ(launch.ranks.size(), 8u) << "trial " << trial;
    kill(launch.launcher, SIGKILL);
    waitpid(launch.launcher, nullptr, 0);
    const double killed_at = shmcoll::testing::monotonic_seconds();
    auto all_gone = [&] {
      for (pid_t pid : launch.ranks) {
        if (!shmcoll::testing::process_gone(pid)) return false;
      }
      return true;
    };
    while (!all_gone() && shmcoll::testing::monotonic_seconds() - killed_at < 1.0) usleep(1000);
    for (pid_t pid : launch.ranks) {
      EXPECT_TRUE(shmcoll::testing::process_gone(pid))
          << "trial " << trial << ": rank process " << pid << " outlived its launcher by 1 s";
    }
  }
  EXPECT_EQ(shmcoll::testing::dev_shm_entries(), shm_before);
  std::filesystem::remove_all(dir);
}

// A rank stopped (SIGSTOP, a debugger) makes the others time out; the launcher then ends the job
// instead of waiting for the stopped rank.
TEST(Launcher, AStoppedRankDoesNotKeepTheLauncherWaiting) {
  shmcoll::testing::ScopedEnv timeout("SHMCOLL_TIMEOUT", "1");
  shmcoll::testing::ScopedEnv grace("SHMCOLL_KILL_GRACE", "300ms");
  const auto dir =
      std::filesystem::temp_directory_path() / ("shmcoll-stopped-" + std::to_string(getpid()));
  const auto launch = shmcoll::testing::launch_in_background(
      SHMCOLL_RUN, {"-n", "4", child, "barrier-forever", dir.string()}, 4, dir);
  ASSERT_EQ(launch.ranks.size(), 4u);
  kill(launch.ranks[1], SIGSTOP);
  double seconds = 0;
  const int status = shmcoll::testing::wait_for_launcher(launch.launcher, 5.0, seconds);
  ASSERT_NE(status, -1) << "the launcher still waited 5 s after rank 1 stopped";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << status;
  EXPECT_NE(launch.stderr_text().find("timeout"), std::string::npos) << launch.stderr_text();
  // The launcher's line names the stopped rank as the cause, not its own SIGTERM.
  EXPECT_NE(launch.stderr_text().find("shmcoll-run: rank 1 (pid"), std::string::npos)
      << launch.stderr_text();
  EXPECT_NE(launch.stderr_text().find("failed while it still ran"), std::string::npos)
      << launch.stderr_text();
  for (pid_t pid : launch.ranks) {
    EXPECT_TRUE(shmcoll::testing::process_gone(pid)) << "rank process " << pid << " survived";
  }
  std::filesystem::remove_all(dir);
}

// As mpirun: once a rank fails, the others get SIGTERM after SHMCOLL_KILL_GRACE, even ranks that
// call no collective that would notice; the launcher names the rank that failed.
TEST(Launcher, AFailedRankEndsTheJobAfterTheGrace) {
  shmcoll::testing::ScopedEnv grace("SHMCOLL_KILL_GRACE", "200ms");
  const auto dir =
      std::filesystem::temp_directory_path() / ("shmcoll-ending-" + std::to_string(getpid()));
  const auto launch = shmcoll::testing::launch_in_background(
      SHMCOLL_RUN, {"-n", "3", child, "exit-rank-others-sleep", dir.string(), "1", "7"}, 3, dir);
  ASSERT_EQ(launch.ranks.size(), 3u);
  double seconds = 0;
  const int status = shmcoll::testing::wait_for_launcher(launch.launcher, 5.0, seconds);
  ASSERT_NE(status, -1) << "the launcher waited 5 s for ranks that outlived a failed one";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << status;
  EXPECT_NE(launch.stderr_text().find("rank 1"), std::string::npos) << launch.stderr_text();
  for (pid_t pid : launch.ranks) {
    EXPECT_TRUE(shmcoll::testing::process_gone(pid)) << "rank process " << pid << " survived";
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
