#include "coll/tree_steps.hpp"

#include <cstring>

#include "ops/reduce.hpp"

namespace shmcoll::coll {

std::uint32_t combine_up_tree(Context& ctx, const std::byte* send, std::byte* result,
                              std::size_t count, Dtype dtype, const Op& op, bool post_at_root) {
  shm::Rounds& rounds = ctx.rounds;
  const topo::TreeNode& node = ctx.tree.nodes[rounds.rank()];
  const std::size_t bytes = count * dtype_size(dtype);
  const std::uint32_t round = rounds.begin();
  const bool at_root = node.parent < 0;
  if (node.children.empty() && !at_root) {
    rounds.publish_message(round, send, bytes);
    return round;
  }
  int inputs = 0;
  ctx.inputs[inputs++] = send;
  for (int child : node.children) {
    ctx.inputs[inputs++] = rounds.wait_message(static_cast<std::uint32_t>(child), round);
  }
  alignas(64) std::byte partial[shm::kMessageBytes];
  std::byte* out = at_root && result ? result : partial;
  ops::reduce_kary(dtype, op, out, ctx.inputs.data(), inputs, count);
  if (at_root && !post_at_root) {
    rounds.publish(round);
  } else {
    rounds.publish_message(round, out, bytes);
  }
  return round;
}

void pass_down_tree(Context& ctx, std::byte* data, std::size_t bytes, std::uint32_t origin) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const topo::TreeNode& node = ctx.tree.nodes[me];
  const std::uint32_t round = rounds.begin();
  if (me == origin) {
    rounds.publish_message(round, data, bytes);
    return;
  }
  const auto source = node.parent < 0 ? origin : static_cast<std::uint32_t>(node.parent);
  std::memcpy(data, rounds.wait_message(source, round), bytes);
  if (node.children.empty()) {
    rounds.publish(round);
  } else {
    rounds.publish_message(round, data, bytes);
  }
}

}  // namespace shmcoll::coll
