// The engine behind every data-movement collective (scatter, gather, allgather, alltoall and
// their v/w forms). A collective describes what this rank sends to and receives from each peer
// as typed blocks; the engine moves them through the segment:
//   - every sender's data is packed (datatype engine) into its own slot, split into one region
//     per destination (personalized: scatter, alltoall) or one region all receivers read
//     (gather, allgather); receivers unpack their region straight into their buffer;
//   - blocks longer than a region move in rounds, the two slots used alternately, so senders
//     pack round k+1 while receivers still unpack round k;
//   - in round one every sender's message line carries its round count and, when all its
//     blocks fit (112 bytes over its regions), the data itself: small calls are one line
//     transfer per pair, flag and data together.
// Round counts must agree on every rank. Without v/w layouts every rank computes them from its own
// arguments (`known_longest`); otherwise each reads all senders' counts in round one.
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
  bool personalized;  // one region per destination, or one region every receiver reads
  // The longest block of the whole call when every rank knows it from its own arguments.
  std::optional<std::size_t> known_longest;
};

void exchange(Context& ctx, const ExchangeSpec& spec, const ExchangeShape& shape);

}  // namespace shmcoll::coll
