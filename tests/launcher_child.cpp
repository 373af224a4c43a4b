// A program for shmcoll-run tests. Usage: launcher_child MODE [ARGS]
//   allreduce               check an allreduce; exit 0 when right
//   exit-rank R CODE        rank R exits with CODE after a barrier; others keep calling barriers
//   kill-rank R             rank R kills itself with SIGKILL mid-loop
//   attach-twice            a second attach must be refused
//   barrier-forever DIR     write my pid to DIR/rank.N, then loop on barriers
//   random-forever DIR SEED write my pid to DIR/rank.N, then loop on collectives drawn at random
//                           (the same sequence on every rank), until killed or failed
//   expect-cores C0,C1,...  rank r checks that shmcoll-run mapped it to core Cr, then allreduces
//   exit-rank-others-sleep DIR R CODE
//                           write my pid to DIR/rank.N and pass a barrier; rank R exits with
//                           CODE, the others sleep outside any collective until killed
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"

namespace {

// DIR/rank.N holds my pid; written under another name and renamed, so a reader never sees half.
void announce_pid(const std::string& dir, int rank) {
  const std::string path = dir + "/rank." + std::to_string(rank);
  std::ofstream(path + ".tmp") << getpid();
  std::filesystem::rename(path + ".tmp", path);
}

// One collective drawn from `random` (seeded alike on every rank, so all draw the same one) with
// up to 2,000 elements per block, so a kill can land in small and chunked calls alike.
void random_collective(shmcoll::Team& team, std::mt19937& random, std::vector<double>& send,
                       std::vector<double>& recv) {
  using shmcoll::Dtype;
  using shmcoll::Op;
  const auto count = static_cast<std::int64_t>(random() % 2000);
  const int root = static_cast<int>(random() % static_cast<unsigned>(team.size()));
  switch (random() % 8) {
    case 0:
      return team.allreduce(send.data(), recv.data(), count, Dtype::f64, Op::sum);
    case 1:
      return team.bcast(recv.data(), count, Dtype::f64, root);
    case 2:
      return team.reduce(send.data(), recv.data(), count, Dtype::f64, Op::max, root);
    case 3:
      return team.alltoall(send.data(), count, Dtype::f64, recv.data(), count, Dtype::f64);
    case 4:
      return team.allgather(send.data(), count, Dtype::f64, recv.data(), count, Dtype::f64);
    case 5:
      return team.scan(send.data(), recv.data(), count, Dtype::f64, Op::sum);
    case 6:
      return team.gather(send.data(), count, Dtype::f64, recv.data(), count, Dtype::f64, root);
    default:
      return team.barrier();
  }
}

}  // namespace

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
      announce_pid(argv[2], team.rank());
      for (;;) team.barrier();
    }
    if (mode == "exit-rank-others-sleep") {
      announce_pid(argv[2], team.rank());
      team.barrier();
      if (team.rank() == std::atoi(argv[3])) return std::atoi(argv[4]);
      for (;;) pause();  // no collective will notice the failure: only the launcher ends this
    }
    if (mode == "random-forever") {
      std::mt19937 random(static_cast<std::uint32_t>(std::stoul(argv[3])));  // any 32-bit seed
      std::vector<double> send(2000 * static_cast<std::size_t>(team.size()), 1.0),
          recv(send.size());
      announce_pid(argv[2], team.rank());
      for (;;) random_collective(team, random, send, recv);
    }
  } catch (const shmcoll::Error& error) {
    std::fprintf(stderr, "launcher_child: %s: %s\n", shmcoll::errc_name(error.code()),
                 error.what());
    return error.code() == shmcoll::Errc::peer_failed ? 4 : 5;
  }
  return 6;
}
