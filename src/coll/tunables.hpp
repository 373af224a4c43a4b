// Every tunable and the algorithm selection table, in one place. Each tunable has an environment
// variable; README's Tunables section and `tunable_table()` list them with their defaults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "topo/tree.hpp"

namespace shmcoll::coll {

enum class Algorithm {
  barrier_flat,        // everyone publishes a round and waits for all
  barrier_tree,        // arrivals gathered up the hierarchy tree, the release sent down it
  bcast_inline,        // <= 112 bytes: root posts a message line pair; readers copy it out
  bcast_pipelined,     // root copies chunks into its two slots alternately; readers copy out
  bcast_tree,          // down the hierarchy tree, each rank re-posting for its children
  reduce_inline,       // <= 112 bytes: everyone posts a message line pair; root reduces them
  reduce_root_reads,   // everyone copies in; root reduces all slots itself
  reduce_slices,       // every rank reduces a slice of each chunk; root gathers the slices
  reduce_tree,         // partial results combined up the hierarchy tree
  allreduce_inline,    // <= 112 bytes: as all_read, through message line pairs
  allreduce_all_read,  // everyone copies in, then every rank reduces all slots itself
  allreduce_slices,    // reduce-scatter then allgather through the slots, chunk by chunk
  allreduce_tree,      // reduce_tree to the tree's root, then bcast_tree
  scan_inline,         // <= 112 bytes: everyone posts a message line; rank r reduces ranks 0..r
  scan_chunks,         // as scan_inline, chunk by chunk through the slots
  scan_tree,           // subtree totals up a rank-ordered tree, then prefixes down it
};

const char* algorithm_name(Algorithm algorithm);

struct Tunables {
  std::size_t slot_bytes;           // SHMCOLL_SLOT_BYTES
  std::size_t heap_bytes;           // SHMCOLL_HEAP_BYTES
  std::size_t direct_min;           // SHMCOLL_DIRECT_MIN
  std::size_t tree_max;             // SHMCOLL_TREE_MAX
  std::size_t allreduce_small_max;  // SHMCOLL_ALLREDUCE_SMALL_MAX
  std::size_t reduce_small_max;     // SHMCOLL_REDUCE_SMALL_MAX
  std::uint32_t slices_min_ranks;   // SHMCOLL_SLICES_MIN_RANKS
  long spin_ns;                     // SHMCOLL_SPIN_NS (default depends on oversubscription)
  long timeout_ms;                  // SHMCOLL_TIMEOUT
  bool check_calls;                 // SHMCOLL_CHECK_CALLS
  std::vector<topo::HierarchyLevel> hierarchy;  // SHMCOLL_HIERARCHY
  int forced_barrier;                           // SHMCOLL_BARRIER_ALGORITHM (-1: by tree)
  int forced_allreduce;                         // SHMCOLL_ALLREDUCE_ALGORITHM (-1: by size)
  int forced_bcast;                             // SHMCOLL_BCAST_ALGORITHM (-1: by size)
  int forced_reduce;                            // SHMCOLL_REDUCE_ALGORITHM (-1: by size)
  int forced_scan;                              // SHMCOLL_SCAN_ALGORITHM (-1: by size)

  // Reads the environment; a malformed value is an invalid_argument error naming the variable.
  static Tunables from_env(std::uint32_t team_size);
};

// What selection needs to know of a team's tree, worked out once per team.
struct TreeShape {
  std::uint32_t ranks = 1;
  bool rank_ordered = true;
  // The cost model (topo/cost_model.hpp) puts the tree's critical path for small collectives
  // below the flat algorithms'.
  bool pays = false;
  static TreeShape of(const topo::Tree& tree);
};

// The tree algorithms are chosen up to SHMCOLL_TREE_MAX bytes when the tree pays (payloads
// beyond a message line go through the slots, a chunk per round); a reduction also needs a
// commutative op or a rank-ordered tree. Forcing a tree algorithm where the op and tree forbid
// it gets the flat one: a forced choice never changes a result.
Algorithm select_barrier(const Tunables& tunables, const TreeShape& tree);
Algorithm select_bcast(const Tunables& tunables, const TreeShape& tree, std::size_t bytes);
Algorithm select_reduce(const Tunables& tunables, const TreeShape& tree, std::size_t bytes,
                        bool commutative);
Algorithm select_allreduce(const Tunables& tunables, const TreeShape& tree, std::size_t bytes,
                           bool commutative);

struct TunableInfo {
  const char* env;
  const char* default_value;
  const char* meaning;
};
// Scan (and exscan) over the tree needs a rank-ordered tree whatever the op: a prefix is the
// ranks before me, which a tree combines only when every subtree is a contiguous range.
Algorithm select_scan(const Tunables& tunables, const TreeShape& tree, std::size_t bytes);

std::span<const TunableInfo> tunable_table();

}  // namespace shmcoll::coll
