// A program for shmcoll-run tests. Usage: launcher_child MODE [ARGS]
//   allreduce               check an allreduce; exit 0 when right
//   exit-rank R CODE        rank R exits with CODE after a barrier; others keep calling barriers
//   kill-rank R             rank R kills itself with SIGKILL mid-loop
//   attach-twice            a second attach must be refused
//   barrier-forever DIR     write my pid to DIR/rank.N, then loop on barriers
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "shmcoll/shmcoll.hpp"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    shmcoll::Team team = shmcoll::Team::attach();
    if (mode == "allreduce") {
      std::int64_t value = team.rank(), sum = -1;
      team.allreduce(&value, &sum, 1, shmcoll::Dtype::i64, shmcoll::Op::sum);
      return sum == std::int64_t{team.size()} * (team.size() - 1) / 2 ? 0 : 1;
    }
    if (mode == "exit-rank" || mode == "kill-rank") {
      const int victim = std::atoi(argv[2]);
      for (int i = 0; i < 1000; ++i) {
        if (team.rank() == victim && i == 100) {
          if (mode == "kill-rank") kill(getpid(), SIGKILL);
          return argc > 3 ? std::atoi(argv[3]) : 0;
        }
        team.barrier();
      }
      return 0;
    }
    if (mode == "attach-twice") {
      try {
        shmcoll::Team::attach();
      } catch (const shmcoll::Error& error) {
        return error.code() == shmcoll::Errc::invalid_argument ? 0 : 1;
      }
      return 1;
    }
    if (mode == "barrier-forever") {
      std::ofstream(std::string(argv[2]) + "/rank." + std::to_string(team.rank())) << getpid();
      for (;;) team.barrier();
    }
  } catch (const shmcoll::Error& error) {
    std::fprintf(stderr, "launcher_child: %s\n", error.what());
    return error.code() == shmcoll::Errc::peer_failed ? 4 : 5;
  }
  return 6;
}
