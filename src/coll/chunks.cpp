#include "coll/chunks.hpp"

#include <cstring>

#include "coll/store.hpp"
#include "ops/reduce.hpp"
#include "util/copy.hpp"

namespace shmcoll::coll {

void reduce_all_slots(Context& ctx, std::uint32_t round, const std::byte* mine, std::byte* out,
                      std::size_t count, Dtype dtype, const Op& op, std::uint32_t ranks) {
  shm::Rounds& rounds = ctx.rounds;
  for (std::uint32_t peer = 0; peer < ranks; ++peer) {
    if (peer != rounds.rank()) rounds.wait_for(peer, round);
    ctx.inputs[peer] = peer == rounds.rank() ? mine : rounds.slot(peer, round);
  }
  ops::reduce_kary(dtype, op, out, ctx.inputs.data(), static_cast<int>(ranks), count);
}

void gather_reduced_slices(Context& ctx, std::uint32_t result_round, std::byte* out,
                           std::size_t count, Dtype dtype) {
  shm::Rounds& rounds = ctx.rounds;
  const std::size_t element_bytes = dtype_size(dtype);
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    const Slice slice = slice_of(count, rounds.size(), peer, element_bytes);
    if (slice.count == 0) continue;
    if (peer != rounds.rank()) rounds.wait_for(peer, result_round);
    copy_bytes(out + slice.first * element_bytes,
               rounds.slot(peer, result_round) + slice.first * element_bytes,
               slice.count * element_bytes);
  }
}

std::uint32_t reduce_own_slice(Context& ctx, const std::byte* send, std::size_t count, Dtype dtype,
                               const Op& op) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::uint32_t size = rounds.size();
  const std::size_t element_bytes = dtype_size(dtype);

  const std::uint32_t copy_round = rounds.begin();
  rounds.wait_slot_free(copy_round);
  std::byte* my_copy = rounds.slot(me, copy_round);
  for (std::uint32_t peer = 0; peer < size; ++peer) {
    const Slice slice = slice_of(count, size, peer, element_bytes);
    if (peer == me || slice.count == 0) continue;
    store_changes(my_copy + slice.first * element_bytes, send + slice.first * element_bytes,
                  slice.count * element_bytes, streams_between_cores(ctx, count * element_bytes));
  }
  rounds.publish(copy_round);

  const Slice mine = slice_of(count, size, me, element_bytes);
  const std::size_t offset = mine.first * element_bytes;
  for (std::uint32_t peer = 0; peer < size; ++peer) {
    if (peer != me) rounds.wait_for(peer, copy_round);
    ctx.inputs[peer] = (peer == me ? send : rounds.slot(peer, copy_round)) + offset;
  }
  const std::uint32_t result_round = rounds.begin();
  // No wait_slot_free: everyone has published copy_round == result_round - 1 (awaited above).
  ops::reduce_kary(dtype, op, rounds.slot(me, result_round) + offset, ctx.inputs.data(),
                   static_cast<int>(size), mine.count);
  rounds.publish(result_round);
  return result_round;
}

}  // namespace shmcoll::coll
