// Every tunable and the algorithm selection table, in one place. Each tunable has an environment
// variable; README's Tunables section and `tunable_table()` list them with their defaults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace shmcoll::coll {

enum class Algorithm {
  barrier_flat,        // everyone publishes a round and waits for all
  bcast_inline,        // <= 120 bytes: root posts a message line pair; readers copy it out
  bcast_pipelined,     // root copies chunks into its two slots alternately; readers copy out
  reduce_inline,       // <= 120 bytes: everyone posts a message line pair; root reduces them
  reduce_root_reads,   // everyone copies in; root reduces all slots itself
  reduce_slices,       // every rank reduces a slice of each chunk; root gathers the slices
  allreduce_inline,    // <= 120 bytes: as all_read, through message line pairs
  allreduce_all_read,  // everyone copies in, then every rank reduces all slots itself
  allreduce_slices,    // reduce-scatter then allgather through the slots, chunk by chunk
};

const char* algorithm_name(Algorithm algorithm);

struct Tunables {
  std::size_t slot_bytes;           // SHMCOLL_SLOT_BYTES
  std::size_t allreduce_small_max;  // SHMCOLL_ALLREDUCE_SMALL_MAX
  std::size_t reduce_small_max;     // SHMCOLL_REDUCE_SMALL_MAX
  std::uint32_t slices_min_ranks;   // SHMCOLL_SLICES_MIN_RANKS
  long spin_ns;                     // SHMCOLL_SPIN_NS (default depends on oversubscription)
  long timeout_ms;                  // SHMCOLL_TIMEOUT_MS
  int forced_allreduce;             // SHMCOLL_ALLREDUCE_ALGORITHM (-1: by size)
  int forced_bcast;                 // SHMCOLL_BCAST_ALGORITHM (-1: by size)
  int forced_reduce;                // SHMCOLL_REDUCE_ALGORITHM (-1: by size)

  // Reads the environment; a malformed value is an invalid_argument error naming the variable.
  static Tunables from_env(std::uint32_t team_size);
};

Algorithm select_bcast(const Tunables& tunables, std::size_t bytes);
Algorithm select_reduce(const Tunables& tunables, std::size_t bytes, std::uint32_t ranks);
Algorithm select_allreduce(const Tunables& tunables, std::size_t bytes, std::uint32_t ranks);

struct TunableInfo {
  const char* env;
  const char* default_value;
  const char* meaning;
};
std::span<const TunableInfo> tunable_table();

}  // namespace shmcoll::coll
