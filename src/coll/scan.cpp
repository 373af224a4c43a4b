// scan and exscan in rank order. Flat: every rank posts its input (the last rank's is read by
// nobody), then combines the inputs of the ranks before it (and its own, inclusive); small
// inputs travel in message lines, larger ones chunk by chunk through the slots. Tree: see
// scan_tree.
#include <cstring>

#include "coll/chunks.hpp"
#include "coll/collectives.hpp"
#include "coll/store.hpp"
#include "coll/tree_steps.hpp"
#include "ops/reduce.hpp"
#include "util/copy.hpp"

namespace shmcoll::coll {

namespace {

void scan_inline(Context& ctx, const std::byte* in, std::byte* out, std::size_t count, Dtype dtype,
                 const Op& op, std::uint32_t contributors) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::uint32_t round = rounds.begin();
  if (me + 1 < rounds.size()) {
    rounds.publish_message(round, in, count * dtype_size(dtype));
  } else {
    rounds.publish(round);
  }
  for (std::uint32_t rank = 0; rank < contributors; ++rank) {
    ctx.inputs[rank] = rank == me ? in : rounds.wait_message(rank, round);
  }
  ops::reduce_kary(dtype, op, out, ctx.inputs.data(), static_cast<int>(contributors), count);
}

void scan_chunks(Context& ctx, const std::byte* in, std::byte* out, std::size_t count, Dtype dtype,
                 const Op& op, std::uint32_t contributors) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::size_t element_bytes = dtype_size(dtype);
  const bool streaming = streams_between_cores(ctx, count * element_bytes);
  for_each_chunk(count, rounds.slot_bytes() / element_bytes, [&](std::size_t first, std::size_t n) {
    const std::size_t offset = first * element_bytes;
    const std::uint32_t round = rounds.begin();
    if (me + 1 < rounds.size()) {
      rounds.wait_slot_free(round);
      store_changes(rounds.slot(me, round), in + offset, n * element_bytes, streaming);
    }
    rounds.publish(round);
    reduce_all_slots(ctx, round, in + offset, out + offset, n, dtype, op, contributors);
  });
}

// On a rank-ordered tree every subtree is the contiguous range of ranks starting at its root, so
// the ranks before a child are its parent's inclusive prefix followed by the subtrees of its
// elder siblings. Round one carries subtree totals up; round two carries each parent's
// inclusive prefix down, and each child adds its elder siblings' totals from round one (their
// posts stay until I publish round two). Two tree depths instead of p - 1 reads on the last rank.
void scan_tree_chunk(Context& ctx, const std::byte* in, std::byte* out, std::size_t count,
                     Dtype dtype, const Op& op, bool exclusive) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const topo::TreeNode& node = ctx.tree.nodes[me];
  const std::size_t bytes = count * dtype_size(dtype);

  const std::uint32_t totals_round = combine_up_tree(ctx, in, nullptr, count, dtype, op, false);
  const std::uint32_t prefix_round = rounds.begin();
  int before = 0;  // inputs that make up the ranks before me
  if (node.parent >= 0) {
    const auto parent = static_cast<std::uint32_t>(node.parent);
    ctx.inputs[before++] = wait_posted(rounds, parent, prefix_round, bytes);
    for (int sibling : ctx.tree.nodes[parent].children) {
      if (sibling == static_cast<int>(me)) break;
      ctx.inputs[before++] =
          wait_posted(rounds, static_cast<std::uint32_t>(sibling), totals_round, bytes);
    }
  }
  ctx.inputs[before] = in;
  if (node.children.empty()) {
    ops::reduce_kary(dtype, op, out, ctx.inputs.data(), exclusive ? before : before + 1, count);
    rounds.publish(prefix_round);
    return;
  }
  Outbox inclusive(rounds, prefix_round, bytes);
  ops::reduce_kary(dtype, op, inclusive.data(), ctx.inputs.data(), before + 1, count);
  // After the inclusive prefix: in place, `out` is `in`.
  if (exclusive) {
    ops::reduce_kary(dtype, op, out, ctx.inputs.data(), before, count);
  } else {
    copy_bytes(out, inclusive.data(), bytes);
  }
  inclusive.post();
}

void scan_tree(Context& ctx, const std::byte* in, std::byte* out, std::size_t count, Dtype dtype,
               const Op& op, bool exclusive) {
  const std::size_t element_bytes = dtype_size(dtype);
  for_each_chunk(count, ctx.rounds.slot_bytes() / element_bytes,
                 [&](std::size_t first, std::size_t n) {
                   const std::size_t offset = first * element_bytes;
                   scan_tree_chunk(ctx, in + offset, out + offset, n, dtype, op, exclusive);
                 });
}

}  // namespace

void scan(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype, const Op& op,
          bool exclusive) {
  if (count == 0) return;  // counts agree on every rank, so all skip the rounds alike
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const std::uint32_t me = ctx.rounds.rank();
  const std::uint32_t contributors = exclusive ? me : me + 1;
  switch (select_scan(ctx.tunables, ctx.tree_shape, count * dtype_size(dtype))) {
    case Algorithm::scan_tree:
      return scan_tree(ctx, in, out, count, dtype, op, exclusive);
    case Algorithm::scan_inline:
      return scan_inline(ctx, in, out, count, dtype, op, contributors);
    default:
      return scan_chunks(ctx, in, out, count, dtype, op, contributors);
  }
}

}  // namespace shmcoll::coll
