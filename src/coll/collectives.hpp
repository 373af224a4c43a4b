// The collective algorithms. Arguments arrive validated; `send` is never in_place (the API layer
// resolves in_place to the receive buffer), so an algorithm only has to tolerate send == recv.
#pragma once

#include <cstddef>
#include <vector>

#include "coll/tunables.hpp"
#include "shm/rounds.hpp"
#include "shmcoll/shmcoll.hpp"
#include "topo/tree.hpp"

namespace shmcoll::coll {

struct Context {
  Context(shm::Rounds& rounds_in, const Tunables& tunables_in, const topo::Tree& tree_in)
      : rounds(rounds_in),
        tunables(tunables_in),
        tree(tree_in),
        tree_shape(TreeShape::of(tree_in)),
        inputs(rounds_in.size()) {}
  shm::Rounds& rounds;
  const Tunables& tunables;
  const topo::Tree& tree;
  TreeShape tree_shape;
  std::vector<const void*> inputs;  // one per rank, sized once so collectives never allocate
};

void barrier(Context& ctx);
void bcast(Context& ctx, void* buffer, std::size_t bytes, int root);
void reduce(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype,
            const Op& op, int root);
void allreduce(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype,
               const Op& op);

}  // namespace shmcoll::coll
