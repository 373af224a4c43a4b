// Teams whose segment never has a name (the MPI layer's node teams): rank 0 makes the segment,
// the others open it through rank 0's descriptor (/proc/<pid>/fd/<fd>) while rank 0 holds it
// open, so nothing is left in /dev/shm whoever is killed when. The invitation is plain bytes
// that the caller hands over (the MPI layer: PMPI_Bcast), and the caller tells rank 0 when every
// member has opened the segment (or given up), so that it closes the descriptor.
#pragma once

#include <cstdint>

#include "shm/segment.hpp"
#include "shmcoll/shmcoll.hpp"

namespace shmcoll::detail {

struct TeamInvitation {
  std::int32_t pid = 0;                 // rank 0
  std::int32_t fd = -1;                 // its descriptor of the segment
  std::uint64_t inode = 0, device = 0;  // of the segment: what a member checks it opened
  std::uint64_t id = 0;  // random, never 0, below 2^62: names the team among its members
};

// Rank 0: a new segment for `size` members, sized as Team::join sizes one; `invitation` names it.
shm::Segment make_invited_segment(int size, const Options& options, TeamInvitation* invitation);
// Every other member: the segment the invitation names (fails where rank 0's /proc entry is
// not reachable or not that segment: another PID namespace, say).
shm::Segment open_invited_segment(const TeamInvitation& invitation, int size);
// Rank 0, once every member has opened the segment or given up.
void close_invitation(const TeamInvitation& invitation);
// Every member, once all have opened the segment: joins (blocks until every member has).
Team join_invited_team(shm::Segment segment, int rank, const Options& options);

}  // namespace shmcoll::detail
