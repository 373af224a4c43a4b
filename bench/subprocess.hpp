// Running the programs shmcoll-bench drives (an MPI's launcher, gnuplot) and reading their output.
#pragma once

#include <string>
#include <vector>

namespace bench {

struct Finished {
  int status;          // the exit status; 128 + signal when killed; 127 when it could not start
  std::string output;  // everything it wrote to stdout (stderr passes through to ours)
};

// Runs argv[0] (found on PATH) with the given arguments and extra environment ("NAME=value").
Finished run_program(const std::vector<std::string>& argv,
                     const std::vector<std::string>& environment = {});

}  // namespace bench
