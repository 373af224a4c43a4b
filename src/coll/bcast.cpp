#include <cstring>

#include "coll/chunks.hpp"
#include "coll/collectives.hpp"
#include "coll/tree_steps.hpp"

namespace shmcoll::coll {

namespace {

// One round: the root posts the payload in its message line pair; the others copy it out.
void bcast_inline(Context& ctx, std::byte* data, std::size_t bytes, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t round = rounds.begin();
  if (rounds.rank() == root) {
    rounds.publish_message(round, data, bytes);
    return;
  }
  rounds.publish(round);
  std::memcpy(data, rounds.wait_message(root, round), bytes);
}

// One round per chunk. The root fills its two slots alternately, so it copies chunk k+1 while
// the others still copy chunk k out.
void bcast_pipelined(Context& ctx, std::byte* data, std::size_t bytes, std::uint32_t root_rank) {
  shm::Rounds& rounds = ctx.rounds;
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

}  // namespace

void bcast(Context& ctx, void* buffer, std::size_t bytes, int root) {
  if (bytes == 0) return;  // sizes agree on every rank, so all skip the rounds alike
  auto* data = static_cast<std::byte*>(buffer);
  const auto root_rank = static_cast<std::uint32_t>(root);
  switch (select_bcast(ctx.tunables, ctx.tree_shape, bytes)) {
    case Algorithm::bcast_inline:
      return bcast_inline(ctx, data, bytes, root_rank);
    case Algorithm::bcast_tree:
      return for_each_chunk(bytes, ctx.rounds.slot_bytes(), [&](std::size_t first, std::size_t n) {
        pass_down_tree(ctx, data + first, n, root_rank);
      });
    default:
      return bcast_pipelined(ctx, data, bytes, root_rank);
  }
}

}  // namespace shmcoll::coll
