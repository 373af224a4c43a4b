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

}  // namespace

void barrier(Context& ctx) {
  if (select_barrier(ctx.tunables, ctx.tree_shape) == Algorithm::barrier_tree)
    return barrier_tree(ctx);
  barrier_flat(ctx);
}

}  // namespace shmcoll::coll
