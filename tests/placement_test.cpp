// NUMA placement of each rank's control page and slots, checked by asking the kernel where the
// pages are and which policy covers them (get_mempolicy with MPOL_F_ADDR).
#include "shm/placement.hpp"

#include <gtest/gtest.h>
#include <numaif.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "api/team_state.hpp"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Placement;
using shmcoll::testing::shared_block;

struct Observed {
  std::atomic<int> wrong_node;    // pages not on the expected node
  std::atomic<int> wrong_policy;  // pages whose policy mode differs from the expected one
  std::atomic<int> pages;
};

// Containers often refuse the NUMA system calls (Docker's default seccomp profile allows mbind
// and get_mempolicy only with CAP_SYS_NICE); there placement can only degrade, which the degrade
// tests still check.
bool kernel_allows_numa_policy() {
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned long node0 = 1;
  const bool allowed = mbind(page, 4096, MPOL_PREFERRED, &node0, 8 * sizeof node0, 0) == 0 &&
                       shmcoll::shm::policy_of_page(page) == MPOL_PREFERRED;
  munmap(page, 4096);
  return allowed;
}

// Every page of the calling rank's area: its node and (want_policy >= 0) its policy mode.
void observe_own_area(shmcoll::Team& team, int want_node, int want_policy, Observed* seen) {
  const auto& segment = shmcoll::detail::TeamAccess::state(team).rounds.segment();
  const auto rank = static_cast<std::uint32_t>(team.rank());
  const std::byte* area = segment.area(rank);
  for (std::size_t offset = 0; offset < segment.layout().area_bytes;
       offset += shmcoll::shm::kPageBytes) {
    seen->pages.fetch_add(1);
    if (want_node >= 0 && shmcoll::shm::node_of_page(area + offset) != want_node) {
      seen->wrong_node.fetch_add(1);
    }
    if (want_policy >= 0 && shmcoll::shm::policy_of_page(area + offset) != want_policy) {
      seen->wrong_policy.fetch_add(1);
    }
  }
}

struct PlacementCase {
  const char* name;
  const char* placement;
  int node;    // expected node of every page (-1: any)
  int policy;  // expected policy mode
};

class Placements : public ::testing::TestWithParam<PlacementCase> {};

TEST_P(Placements, RankPagesLandWhereThePolicySays) {
  const PlacementCase& c = GetParam();
  if (!kernel_allows_numa_policy()) GTEST_SKIP() << "this kernel or container refuses mbind";
  auto* seen = shared_block<Observed>();
  shmcoll::Options options;
  options.bind = shmcoll::Binding::core;
  options.placement = Placement::parse(c.placement);
  options.slot_bytes = 64 << 10;
  options.heap_bytes = 64 << 10;
  shmcoll::run(2, options, [&](shmcoll::Team& team) {
    // The heap is placed with the rest, and its pages land when the user first writes them.
    const std::span<char> heap = team.allocate<char>(64 << 10);
    std::fill(heap.begin(), heap.end(), 'x');
    observe_own_area(team, c.node, c.policy, seen);
    team.barrier();
  });
  EXPECT_EQ(seen->pages.load(), 2 * (1 + 2 * 16 + 16));
  EXPECT_EQ(seen->wrong_node.load(), 0);
  EXPECT_EQ(seen->wrong_policy.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(ThisMachine, Placements,
                         ::testing::Values(PlacementCase{"local", "local", 0, MPOL_PREFERRED},
                                           PlacementCase{"node0", "node:0", 0, MPOL_PREFERRED},
                                           PlacementCase{"interleave", "interleave", 0,
                                                         MPOL_INTERLEAVE},
                                           PlacementCase{"none", "none", 0, MPOL_DEFAULT}),
                         [](const auto& info) { return std::string(info.param.name); });

// A node this machine does not have: placement falls back to first touch, with one warning for
// the whole team, and the team works.
TEST(Placement, MissingNodeDegradesToNoneWithOneWarning) {
  auto* seen = shared_block<Observed>();
  shmcoll::Options options;
  options.placement = Placement::parse("node:63");
  const int want_policy = kernel_allows_numa_policy() ? MPOL_DEFAULT : -1;
  ::testing::internal::CaptureStderr();
  shmcoll::run(4, options, [&](shmcoll::Team& team) {
    observe_own_area(team, -1, want_policy, seen);
    int value = 1;
    team.allreduce(shmcoll::in_place, &value, 1, shmcoll::Dtype::i32, shmcoll::Op::sum);
    if (value != 4) seen->wrong_node.fetch_add(1);
  });
  const std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(seen->wrong_policy.load(), 0);
  EXPECT_EQ(seen->wrong_node.load(), 0);
  std::size_t warnings = 0;
  for (std::size_t at = errors.find("degraded to none"); at != std::string::npos;
       at = errors.find("degraded to none", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << errors;
  EXPECT_NE(errors.find("node:63"), std::string::npos) << errors;
}

// On a loaded topology ranks sit on NUMA nodes this machine lacks: local placement degrades for
// them (once, team-wide) and keeps node 0 for the others.
TEST(Placement, SyntheticNodesThatDoNotExistDegrade) {
  if (!kernel_allows_numa_policy()) GTEST_SKIP() << "this kernel or container refuses mbind";
  auto* seen = shared_block<Observed>();
  shmcoll::Options options;
  options.bind = shmcoll::Binding::core;
  options.map_by = shmcoll::MapBy::numa;
  options.topology = "synthetic:pack:2 numa:2 core:2 pu:1";
  ::testing::internal::CaptureStderr();
  shmcoll::run(4, options, [&](shmcoll::Team& team) {
    // Ranks 0..3 sit on synthetic nodes 0..3; only node 0 exists here.
    observe_own_area(team, team.rank() == 0 ? 0 : -1,
                     team.rank() == 0 ? MPOL_PREFERRED : MPOL_DEFAULT, seen);
    team.barrier();
  });
  const std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(seen->wrong_policy.load(), 0);
  EXPECT_EQ(seen->wrong_node.load(), 0);
  EXPECT_EQ(errors.find("degraded"), errors.rfind("degraded")) << errors;
  EXPECT_NE(errors.find("does not exist"), std::string::npos) << errors;
}

TEST(Placement, EnvironmentChoosesThePolicyAndBadValuesAreNamed) {
  auto* seen = shared_block<Observed>();
  if (kernel_allows_numa_policy()) {
    shmcoll::testing::ScopedEnv env("SHMCOLL_PLACEMENT", "interleave");
    shmcoll::run(2, {},
                 [&](shmcoll::Team& team) { observe_own_area(team, -1, MPOL_INTERLEAVE, seen); });
    EXPECT_EQ(seen->wrong_policy.load(), 0);
  }
  shmcoll::testing::ScopedEnv env("SHMCOLL_PLACEMENT", "nearby");
  try {
    shmcoll::run(2, {}, [](shmcoll::Team&) {});
    ADD_FAILURE() << "SHMCOLL_PLACEMENT=nearby was accepted";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), shmcoll::Errc::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("SHMCOLL_PLACEMENT"), std::string::npos);
  }
}

}  // namespace
