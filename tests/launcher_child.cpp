// A program for shmcoll-run tests. Usage: launcher_child MODE [ARGS]
//   allreduce               check an allreduce; exit 0 when right
//   exit-rank R CODE        rank R exits with CODE after a barrier; others keep calling barriers
//   kill-rank R             rank R kills itself with SIGKILL mid-loop
//   attach-twice            a second attach must be refused
//   barrier-forever DIR     write my pid to DIR/rank.N, then loop on barriers
//   expect-cores C0,C1,...  rank r checks that shmcoll-run mapped it to core Cr, then allreduces
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
    if (mode == "expect-cores") {
      std::string cores = std::string(",") + argv[2] + ",";
      const char* mine = std::getenv("SHMCOLL_CORE");
      const bool mapped = mine && cores.find("," + std::string(mine) + ",") != std::string::npos;
      std::size_t at = 0;
      for (int skip = 0; skip < team.rank(); ++skip) at = cores.find(',', at + 1);
      const std::string want = cores.substr(at + 1, cores.find(',', at + 1) - at - 1);
      std::int64_t value = 1, sum = 0;
      team.allreduce(&value, &sum, 1, shmcoll::Dtype::i64, shmcoll::Op::sum);
      return mapped && want == mine && sum == team.size() ? 0 : 1;
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
