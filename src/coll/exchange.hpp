// The engine behind every data-movement collective (scatter, gather, allgather, alltoall and
// their v/w forms). A collective describes what this rank sends to and receives from each peer
// as typed blocks; the engine moves them through the segment:
//   - every sender's data is packed (datatype engine) into its own slot, split into one region
//     per destination (personalized: scatter, alltoall) or one region all receivers read
//     (gather, allgather); receivers unpack their region straight into their buffer;
//   - blocks longer than a region move in rounds, the two slots used alternately, so senders
//     pack round k+1 while receivers still unpack round k;
//   - in round one every sender's message line carries its round count and, when all its
//     blocks fit (96 bytes over its regions), the data itself: small calls are one line pair
//     per pair of ranks, flag and data together; a scatter root whose small blocks overflow
//     one line fills the lines of up to 8 rounds, which it may write ahead of its readers;
//   - a sender whose blocks lie in its heap (Team::allocate) and are long enough posts their
//     offsets instead, receivers copy them straight out (one copy, not two) and then release
//     them; the sender returns once every rank has released. A sender whose ordinary buffer has
//     shared pages (shm/shared_pages.hpp) does the same with a note per block naming its memfd,
//     and one whose contiguous blocks reach SHMCOLL_CMA_MIN with a note per block naming where
//     it is in its memory, which receivers read with the kernel's cross-memory copy
//     (shm/process_memory.hpp). In a gatherv such senders write their blocks into the root's
//     buffer instead, where its first round's note says (the root copying every block itself
//     would take as long as all the senders together).
// Round counts must agree on every rank. Where every rank knows every block length from its own
// arguments (regular layouts, allgatherv) each computes them; in rooted v forms the root knows
// them all and the others read its count; in alltoallv/w each reads every rank's count. There a
// receiver cannot check a block's length against its own arguments either, so each block's length
// travels with it, and one that is sent more or less than it expects fails with "mismatched
// counts" (fail_mismatched_counts, also for scatterv's small blocks, scatter.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "coll/blocks.hpp"
#include "coll/collectives.hpp"

namespace shmcoll::coll {

class ExchangeSpec {
 public:
  static constexpr std::uint32_t kEveryone = ~0u;
  virtual ~ExchangeSpec() = default;
  // My data for `dest` (never me). A non-personalized exchange asks once, for kEveryone.
  virtual Block outgoing(std::uint32_t dest) const = 0;
  // Where the data from `source` (never me) lands.
  virtual Block incoming(std::uint32_t source) const = 0;
  // My own contribution to my own receive buffer, when there is one (not in place).
  virtual void copy_own() const = 0;
};

struct ExchangeShape {
  enum class Knowledge { everyone, root, nobody };  // who knows every block length
  bool personalized;  // one region per destination, or one region every receiver reads
  Knowledge lengths_known_by;
  std::size_t longest = 0;  // for Knowledge::everyone: the longest block of the whole call
  std::uint32_t root = 0;   // for Knowledge::root
  // Receivers may read a sender's blocks straight from its heap (not when a block's memory
  // also receives during the call, as in alltoall in place).
  bool direct_allowed = true;
  // Only the root sends (scatter): blocks that overflow one message line may fill the lines of
  // several rounds.
  bool one_sender = false;
  bool one_receiver = false;  // only the root receives (gather)
};

void exchange(Context& ctx, const ExchangeSpec& spec, const ExchangeShape& shape);

// Rank `me` was sent `sent` bytes by `source` where it expects `expected`.
[[noreturn]] void fail_mismatched_counts(std::uint32_t me, std::uint32_t source, std::uint64_t sent,
                                         std::size_t expected);

}  // namespace shmcoll::coll
