// Members of one team started with different environments (an MPMD launch, a wrapper script that
// sets a variable on some ranks): every call still takes one path, rank 0's, and the first member
// whose own values differ says which, once.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Op;
using shmcoll::Team;

// Each rank's own environment: the algorithm it would force and the tree it would build.
struct RankEnvironment {
  const char* allreduce_algorithm;
  const char* tree_max;
  const char* hierarchy;
};
constexpr RankEnvironment kEnvironments[] = {
    {"allreduce_tree", "16384", "package,numa,l3,core:8"},
    {"allreduce_all_read", "0", "core:2"},
    {"allreduce_slices", "65536", "core"},
};

void set_environment(const RankEnvironment& environment) {
  setenv("SHMCOLL_ALLREDUCE_ALGORITHM", environment.allreduce_algorithm, 1);
  setenv("SHMCOLL_TREE_MAX", environment.tree_max, 1);
  setenv("SHMCOLL_HIERARCHY", environment.hierarchy, 1);
}

// Allreduce (4096 floats: 16 KiB, where every algorithm above applies), bcast and reduce: the
// number of wrong elements.
long run_calls(Team& team) {
  const int me = team.rank(), p = team.size();
  long wrong = 0;
  constexpr int kCount = 4096;
  std::vector<float> in(kCount), out(kCount);
  for (int call = 0; call < 20; ++call) {
    for (int i = 0; i < kCount; ++i) in[i] = float(me + 1 + (i + call) % 7);
    team.allreduce(in.data(), out.data(), kCount, Dtype::f32, Op::sum);
    for (int i = 0; i < kCount; ++i) {
      wrong += out[i] != float(p * (p + 1) / 2 + p * ((i + call) % 7));
    }
    std::vector<float> shared = in;
    team.bcast(shared.data(), kCount, Dtype::f32, call % p);
    for (int i = 0; i < kCount; ++i) wrong += shared[i] != float(call % p + 1 + (i + call) % 7);
    team.reduce(in.data(), out.data(), 64, Dtype::f32, Op::max, 0);
    for (int i = 0; me == 0 && i < 64; ++i) wrong += out[i] != float(p + (i + call) % 7);
  }
  return wrong;
}

TEST(TeamTunables, MembersWithOtherEnvironmentsRunRankZerosPath) {
  const std::string name = Team::unique_segment_name();
  const std::filesystem::path log =
      std::filesystem::temp_directory_path() / ("shmcoll-tunables-" + std::to_string(getpid()));
  constexpr int kSize = 3;
  const std::vector<pid_t> children = shmcoll::testing::fork_members(kSize, [&](int rank) {
    const std::string err = log.string() + "." + std::to_string(rank);
    if (std::FILE* file = std::fopen(err.c_str(), "w")) dup2(fileno(file), STDERR_FILENO);
    set_environment(kEnvironments[rank]);
    Team team = Team::join(name, rank, kSize);
    return run_calls(team) == 0 ? 0 : 2;
  });
  shmcoll::testing::ScopedEnv algorithm("SHMCOLL_ALLREDUCE_ALGORITHM",
                                        kEnvironments[0].allreduce_algorithm);
  shmcoll::testing::ScopedEnv tree_max("SHMCOLL_TREE_MAX", kEnvironments[0].tree_max);
  shmcoll::testing::ScopedEnv hierarchy("SHMCOLL_HIERARCHY", kEnvironments[0].hierarchy);
  Team team = Team::join(name, 0, kSize);
  EXPECT_EQ(run_calls(team), 0) << "rank 0 got wrong results";
  std::string warnings;
  for (std::size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    waitpid(children[i], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << i + 1 << ": status " << status << " (2: wrong results)";
    const std::string err = log.string() + "." + std::to_string(i + 1);
    std::stringstream text;
    text << std::ifstream(err).rdbuf();
    warnings += text.str();
    std::filesystem::remove(err);
  }
  // Once per team, from whichever differing member joined first, naming variables and values.
  std::size_t lines = 0;
  for (std::size_t at = warnings.find("the team uses rank 0's values"); at != std::string::npos;
       at = warnings.find("the team uses rank 0's values", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << warnings;
  const bool names_rank1 =
      warnings.find("SHMCOLL_ALLREDUCE_ALGORITHM=allreduce_all_read (rank 0: allreduce_tree)") !=
      std::string::npos;
  const bool names_rank2 =
      warnings.find("SHMCOLL_ALLREDUCE_ALGORITHM=allreduce_slices (rank 0: allreduce_tree)") !=
      std::string::npos;
  EXPECT_TRUE(names_rank1 || names_rank2) << warnings;
  EXPECT_NE(warnings.find("SHMCOLL_HIERARCHY="), std::string::npos) << warnings;
}

}  // namespace
