#include "coll/collectives.hpp"

namespace shmcoll::coll {

namespace {

void barrier_flat(Context& ctx) {
  const std::uint32_t round = ctx.rounds.begin();
  ctx.rounds.publish(round);
  ctx.rounds.wait_for_all(round);
}

// Two rounds: a rank arrives once its children have (arrivals gather at the tree's root), then
// the release travels down, each rank passing it on by publishing.
void barrier_tree(Context& ctx) {
  shm::Rounds& rounds = ctx.rounds;
  const topo::TreeNode& node = ctx.tree.nodes[rounds.rank()];
  const std::uint32_t arrival = rounds.begin();
  for (int child : node.children) rounds.wait_for(static_cast<std::uint32_t>(child), arrival);
  rounds.publish(arrival);
  const std::uint32_t release = rounds.begin();
  if (node.parent >= 0) rounds.wait_for(static_cast<std::uint32_t>(node.parent), release);
  rounds.publish(release);
}

// Released by `releaser`, in two rounds: every rank first publishes its arrival, so ranks that
// disagree about the releaser (a crossed rooted call before) find each other's and fail with the
// mismatch instead of waiting for each other. The releaser then waits for every arrival and
// publishes the release, and leaves first; the others check its arrival and wait on its line for
// the release. Nobody waits for the others' release round, so they publish it with their
// arrival: the releaser's next call may then write its slot (wait_slot_free: everyone has
// published the round before) at once, where it otherwise waited for each of them to get a CPU
// again (osu_bcast of 1 KiB, 4 ranks on 2 cores: 15-21 us against 0.5).
void barrier_released_by(Context& ctx, std::uint32_t releaser) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t arrival = rounds.begin();
  rounds.publish(arrival);
  const std::uint32_t release = rounds.begin();
  if (rounds.rank() == releaser) {
    rounds.wait_for_all(arrival);
    rounds.publish(release);
    return;
  }
  rounds.publish(release);
  rounds.wait_for(releaser, arrival);
  rounds.wait_for(releaser, release);
}

// Where ranks share CPUs each rank must run twice per barrier (to arrive, then to leave); here
// it waits for one word instead of polling every peer's, and only the last to arrive reads them.
// The last to arrive leaves first, and the others as the scheduler gets to them. After a rooted
// call, whose root is usually the first to arrive (a bcast's or a scatter's only writes), that
// root releases the barrier instead and leaves first: a program that calls it rooted at the
// same rank again (OSU: call, barrier, call) then finds the root's data posted before the others
// are out of the barrier, where otherwise each waited for the root to get a CPU again (osu_bcast
// of 8 B, 4 ranks on 2 cores, each rank's average: 2.4 us against 0.1-0.3).
void barrier_arrivals(Context& ctx) {
  if (ctx.last_call_root >= 0) {
    return barrier_released_by(ctx, static_cast<std::uint32_t>(ctx.last_call_root));
  }
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t round = rounds.begin();
  rounds.publish(round);
  if (!rounds.arrive(round)) {
    rounds.wait_result(round);
    return;
  }
  rounds.wait_for_all(round);  // all published already: this checks their calls' signatures
  rounds.publish_result(round);
}

}  // namespace

void barrier(Context& ctx) {
  switch (select_barrier(ctx.tunables, ctx.tree_shape)) {
    case Algorithm::barrier_tree:
      return barrier_tree(ctx);
    case Algorithm::barrier_arrivals:
      return barrier_arrivals(ctx);
    default:
      return barrier_flat(ctx);
  }
}

}  // namespace shmcoll::coll
