// The moves every tree algorithm is made of: combine up the hierarchy tree, and pass down it.
// Each takes one round and carries at most one slot's worth; callers loop over chunks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll/collectives.hpp"

namespace shmcoll::coll {

// Where I build what I post in a round: a message line when the payload fits one, else my slot
// for the round (waited free first). post() publishes it.
class Outbox {
 public:
  Outbox(shm::Rounds& rounds, std::uint32_t round, std::size_t bytes);
  std::byte* data() { return data_; }
  void post();

 private:
  shm::Rounds& rounds_;
  std::uint32_t round_;
  std::size_t bytes_;
  std::byte* data_;
  alignas(64) std::byte line_[shm::kMessageBytes];
};

// What `peer` posted through its Outbox in `round`.
const std::byte* wait_posted(shm::Rounds& rounds, std::uint32_t peer, std::uint32_t round,
                             std::size_t bytes);

// Combines my input with my children's partial results (own first, then children in rank order,
// which is rank order on a rank-ordered tree) and posts the partial for my parent. The tree's
// root writes the full result to `result` (may alias `send`) and, with `post_at_root`, also
// posts it; with neither, the total is not wanted and the root only takes part in the round.
// Returns the round.
std::uint32_t combine_up_tree(Context& ctx, const std::byte* send, std::byte* result,
                              std::size_t count, Dtype dtype, const Op& op, bool post_at_root);

// `origin` posts the packed bytes [first, first + bytes) of `data`; the tree's root unpacks them
// from `origin` and every other rank from its parent, re-posting them when it has children.
// `data` is read at `origin`, written elsewhere.
void pass_down_tree(Context& ctx, const Block& data, std::size_t first, std::size_t bytes,
                    std::uint32_t origin);
// The same for plain bytes.
void pass_down_tree(Context& ctx, std::byte* data, std::size_t bytes, std::uint32_t origin);

}  // namespace shmcoll::coll
