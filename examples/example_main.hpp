// Every example runs two ways: under the launcher (`shmcoll-run -n 4 ./example`), where this
// process is one rank, or alone (`./example -n 4`), where it forks its ranks with shmcoll::run.
// A rank that finds a wrong result throws, and the program exits 1.
#pragma once

#include <shmcoll/shmcoll.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>

namespace example {

inline int main(int argc, char** argv, const char* about,
                const std::function<void(shmcoll::Team&)>& body) {
  int ranks = 4;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(
          "%s\n\nUsage: %s [-n RANKS]      forks RANKS ranks itself (default 4)\n"
          "       shmcoll-run -n RANKS %s   one rank per process, started by the launcher\n"
          "Example: %s -n 8\n",
          about, argv[0], argv[0], argv[0]);
      return 0;
    }
    if (std::strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      ranks = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "%s: unknown argument %s (try --help)\n", argv[0], argv[i]);
      return 2;
    }
  }
  try {
    if (std::getenv("SHMCOLL_RANK")) {  // started by shmcoll-run
      shmcoll::Team team = shmcoll::Team::attach();
      body(team);
    } else {
      shmcoll::run(ranks, {}, body);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
    return 1;
  }
  return 0;
}

}  // namespace example
