#include "api/team_state.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "coll/signature.hpp"
#include "shm/futex.hpp"
#include "shm/placement.hpp"

namespace shmcoll::detail {

namespace {

// Whether this member is the team's first to print warning `kind` (each kind is printed once).
bool first_warning(const shm::Segment& segment, std::uint32_t kind) {
  return (segment.header().warned.fetch_or(kind) & kind) == 0;
}

}  // namespace

shm::Segment place_area(shm::Segment segment, std::uint32_t rank, const RankSetup& setup) {
  const std::string degraded = shm::place_pages(segment.area(rank), segment.layout().area_bytes,
                                                setup.placement, setup.location.numa_os_index);
  if (!degraded.empty() && first_warning(segment, shm::kPlacementWarning)) {
    std::fprintf(stderr, "shmcoll: placement %s degraded to none: %s\n",
                 setup.placement.to_string().c_str(), degraded.c_str());
  }
  return segment;
}

namespace {

// Every rank of a call must take the same path: a member whose environment chose other
// team-wide tunables than rank 0's (an MPMD launch, a wrapper script setting a variable on some
// ranks) runs with rank 0's. The first such member says which and both values, once per team.
void adopt_team_tunables(const shm::Rounds& rounds, coll::Tunables& tunables) {
  if (rounds.rank() == 0) return;
  coll::TeamTunables rank0;
  std::memcpy(&rank0, rounds.team_data(), sizeof rank0);
  const std::vector<std::string> differing = tunables.team.differences(rank0, "rank 0");
  tunables.team = rank0;
  if (differing.empty() || !first_warning(rounds.segment(), shm::kTunablesWarning)) return;
  std::string list;
  for (const std::string& entry : differing) list += (list.empty() ? "" : ", ") + entry;
  std::fprintf(stderr,
               "shmcoll: rank %u: %s; the team uses rank 0's values (every rank of a call must "
               "take the same path)\n",
               rounds.rank(), list.c_str());
}

}  // namespace

bool ranks_share_cpus(std::span<const MemberProfile> members) {
  // The team's budget: the union of the masks, and the largest quota when every member has one.
  topo::CpuBudget together;
  bool every_member_has_quota = true;
  for (const MemberProfile& member : members) {
    if (member.crowded) return true;
    together.allowed |= member.budget.allowed;
    together.quota_cpus = std::max(together.quota_cpus, member.budget.quota_cpus);
    every_member_has_quota = every_member_has_quota && member.budget.quota_cpus > 0;
  }
  if (!every_member_has_quota) together.quota_cpus = 0;
  return members.size() > static_cast<std::size_t>(together.usable());
}

topo::Tree join_and_build_tree(shm::Rounds& rounds, const RankSetup& setup,
                               coll::Tunables& tunables, bool& share) {
  static_assert(sizeof(MemberProfile) <= shm::kProfileBytes);
  static_assert(std::is_trivially_copyable_v<MemberProfile>);
  static_assert(sizeof(coll::TeamTunables) <= shm::kTeamDataBytes);
  static_assert(std::is_trivially_copyable_v<coll::TeamTunables>);
  const MemberProfile mine{setup.location, topo::CpuBudget::of_this_process(),
                           shm::register_for_global_membarrier(), setup.processes_share_cpus};
  rounds.set_mismatch_describer(&coll::describe_mismatch);
  rounds.join_team(std::as_bytes(std::span(&mine, 1)), std::as_bytes(std::span(&tunables.team, 1)));
  adopt_team_tunables(rounds, tunables);
  std::vector<MemberProfile> members(rounds.size());
  std::vector<topo::Location> where(rounds.size());
  bool membarrier = true;
  for (std::uint32_t rank = 0; rank < rounds.size(); ++rank) {
    std::memcpy(&members[rank], rounds.profile_data(rank), sizeof(MemberProfile));
    where[rank] = members[rank].location;
    membarrier = membarrier && members[rank].membarrier;
  }
  // Each rank's home is the rank-th CPU of its mask: distinct among ranks that share a mask and
  // fit it, and for a bound rank the one it is bound to.
  share = ranks_share_cpus(members);
  rounds.set_wait_policy(
      wait_policy(tunables, share, mine.budget.nth_allowed(rounds.rank()), membarrier));
  return topo::Tree::build(where, tunables.team.hierarchy());
}

shm::SegmentSizes segment_sizes_for(const Options& options, const coll::Tunables& tunables,
                                    std::uint32_t team_size) {
  const std::size_t heap = options.heap_bytes != 0 ? options.heap_bytes : tunables.heap_bytes;
  if (options.slot_bytes != 0) return {options.slot_bytes, heap};
  std::size_t slot = tunables.slot_bytes_for(team_size);
  if (tunables.slot_bytes != 0) return {slot, heap};  // SHMCOLL_SLOT_BYTES, as set
  struct statvfs shm {};
  if (statvfs("/dev/shm", &shm) == 0) {
    const std::size_t half_free = shm.f_bavail * shm.f_frsize / 2;
    while (slot > coll::Tunables::kLeastDefaultSlot &&
           std::size_t{team_size} * 2 * slot > half_free) {
      slot /= 2;
    }
  }
  return {slot, heap};
}

}  // namespace shmcoll::detail
