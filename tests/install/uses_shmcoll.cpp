// Built against an installed shmcoll: an allreduce on 3 forked ranks, checked.
#include <shmcoll/shmcoll.hpp>

#include <cstdio>

int main() {
  shmcoll::run(3, {}, [](shmcoll::Team& team) {
    long value = team.rank() + 1;
    team.allreduce(shmcoll::in_place, &value, 1, shmcoll::Dtype::i64, shmcoll::Op::sum);
    if (value != 6) throw std::runtime_error("allreduce gave " + std::to_string(value));
  });
  std::printf("uses_shmcoll: shmcoll %s, allreduce on 3 ranks ok\n", shmcoll::version());
  return 0;
}
