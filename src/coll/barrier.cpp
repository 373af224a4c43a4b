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

// Where ranks share CPUs each rank must run twice per barrier (to arrive, then to leave); here
// it waits for one word instead of polling every peer's, and only the last to arrive reads them.
void barrier_arrivals(Context& ctx) {
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
