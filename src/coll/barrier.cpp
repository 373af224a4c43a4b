#include "coll/collectives.hpp"

namespace shmcoll::coll {

void barrier(Context& ctx) {
  const std::uint32_t round = ctx.rounds.begin();
  ctx.rounds.publish(round);
  ctx.rounds.wait_for_all(round);
}

}  // namespace shmcoll::coll
