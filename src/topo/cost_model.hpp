// The latency model for small collectives over a tree, in units of one cross-core handoff `h`
// of a message line (measured by every shmcoll-bench run as the two-rank line exchange).
// docs/performance-details.md, Cost model, explains the constants; shmcoll-topo prints the model
// for any shape.
#pragma once

#include "topo/tree.hpp"

namespace shmcoll::topo {

struct CostModel {
  // Each further child whose line has already arrived (independent loads overlap).
  double poll = 0.25;
  // A handoff across each level, widest first (package, numa, l3, l2, core). Only the figure
  // within a package is measured here (2-core machine); the others are typical two-socket ratios.
  double handoff[kLevelCount] = {2.5, 1.5, 1.0, 1.0, 1.0};
  // Between ranks sharing a core a handoff is a context switch: at 8 ranks on 2 cores a call
  // costs 100-200 us where h is 0.06-0.3 us. Priced so that such levels never favour a tree
  // (measured: the tree was 1.1-1.5x slower than flat there).
  double shared_core = 50.0;

  // Critical path of a small allreduce or barrier: combining up the tree, then passing down.
  double tree_handoffs(const Tree& tree) const;
  // The same over the flat algorithms: every rank reads every other rank's line.
  double flat_handoffs(const Tree& tree) const;

 private:
  double level_cost(const std::string& level) const;
};

}  // namespace shmcoll::topo
