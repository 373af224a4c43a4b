// scan and exscan: every rank posts its input (the last rank's is read by nobody), then combines
// the inputs of the ranks before it (and its own, inclusive) in rank order. Small inputs travel
// in message lines, larger ones chunk by chunk through the slots.
#include <cstring>

#include "coll/chunks.hpp"
#include "coll/collectives.hpp"
#include "ops/reduce.hpp"

namespace shmcoll::coll {

void scan(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype, const Op& op,
          bool exclusive) {
  if (count == 0) return;  // counts agree on every rank, so all skip the rounds alike
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::size_t element_bytes = dtype_size(dtype);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const std::uint32_t contributors = exclusive ? me : me + 1;
  const bool read_by_others = me + 1 < rounds.size();

  if (count * element_bytes <= shm::kMessageBytes) {
    const std::uint32_t round = rounds.begin();
    if (read_by_others) {
      rounds.publish_message(round, in, count * element_bytes);
    } else {
      rounds.publish(round);
    }
    for (std::uint32_t rank = 0; rank < contributors; ++rank) {
      ctx.inputs[rank] = rank == me ? in : rounds.wait_message(rank, round);
    }
    ops::reduce_kary(dtype, op, out, ctx.inputs.data(), int(contributors), count);
    return;
  }

  for_each_chunk(count, rounds.slot_bytes() / element_bytes, [&](std::size_t first, std::size_t n) {
    const std::size_t offset = first * element_bytes;
    const std::uint32_t round = rounds.begin();
    if (read_by_others) {
      rounds.wait_slot_free(round);
      std::memcpy(rounds.slot(me, round), in + offset, n * element_bytes);
    }
    rounds.publish(round);
    reduce_all_slots(ctx, round, in + offset, out + offset, n, dtype, op, contributors);
  });
}

}  // namespace shmcoll::coll
