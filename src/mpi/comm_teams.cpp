// One shmcoll team per communicator whose members share the node, or a node hierarchy for one
// spanning nodes, cached as an attribute and freed with the communicator. Creation is
// collective: rank 0 makes a segment name and hands it out with PMPI_Bcast, everyone joins, and
// a PMPI_Allreduce agrees whether all succeeded, so every member takes the same path for the
// communicator's whole life.
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/environment.hpp"
#include "api/invited_team.hpp"
#include "api/team_state.hpp"
#include "coll/tunables.hpp"
#include "mpi/hierarchy.hpp"
#include "mpi/team_pool.hpp"
#include "shm/rounds.hpp"
#include "topo/cpu_budget.hpp"

namespace shmcoll::mpi {

namespace {

// A communicator's entry: a team, a hierarchy, or a decision (made once, by all members) to use
// PMPI.
struct CachedTeam {
  // Shared with the persistent requests planned on it, which may outlive the communicator.
  std::shared_ptr<Team> team;
  std::unique_ptr<NodeHierarchy> spanning;
  PmpiReason why_pmpi = PmpiReason::unexplained;  // when it holds neither
  // The team's id, agreed by its members, and the members as ranks of MPI_COMM_WORLD: what the
  // pool keeps the team under when the communicator is freed.
  std::uint64_t team_id = 0;
  std::vector<int> members;
  // Until `decided`, the communicator's calls go to PMPI and every member counts them alike: at
  // call `next_check` (then 2 to 16 times as many calls later, each time it is not yet decided)
  // the members agree whether it gets a team. `pmpi_calls`: its blocking calls that went to PMPI
  // on this rank since its last check (then added to its members' warm-up calls in the pool).
  long calls = 0;
  long next_check = 1;
  long pmpi_calls = 0;
  bool decided = false;
  bool holds_team() const { return team || spanning; }
};

int keyval = MPI_KEYVAL_INVALID;
std::once_flag keyval_made;
bool finalizing = false;
// Under the SharedTables lock from here to `note_held_bytes` (threads decide their communicators'
// teams at once): the places taken under the cap (teams held, and places reserved while members
// agree).
int teams_alive = 0;
TeamCounts counts;

// SHMCOLL_MPI_MAX_TEAMS: communicators past this many get PMPI (each team holds 2 slots per rank).
int team_cap() {
  return detail::mpi_layer_settings().max_teams;
}

// SHMCOLL_MPI_TEAM_AFTER_CALLS: a communicator's first calls go to PMPI, so one used once or twice
// (a library's dup, a split per phase) costs no agreement; at the next its members agree on a team.
long warm_up_calls() {
  return detail::mpi_layer_settings().team_after_calls;
}

// SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS: a team kept in the pool is taken at that first agreement, but
// a new segment (2.3 ms to make and pre-fault at 2 bound ranks, 4.9 at 4 on 2 cores) only once
// these ranks' communicators have made this many blocking calls through PMPI on one member: a
// communicator that is never busy never pays for one. Counted in calls, not in the time they took,
// so that the same program takes the same path at every call on every run (and so adds in the
// same order: bitwise the same results), however fast the machine is that day. MPI_COMM_WORLD,
// which every program keeps busy, gets its team at the first agreement.
long new_team_after() {
  return detail::mpi_layer_settings().new_team_after_calls;
}

// Whether MPI_COMM_WORLD's team found its ranks (all of the program's processes, on one node)
// outnumbering the CPUs they may use: the teams made after it, of a few of these processes, then
// wait as ranks that share CPUs do (Options::processes_share_cpus), although their own ranks fit
// their CPUs. Known from the world's first agreement on, the same on every rank.
std::atomic<bool> world_shares_cpus{false};

// SHMCOLL_MPI_POOL_TEAMS: teams of freed communicators kept for the next one over the same ranks.
TeamPool& pool() {
  static TeamPool kept(static_cast<std::size_t>(detail::mpi_layer_settings().pool_teams));
  return kept;
}

// /dev/shm held by communicators' teams alive (not those inside node hierarchies), and the most
// held at once with the pool's.
std::size_t alive_bytes = 0;
void note_held_bytes() {
  counts.peak_shm_bytes = std::max(counts.peak_shm_bytes, alive_bytes + pool().bytes());
}

// Counts `cached`'s team or hierarchy in (+1) or out (-1) of the cap and the bytes held (under the
// lock).
void count_held(const CachedTeam& cached, int sign) {
  if (cached.holds_team()) teams_alive += sign;
  if (cached.team) {
    const std::size_t bytes = cached.team->segment_bytes();
    alive_bytes = sign > 0 ? alive_bytes + bytes : alive_bytes - bytes;
  }
}

// The last communicator this thread looked up, and its entry: a loop of calls on one
// communicator asks the MPI for the attribute once (a lookup in the MPI's hash table per call,
// about a fifth of what the layer adds to an 8-byte call). Deleting any entry (a communicator
// freed, whoever frees it; a freed handle may come back for a new communicator) makes every
// thread's remembered entry stale.
std::atomic<std::uint64_t> entries_deleted{0};
struct LastLookup {
  MPI_Comm comm = MPI_COMM_NULL;
  CachedTeam* cached = nullptr;
  std::uint64_t deleted = 0;
};
thread_local LastLookup last_lookup;

int delete_cached(MPI_Comm, int, void* value, void*) {
  auto* cached = static_cast<CachedTeam*>(value);
  entries_deleted.fetch_add(1, std::memory_order_acq_rel);
  {
    SharedTables lock;
    count_held(*cached, -1);
    // Not a team a persistent request still plans on: its MPI_Start may come at any time, in
    // no order with the calls of the communicator that would take the team from the pool.
    if (cached->team && !cached->team->ended() && !finalizing && cached->team.use_count() == 1) {
      pool().keep(std::move(cached->members), cached->team_id, std::move(cached->team));
      note_held_bytes();
    }
  }
  delete cached;
  return MPI_SUCCESS;
}

// This rank's node-mates in `comm`, in `comm`'s rank order (SHMCOLL_MPI_FAKE_NODES=k splits the
// ranks of MPI_COMM_WORLD into k pretend nodes, so the multi-node path can be tested on one
// machine).
MPI_Comm split_by_node(MPI_Comm comm) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  MPI_Comm node = MPI_COMM_NULL;
  const int fake_nodes = detail::mpi_layer_settings().fake_nodes;
  if (fake_nodes > 1) {
    int world_rank = 0, world_size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const int per_node = (world_size + fake_nodes - 1) / fake_nodes;
    PMPI_Comm_split(comm, world_rank / per_node, rank, &node);
  } else {
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  }
  return node;
}

// Whether the processes of MPI_COMM_WORLD that share a machine outnumber the CPUs they may use
// together, judged as a team judges its own ranks (detail::ranks_share_cpus: their masks' union,
// capped by their quotas). Pretend nodes (containers, network namespaces) of one machine each see
// only their own ranks, which may fit their CPUs while the nodes together crowd them: each node's
// team must then wait as ranks sharing CPUs do. A machine is known by its kernel's boot id, which
// no namespace changes. Collective over `world`; the same answer on every rank.
bool machines_share_cpus(MPI_Comm world) {
  struct Entry {
    std::uint64_t machine = 0;
    topo::CpuBudget budget;
  } mine;
  static_assert(std::is_trivially_copyable_v<Entry>);
  char boot_id[64] = {};
  if (FILE* file = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (std::fgets(boot_id, sizeof boot_id, file) == nullptr) boot_id[0] = 0;
    std::fclose(file);
  }
  mine.machine = std::hash<std::string>{}(boot_id);
  mine.budget = topo::CpuBudget::of_this_process();
  int size = 0;
  PMPI_Comm_size(world, &size);
  std::vector<Entry> all(static_cast<std::size_t>(size));
  PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, world);
  std::sort(all.begin(), all.end(),
            [](const Entry& a, const Entry& b) { return a.machine < b.machine; });
  std::vector<detail::MemberProfile> one_machine;
  for (std::size_t at = 0; at < all.size(); ++at) {
    one_machine.push_back({topo::Location{}, all[at].budget, false, false});
    const bool last_of_machine = at + 1 == all.size() || all[at + 1].machine != all[at].machine;
    if (!last_of_machine) continue;
    if (detail::ranks_share_cpus(one_machine)) return true;
    one_machine.clear();
  }
  return false;
}

// What this rank proposes at a check, and holds while the members agree: a place under the cap
// and the team it kept in the pool for these members (taken out, so that another thread's
// communicator of the same ranks cannot take it meanwhile).
struct Proposal {
  bool place = false;
  std::shared_ptr<Team> kept;
  std::uint64_t kept_id = 0;
  long warm_up_calls = 0;
};

Proposal propose(CachedTeam& cached) {
  SharedTables lock;
  Proposal proposal;
  proposal.place = teams_alive < team_cap();
  if (proposal.place) ++teams_alive;
  proposal.kept_id = pool().find(cached.members);
  if (proposal.kept_id != 0) proposal.kept = pool().take(proposal.kept_id);
  // Members outside MPI_COMM_WORLD (spawned, connected) have no account: the communicator's own
  // calls count.
  long& warm_up_calls =
      cached.members.empty() ? cached.pmpi_calls : pool().warm_up_calls(cached.members);
  if (!cached.members.empty()) warm_up_calls += std::exchange(cached.pmpi_calls, 0);
  proposal.warm_up_calls = warm_up_calls;
  return proposal;
}

// Gives back what the proposal held and `cached` did not take: the place, when it holds no team,
// and the kept team, when the members took another path. Counts in what `cached` now holds.
void settle(CachedTeam& cached, Proposal& proposal) {
  SharedTables lock;
  if (proposal.place) --teams_alive;
  if (proposal.kept) pool().keep(cached.members, proposal.kept_id, std::move(proposal.kept));
  count_held(cached, +1);
  note_held_bytes();
}

// The members' agreement at one of `cached`'s checks: it takes a team kept in the pool when every
// member kept the same one, makes a new team (all of `comm` on this node) or hierarchy (spanning
// nodes) when the communicator has proved busy, or leaves it to PMPI, for now (warming up, the
// team cap reached) or for good (a member could not join, node by node is off). One
// PMPI_Allreduce decides it all: every member is willing (the cap counts this process's teams,
// which differ by rank), which team each kept, the most blocking calls any member made through PMPI
// on these ranks' communicators while they warmed up (TeamPool::warm_up_calls), whether any
// member turned node by node off, and whether every member runs nonblocking calls node by node.
void agree(MPI_Comm comm, CachedTeam& cached, Proposal& proposal) {
  const auto kept = static_cast<std::int64_t>(proposal.kept_id);
  const auto& settings = detail::mpi_layer_settings();
  const bool nonblocking = settings.nonblocking_across_nodes && mpi_thread_multiple();
  const std::int64_t proposed[6] = {
      proposal.place ? 0 : 1, kept, -kept, proposal.warm_up_calls, settings.node_by_node ? 0 : 1,
      nonblocking ? 0 : 1};
  std::int64_t agreed[6] = {};
  PMPI_Allreduce(proposed, agreed, 6, MPI_INT64_T, MPI_MAX, comm);
  // A team's making is timed from here: the members are together (in MPI_Init, the agreement
  // also waits for the last process to start).
  const auto start = std::chrono::steady_clock::now();
  if (agreed[0] != 0) {  // asked again at the next check: a busy communicator gets a freed place
    cached.why_pmpi = PmpiReason::team_cap;
    return;
  }
  if (proposal.kept && agreed[1] == -agreed[2]) {  // every member proposed `kept`
    cached.decided = true;
    cached.team = std::exchange(proposal.kept, nullptr);
    cached.team_id = proposal.kept_id;
    const SharedTables lock;
    ++counts.reused;
    return;
  }
  if (comm != MPI_COMM_WORLD && agreed[3] < new_team_after()) {
    // At the pace so far, the threshold is reached after about `at_pace` calls: the next check
    // comes then (within 2 to 16 times the calls so far), so that calls are not slowed by checks.
    cached.why_pmpi = PmpiReason::warming_up;
    const long at_pace = static_cast<long>(
        static_cast<double>(cached.calls) * static_cast<double>(new_team_after()) /
        static_cast<double>(std::max<std::int64_t>(agreed[3], 1)));
    cached.next_check = std::clamp(at_pace, 2 * cached.calls, 16 * cached.calls);
    return;
  }
  cached.decided = true;
  if (comm != MPI_COMM_WORLD && !cached.members.empty()) {  // the next is earned anew
    const SharedTables lock;
    pool().warm_up_calls(cached.members) -= new_team_after();
  }

  MPI_Comm node = split_by_node(comm);
  int size = 0, node_size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_size(node, &node_size);
  PMPI_Comm_rank(comm, &rank);
  try {
    if (node_size == size) {
      cached.team = std::make_shared<Team>(join_node_team(comm, &cached.team_id));
    } else if (agreed[4] != 0) {
      cached.why_pmpi = PmpiReason::node_by_node_off;
    } else {
      int most_on_a_node = 0;
      PMPI_Allreduce(&node_size, &most_on_a_node, 1, MPI_INT, MPI_MAX, comm);
      if (most_on_a_node == 1) {
        // Node by node would only add the layer's steps to the MPI's own between nodes.
        cached.why_pmpi = PmpiReason::one_rank_per_node;
      } else {
        if (comm == MPI_COMM_WORLD) world_shares_cpus.store(machines_share_cpus(comm));
        cached.spanning = std::make_unique<NodeHierarchy>(comm, node, agreed[5] == 0);
        node = MPI_COMM_NULL;  // the hierarchy owns it now
      }
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "shmcoll: rank %d: no shared-memory team (%s); using MPI\n", rank,
                 error.what());
  }
  if (node != MPI_COMM_NULL) PMPI_Comm_free(&node);
  int joined = cached.holds_team() ? 1 : 0, all_joined = 0;
  PMPI_Allreduce(&joined, &all_joined, 1, MPI_INT, MPI_MIN, comm);
  if (!all_joined) {
    cached.team.reset();
    cached.spanning.reset();
    if (cached.why_pmpi != PmpiReason::node_by_node_off &&
        cached.why_pmpi != PmpiReason::one_rank_per_node) {
      cached.why_pmpi = PmpiReason::no_team;
    }
    return;
  }
  if (comm == MPI_COMM_WORLD && cached.team) {
    world_shares_cpus.store(detail::TeamAccess::state(*cached.team).ranks_share_cpus);
  }
  const SharedTables lock;
  ++counts.made;
  counts.making_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void decide(MPI_Comm comm, CachedTeam& cached) {
  cached.next_check = 2 * cached.calls;  // unless the pace says later
  if (cached.members.empty()) cached.members = world_ranks_of(comm);
  Proposal proposal = propose(cached);
  agree(comm, cached, proposal);
  settle(cached, proposal);
}

CachedTeam* cached_of(MPI_Comm comm) {
  if (layer_disabled()) return nullptr;
  if (comm == MPI_COMM_NULL) {
    note_pmpi_reason(PmpiReason::null_handle);
    return nullptr;
  }
  std::call_once(keyval_made, [] {
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cached, &keyval, nullptr);
  });
  const std::uint64_t deleted = entries_deleted.load(std::memory_order_acquire);
  // (comm is never MPI_COMM_NULL here, the comm of a lookup not yet made.)
  if (last_lookup.comm == comm && last_lookup.deleted == deleted) {
    return last_lookup.cached;
  }
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, keyval, &value, &found);
  if (found) {
    last_lookup = {comm, static_cast<CachedTeam*>(value), deleted};
    return last_lookup.cached;
  }
  auto* cached = new CachedTeam;
  int inter = 0, size = 0;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &size);
  // A communicator of one rank needs no shared memory: the MPI's own copy is as fast as ours,
  // and a team would cost a segment (MPI_COMM_SELF, and libraries' per-rank communicators).
  cached->decided = inter != 0 || size == 1;
  cached->why_pmpi = inter       ? PmpiReason::intercommunicator
                     : size == 1 ? PmpiReason::one_rank
                                 : PmpiReason::warming_up;
  cached->next_check = warm_up_calls() + 1;
  PMPI_Comm_set_attr(comm, keyval, cached);
  return cached;
}

}  // namespace

bool layer_disabled() {
  const bool disabled = detail::mpi_layer_settings().disabled;
  if (disabled) note_pmpi_reason(PmpiReason::layer_off);
  return disabled;
}

namespace {

// The MPI's own shared memory (Open MPI's vader, MPICH's) is backed as it is first written: a
// team that filled /dev/shm would make the MPI die of SIGBUS later, in a program that runs
// without the layer. So a team takes at most an eighth of what /dev/shm has free when it is
// made: its slots shrink to fit (to one page), and where not even that fits, the communicator
// goes to PMPI. 0, with `reason` set, for PMPI. (Rank 0 decides; the others read the sizes from
// the segment.)
std::size_t slot_bytes_within_budget(int size, std::string& reason) {
  const std::size_t wanted =
      coll::Tunables::from_env().slot_bytes_for(static_cast<std::uint32_t>(size));
  struct statvfs shm {};
  if (statvfs("/dev/shm", &shm) != 0) return wanted;  // the team's creation will say why
  const std::size_t free_bytes = shm.f_bavail * shm.f_frsize;
  const std::size_t per_rank = free_bytes / 8 / static_cast<std::size_t>(size);
  const std::size_t fixed = 2 * 4096 + detail::kMpiTeamHeapBytes;  // control page, profile, heap
  const std::size_t slot = per_rank > fixed ? (per_rank - fixed) / 2 / 4096 * 4096 : 0;
  if (slot >= 4096) return std::min(wanted, slot);
  reason = "/dev/shm has " + std::to_string(free_bytes) + " bytes free; a team of " +
           std::to_string(size) + " takes at most an eighth of it, leaving the rest to the MPI";
  return 0;
}

}  // namespace

Team join_node_team(MPI_Comm comm, std::uint64_t* id) {
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  Options options;
  options.heap_bytes = detail::kMpiTeamHeapBytes;
  options.processes_share_cpus = world_shares_cpus.load();
  // Rank 0 makes the segment, without a name (invited_team.hpp): a rank killed at any moment
  // leaves nothing in /dev/shm. Its invitation, or why there is none, goes to the others.
  struct {
    detail::TeamInvitation invitation;
    Errc failure;
    char why[200];
  } offer{};
  std::optional<shm::Segment> segment;
  if (rank == 0) {
    std::string reason;
    offer.failure = Errc::out_of_memory;  // unless making the segment says otherwise
    options.slot_bytes = slot_bytes_within_budget(size, reason);
    try {
      if (options.slot_bytes > 0)
        segment = detail::make_invited_segment(size, options, &offer.invitation);
    } catch (const Error& error) {
      offer.failure = error.code();
      reason = error.what();
    }
    std::snprintf(offer.why, sizeof offer.why, "%s", reason.c_str());
  }
  PMPI_Bcast(&offer, sizeof offer, MPI_BYTE, 0, comm);
  if (offer.invitation.id == 0) {
    throw Error(offer.failure, rank == 0
                                   ? std::string(offer.why)
                                   : std::string("rank 0 could not make a team: ") + offer.why);
  }
  std::string why;
  if (rank != 0) {
    try {
      segment = detail::open_invited_segment(offer.invitation, size);
    } catch (const Error& error) {
      why = error.what();
    }
  }
  // Joining waits for every member: first every member says whether it has the segment.
  int opened = segment ? 1 : 0, all_opened = 0;
  PMPI_Allreduce(&opened, &all_opened, 1, MPI_INT, MPI_MIN, comm);
  if (rank == 0) detail::close_invitation(offer.invitation);
  if (!all_opened) {
    throw Error(Errc::system_error,
                why.empty() ? "a member could not open the team's segment" : why);
  }
  if (id) *id = offer.invitation.id;
  return detail::join_invited_team(std::move(*segment), rank, options);
}

int Route::size() const {
  return team ? team->size() : nodes ? nodes->size() : 0;
}

int Route::rank() const {
  return team ? team->rank() : nodes ? nodes->rank() : -1;
}

namespace {

Route route(MPI_Comm comm, bool may_agree) {
  // Every served call asks its route first, on the thread that makes the call (never a worker).
  shm::set_wait_idle_hook(&drive_mpi_progress);
  CachedTeam* cached = cached_of(comm);
  if (!cached) return {};
  if (!cached->decided) {
    if (++cached->calls >= cached->next_check && may_agree) decide(comm, *cached);
    if (!cached->decided) {
      note_pmpi_reason(cached->why_pmpi);
      if (may_agree) ++cached->pmpi_calls;
      return {};
    }
  }
  // A team that ended (every member learns it at its next call at the latest) is retired; the
  // slot it held goes back to the cap.
  if (cached->holds_team() && (cached->team ? cached->team->ended() : cached->spanning->ended())) {
    {
      const SharedTables lock;
      count_held(*cached, -1);
    }
    // Outside the lock: a hierarchy frees its communicators with PMPI.
    cached->team.reset();
    cached->spanning.reset();
    cached->why_pmpi = PmpiReason::team_ended;
  }
  if (!cached->holds_team()) note_pmpi_reason(cached->why_pmpi);
  return {cached->team.get(), cached->spanning.get()};
}

}  // namespace

Route route_of(MPI_Comm comm) {
  return route(comm, true);
}

Route route_without_agreeing(MPI_Comm comm) {
  return route(comm, false);
}

std::shared_ptr<Team> shared_team(MPI_Comm comm) {
  CachedTeam* cached = cached_of(comm);
  return cached ? cached->team : nullptr;
}

void agree_world_team() {
  CachedTeam* cached = cached_of(MPI_COMM_WORLD);
  if (cached && !cached->decided) decide(MPI_COMM_WORLD, *cached);
}

WaitCounts world_wait_counts() {
  if (keyval == MPI_KEYVAL_INVALID) return {};
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(MPI_COMM_WORLD, keyval, &value, &found);
  const auto* cached = found ? static_cast<CachedTeam*>(value) : nullptr;
  return cached && cached->team ? cached->team->wait_counts() : WaitCounts{};
}

TeamCounts team_counts() {
  const SharedTables lock;
  return counts;
}

void release_world_teams() {
  finalizing = true;
  {
    const SharedTables lock;
    pool().clear();
  }
  if (keyval == MPI_KEYVAL_INVALID) return;
  for (MPI_Comm comm : {MPI_COMM_WORLD, MPI_COMM_SELF}) {
    void* value = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(comm, keyval, &value, &found);
    if (found) PMPI_Comm_delete_attr(comm, keyval);
  }
  PMPI_Comm_free_keyval(&keyval);
}

}  // namespace shmcoll::mpi
