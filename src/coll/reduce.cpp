#include "ops/reduce.hpp"

#include <cstring>

#include "coll/chunks.hpp"
#include "coll/collectives.hpp"
#include "coll/shared_inputs.hpp"
#include "coll/store.hpp"
#include "coll/tree_steps.hpp"
#include "util/copy.hpp"

namespace shmcoll::coll {

namespace {

// One round: everyone but the root posts its payload in a message line; the root reduces them.
void reduce_inline(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                   Dtype dtype, const Op& op, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t round = rounds.begin();
  if (rounds.rank() != root) {
    rounds.publish_message(round, send, count * dtype_size(dtype));
    return;
  }
  rounds.publish(round);
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    ctx.inputs[peer] = peer == root ? send : rounds.wait_message(peer, round);
  }
  ops::reduce_kary(dtype, op, recv, ctx.inputs.data(), static_cast<int>(rounds.size()), count);
}

// One round per chunk (stream_chunk_bytes): everyone but the root publishes its chunk; the root
// reduces them all.
void reduce_root_reads(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                       Dtype dtype, const Op& op, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::size_t element_bytes = dtype_size(dtype);
  const std::size_t chunk = stream_chunk_bytes(ctx) / element_bytes;
  const bool streaming = streams_between_cores(ctx, count * element_bytes);
  for_each_chunk(count, chunk, [&](std::size_t first, std::size_t n) {
    const std::size_t offset = first * element_bytes;
    const std::uint32_t round = rounds.begin();
    if (me != root) {
      rounds.wait_slot_free(round);
      store_changes(rounds.slot(me, round), send + offset, n * element_bytes, streaming);
      rounds.publish(round);
      return;
    }
    rounds.publish(round);
    reduce_all_slots(ctx, round, send + offset, recv + offset, n, dtype, op, rounds.size());
  });
}

// A message of one slot, where ranks do not share CPUs, in pieces (chunks.hpp): the root
// reduces piece k while the others fill piece k+1. A rank whose data changed in its last reduce
// fills its whole slot in the first round instead, and says so in that round's line, as
// changing data goes faster whole (bcast.cpp); when every rank did, the root reduces all at
// once. The piece count, which is also the round count, follows from what every rank knows (the
// size, whether ranks share CPUs).
void reduce_root_reads_pieces(Context& ctx, const std::byte* send, std::byte* recv,
                              std::size_t bytes, Dtype dtype, const Op& op, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::uint32_t pieces = piece_count(bytes);
  const std::uint32_t first_round = rounds.begin();
  if (me != root) {
    rounds.wait_slot_free(first_round);
    std::byte* const slot = rounds.slot(me, first_round);
    const std::uint8_t whole = !ctx.reduce_data_was_unchanged;
    const bool streaming = streams_between_cores(ctx, bytes);
    const bool changed_whole = whole && store_changes(slot, send, bytes, streaming);
    const bool changed_in_pieces = publish_pieces(
        rounds, first_round, bytes, pieces, &whole, sizeof whole, [&](const Piece& piece) {
          return !whole &&
                 store_changes(slot + piece.first, send + piece.first, piece.bytes, streaming);
        });
    ctx.reduce_data_was_unchanged = !changed_whole && !changed_in_pieces;
    return;
  }
  rounds.publish(first_round);
  bool all_whole = true;
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    if (peer != me) {
      all_whole = *rounds.wait_message(peer, first_round) != std::byte{0} && all_whole;
    }
  }
  // The root reads and never writes, so it publishes its other rounds at once: the others may
  // then fill their other slot for their next reduce while it still reads this one's pieces, as
  // they could with one round per call (changing data, back to back: 36 us a call at 256 KiB,
  // where publishing piece by piece measured 54). Only once it has read their first lines: a
  // sender reuses the line of round r for round r + kMessageLines once every rank has published
  // r + 1, which at 1 MiB (17 pieces) falls within its next reduce.
  for (std::uint32_t index = 1; index < pieces; ++index) rounds.publish(rounds.begin());
  const std::uint32_t parts = all_whole ? 1 : pieces;
  const std::size_t element_bytes = dtype_size(dtype);
  for (std::uint32_t index = 0; index < parts; ++index) {
    const std::uint32_t round = first_round + index;
    const Piece piece = piece_of(bytes, parts, index);
    for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
      if (peer != me) rounds.wait_for(peer, round);
      ctx.inputs[peer] = (peer == me ? send : rounds.slot(peer, first_round)) + piece.first;
    }
    ops::reduce_kary(dtype, op, recv + piece.first, ctx.inputs.data(),
                     static_cast<int>(rounds.size()), piece.bytes / element_bytes);
  }
}

// One round per chunk up the tree; a root other than the tree's root copies the result the
// tree's root posts in the same round.
void reduce_tree(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                 Dtype dtype, const Op& op, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  constexpr std::uint32_t tree_root = topo::Tree::root();
  const bool at_tree_root = rounds.rank() == tree_root;
  const std::size_t element_bytes = dtype_size(dtype);
  for_each_chunk(count, rounds.slot_bytes() / element_bytes, [&](std::size_t first, std::size_t n) {
    const std::size_t offset = first * element_bytes;
    std::byte* result = at_tree_root && root == tree_root ? recv + offset : nullptr;
    const std::uint32_t round =
        combine_up_tree(ctx, send + offset, result, n, dtype, op, root != tree_root);
    if (rounds.rank() == root && !at_tree_root) {
      copy_bytes(recv + offset, wait_posted(rounds, tree_root, round, n * element_bytes),
                 n * element_bytes);
    }
  });
}

// Per chunk: every rank reduces one slice (the reduce work is shared), the root copies them out.
void reduce_slices(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                   Dtype dtype, const Op& op, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::size_t element_bytes = dtype_size(dtype);
  for_each_chunk(count, rounds.slot_bytes() / element_bytes, [&](std::size_t first, std::size_t n) {
    const std::size_t offset = first * element_bytes;
    const std::uint32_t result_round = reduce_own_slice(ctx, send + offset, n, dtype, op);
    if (rounds.rank() == root) gather_reduced_slices(ctx, result_round, recv + offset, n, dtype);
  });
}

}  // namespace

void reduce(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype,
            const Op& op, int root) {
  if (count == 0) return;  // counts agree on every rank, so all skip the rounds alike
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const auto root_rank = static_cast<std::uint32_t>(root);
  const std::size_t bytes = count * dtype_size(dtype);
  const Algorithm algorithm = select_reduce(ctx.tunables, ctx.tree_shape, bytes, op.commutative());
  const bool reads_every_buffer =
      algorithm == Algorithm::reduce_slices || algorithm == Algorithm::reduce_root_reads;
  if (reads_every_buffer && reduce_from_shared_pages(ctx, in, out, count, dtype, op, root_rank)) {
    return;
  }
  switch (algorithm) {
    case Algorithm::reduce_inline:
      return reduce_inline(ctx, in, out, count, dtype, op, root_rank);
    case Algorithm::reduce_tree:
      return reduce_tree(ctx, in, out, count, dtype, op, root_rank);
    case Algorithm::reduce_slices:
      return reduce_slices(ctx, in, out, count, dtype, op, root_rank);
    default:
      if (bytes <= ctx.rounds.slot_bytes() && !ctx.tree_shape.ranks_share_cpus) {
        return reduce_root_reads_pieces(ctx, in, out, bytes, dtype, op, root_rank);
      }
      return reduce_root_reads(ctx, in, out, count, dtype, op, root_rank);
  }
}

}  // namespace shmcoll::coll
