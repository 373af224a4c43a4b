// Whether a team's ranks share CPUs is judged from the CPUs they may use (affinity masks, cgroup
// quotas), not from the machine's CPU count: a taskset or a container smaller than the machine
// makes two unbound ranks share one CPU on a machine of many.
#include "topo/cpu_budget.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "api/team_state.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using shmcoll::topo::cgroup_quota_cpus;

class FakeCgroups : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("shmcoll-cgroups-" + std::to_string(getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const fs::path& file, const std::string& text) {
    fs::create_directories((root_ / file).parent_path());
    std::ofstream(root_ / file) << text;
  }
  fs::path root_;
};

TEST_F(FakeCgroups, Version2TakesTheTightestQuotaOnThePathRoundedUp) {
  write("cgroup.controllers", "cpu memory\n");
  write("cpu.max", "max 100000\n");
  write("jobs/cpu.max", "350000 100000\n");  // 3.5 CPUs: 4
  write("jobs/job1/cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_quota_cpus("0::/jobs/job1\n", root_), 4);
  write("jobs/job1/cpu.max", "150000 100000\n");
  EXPECT_EQ(cgroup_quota_cpus("0::/jobs/job1\n", root_), 2);
  EXPECT_EQ(cgroup_quota_cpus("0::/\n", root_), 0) << "no quota at the root";
}

TEST_F(FakeCgroups, Version1AndHybridMounts) {
  // v1's cpu controller (as docker --cpus=1.5 writes it) beside a hybrid unified/ mount.
  write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n");
  write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  write("unified/cgroup.controllers", "\n");
  write("unified/cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_quota_cpus("12:cpu,cpuacct:/docker/abc\n0::/\n", root_), 2);
  // Inside the container, /proc/self/cgroup names the host's path but the mount's root is ours.
  fs::remove_all(root_ / "cpu,cpuacct");
  write("cpu,cpuacct/cpu.cfs_quota_us", "100000\n");
  write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_quota_cpus("12:cpu,cpuacct:/docker/abc\n", root_), 1);
  write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cgroup_quota_cpus("12:cpu,cpuacct:/docker/abc\n", root_), 0);
  EXPECT_EQ(cgroup_quota_cpus("garbage\n\n3:memory:/x\n", root_), 0);
}

// How each rank of a real team waits: it yields its CPU (and does not spin) when its ranks share
// CPUs. Every rank must settle on the same.
struct Waits {
  long spin_ns;
  long yield_ns;
  friend bool operator==(const Waits&, const Waits&) = default;
};
constexpr Waits kOwnCpus{200'000, 0};
constexpr Waits kSharedCpus{0, 1'000'000};

Waits team_waits(int ranks, shmcoll::Binding bind) {
  auto* waits = shmcoll::testing::shared_block<std::array<Waits, 4>>();
  shmcoll::Options options;
  options.bind = bind;
  shmcoll::run(ranks, options, [&](shmcoll::Team& team) {
    const auto& policy = shmcoll::detail::TeamAccess::state(team).rounds.wait_policy();
    (*waits)[team.rank()] = {policy.spin_ns, policy.yield_ns};
  });
  for (int rank = 1; rank < ranks; ++rank) EXPECT_EQ((*waits)[rank], (*waits)[0]);
  return (*waits)[0];
}

TEST(CpuBudget, ATasksetSmallerThanTheTeamMakesRanksShare) {
  cpu_set_t original;
  ASSERT_EQ(sched_getaffinity(0, sizeof original, &original), 0);
  const int allowed = CPU_COUNT(&original);
  // As many ranks as this process may use: each gets one (on this 2-core machine, 2 ranks).
  EXPECT_EQ(team_waits(std::min(allowed, 4), shmcoll::Binding::none), kOwnCpus);
  // One more than that share them.
  if (allowed < 4) {
    EXPECT_EQ(team_waits(allowed + 1, shmcoll::Binding::none), kSharedCpus);
  }
  // A taskset of one CPU on a machine of several: two unbound ranks share it.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &original)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const Waits restricted = team_waits(2, shmcoll::Binding::none);
  ASSERT_EQ(sched_setaffinity(0, sizeof original, &original), 0);
  EXPECT_EQ(restricted, kSharedCpus);
  // Ranks bound to distinct cores do not share, although each one's own mask is a single core.
  if (allowed >= 2) {
    EXPECT_EQ(team_waits(2, shmcoll::Binding::core), kOwnCpus);
  }
}

// run() binds its caller as rank 0 for the call only: afterwards the caller runs where it ran
// before (else a later unbound team, or the program's own threads, would all share one CPU).
TEST(CpuBudget, ABoundRunGivesTheCallerItsCpusBack) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "one CPU: binding changes nothing";
  shmcoll::Options options;
  options.bind = shmcoll::Binding::core;
  int cpus_in_call = 0;
  shmcoll::run(2, options, [&](shmcoll::Team& team) {
    cpu_set_t during;
    if (team.rank() == 0 && sched_getaffinity(0, sizeof during, &during) == 0) {
      cpus_in_call = CPU_COUNT(&during);
    }
  });
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_EQ(cpus_in_call, 1) << "rank 0 was not bound during the call";
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "the caller's CPUs: " << CPU_COUNT(&before)
                                          << " before the call, " << CPU_COUNT(&after) << " after";
}

// A team of fewer ranks than CPUs waits as ranks that share CPUs do when the caller knows that
// the program's processes on the node outnumber their CPUs (Options::processes_share_cpus, which
// the MPI layer learns from MPI_COMM_WORLD's team): 2 ranks of a row communicator among 4
// processes on 2 CPUs. One member told is enough, and every member settles on the same.
Waits joined_team_waits(bool rank_1_told) {
  auto* waits = shmcoll::testing::shared_block<std::array<Waits, 2>>();
  const std::string name = shmcoll::Team::unique_segment_name();
  auto member = [&](int rank) {
    shmcoll::Options options;
    options.processes_share_cpus = rank == 1 && rank_1_told;
    shmcoll::Team team = shmcoll::Team::join(name, rank, 2, options);
    const auto& policy = shmcoll::detail::TeamAccess::state(team).rounds.wait_policy();
    (*waits)[rank] = {policy.spin_ns, policy.yield_ns};
    team.barrier();
    return 0;
  };
  const std::vector<pid_t> children = shmcoll::testing::fork_members(2, member);
  member(0);
  for (const pid_t child : children) {
    int status = 0;
    EXPECT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ((*waits)[1], (*waits)[0]);
  return (*waits)[0];
}

TEST(CpuBudget, ATeamAmongMoreOfTheProgramsProcessesThanCpusWaitsAsSharing) {
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  if (CPU_COUNT(&mask) < 2)
    GTEST_SKIP() << "2 unbound ranks share this process's single CPU anyway";
  EXPECT_EQ(joined_team_waits(false), kOwnCpus);
  EXPECT_EQ(joined_team_waits(true), kSharedCpus);
}

TEST(CpuBudget, ExplicitSpinAndYieldWin) {
  shmcoll::testing::ScopedEnv spin("SHMCOLL_SPIN_NS", "1234");
  shmcoll::testing::ScopedEnv yield("SHMCOLL_YIELD_NS", "5678");
  EXPECT_EQ(team_waits(2, shmcoll::Binding::none), (Waits{1234, 5678}));
  EXPECT_EQ(team_waits(3, shmcoll::Binding::none), (Waits{1234, 5678}));
}

}  // namespace
