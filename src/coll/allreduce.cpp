#include <cstring>

#include "coll/chunks.hpp"
#include "coll/collectives.hpp"
#include "coll/shared_inputs.hpp"
#include "coll/store.hpp"
#include "coll/tree_steps.hpp"
#include "ops/reduce.hpp"

namespace shmcoll::coll {

namespace {

// One round: my payload goes into a message line; every rank reads each peer's line (flag and
// data arrive together) and reduces in rank order.
void allreduce_inline(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                      Dtype dtype, const Op& op) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t round = rounds.begin();
  rounds.publish_message(round, send, count * dtype_size(dtype));
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    ctx.inputs[peer] = peer == rounds.rank() ? send : rounds.wait_message(peer, round);
  }
  ops::reduce_kary(dtype, op, recv, ctx.inputs.data(), static_cast<int>(rounds.size()), count);
}

// One round, where ranks share CPUs: as allreduce_inline, but only the last rank to arrive reads
// the lines and reduces (in rank order, so bitwise as allreduce_inline); the others wait for its
// result. Each rank polls one word instead of p - 1 lines, and the lines are read once, not p - 1
// times.
void allreduce_arrivals(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                        Dtype dtype, const Op& op) {
  shm::Rounds& rounds = ctx.rounds;
  const std::size_t bytes = count * dtype_size(dtype);
  const std::uint32_t round = rounds.begin();
  rounds.publish_message(round, send, bytes);
  if (!rounds.arrive(round)) {
    std::memcpy(recv, rounds.wait_result(round), bytes);
    return;
  }
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    ctx.inputs[peer] = peer == rounds.rank() ? send : rounds.wait_message(peer, round);
  }
  std::byte* result = rounds.result_data();
  ops::reduce_kary(dtype, op, result, ctx.inputs.data(), static_cast<int>(rounds.size()), count);
  std::memcpy(recv, result, bytes);
  rounds.publish_result(round);
}

// One round per chunk (stream_chunk_bytes): publish my chunk, then reduce every rank's chunk
// myself. Every rank evaluates the same expression in rank order, so results are bitwise equal
// everywhere.
void allreduce_all_read(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                        Dtype dtype, const Op& op) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::size_t element_bytes = dtype_size(dtype);
  const std::size_t chunk = stream_chunk_bytes(ctx) / element_bytes;
  const bool streaming = streams_between_cores(ctx, count * element_bytes);
  for_each_chunk(count, chunk, [&](std::size_t first, std::size_t n) {
    const std::size_t offset = first * element_bytes;
    const std::uint32_t round = rounds.begin();
    rounds.wait_slot_free(round);
    store_changes(rounds.slot(me, round), send + offset, n * element_bytes, streaming);
    rounds.publish(round);
    reduce_all_slots(ctx, round, send + offset, recv + offset, n, dtype, op, rounds.size());
  });
}

// Per chunk: reduce-scatter into the slots (each rank reduces one slice), then every rank copies
// all reduced slices out. Memory traffic per rank is about 3 chunk lengths instead of p.
void allreduce_slices(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                      Dtype dtype, const Op& op) {
  shm::Rounds& rounds = ctx.rounds;
  const std::size_t element_bytes = dtype_size(dtype);
  for_each_chunk(count, rounds.slot_bytes() / element_bytes, [&](std::size_t first, std::size_t n) {
    const std::size_t offset = first * element_bytes;
    const std::uint32_t result_round = reduce_own_slice(ctx, send + offset, n, dtype, op);
    gather_reduced_slices(ctx, result_round, recv + offset, n, dtype);
  });
}

// Per chunk, up the tree to its root, then the result down: two rounds, and every rank gets the
// root's bits.
void allreduce_tree(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                    Dtype dtype, const Op& op) {
  constexpr std::uint32_t tree_root = topo::Tree::root();
  const std::size_t element_bytes = dtype_size(dtype);
  for_each_chunk(
      count, ctx.rounds.slot_bytes() / element_bytes, [&](std::size_t first, std::size_t n) {
        std::byte* result = recv + first * element_bytes;
        combine_up_tree(ctx, send + first * element_bytes,
                        ctx.rounds.rank() == tree_root ? result : nullptr, n, dtype, op, false);
        pass_down_tree(ctx, result, n * element_bytes, tree_root);
      });
}

}  // namespace

void allreduce(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype,
               const Op& op) {
  if (count == 0) return;  // counts agree on every rank, so all skip the rounds alike
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  switch (
      select_allreduce(ctx.tunables, ctx.tree_shape, count * dtype_size(dtype), op.commutative())) {
    case Algorithm::allreduce_inline:
      return allreduce_inline(ctx, in, out, count, dtype, op);
    case Algorithm::allreduce_arrivals:
      return allreduce_arrivals(ctx, in, out, count, dtype, op);
    case Algorithm::allreduce_tree:
      return allreduce_tree(ctx, in, out, count, dtype, op);
    case Algorithm::allreduce_slices:
      return allreduce_slices(ctx, in, out, count, dtype, op);
    default:
      if (allreduce_from_shared_pages(ctx, in, out, count, dtype, op)) return;
      return allreduce_all_read(ctx, in, out, count, dtype, op);
  }
}

}  // namespace shmcoll::coll
