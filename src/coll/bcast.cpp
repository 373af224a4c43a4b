#include <cstring>

#include "coll/chunks.hpp"
#include "coll/collectives.hpp"

namespace shmcoll::coll {

// One round per chunk. The root fills its two slots alternately, so it copies chunk k+1 while
// the others still copy chunk k out.
void bcast(Context& ctx, void* buffer, std::size_t bytes, int root) {
  shm::Rounds& rounds = ctx.rounds;
  const auto root_rank = static_cast<std::uint32_t>(root);
  auto* data = static_cast<std::byte*>(buffer);
  for_each_chunk(bytes, rounds.slot_bytes(), [&](std::size_t first, std::size_t n) {
    const std::uint32_t round = rounds.begin();
    if (rounds.rank() == root_rank) {
      rounds.wait_slot_free(round);
      std::memcpy(rounds.slot(root_rank, round), data + first, n);
      rounds.publish(round);
      return;
    }
    rounds.publish(round);
    rounds.wait_for(root_rank, round);
    std::memcpy(data + first, rounds.slot(root_rank, round), n);
  });
}

}  // namespace shmcoll::coll
