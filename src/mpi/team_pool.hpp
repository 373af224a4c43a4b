// Teams of freed communicators, kept for the next communicator over the same processes in the
// same rank order (a dup/free or split/free loop makes one such communicator after another), so
// it costs an agreement instead of a segment to create, map, pre-fault and tear down. A kept
// team goes on where its last call left it: every member made the same calls on it, and a member
// reaches the new communicator's first call only after its last call on the old one returned.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "shmcoll/shmcoll.hpp"

namespace shmcoll::mpi {

// `comm`'s members as ranks of MPI_COMM_WORLD, in `comm`'s rank order; empty when one is outside
// MPI_COMM_WORLD (spawned or connected), whose teams are not kept.
std::vector<int> world_ranks_of(MPI_Comm comm);

class TeamPool {
 public:
  explicit TeamPool(std::size_t capacity) : capacity_(capacity) {}
  // Keeps `team` (agreed on as `id` by its members) for a later communicator of `members`; the
  // oldest kept team is let go past the capacity.
  void keep(std::vector<int> members, std::uint64_t id, std::shared_ptr<Team> team);
  // The id of the most recently kept team of `members`, 0 when none is kept.
  std::uint64_t find(const std::vector<int>& members) const;
  // Takes the team kept as `id` out of the pool (null when none is).
  std::shared_ptr<Team> take(std::uint64_t id);
  void clear() {
    entries_.clear();
    warm_up_calls_.clear();
  }
  // The blocking calls this process made through PMPI on communicators of `members` while those
  // warmed up, since the last new team made for them: what earns these ranks a new team, which the
  // pool then hands from one of their communicators to the next (a split loop's communicators each
  // live too briefly to earn one alone). At most 256 sets of members are tracked; a new set past
  // that starts the tracking afresh.
  long& warm_up_calls(const std::vector<int>& members);
  // Kept teams and the /dev/shm their segments hold.
  std::size_t size() const { return entries_.size(); }
  std::size_t bytes() const;

 private:
  struct Entry {
    std::vector<int> members;
    std::uint64_t id;
    std::shared_ptr<Team> team;
  };
  std::size_t capacity_;
  std::deque<Entry> entries_;  // oldest first
  std::map<std::vector<int>, long> warm_up_calls_;
};

}  // namespace shmcoll::mpi
