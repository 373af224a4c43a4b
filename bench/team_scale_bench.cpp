// What a team costs as it grows: for each team size, the time from run() to the end of the first
// barrier (forking, joining, backing each rank's pages), the files each rank holds open, and the
// shared memory each rank backs; and what a switch between two processes on one CPU costs here
// (the floor of any collective whose ranks share CPUs). Medians of --runs runs.
//
//   build/bin/shmcoll-bench-teams [-n 2,64,256] [--runs R]
#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "coll/tunables.hpp"
#include "shm/layout.hpp"
#include "shmcoll/shmcoll.hpp"

namespace {

using bench::median;
using bench::now_seconds;

int open_files() {
  int count = 0;
  DIR* directory = opendir("/proc/self/fd");
  if (directory == nullptr) return -1;
  while (const dirent* entry = readdir(directory)) count += entry->d_name[0] != '.';
  closedir(directory);
  return count - 1;  // the directory itself
}

struct TeamFigures {
  double made_at;  // seconds from run() to the end of the first barrier, at rank 0
  int files_at_root;
  int files_elsewhere;
};

TeamFigures measure_team(int ranks) {
  auto* shared = static_cast<TeamFigures*>(mmap(
      nullptr, sizeof(TeamFigures), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  const double start = now_seconds();
  shmcoll::run(ranks, {}, [&](shmcoll::Team& team) {
    team.barrier();
    if (team.rank() == 0) {
      shared->made_at = now_seconds() - start;
      shared->files_at_root = open_files();
    }
    if (team.rank() == team.size() - 1) shared->files_elsewhere = open_files();
    team.barrier();
  });
  const TeamFigures figures = *shared;
  munmap(shared, sizeof(TeamFigures));
  return figures;
}

// Microseconds per switch between `processes` processes pinned to one CPU that yield in turn.
double switch_us(int processes) {
  auto* per_process =
      static_cast<double*>(mmap(nullptr, sizeof(double) * processes, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  cpu_set_t original;
  sched_getaffinity(0, sizeof original, &original);
  int first_cpu = 0;
  while (!CPU_ISSET(first_cpu, &original)) ++first_cpu;
  for (int i = 0; i < processes; ++i) {
    if (fork() == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(first_cpu, &one);
      sched_setaffinity(0, sizeof one, &one);
      const double start = now_seconds();
      long yields = 0;
      while (now_seconds() - start < 0.2) {
        sched_yield();
        ++yields;
      }
      per_process[i] = (now_seconds() - start) * 1e6 / static_cast<double>(yields);
      _exit(0);
    }
  }
  while (wait(nullptr) > 0) {
  }
  const double per_yield = median(std::vector<double>(per_process, per_process + processes));
  munmap(per_process, sizeof(double) * processes);
  return per_yield / processes;  // each yield waits for every other process's turn
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "What a team costs as it grows (creation time, open files, backed shared memory per rank) "
      "and what a process switch costs on this machine.\n"
      "Example: shmcoll-bench-teams -n 2,64,128,256 --runs 3"};
  std::vector<int> sizes{2, 64, 256};
  int runs = 3;
  app.add_option("-n,--np", sizes, "team sizes, comma separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--runs", runs, "runs per size (medians are reported)")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  const long page = sysconf(_SC_PAGESIZE);
  std::printf("process switch on one CPU: %.2f us (yield alone: %.2f us)\n", switch_us(4),
              switch_us(1));
  std::printf("%6s %14s %18s %18s %22s\n", "ranks", "team_made_ms", "open_files_root",
              "open_files_other", "backed_KiB_per_rank");
  const auto tunables = shmcoll::coll::Tunables::from_env();
  for (int ranks : sizes) {
    // The slot size a team of `ranks` gets, as its segment lays it out.
    const std::size_t slot_bytes = shmcoll::shm::SegmentLayout::compute(
                                       static_cast<std::uint32_t>(ranks),
                                       tunables.slot_bytes_for(static_cast<std::uint32_t>(ranks)))
                                       .slot_bytes;
    std::vector<double> made;
    TeamFigures figures{};
    for (int run = 0; run < runs; ++run) {
      figures = measure_team(ranks);
      made.push_back(figures.made_at * 1e3);
    }
    // A rank backs its control page and two slots when the team is made, plus its profile.
    const double backed_kib = static_cast<double>(page + 2 * slot_bytes + 256) / 1024.0;
    std::printf("%6d %14.1f %18d %18d %22.1f\n", ranks, median(made), figures.files_at_root,
                ranks > 1 ? figures.files_elsewhere : figures.files_at_root, backed_kib);
  }
  return 0;
}
