// What a Team holds: its tunables, its rounds over the segment, and the algorithms' context.
#pragma once

#include "coll/collectives.hpp"
#include "coll/tunables.hpp"
#include "shm/rounds.hpp"
#include "shm/segment.hpp"

namespace shmcoll::detail {

inline shm::WaitPolicy wait_policy(const coll::Tunables& tunables) {
  shm::WaitPolicy policy;  // keeps the default sleep slice
  policy.spin_ns = tunables.spin_ns;
  policy.timeout_ms = tunables.timeout_ms;
  return policy;
}

struct TeamState {
  // Joins the team: blocks until every member has joined.
  TeamState(shm::Segment segment, std::uint32_t rank, const coll::Tunables& tunables_in)
      : tunables(tunables_in),
        rounds(std::move(segment), rank, wait_policy(tunables_in)),
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
