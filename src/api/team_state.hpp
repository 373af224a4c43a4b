// What a Team holds: its tunables, its rounds over the segment, and the algorithms' context.
#pragma once

#include "coll/collectives.hpp"
#include "coll/tunables.hpp"
#include "shm/rounds.hpp"
#include "shm/segment.hpp"

namespace shmcoll::detail {

struct TeamState {
  // Joins the team: blocks until every member has joined.
  TeamState(shm::Segment segment, std::uint32_t rank, const coll::Tunables& tunables_in)
      : tunables(tunables_in),
        rounds(std::move(segment), rank,
               shm::WaitPolicy{tunables_in.spin_ns, 10'000'000, tunables_in.timeout_ms}),
        context(rounds, tunables) {
    rounds.join_team();
  }
  coll::Tunables tunables;
  shm::Rounds rounds;
  coll::Context context;
};

struct TeamAccess {
  // Joins the team (blocks until every member has joined) and wraps it in the public type.
  static Team make(shm::Segment segment, std::uint32_t rank, const coll::Tunables& tunables) {
    return Team(std::make_unique<TeamState>(std::move(segment), rank, tunables));
  }
};

inline std::size_t slot_bytes_for(const Options& options, const coll::Tunables& tunables) {
  return options.slot_bytes != 0 ? options.slot_bytes : tunables.slot_bytes;
}

}  // namespace shmcoll::detail
