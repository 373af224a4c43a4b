// The README's first program: four ranks, forked from this one, add up a vector and broadcast it.
#include <cstdio>
#include <shmcoll/shmcoll.hpp>
#include <span>
#include <vector>

int main() {
  shmcoll::run(4, {}, [](shmcoll::Team& team) {  // forks 3 children; rank 0 is the caller
    std::vector<double> x(1000, team.rank());
    team.allreduce_in_place(std::span<double>(x), shmcoll::Op::sum);  // 0+1+2+3 on every rank
    team.bcast(std::span<double>(x), /*root=*/2);
    if (team.rank() == 0) std::printf("x[0] = %g on %d ranks\n", x[0], team.size());
  });
}
