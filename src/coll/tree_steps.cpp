#include "coll/tree_steps.hpp"

#include <cstring>

#include "ops/reduce.hpp"
#include "util/copy.hpp"

namespace shmcoll::coll {

Outbox::Outbox(shm::Rounds& rounds, std::uint32_t round, std::size_t bytes)
    : rounds_(rounds), round_(round), bytes_(bytes), data_(line_) {
  if (bytes > shm::kMessageBytes) {
    rounds.wait_slot_free(round);
    data_ = rounds.slot(rounds.rank(), round);
  }
}

void Outbox::post() {
  if (data_ == line_) {
    rounds_.publish_message(round_, line_, bytes_);
  } else {
    rounds_.publish(round_);
  }
}

const std::byte* wait_posted(shm::Rounds& rounds, std::uint32_t peer, std::uint32_t round,
                             std::size_t bytes) {
  if (bytes <= shm::kMessageBytes) return rounds.wait_message(peer, round);
  rounds.wait_for(peer, round);
  return rounds.slot(peer, round);
}

std::uint32_t combine_up_tree(Context& ctx, const std::byte* send, std::byte* result,
                              std::size_t count, Dtype dtype, const Op& op, bool post_at_root) {
  shm::Rounds& rounds = ctx.rounds;
  const topo::TreeNode& node = ctx.tree.nodes[rounds.rank()];
  const std::size_t bytes = count * dtype_size(dtype);
  const std::uint32_t round = rounds.begin();
  const bool at_root = node.parent < 0;
  if (at_root && !result && !post_at_root) {
    rounds.publish(round);
    return round;
  }
  int inputs = 0;
  ctx.inputs[inputs++] = send;
  for (int child : node.children) {
    ctx.inputs[inputs++] = wait_posted(rounds, static_cast<std::uint32_t>(child), round, bytes);
  }
  if (at_root && !post_at_root) {
    ops::reduce_kary(dtype, op, result, ctx.inputs.data(), inputs, count);
    rounds.publish(round);
    return round;
  }
  Outbox outbox(rounds, round, bytes);
  ops::reduce_kary(dtype, op, outbox.data(), ctx.inputs.data(), inputs, count);  // a leaf copies
  if (at_root && result) copy_bytes(result, outbox.data(), bytes);
  outbox.post();
  return round;
}

void pass_down_tree(Context& ctx, const Block& data, std::size_t first, std::size_t bytes,
                    std::uint32_t origin) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const topo::TreeNode& node = ctx.tree.nodes[me];
  const std::uint32_t round = rounds.begin();
  if (me != origin) {
    const auto source = node.parent < 0 ? origin : static_cast<std::uint32_t>(node.parent);
    data.type->unpack_range(wait_posted(rounds, source, round, bytes), data.count, first, bytes,
                            data.base);
    if (node.children.empty()) {
      rounds.publish(round);
      return;
    }
  }
  Outbox outbox(rounds, round, bytes);
  data.type->pack_range(data.base, data.count, first, bytes, outbox.data());
  outbox.post();
}

void pass_down_tree(Context& ctx, std::byte* data, std::size_t bytes, std::uint32_t origin) {
  static const Datatype kBytes(Dtype::byte);
  pass_down_tree(ctx, Block{data, std::int64_t(bytes), &kBytes}, 0, bytes, origin);
}

}  // namespace shmcoll::coll
