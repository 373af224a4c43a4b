#include "api/team_state.hpp"

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "coll/signature.hpp"
#include "shm/placement.hpp"

namespace shmcoll::detail {

shm::Segment place_area(shm::Segment segment, std::uint32_t rank, const RankSetup& setup) {
  const std::string degraded = shm::place_pages(segment.area(rank), segment.layout().area_bytes,
                                                setup.placement, setup.location.numa_os_index);
  if (!degraded.empty() && segment.header().warned.exchange(1) == 0) {
    std::fprintf(stderr, "shmcoll: placement %s degraded to none: %s\n",
                 setup.placement.to_string().c_str(), degraded.c_str());
  }
  return segment;
}

topo::Tree join_and_build_tree(shm::Rounds& rounds, const topo::Location& location,
                               const coll::Tunables& tunables) {
  static_assert(sizeof(topo::Location) <= shm::kProfileBytes);
  static_assert(std::is_trivially_copyable_v<topo::Location>);
  rounds.set_mismatch_describer(&coll::describe_mismatch);
  rounds.join_team(std::as_bytes(std::span(&location, 1)));
  std::vector<topo::Location> where(rounds.size());
  for (std::uint32_t rank = 0; rank < rounds.size(); ++rank) {
    std::memcpy(&where[rank], rounds.profile_data(rank), sizeof(topo::Location));
  }
  return topo::Tree::build(where, tunables.hierarchy);
}

}  // namespace shmcoll::detail
