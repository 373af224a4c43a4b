// What a Team holds: its tunables, its rounds over the segment, its hierarchy tree and the
// algorithms' context.
#pragma once

#include "api/buffer_spans.hpp"
#include "api/progress.hpp"
#include "api/rank_setup.hpp"
#include "coll/collectives.hpp"
#include "coll/tunables.hpp"
#include "shm/heap.hpp"
#include "shm/rounds.hpp"
#include "shm/segment.hpp"
#include "topo/cpu_budget.hpp"
#include "topo/tree.hpp"

namespace shmcoll::detail {

// `home_cpu`: where a waiter that finds its peer on its own CPU moves (-1: it does not move).
// `membarrier`: every member registered for global membarriers. Where ranks do not share CPUs,
// sleeps are rare, so sleepers take the handshake's cost (a membarrier) off every publish; where
// they do, sleeps are frequent and publishers fence.
inline shm::WaitPolicy wait_policy(const coll::Tunables& tunables, bool ranks_share_cpus,
                                   int home_cpu = -1, bool membarrier = false) {
  shm::WaitPolicy policy;  // keeps the default sleep slice
  policy.spin_ns = tunables.spin_for(ranks_share_cpus);
  policy.timeout_ms = tunables.timeout_ms;
  policy.yield_ns = tunables.yield_for(ranks_share_cpus);
  policy.home_cpu = ranks_share_cpus ? -1 : home_cpu;
  if (membarrier && !ranks_share_cpus) {
    policy.handshake = shm::WaitPolicy::Handshake::sleeper_membarrier;
  }
  return policy;
}

// What a member publishes when it joins: where it runs, the CPUs it may use, and whether it
// registered for global membarriers (WaitPolicy::Handshake).
struct MemberProfile {
  topo::Location location;
  topo::CpuBudget budget;
  bool membarrier;
  bool crowded;  // Options::processes_share_cpus: the program's other processes contend too
};
// Whether the team's ranks outnumber the CPUs they may use together: the union of their affinity
// masks, capped by their cgroup quota. Bound ranks on distinct cores do not; unbound ranks under
// taskset or a container's quota may, whatever the machine's CPU count. A team of a few of the
// program's processes shares them too when any member was told so (crowded): 2 ranks of a row
// communicator on 2 CPUs, among 4 processes on those CPUs, wait for CPUs the others hold.
bool ranks_share_cpus(std::span<const MemberProfile> members);

// Places my area of the segment (before anything touches it); the first rank whose placement
// degrades prints the one warning.
shm::Segment place_area(shm::Segment segment, std::uint32_t rank, const RankSetup& setup);
// Joins the team (publishing my location and CPUs, and on rank 0 the team-wide tunables), takes
// rank 0's team-wide tunables into `tunables` (saying once on stderr which of this rank's own
// differed), sets how waits spin from whether the ranks share CPUs, and builds the tree from
// every member's location.
// `ranks_share_cpus` is set as ranks_share_cpus() judges the team.
topo::Tree join_and_build_tree(shm::Rounds& rounds, const RankSetup& setup,
                               coll::Tunables& tunables, bool& ranks_share_cpus);

struct TeamState {
  // Joins the team: blocks until every member has joined.
  TeamState(shm::Segment segment, std::uint32_t rank, const coll::Tunables& tunables_in,
            const RankSetup& setup)
      : tunables(tunables_in),
        rounds(place_area(std::move(segment), rank, setup), rank, wait_policy(tunables_in, false)),
        tree(join_and_build_tree(rounds, setup, tunables, ranks_share_cpus)),
        context(rounds, tunables.team, tree, ranks_share_cpus),
        equal_counts(rounds.size()),
        block_spans(2 * rounds.size()),
        heap(rounds.segment().heap(rank), rounds.segment().layout().heap_bytes),
        location(setup.location) {}
  coll::Tunables tunables;
  shm::Rounds rounds;
  bool ranks_share_cpus = false;  // set while the tree is built
  topo::Tree tree;
  coll::Context context;
  std::vector<std::int64_t> equal_counts;  // reduce_scatter_block's counts, sized once
  std::vector<DataSpan> block_spans;       // overlap checks' scratch, two per rank reserved once
  shm::Heap heap;                          // Team::allocate's memory
  topo::Location location;                 // where this rank runs (its sub-teams' too)
  // Runs the nonblocking calls; made at the first. Last, so it finishes them before the rest goes.
  std::unique_ptr<ProgressWorker> worker;
};

struct TeamAccess {
  // Joins the team (blocks until every member has joined) and wraps it in the public type.
  static Team make(shm::Segment segment, std::uint32_t rank, const coll::Tunables& tunables,
                   const RankSetup& setup) {
    return Team(std::make_unique<TeamState>(std::move(segment), rank, tunables, setup));
  }
  static const TeamState& state(const Team& team) { return *team.state_; }
};

// The sizes a new segment gets: the caller's, else the tunables'. A default slot (neither set)
// halves, down to 256 KiB, until the team's slots take at most half of what /dev/shm has free, so
// a small /dev/shm (Docker's 64 MiB) runs as many ranks as with 256 KiB slots.
shm::SegmentSizes segment_sizes_for(const Options& options, const coll::Tunables& tunables,
                                    std::uint32_t team_size);

}  // namespace shmcoll::detail
