#include "coll/tunables.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "coll/machine_tuning.hpp"
#include "shm/layout.hpp"
#include "shm/rounds.hpp"
#include "topo/cost_model.hpp"
#include "util/fail.hpp"

namespace shmcoll::coll {

namespace {

// Defaults and the measurement behind each (2-core AMD EPYC VM, see docs/performance.md).
constexpr TunableInfo kTunables[] = {
    {"SHMCOLL_SLOT_BYTES", "0",
     "bytes of each of a rank's two data slots; longer messages stream through them in chunks of "
     "up to 512 KiB (a whole slot where ranks share CPUs); memory is 2 * size * slot; 0: 4 MiB / "
     "size, within 256 KiB-1 MiB"},
    {"SHMCOLL_HEAP_BYTES", "67108864",
     "bytes of each rank's heap for Team::allocate (address space; pages count once written)"},
    {"SHMCOLL_DIRECT_MIN", "8192",
     "smallest block a data-movement collective lets peers read straight from a sender's heap "
     "instead of copying it through a slot"},
    {"SHMCOLL_SHARE_PAGES_MIN", "262144",
     "smallest block that peers read (or write) in a buffer's shared pages, one copy instead of "
     "two: MPI_Alloc_mem memory from this size up is shared from the start, and with "
     "SHMCOLL_MOVE_PAGES=1 ordinary send buffers too; 0: never"},
    {"SHMCOLL_MOVE_PAGES", "0",
     "1 moves the whole pages of an ordinary (private) send buffer of SHMCOLL_SHARE_PAGES_MIN or "
     "more onto shared memory on its second call, in place: faster large calls, but the "
     "program's mappings change (locks, huge pages, NUMA policies, device registrations, mremap "
     "growth and fork are not kept as they were: docs/limits.md)"},
    {"SHMCOLL_CMA_MIN", "0, or as tuned for this machine",
     "smallest block of scatter, alltoall and 2-rank allgather (and their v/w forms) that "
     "receivers copy straight out of the sender's buffer with the kernel's cross-memory copy "
     "(process_vm_readv), and of gather and gatherv that senders copy straight into the root's "
     "(process_vm_writev; where ranks share CPUs, blocks longer than a slot), and of a bcast "
     "beyond one slot that readers copy straight out of the "
     "root's while the root writes a share into each (not where ranks share CPUs), one copy "
     "instead of two; where a rank cannot (ptrace permission), the team goes back to the slots "
     "for good; 0: never, but for a scatter's blocks that take more than one round through the "
     "slots where ranks share CPUs (docs/performance-osu.md); which is faster differs by machine "
     "(docs/tunables.md, Tuned per machine)"},
    {"SHMCOLL_STREAM_MIN", "4096, or as tuned for this machine",
     "smallest slot write (a message's chunk or an exchange's block) that goes past the writer's "
     "caches (non-temporal stores) where ranks have CPUs of their own; 0: never"},
    {"SHMCOLL_TUNING", "$XDG_CACHE_HOME/shmcoll/tuning, else ~/.cache/shmcoll/tuning",
     "file of SHMCOLL_CMA_MIN and SHMCOLL_STREAM_MIN as tools/shmcoll-tune measured them on a "
     "kind of machine (CPU model and count), used as their defaults on that kind only; none: "
     "the built-in defaults"},
    {"SHMCOLL_TREE_MAX", "16384",
     "largest payload the tree algorithms take where the cost model says the tree pays; beyond "
     "it the sliced algorithms share the bandwidth among all ranks"},
    {"SHMCOLL_ALLREDUCE_SMALL_MAX", "16384",
     "largest allreduce (bytes) where every rank reduces all slots itself"},
    {"SHMCOLL_REDUCE_SMALL_MAX", "16384",
     "largest reduce (bytes) where the root reduces all slots itself"},
    {"SHMCOLL_SLICES_MIN_RANKS", "3",
     "smallest team where large (all)reduces split the reduction into per-rank slices; at 2 ranks "
     "reading all slots is 1.7-2x faster (measured), above it slices move less data per rank"},
    {"SHMCOLL_SPIN_NS", "200000, or 0 when ranks outnumber the CPUs they may use",
     "busy-wait before a wait yields or sleeps on a futex"},
    {"SHMCOLL_YIELD_NS", "0, or 1000000 when ranks outnumber the CPUs they may use",
     "after spinning, poll with sched_yield this long before sleeping on a futex (a rank that "
     "waits gives its CPU to ranks that can run)"},
    {"SHMCOLL_TIMEOUT", "0 (off)",
     "a wait longer than this fails with timeout: seconds, or with a unit as in 500ms or 2s"},
    {"SHMCOLL_KILL_GRACE", "1s",
     "shmcoll-run: once a rank fails, the others get SIGTERM this long after, and SIGKILL as long "
     "again after that (after SIGINT/SIGTERM/SIGHUP to the launcher: SIGTERM at once); seconds, "
     "or with a unit as in 500ms"},
    {"SHMCOLL_CHECK_CALLS", "1",
     "0 turns off the check that every rank made the same call (kind, root, op, datatype, "
     "count); a mismatch then corrupts or hangs instead of failing with mismatched_call"},
    {"SHMCOLL_HIERARCHY", "package,numa,l3,core:8",
     "levels the tree splits on, widest first, each optionally :radix (most children per member "
     "in a group; default: all on the leader)"},
    {"SHMCOLL_TOPOLOGY", "this machine",
     "synthetic:<hwloc description> or xml:<file>: map ranks and build trees as on that machine"},
    {"SHMCOLL_PLACEMENT", "local", "where rank memory lives: local, interleave, node:<n>, none"},
    {"SHMCOLL_BARRIER_ALGORITHM", "auto", "force barrier_flat, barrier_tree or barrier_arrivals"},
    {"SHMCOLL_ALLREDUCE_ALGORITHM", "auto",
     "force allreduce_inline or allreduce_arrivals (<= 104 bytes), allreduce_tree, "
     "allreduce_all_read or allreduce_slices"},
    {"SHMCOLL_BCAST_ALGORITHM", "auto",
     "force bcast_inline (<= 104 bytes), bcast_tree or bcast_pipelined"},
    {"SHMCOLL_REDUCE_ALGORITHM", "auto",
     "force reduce_inline (<= 104 bytes), reduce_tree, reduce_root_reads or reduce_slices"},
    {"SHMCOLL_SCAN_ALGORITHM", "auto",
     "force scan_inline (<= 104 bytes), scan_tree or scan_chunks (scan and exscan)"},
};

// A number from the environment, else from the machine's tuning file (`tuned`), else `fallback`.
long long env_number(const char* name, long long fallback, const MachineTuning* tuned = nullptr) {
  const char* text = std::getenv(name);
  const bool from_file = (!text || !*text) && tuned && tuned->value(name);
  if (from_file) text = tuned->value(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  switch (*end) {  // size suffixes, as in 256K or 1M
    case 'K':
    case 'k':
      value <<= 10;
      ++end;
      break;
    case 'M':
    case 'm':
      value <<= 20;
      ++end;
      break;
    case 'G':
    case 'g':
      value <<= 30;
      ++end;
      break;
    default:
      break;
  }
  if (end == text || *end != '\0' || value < 0) {
    fail(Errc::invalid_argument, from_file ? "in " + tuned->path + ", " : "environment variable ",
         name, "=\"", text, "\" is not a non-negative number (K, M, G suffixes allowed)");
  }
  return value;
}

// A duration: seconds, or a number with the unit ms or s (0.5, 500ms and 0.5s are the same).
long env_milliseconds(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  const std::string unit = end;
  const double scale = unit == "ms" ? 1 : unit.empty() || unit == "s" ? 1000 : -1;
  if (end == text || scale < 0 || !(value >= 0) || value * scale > 1e12) {
    fail(Errc::invalid_argument, "environment variable ", name, "=\"", text,
         "\" is not a duration (seconds, or a number with ms or s, as in 500ms)");
  }
  return static_cast<long>(value * scale + 0.5);
}

bool env_flag(const char* name, bool fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  const std::string value = text;
  if (value == "1") return true;
  if (value == "0") return false;
  fail(Errc::invalid_argument, "environment variable ", name, "=\"", text, "\" must be 0 or 1");
}

int env_algorithm(const char* name, std::initializer_list<Algorithm> choices) {
  const char* text = std::getenv(name);
  if (!text || !*text || std::string(text) == "auto") return -1;
  std::string allowed = "auto";
  for (Algorithm candidate : choices) {
    if (std::string(text) == algorithm_name(candidate)) return static_cast<int>(candidate);
    allowed += std::string(", ") + algorithm_name(candidate);
  }
  fail(Errc::invalid_argument, "environment variable ", name, "=\"", text, "\" must be one of ",
       allowed);
}

}  // namespace

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::barrier_flat:
      return "barrier_flat";
    case Algorithm::barrier_tree:
      return "barrier_tree";
    case Algorithm::barrier_arrivals:
      return "barrier_arrivals";
    case Algorithm::bcast_tree:
      return "bcast_tree";
    case Algorithm::reduce_tree:
      return "reduce_tree";
    case Algorithm::allreduce_tree:
      return "allreduce_tree";
    case Algorithm::bcast_inline:
      return "bcast_inline";
    case Algorithm::bcast_pipelined:
      return "bcast_pipelined";
    case Algorithm::reduce_inline:
      return "reduce_inline";
    case Algorithm::reduce_root_reads:
      return "reduce_root_reads";
    case Algorithm::reduce_slices:
      return "reduce_slices";
    case Algorithm::allreduce_inline:
      return "allreduce_inline";
    case Algorithm::allreduce_all_read:
      return "allreduce_all_read";
    case Algorithm::allreduce_slices:
      return "allreduce_slices";
    case Algorithm::allreduce_arrivals:
      return "allreduce_arrivals";
    case Algorithm::scan_inline:
      return "scan_inline";
    case Algorithm::scan_chunks:
      return "scan_chunks";
    case Algorithm::scan_tree:
      return "scan_tree";
  }
  return "?";
}

std::size_t Tunables::slot_bytes_for(std::uint32_t team_size) const {
  if (slot_bytes != 0) return slot_bytes;
  constexpr std::size_t kTeamSlots = std::size_t{4} << 20, kMost = 1 << 20;
  return std::clamp(kTeamSlots / std::max<std::uint32_t>(team_size, 1) / 4096 * 4096,
                    kLeastDefaultSlot, kMost);
}

Tunables Tunables::from_env() {
  Tunables t;
  t.slot_bytes = static_cast<std::size_t>(env_number("SHMCOLL_SLOT_BYTES", 0));
  t.heap_bytes = static_cast<std::size_t>(env_number("SHMCOLL_HEAP_BYTES", 64 << 20));
  t.spin_ns = static_cast<long>(env_number("SHMCOLL_SPIN_NS", -1));
  t.yield_ns = static_cast<long>(env_number("SHMCOLL_YIELD_NS", -1));
  t.timeout_ms = env_milliseconds("SHMCOLL_TIMEOUT");
  const char* grace = std::getenv("SHMCOLL_KILL_GRACE");
  t.kill_grace_ms = grace && *grace ? env_milliseconds("SHMCOLL_KILL_GRACE") : 1000;
  TeamTunables& team = t.team;
  const MachineTuning tuned = MachineTuning::load();
  team.direct_min = static_cast<std::uint64_t>(env_number("SHMCOLL_DIRECT_MIN", 8 << 10));
  team.share_pages_min =
      static_cast<std::uint64_t>(env_number("SHMCOLL_SHARE_PAGES_MIN", 256 << 10));
  team.move_pages = env_flag("SHMCOLL_MOVE_PAGES", false);
  team.cma_min = static_cast<std::uint64_t>(env_number("SHMCOLL_CMA_MIN", 0, &tuned));
  team.stream_min = static_cast<std::uint64_t>(env_number("SHMCOLL_STREAM_MIN", 4096, &tuned));
  team.tree_max = static_cast<std::uint64_t>(env_number("SHMCOLL_TREE_MAX", 16 << 10));
  team.allreduce_small_max =
      static_cast<std::uint64_t>(env_number("SHMCOLL_ALLREDUCE_SMALL_MAX", 16 << 10));
  team.reduce_small_max =
      static_cast<std::uint64_t>(env_number("SHMCOLL_REDUCE_SMALL_MAX", 16 << 10));
  team.slices_min_ranks = static_cast<std::uint32_t>(env_number("SHMCOLL_SLICES_MIN_RANKS", 3));
  team.check_calls = env_flag("SHMCOLL_CHECK_CALLS", true);
  team.forced_barrier = env_algorithm(
      "SHMCOLL_BARRIER_ALGORITHM",
      {Algorithm::barrier_flat, Algorithm::barrier_tree, Algorithm::barrier_arrivals});
  team.forced_allreduce = env_algorithm(
      "SHMCOLL_ALLREDUCE_ALGORITHM",
      {Algorithm::allreduce_inline, Algorithm::allreduce_arrivals, Algorithm::allreduce_tree,
       Algorithm::allreduce_all_read, Algorithm::allreduce_slices});
  team.forced_bcast =
      env_algorithm("SHMCOLL_BCAST_ALGORITHM",
                    {Algorithm::bcast_inline, Algorithm::bcast_tree, Algorithm::bcast_pipelined});
  team.forced_reduce = env_algorithm("SHMCOLL_REDUCE_ALGORITHM",
                                     {Algorithm::reduce_inline, Algorithm::reduce_tree,
                                      Algorithm::reduce_root_reads, Algorithm::reduce_slices});
  team.forced_scan =
      env_algorithm("SHMCOLL_SCAN_ALGORITHM",
                    {Algorithm::scan_inline, Algorithm::scan_tree, Algorithm::scan_chunks});
  const std::vector<topo::HierarchyLevel> levels = topo::hierarchy_from_env();
  team.hierarchy_levels = static_cast<std::uint32_t>(levels.size());  // parse allows no repeats
  team.hierarchy_entries = {};
  std::copy(levels.begin(), levels.end(), team.hierarchy_entries.begin());
  return t;
}

long Tunables::spin_for(bool ranks_share_cpus) const {
  if (spin_ns >= 0) return spin_ns;
  return ranks_share_cpus ? 0 : shm::WaitPolicy{}.spin_ns;
}

long Tunables::yield_for(bool ranks_share_cpus) const {
  if (yield_ns >= 0) return yield_ns;
  return ranks_share_cpus ? 1'000'000 : 0;
}

namespace {

std::string forced_name(std::int32_t forced) {
  return forced < 0 ? "auto" : algorithm_name(static_cast<Algorithm>(forced));
}

}  // namespace

std::vector<std::string> TeamTunables::differences(const TeamTunables& theirs,
                                                   const std::string& their_name) const {
  std::vector<std::string> found;
  auto compare = [&](const char* env, const std::string& mine, const std::string& other) {
    if (mine != other)
      found.push_back(std::string(env) + "=" + mine + " (" + their_name + ": " + other + ")");
  };
  auto number = [](std::uint64_t value) { return std::to_string(value); };
  compare("SHMCOLL_DIRECT_MIN", number(direct_min), number(theirs.direct_min));
  compare("SHMCOLL_SHARE_PAGES_MIN", number(share_pages_min), number(theirs.share_pages_min));
  compare("SHMCOLL_MOVE_PAGES", number(move_pages), number(theirs.move_pages));
  compare("SHMCOLL_CMA_MIN", number(cma_min), number(theirs.cma_min));
  compare("SHMCOLL_STREAM_MIN", number(stream_min), number(theirs.stream_min));
  compare("SHMCOLL_TREE_MAX", number(tree_max), number(theirs.tree_max));
  compare("SHMCOLL_ALLREDUCE_SMALL_MAX", number(allreduce_small_max),
          number(theirs.allreduce_small_max));
  compare("SHMCOLL_REDUCE_SMALL_MAX", number(reduce_small_max), number(theirs.reduce_small_max));
  compare("SHMCOLL_SLICES_MIN_RANKS", number(slices_min_ranks), number(theirs.slices_min_ranks));
  compare("SHMCOLL_CHECK_CALLS", number(check_calls), number(theirs.check_calls));
  compare("SHMCOLL_BARRIER_ALGORITHM", forced_name(forced_barrier),
          forced_name(theirs.forced_barrier));
  compare("SHMCOLL_ALLREDUCE_ALGORITHM", forced_name(forced_allreduce),
          forced_name(theirs.forced_allreduce));
  compare("SHMCOLL_BCAST_ALGORITHM", forced_name(forced_bcast), forced_name(theirs.forced_bcast));
  compare("SHMCOLL_REDUCE_ALGORITHM", forced_name(forced_reduce),
          forced_name(theirs.forced_reduce));
  compare("SHMCOLL_SCAN_ALGORITHM", forced_name(forced_scan), forced_name(theirs.forced_scan));
  compare("SHMCOLL_HIERARCHY", topo::hierarchy_to_string(hierarchy()),
          topo::hierarchy_to_string(theirs.hierarchy()));
  return found;
}

namespace {

struct Candidates {
  Algorithm inline_algorithm;  // fits a message line, flat
  Algorithm tree_algorithm;    // fits a message line, over the tree
  Algorithm larger;            // by size, for payloads beyond a message line
  // Fits a message line, where ranks share CPUs (none: the inline one)
  std::optional<Algorithm> shared_algorithm = std::nullopt;
};

// A forced algorithm applies where it can: an inline or shared one only when the payload fits a
// message line, a tree one only when `tree_exact` (the tree keeps the result exact).
Algorithm choose(int forced, const Candidates& candidates, std::size_t bytes, bool tree_exact,
                 const TreeShape& tree, const TeamTunables& tunables) {
  const bool fits_message = bytes <= shm::kMessageBytes;
  auto usable = [&](Algorithm algorithm) {
    if (algorithm == candidates.inline_algorithm || algorithm == candidates.shared_algorithm) {
      return fits_message;
    }
    if (algorithm == candidates.tree_algorithm) return tree_exact;
    return true;
  };
  if (forced >= 0 && usable(static_cast<Algorithm>(forced))) return static_cast<Algorithm>(forced);
  if (fits_message && tree.ranks_share_cpus && candidates.shared_algorithm) {
    return *candidates.shared_algorithm;
  }
  if (tree_exact && tree.pays && bytes <= tunables.tree_max) return candidates.tree_algorithm;
  return fits_message ? candidates.inline_algorithm : candidates.larger;
}

}  // namespace

// A flat small collective costs every rank a transfer from every other, a tree a handoff per
// level plus the polls of each parent; the model weighs the two for this team's tree.
TreeShape TreeShape::of(const topo::Tree& tree, bool ranks_share_cpus) {
  const topo::CostModel model;
  return {static_cast<std::uint32_t>(tree.size()), tree.rank_ordered,
          model.tree_handoffs(tree) < model.flat_handoffs(tree), ranks_share_cpus};
}

Algorithm select_barrier(const TeamTunables& tunables, const TreeShape& tree) {
  if (tunables.forced_barrier >= 0) return static_cast<Algorithm>(tunables.forced_barrier);
  if (tree.ranks_share_cpus) return Algorithm::barrier_arrivals;
  return tree.pays ? Algorithm::barrier_tree : Algorithm::barrier_flat;
}

Algorithm select_bcast(const TeamTunables& tunables, const TreeShape& tree, std::size_t bytes) {
  return choose(tunables.forced_bcast,
                {Algorithm::bcast_inline, Algorithm::bcast_tree, Algorithm::bcast_pipelined}, bytes,
                true, tree, tunables);
}

Algorithm select_reduce(const TeamTunables& tunables, const TreeShape& tree, std::size_t bytes,
                        bool commutative) {
  const bool slices = bytes > tunables.reduce_small_max && tree.ranks >= tunables.slices_min_ranks;
  return choose(tunables.forced_reduce,
                {Algorithm::reduce_inline, Algorithm::reduce_tree,
                 slices ? Algorithm::reduce_slices : Algorithm::reduce_root_reads},
                bytes, commutative || tree.rank_ordered, tree, tunables);
}

Algorithm select_allreduce(const TeamTunables& tunables, const TreeShape& tree, std::size_t bytes,
                           bool commutative) {
  const bool slices =
      bytes > tunables.allreduce_small_max && tree.ranks >= tunables.slices_min_ranks;
  return choose(tunables.forced_allreduce,
                {Algorithm::allreduce_inline, Algorithm::allreduce_tree,
                 slices ? Algorithm::allreduce_slices : Algorithm::allreduce_all_read,
                 Algorithm::allreduce_arrivals},
                bytes, commutative || tree.rank_ordered, tree, tunables);
}

Algorithm select_scan(const TeamTunables& tunables, const TreeShape& tree, std::size_t bytes) {
  return choose(tunables.forced_scan,
                {Algorithm::scan_inline, Algorithm::scan_tree, Algorithm::scan_chunks}, bytes,
                tree.rank_ordered, tree, tunables);
}

std::span<const TunableInfo> tunable_table() {
  return kTunables;
}

}  // namespace shmcoll::coll
