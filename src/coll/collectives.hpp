// The collective algorithms. Arguments arrive validated; `send` is never in_place (the API layer
// resolves in_place to the receive buffer), so an algorithm only has to tolerate send == recv.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "coll/blocks.hpp"
#include "coll/tunables.hpp"
#include "shm/rounds.hpp"
#include "shmcoll/shmcoll.hpp"
#include "topo/tree.hpp"

namespace shmcoll::coll {

struct Context {
  Context(shm::Rounds& rounds_in, const TeamTunables& tunables_in, const topo::Tree& tree_in,
          bool ranks_share_cpus = false)
      : rounds(rounds_in),
        tunables(tunables_in),
        tree(tree_in),
        tree_shape(TreeShape::of(tree_in, ranks_share_cpus)),
        inputs(rounds_in.size()),
        offsets(rounds_in.size()),
        direct_from(rounds_in.size()),
        line_arrival(rounds_in.size()),
        peer_pages(rounds_in.size()),
        cuts(2 * rounds_in.size() + 2) {}
  shm::Rounds& rounds;
  const TeamTunables& tunables;
  const topo::Tree& tree;
  TreeShape tree_shape;
  // One entry per rank, sized once so collectives never allocate.
  std::vector<const void*> inputs;
  std::vector<std::size_t> offsets;
  std::vector<char> direct_from;  // the exchange: which senders' blocks were read from their heap
  std::vector<std::uint32_t> line_arrival;   // the exchange: where blocks arrive in later lines
  std::vector<const std::byte*> peer_pages;  // shared_inputs: each peer's shared pages, mapped
  std::vector<std::size_t> cuts;             // shared_inputs: where the buffers' parts begin
  // Whether the last bcast this rank was the root of, and the last reduce it sent to, found its
  // slot already holding the data (bcast.cpp, reduce.cpp: the next one moves in pieces).
  bool bcast_data_was_unchanged = false;
  bool reduce_data_was_unchanged = false;
  // Set on every rank alike once a rank could not read a peer's memory with the kernel's
  // cross-memory copy (exchange.cpp): the team's later calls go through the slots.
  bool cma_refused = false;
  // The root of the team's last call, -1 when it had none (set by the caller after each call,
  // alike on every rank): where ranks share CPUs, it releases the next barrier (barrier.cpp).
  int last_call_root = -1;
};

void barrier(Context& ctx);
// `data`: this rank's layout of the bytes (every rank's holds the same number).
void bcast(Context& ctx, const Block& data, int root);
void reduce(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype,
            const Op& op, int root);
void allreduce(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype,
               const Op& op);
// recv[0, counts[me]) = the reduction of every rank's elements [offset of me, + counts[me]) of
// send, where blocks follow each other in rank order. In place, send is the receive buffer.
void reduce_scatter(Context& ctx, const void* send, void* recv,
                    std::span<const std::int64_t> counts, Dtype dtype, const Op& op, bool in_place);
// Inclusive (exclusive == false) or exclusive prefix reduction in rank order; an exclusive scan
// leaves rank 0's recv untouched.
void scan(Context& ctx, const void* send, void* recv, std::size_t count, Dtype dtype, const Op& op,
          bool exclusive);

// Data movement. `varying`: v or w layouts, so no rank knows every block length by itself.
// Blocks that the standard makes insignificant (or in-place ones) arrive with count 0.
void scatter(Context& ctx, const Layout& send, const Block& recv, int root, bool varying);
void gather(Context& ctx, const Block& send, const Layout& recv, int root, bool varying);
// In place: my block is already in recv.block(me).
void allgather(Context& ctx, const Block& send, const Layout& recv, bool in_place);
// In place: send is recv.
void alltoall(Context& ctx, const Layout& send, const Layout& recv, bool in_place, bool varying);

}  // namespace shmcoll::coll
