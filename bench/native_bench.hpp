// shmcoll's own contender in shmcoll-bench: one size of one collective on N forked ranks, timed
// as every contender is (shmcoll_bench.cpp states the method), and optionally checked.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench_report.hpp"
#include "shmcoll/shmcoll.hpp"

namespace bench {

struct NativeConfig {
  int ranks = 2;
  shmcoll::Dtype dtype = shmcoll::Dtype::f32;
  shmcoll::Op op = shmcoll::Op::sum;
  int iters = 30;
  bool check = false;
  bool heap = false;             // send buffers from Team::allocate
  bool vary_data = false;        // rotate through buffer slots (harness_method.h)
  bool single_call = false;      // OSU/IMB: a barrier, one call per sample (harness_method.h)
  bool written = false;          // single_call: buffers written once before timing, as OSU does
  bool inject_error = false;     // corrupt one checked element, to prove --check catches it
  std::string bind_to = "auto";  // core, none, or auto: core when the ranks fit the cores
};

// Every contender binds each rank to a core when the ranks fit on the cores, and leaves them
// unbound when oversubscribed (where launchers refuse or stack bound ranks).
bool ranks_fit_cores(int ranks);

// Every collective the harness runs, in the order `--coll all` runs them.
const std::vector<std::string>& collective_names();

// Runs `coll` with `bytes` (the vector for reductions, the block per rank pair otherwise; barrier
// ignores it) and returns the samples. With config.check, the number of wrong elements found is
// added to `mismatches`, and each rank with any is named on stderr.
Row run_native(const NativeConfig& config, const std::string& coll, std::size_t bytes,
               int& mismatches);

}  // namespace bench
