// The PMPI drop-in layer (docs/mpi-layer.md): MPI calls on a communicator whose members share
// this node run on a shmcoll team cached on the communicator; everything else goes to PMPI. Built
// once per MPI (the ABIs differ), from the same sources.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "shmcoll/datatype.hpp"
#include "shmcoll/shmcoll.hpp"

namespace shmcoll::mpi {

class NodeHierarchy;

// Where a communicator's collectives run: on one team when all its members share this node, node
// by node (hierarchy.hpp) when it spans nodes, or neither: PMPI (the layer is off, an
// intercommunicator, the team cap reached, or the team ended: a mismatched call or a dead peer
// failed it, and the communicator goes on through PMPI as it would without the layer). Made on
// first use by every member at once: this is itself collective on `comm`, so every intercepted
// collective asks it first, before anything else decides the path.
struct Route {
  Team* team = nullptr;
  NodeHierarchy* nodes = nullptr;
  // The communicator's size and this rank where shmcoll serves it, else 0 and -1.
  int size() const;
  int rank() const;
};
Route route_of(MPI_Comm comm);
// The route of a nonblocking or persistent call, which must not block: the members never agree
// here (route_of's agreement is a blocking PMPI_Allreduce, and a peer may reach its own call only
// after this rank's returns). The call still counts towards the communicator's check, held at its
// next blocking call.
Route route_without_agreeing(MPI_Comm comm);
// The communicator's team (null when it has none), shared: a persistent request planned on it
// keeps it, and MPI_Start works after MPI_Comm_free, as it does without the layer.
std::shared_ptr<Team> shared_team(MPI_Comm comm);
// Turns the MPI's progress engine (PMPI_Iprobe, which matches nothing it could take from the
// program): the idle hook of the layer's waits on the program's thread. A program may post a
// receive, then enter a collective that its peer enters only after a large send to that receive
// completes, which takes this rank's MPI to move it; MPI's own collectives progress it as they
// wait, and the layer's must too, or the two ranks wait for each other.
void drive_mpi_progress();
// A nonblocking call's MPI_Request (a generalized request; requests.cpp): the layer's completion
// calls complete it once `call` has completed. `comm`'s handler reports the call's failure.
void start_nonblocking(MPI_Comm comm, Request call, MPI_Request* request);
// A persistent call's MPI_Request: each MPI_Start runs `issue`, a new nonblocking call.
void make_persistent(MPI_Comm comm, std::function<Request()> issue, MPI_Request* request);
// Joins a shmcoll team of all of `comm`'s members (collective on `comm`; the segment name goes
// out with PMPI_Bcast), and sets `id` to an id every member gets the same. Throws shmcoll::Error
// when this rank cannot join.
Team join_node_team(MPI_Comm comm, std::uint64_t* id = nullptr);
// Communicator teams made new and taken from the pool of freed ones (team_pool.hpp), and the
// time making the new ones took.
struct TeamCounts {
  long made = 0;
  long reused = 0;
  double making_seconds = 0;
  std::size_t peak_shm_bytes = 0;  // held at once by teams alive and kept (node hierarchies aside)
};
TeamCounts team_counts();
// How this rank's waits on MPI_COMM_WORLD's team have gone (zero when it has none; never makes
// one, so one rank alone may ask).
WaitCounts world_wait_counts();
// Frees what team_of cached on MPI_COMM_WORLD and MPI_COMM_SELF (their attributes are not
// deleted by MPI_Finalize in every MPI).
void release_world_teams();
// MPI_COMM_WORLD's members agree on its team (start_layer, in MPI_Init, which every process of the
// world calls): its calls are served from the first, the nonblocking ones too, which never make
// members agree (a communicator whose calls are all nonblocking otherwise never gets a team).
void agree_world_team();
// SHMCOLL_MPI_DISABLE=1: every call is a plain PMPI call (noted as the call's reason).
bool layer_disabled();
void set_thread_level(int provided);
// Whether the MPI provides MPI_THREAD_MULTIPLE: any thread, the layer's workers too, may call it.
bool mpi_thread_multiple();

// MPI_THREAD_MULTIPLE lets threads call collectives on different communicators at once (on one
// communicator the standard makes it erroneous, so what a communicator holds is touched by one
// thread at a time). The tables the layer shares across communicators (decoded datatypes and
// ops, the teams' cap, pool and counts, the statistics) are read and written under this lock,
// taken only at that level: below it one thread calls at a time. It guards table operations
// alone, never an MPI call: the MPI runs the layer's callbacks (a communicator freed) under locks
// of its own, and no thread may hold it while its rank waits on a peer.
class SharedTables {
 public:
  SharedTables();
  ~SharedTables();
  SharedTables(const SharedTables&) = delete;
  SharedTables& operator=(const SharedTables&) = delete;

 private:
  bool held_;
};
// Counts the datatypes and ops forgotten (freed by the program): a thread's own cached lookup
// (the last type or reduction it used) made under an older count may name a freed handle.
std::uint64_t forgotten_handles();
void note_forgotten_handle();
// What the layer does after the MPI's initialisation (notes the thread level it provides, agrees
// MPI_COMM_WORLD's team) and before its finalisation, whichever language's entry point the
// program called.
void start_layer();
// Ends the process with a one-line error naming the right file when the program's MPI is not
// the one this layer was built for (called before the MPI initialises, from every init entry).
void refuse_the_wrong_mpi();
void finalize_layer();

// Whether a handle is the MPI's own (never freed) rather than the program's: named types, and
// the predefined ops the layer reduces with.
bool is_predefined_type(MPI_Datatype type);
bool is_predefined_op(MPI_Op op);
// Predefined MPI element types as shmcoll ones; nullopt: not an element type shmcoll reduces.
std::optional<Dtype> dtype_of(MPI_Datatype type);
// Any MPI datatype as a shmcoll Datatype: predefined ones, and derived ones decoded once with
// MPI_Type_get_envelope/contents (else probed) and cached until the type is freed (watch_for_free).
// Null only for a type that neither reaches and that spans more than kProbeMaxBytes; the call goes
// to PMPI.
const Datatype* datatype_of(MPI_Datatype type);
// A committed type's typemap read back from MPI's own packing (datatype_probe.cpp); nullopt
// beyond kProbeMaxBytes of true extent (the probe holds about six times that, once per type).
inline constexpr std::size_t kProbeMaxBytes = std::size_t{16} << 20;
std::optional<Datatype> probe_datatype(MPI_Datatype type);
void forget_datatype(MPI_Datatype type);
// Has the MPI tell the layer when `type` is freed (an attribute's delete callback), so what the
// layer cached under its handle is forgotten then, by whatever path the type is freed.
void watch_for_free(MPI_Datatype type);
// Stands in for an argument the standard makes insignificant (never read).
const Datatype& unused_type();

// How a reduction over `type` with `op` runs on shmcoll: predefined types with the predefined
// ops MPI defines on them, or with user ops (MPI_Op_create), which get the caller's MPI type
// back, as MPI promises. nullopt: PMPI.
struct Reduction {
  Dtype dtype;
  Op op;
  std::size_t bytes(std::int64_t count) const {
    return count > 0 ? static_cast<std::size_t>(count) * dtype_size(dtype) : 0;
  }
};
std::optional<Reduction> reduction_of(MPI_Datatype type, MPI_Op op);
void remember_user_op(MPI_Op op, MPI_User_function* function, bool commutative);
// A user op created in Fortran: its function takes the datatype as a Fortran handle.
void remember_fortran_user_op(MPI_Op op, MPI_User_function* function, bool commutative);
void forget_user_op(MPI_Op op);
// Forgets what was learnt about reductions on `type` (when the MPI frees it).
void forget_reductions_on(MPI_Datatype type);

// A shmcoll error as an MPI error code, raised through the communicator's error handler.
int raise_error(MPI_Comm comm, const Error& error);
// An error of `error_class` with `message` (printed first when the handler is fatal).
int raise_class(MPI_Comm comm, int error_class, const std::string& message);

inline const void* send_of(const void* buffer) {
  return buffer == MPI_IN_PLACE ? in_place : buffer;
}
inline void* recv_of(void* buffer) {
  return buffer == MPI_IN_PLACE ? in_place : buffer;
}
inline std::size_t bytes_of(std::int64_t count, const Datatype& type) {
  return count > 0 ? static_cast<std::size_t>(count) * type.size() : 0;
}

// A v-collective's int counts or displacements as the int64 span shmcoll takes.
// The arrays are the layer's own, reused (slot 0-3), so once grown to the communicator's size a
// call allocates nothing. Null `values` (insignificant on this rank): an empty span.
std::span<const std::int64_t> widen(const int* values, int n, int slot);
// MPI-4's large-count forms: MPI_Count counts, MPI_Aint displacements.
std::span<const std::int64_t> widen(const long long* values, int n, int slot);
std::span<const std::int64_t> widen(const long* values, int n, int slot);
// `n` copies of `value`, likewise.
std::span<const std::int64_t> repeat(std::int64_t value, int n, int slot);
// Alltoallw's per-peer types (slot 0 send, 1 recv), for the counts (widened) that go with them;
// nullopt when one that moves data cannot be decoded.
std::optional<std::span<const Datatype>> datatypes_of(const MPI_Datatype* types,
                                                      std::span<const std::int64_t> counts, int n,
                                                      int slot);

// Why a call went to PMPI, for SHMCOLL_MPI_VERBOSE's table: noted where the path is decided
// (route_of, datatype_of, reduction_of, the intercepted call), read when the call ends in PMPI.
enum class PmpiReason : unsigned char {
  unexplained,
  null_handle,          // MPI_COMM_NULL, MPI_DATATYPE_NULL: the MPI reports the error
  layer_off,            // SHMCOLL_MPI_DISABLE=1
  warming_up,           // the communicator's calls before it proved busy
  one_rank,             // a communicator of one rank (MPI_COMM_SELF): the MPI's copy is as fast
  intercommunicator,    //
  team_cap,             // SHMCOLL_MPI_MAX_TEAMS communicators held a team at its last check
  no_team,              // a member could not join (too little /dev/shm, ...), said on stderr
  team_ended,           // a mismatched call or a dead peer ended the communicator's team
  too_large_for_nodes,  // node by node, blocks past MPI's int counts
  node_by_node_off,     // SHMCOLL_MPI_NODE_BY_NODE=0 on a member, and the communicator spans nodes
  one_rank_per_node,    // spans nodes with one rank on each: nothing to share inside a node
  order_across_nodes,   // a non-commutative op over nodes that do not hold rank ranges in order
  nonblocking_across_nodes,  // not agreed (NodeHierarchy::serves_nonblocking)
  persistent_across_nodes,   // persistent requests restart on a team, never node by node
  handle_across_nodes,       // nonblocking node by node with a derived type or user op
  datatype_unknown,          // a datatype that could be neither decoded nor probed
  op_refused,                // the MPI itself refuses the op on the datatype (it reports the error)
  derived_type,     // a predefined op on a derived datatype that the MPI accepts (not served)
  user_op_derived,  // a user op on a derived datatype: it must see the caller's layout
  not_reducible,    // a datatype shmcoll has no element type for (MPI_PACKED, ...)
  count
};
void note_pmpi_reason(PmpiReason reason);

// SHMCOLL_MPI_VERBOSE=1: per collective, calls and bytes through shmcoll and through PMPI, and
// time spent; printed at MPI_Finalize by rank 0 of MPI_COMM_WORLD. One row per collective
// (shmcoll::Collective), then one for MPI_Reduce_local.
inline constexpr int kReduceLocalRow = kCollectiveCount;
inline constexpr int kStatisticsRows = kCollectiveCount + 1;
class CallTimer {
 public:
  explicit CallTimer(Collective which) : CallTimer(static_cast<int>(which)) {}
  static CallTimer for_reduce_local() { return CallTimer(kReduceLocalRow); }
  // Records the call on destruction: a PMPI call unless marked otherwise before.
  ~CallTimer();
  void through_shmcoll(std::size_t bytes) {
    outcome_ = Outcome::shmcoll;
    bytes_ = bytes;
  }
  void failed_in_shmcoll() { outcome_ = Outcome::failed; }

  enum class Outcome { pmpi, shmcoll, failed };

 private:
  explicit CallTimer(int row);
  int row_;
  Outcome outcome_ = Outcome::pmpi;
  std::size_t bytes_ = 0;
  std::chrono::steady_clock::time_point start_;
};
void print_statistics();

// Runs `call` on the shmcoll path: success is recorded as `bytes` through shmcoll, a shmcoll
// error as a failure, raised through the communicator's error handler. A failure that ended the
// team (a mismatch, a dead peer) retires it: the communicator's next calls go to PMPI.
template <typename Call>
int through_shmcoll(MPI_Comm comm, CallTimer& timer, std::size_t bytes, Call&& call) {
  try {
    call();
    timer.through_shmcoll(bytes);
    return MPI_SUCCESS;
  } catch (const Error& error) {
    timer.failed_in_shmcoll();
    return raise_error(comm, error);
  }
}

// The arguments MPI gives error classes of their own, checked where a call takes the shmcoll path,
// before anything moves: a program sees MPI_ERR_ROOT or MPI_ERR_COUNT, as with its MPI alone
// (where Debian's MPICH 4.0.2 crashes on a negative count: the class the standard names). Only
// significant arguments are passed in. (A null datatype is MPI's to judge: such a call goes to
// PMPI, as datatype_of and reduction_of have nothing for it.)
// Checked on every call, so the checks are inline and the message is made only when raised.
class Arguments {
 public:
  Arguments(const char* call, int size) : call_(call), size_(size) {}
  Arguments& root(int root) {
    if (valid() && (root < 0 || root >= size_)) bad(MPI_ERR_ROOT, "root", -1, root);
    return *this;
  }
  Arguments& count(const char* name, std::int64_t count) {  // int, or MPI-4's MPI_Count
    if (valid() && count < 0) bad(MPI_ERR_COUNT, name, -1, count);
    return *this;
  }
  template <typename Count>  // one per rank; null: insignificant
  Arguments& counts(const char* name, const Count* counts) {
    for (int rank = 0; counts && valid() && rank < size_; ++rank) {
      if (counts[rank] < 0) bad(MPI_ERR_COUNT, name, rank, counts[rank]);
    }
    return *this;
  }
  bool valid() const { return error_class_ == MPI_SUCCESS; }
  // Raises the first bad argument's class through `comm`'s handler; the call counts as failed.
  int raise(MPI_Comm comm, CallTimer& timer) const;

 private:
  void bad(int error_class, const char* name, int index, std::int64_t value) {
    error_class_ = error_class, name_ = name, index_ = index, value_ = value;
  }
  const char* call_;
  int size_;
  int error_class_ = MPI_SUCCESS;
  const char* name_ = nullptr;  // the first bad argument, its index (-1: not an array), value
  int index_ = -1;
  std::int64_t value_ = 0;
};

}  // namespace shmcoll::mpi
