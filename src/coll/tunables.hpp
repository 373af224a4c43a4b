// Every tunable and the algorithm selection table, in one place. Each tunable has an environment
// variable; docs/tunables.md (through shmcoll-info) and `tunable_table()` list them with their
// defaults.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "topo/tree.hpp"

namespace shmcoll::coll {

enum class Algorithm {
  barrier_flat,        // everyone publishes a round and waits for all
  barrier_tree,        // arrivals gathered up the hierarchy tree, the release sent down it
  barrier_arrivals,    // everyone counts its arrival; the last to arrive releases everyone
  bcast_inline,        // <= 104 bytes: root posts a message line pair; readers copy it out
  bcast_pipelined,     // root copies chunks into its two slots alternately (or one slot in pieces)
  bcast_tree,          // down the hierarchy tree, each rank re-posting for its children
  reduce_inline,       // <= 104 bytes: everyone posts a message line pair; root reduces them
  reduce_root_reads,   // everyone copies in; root reduces all slots itself
  reduce_slices,       // every rank reduces a slice of each chunk; root gathers the slices
  reduce_tree,         // partial results combined up the hierarchy tree
  allreduce_inline,    // <= 104 bytes: as all_read, through message line pairs
  allreduce_all_read,  // everyone copies in, then every rank reduces all slots itself
  allreduce_slices,    // reduce-scatter then allgather through the slots, chunk by chunk
  allreduce_tree,      // reduce_tree to the tree's root, then bcast_tree
  allreduce_arrivals,  // <= 104 bytes: everyone posts a line; the last to arrive reduces for all
  scan_inline,         // <= 104 bytes: everyone posts a message line; rank r reduces ranks 0..r
  scan_chunks,         // as scan_inline, chunk by chunk through the slots
  scan_tree,           // subtree totals up a rank-ordered tree, then prefixes down it
};

const char* algorithm_name(Algorithm algorithm);

// The tunables that decide a call's path (its algorithm, the tree, direct heap reads, the call
// check). Every rank of a call must take the same path, so a team uses its rank 0's values,
// which rank 0 publishes in the segment (api/team_state.cpp); trivially copyable for that.
struct TeamTunables {
  std::uint64_t direct_min;           // SHMCOLL_DIRECT_MIN
  std::uint64_t share_pages_min;      // SHMCOLL_SHARE_PAGES_MIN (0: never)
  bool move_pages;                    // SHMCOLL_MOVE_PAGES
  std::uint64_t cma_min;              // SHMCOLL_CMA_MIN (0: never)
  std::uint64_t stream_min;           // SHMCOLL_STREAM_MIN (0: never)
  std::uint64_t tree_max;             // SHMCOLL_TREE_MAX
  std::uint64_t allreduce_small_max;  // SHMCOLL_ALLREDUCE_SMALL_MAX
  std::uint64_t reduce_small_max;     // SHMCOLL_REDUCE_SMALL_MAX
  std::uint32_t slices_min_ranks;     // SHMCOLL_SLICES_MIN_RANKS
  bool check_calls;                   // SHMCOLL_CHECK_CALLS
  std::int32_t forced_barrier;        // SHMCOLL_BARRIER_ALGORITHM (-1: by tree)
  std::int32_t forced_allreduce;      // SHMCOLL_ALLREDUCE_ALGORITHM (-1: by size)
  std::int32_t forced_bcast;          // SHMCOLL_BCAST_ALGORITHM (-1: by size)
  std::int32_t forced_reduce;         // SHMCOLL_REDUCE_ALGORITHM (-1: by size)
  std::int32_t forced_scan;           // SHMCOLL_SCAN_ALGORITHM (-1: by size)
  std::uint32_t hierarchy_levels;     // SHMCOLL_HIERARCHY: the first hierarchy_levels entries
  std::array<topo::HierarchyLevel, topo::kLevelCount> hierarchy_entries;

  std::span<const topo::HierarchyLevel> hierarchy() const {
    return {hierarchy_entries.data(), hierarchy_levels};
  }
  // Each tunable whose value here differs from `theirs`, as "SHMCOLL_TREE_MAX=8192 (rank 0:
  // 16384)" with `their_name` in the parentheses.
  std::vector<std::string> differences(const TeamTunables& theirs,
                                       const std::string& their_name) const;
};

struct Tunables {
  std::size_t slot_bytes;  // SHMCOLL_SLOT_BYTES (the segment's creator's); 0: slot_bytes_for
  // The slot a team of `team_size` gets: SHMCOLL_SLOT_BYTES where set, else 4 MiB shared among the
  // ranks, at least 256 KiB and at most 1 MiB each. A message that fits one slot moves in one
  // call's rounds without waiting for a slot to be freed (2 ranks, bcast of 1 MiB after a barrier:
  // 65-88 us in a 1 MiB slot, 120-129 through 256 KiB slots); longer ones stream through the two
  // slots in shorter chunks (chunks.hpp, kStreamChunkBytes).
  std::size_t slot_bytes_for(std::uint32_t team_size) const;
  static constexpr std::size_t kLeastDefaultSlot = 256 << 10;
  std::size_t heap_bytes;  // SHMCOLL_HEAP_BYTES (the segment's creator's)
  long spin_ns;            // SHMCOLL_SPIN_NS (this rank's); -1: unset, see spin_for
  long yield_ns;           // SHMCOLL_YIELD_NS (this rank's); -1: unset, see yield_for
  long timeout_ms;         // SHMCOLL_TIMEOUT (this rank's)
  long kill_grace_ms;      // SHMCOLL_KILL_GRACE (the launcher's)
  TeamTunables team;       // replaced by rank 0's when the team is made

  // Reads the environment; a malformed value is an invalid_argument error naming the variable.
  static Tunables from_env();
  // How long a wait spins, then polls with sched_yield, before it sleeps: SHMCOLL_SPIN_NS and
  // SHMCOLL_YIELD_NS, else 200 us of spinning and no yielding, or, when the team's ranks
  // outnumber the CPUs they may use (they share CPUs), no spinning and 1 ms of yielding. 200 us
  // covers a 4 MiB copy a root waits out (bcast's readers copying from its pages): at 50 us it
  // slept and woke late, 115-177 us a call against 87-92.
  long spin_for(bool ranks_share_cpus) const;
  long yield_for(bool ranks_share_cpus) const;
};

// What selection needs to know of a team (its tree, whether its ranks share CPUs), worked out
// once per team from what every member published, so every rank selects alike.
struct TreeShape {
  std::uint32_t ranks = 1;
  bool rank_ordered = true;
  // The cost model (topo/cost_model.hpp) puts the tree's critical path for small collectives
  // below the flat algorithms'.
  bool pays = false;
  // The ranks outnumber the CPUs they may use (api/team_state.hpp, ranks_share_cpus).
  bool ranks_share_cpus = false;
  static TreeShape of(const topo::Tree& tree, bool ranks_share_cpus = false);
};

// The tree algorithms are chosen up to SHMCOLL_TREE_MAX bytes when the tree pays (payloads
// beyond a message line go through the slots, a chunk per round); a reduction also needs a
// commutative op or a rank-ordered tree. Forcing a tree algorithm where the op and tree forbid
// it gets the flat one: a forced choice never changes a result.
Algorithm select_barrier(const TeamTunables& tunables, const TreeShape& tree);
Algorithm select_bcast(const TeamTunables& tunables, const TreeShape& tree, std::size_t bytes);
Algorithm select_reduce(const TeamTunables& tunables, const TreeShape& tree, std::size_t bytes,
                        bool commutative);
Algorithm select_allreduce(const TeamTunables& tunables, const TreeShape& tree, std::size_t bytes,
                           bool commutative);

struct TunableInfo {
  const char* env;
  const char* default_value;
  const char* meaning;
};
// Scan (and exscan) over the tree needs a rank-ordered tree whatever the op: a prefix is the
// ranks before me, which a tree combines only when every subtree is a contiguous range.
Algorithm select_scan(const TeamTunables& tunables, const TreeShape& tree, std::size_t bytes);

std::span<const TunableInfo> tunable_table();

}  // namespace shmcoll::coll
