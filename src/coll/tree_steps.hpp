// The two moves every tree algorithm is made of, for payloads that fit a message line: combine
// up the hierarchy tree, and pass down it. Each takes one round.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll/collectives.hpp"

namespace shmcoll::coll {

// Combines my input with my children's partial results (own first, then children in rank order,
// which is rank order on a rank-ordered tree) and posts the partial for my parent. The tree's
// root writes the full result to `result` (may alias `send`; null: post it only) and, with
// `post_at_root`, also posts it. Returns the round.
std::uint32_t combine_up_tree(Context& ctx, const std::byte* send, std::byte* result,
                              std::size_t count, Dtype dtype, const Op& op, bool post_at_root);

// `origin` posts `data`; the tree's root copies it from `origin` and every other rank from its
// parent, re-posting it when it has children. `data` is read at `origin`, written elsewhere.
void pass_down_tree(Context& ctx, std::byte* data, std::size_t bytes, std::uint32_t origin);

}  // namespace shmcoll::coll
