// shmcoll: shared-memory collectives for the processes of one node.
//
// A Team is a fixed group of processes that share one POSIX shared-memory segment. Every member
// calls the same collectives in the same order, as in MPI. Teams are made four ways:
//   shmcoll::run(n, options, fn)      forks n-1 children and runs fn(team) on every rank;
//   Team::attach()                    inside a program started by `shmcoll-run`;
//   Team::join(name, rank, size)      processes that were not forked together (the MPI layer);
//   team.split(color, key)            sub-teams of a team, as MPI_Comm_split.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "shmcoll/datatype.hpp"
#include "shmcoll/types.hpp"

namespace shmcoll {

// Error codes; the C API (shmcoll.h) uses the same numbers.
enum class Errc : int {
  ok = 0,
  invalid_argument = 1,  // an argument is out of range; the message names it
  peer_failed = 2,       // a member of the team died or left; the team is unusable
  rank_failed = 3,       // shmcoll::run: a rank exited non-zero, crashed or was killed
  segment_mismatch = 4,  // a segment with a wrong magic, layout version or size
  system_error = 5,      // an operating-system call failed (message has errno text)
  timeout = 6,           // a wait exceeded its configured deadline (SHMCOLL_TIMEOUT)
  mismatched_call = 7,   // ranks called different collectives, or with different root, op,
                         // datatype or count; the message names two such ranks and the field
  out_of_memory = 8,     // shared memory (/dev/shm) cannot back what was asked for; the message
                         // says how much was needed and how much is free
};

SHMCOLL_API const char* errc_name(Errc code) noexcept;

// The library's version ("0.1.0"), of the library loaded at run time.
SHMCOLL_API const char* version() noexcept;

class SHMCOLL_API Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message);
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

// MPI_IN_PLACE: as a send buffer, the input comes from the receive buffer; as scatter's receive
// buffer at the root, the root's block stays in its send buffer.
inline void* const in_place = reinterpret_cast<void*>(std::uintptr_t{1});

// Whether ranks are bound to cores (shmcoll-run --bind-to).
enum class Binding { none, core };
// Which core each rank gets (shmcoll-run --map-by): `core` fills cores in hwloc order (compact);
// `package` deals ranks round robin across packages, then across each package's NUMA nodes
// (spread); `numa` deals them round robin across NUMA nodes. More ranks than cores wrap around.
enum class MapBy { core, package, numa };

// Where each rank's control lines and slots live (SHMCOLL_PLACEMENT): on the rank's own NUMA node
// (local), interleaved over all nodes, all on one node, or wherever first touch puts them (none).
// A node that does not exist degrades to none with one warning.
struct SHMCOLL_API Placement {
  enum class Kind { local, interleave, node, none };
  Kind kind = Kind::local;
  int node = -1;  // for Kind::node
  // "local", "interleave", "node:<n>" or "none"; anything else is invalid_argument.
  static Placement parse(const std::string& text);
  std::string to_string() const;
};

struct Options {
  // Bytes of each of a rank's two data slots; rounded up to whole pages. 0: SHMCOLL_SLOT_BYTES or
  // the built-in default (see docs/tunables.md).
  std::size_t slot_bytes = 0;
  // Bytes of each rank's heap, which Team::allocate hands out (whole pages; only what is used
  // takes memory). 0: SHMCOLL_HEAP_BYTES or the built-in default.
  std::size_t heap_bytes = 0;
  Binding bind = Binding::none;
  MapBy map_by = MapBy::core;
  // Unset: SHMCOLL_PLACEMENT, else local.
  std::optional<Placement> placement;
  // "" (SHMCOLL_TOPOLOGY, else this machine), "synthetic:<hwloc description>" or "xml:<file>".
  // On a loaded topology nothing is bound, but ranks are mapped and the tree is built as there.
  std::string topology;
  // True when the caller knows that the program's processes on this node outnumber the CPUs they
  // may use (the MPI layer learns it from MPI_COMM_WORLD's team): a team of a few of them then
  // waits as ranks that share CPUs do, although its own ranks fit their CPUs, since its peers may
  // be waiting for a CPU that processes outside the team hold.
  bool processes_share_cpus = false;
};

namespace detail {
struct TeamState;
struct TeamAccess;
struct PendingCall;
}  // namespace detail

// A nonblocking call (Team::iallreduce and the others). wait() returns once the call has completed
// on this rank, so its buffers are the program's again, and throws the error it failed with;
// test() says whether it has completed. A Request destroyed before it completed waits for it
// first (the call uses the buffers until then).
class SHMCOLL_API Request {
 public:
  Request() = default;
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  ~Request();
  void wait();
  bool test() const;
  // Waits at most `timeout` for the call to complete, never running it on this thread; true when
  // it has (then wait() returns at once).
  bool wait_for(std::chrono::nanoseconds timeout) const;

 private:
  friend class Team;
  explicit Request(std::shared_ptr<detail::PendingCall> call);
  std::shared_ptr<detail::PendingCall> call_;
};

// How this rank's waits for its peers have gone since the team began: a wait spins first
// (SHMCOLL_SPIN_NS), then yields its CPU (SHMCOLL_YIELD_NS), then sleeps on a futex; a sleep
// costs a system call on both sides and a trip through the scheduler's wake-up path. For
// benchmarks, and for telling why a call was slow.
struct WaitCounts {
  std::uint64_t yields = 0;        // sched_yield calls while waiting
  std::uint64_t futex_sleeps = 0;  // futex waits entered (each up to one sleep slice)
};

class SHMCOLL_API Team {
 public:
  // Inside a program started by shmcoll-run: rank, size and segment come from the environment.
  static Team attach();
  // Processes not forked together: rank 0 creates the segment `name`, the others open it; the name
  // is removed as soon as all `size` members have it mapped. Get a name from unique_segment_name()
  // on one process and hand it to the others (the MPI layer uses PMPI_Bcast).
  static Team join(const std::string& name, int rank, int size, const Options& options = {});
  static std::string unique_segment_name();
  // Splits this team as MPI_Comm_split splits a communicator (collective on this team): the
  // members that pass the same `color` (>= 0) form a new team, ranked by `key`, ties by their
  // rank here; a member passing kNoColor joins none and gets nullopt. Each new team has a segment
  // of its own, sized by `options` (slots and heap; placement) as a new team of its size, and
  // built on this team's topology and tunables, so its calls and this team's never disturb each
  // other. Fails on every member alike when a new team's segment cannot be made.
  static constexpr int kNoColor = -1;
  std::optional<Team> split(int color, int key, const Options& options = {});

  Team(Team&&) noexcept;
  Team& operator=(Team&&) noexcept;
  ~Team();

  // -1 for a Team that was moved from, whose collectives fail with invalid_argument.
  int rank() const noexcept;
  int size() const noexcept;
  // Whether the team has ended (a member died, called a mismatched collective, timed out or
  // failed in the middle of a call): every collective on it would fail. A moved-from Team too.
  bool ended() const noexcept;
  // All zero for a Team that was moved from.
  WaitCounts wait_counts() const noexcept;
  // Bytes of shared memory (/dev/shm) the team's segment holds, once for all its members; 0 for
  // a Team that was moved from.
  std::size_t segment_bytes() const noexcept;

  void barrier();
  void bcast(void* buffer, std::int64_t count, Dtype dtype, int root);
  // `count` elements of a derived type; each rank may use its own type as long as every rank's
  // count * size() is the same (a root sending contiguous ints, others receiving a column).
  void bcast(void* buffer, std::int64_t count, const Datatype& type, int root);
  // recvbuf is significant at root only; sendbuf == in_place at root takes root's input from
  // recvbuf.
  void reduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype, const Op& op,
              int root);
  // sendbuf == in_place takes every rank's input from recvbuf.
  void allreduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype, const Op& op);

  // Each rank gets its block of the reduction: blocks of recvcounts[i] elements follow each other
  // in rank order. In place, the whole input comes from recvbuf and the result replaces its start.
  void reduce_scatter(const void* sendbuf, void* recvbuf, std::span<const std::int64_t> recvcounts,
                      Dtype dtype, const Op& op);
  void reduce_scatter_block(const void* sendbuf, void* recvbuf, std::int64_t recvcount, Dtype dtype,
                            const Op& op);
  // Inclusive and exclusive prefix reductions in rank order (in place: input from recvbuf).
  // exscan leaves rank 0's recvbuf untouched.
  void scan(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype, const Op& op);
  void exscan(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype, const Op& op);

  // Data movement, with MPI's arguments and rules (../shared/spec). Types may be derived
  // datatypes; a Dtype converts to one. Displacements are in extents of the type, except
  // alltoallw's, which are in bytes. Where the standard makes an argument insignificant (the
  // send side of scatter off the root, say), it is not read. In place: scatter(v) recvbuf at the
  // root; gather(v) sendbuf at the root; allgather(v) and alltoall(v/w) sendbuf, on every rank.
  void scatter(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype, void* recvbuf,
               std::int64_t recvcount, const Datatype& recvtype, int root);
  void scatterv(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                std::span<const std::int64_t> displs, const Datatype& sendtype, void* recvbuf,
                std::int64_t recvcount, const Datatype& recvtype, int root);
  void gather(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype, void* recvbuf,
              std::int64_t recvcount, const Datatype& recvtype, int root);
  void gatherv(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype, void* recvbuf,
               std::span<const std::int64_t> recvcounts, std::span<const std::int64_t> displs,
               const Datatype& recvtype, int root);
  void allgather(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                 void* recvbuf, std::int64_t recvcount, const Datatype& recvtype);
  void allgatherv(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                  void* recvbuf, std::span<const std::int64_t> recvcounts,
                  std::span<const std::int64_t> displs, const Datatype& recvtype);
  void alltoall(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                void* recvbuf, std::int64_t recvcount, const Datatype& recvtype);
  void alltoallv(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                 std::span<const std::int64_t> sdispls, const Datatype& sendtype, void* recvbuf,
                 std::span<const std::int64_t> recvcounts, std::span<const std::int64_t> rdispls,
                 const Datatype& recvtype);
  void alltoallw(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                 std::span<const std::int64_t> sdispls, std::span<const Datatype> sendtypes,
                 void* recvbuf, std::span<const std::int64_t> recvcounts,
                 std::span<const std::int64_t> rdispls, std::span<const Datatype> recvtypes);

  // Nonblocking forms, as MPI_Ibarrier, MPI_Ibcast, MPI_Ireduce and MPI_Iallreduce: arguments
  // are checked here, then the call runs on the team's worker thread while the program goes on.
  // Every rank issues the team's calls, blocking and nonblocking, in the same order; a blocking
  // call first waits for the nonblocking ones issued before it. Buffers stay the call's until its
  // Request completes.
  Request ibarrier();
  Request ibcast(void* buffer, std::int64_t count, Dtype dtype, int root);
  Request ireduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype, const Op& op,
                  int root);
  Request iallreduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype,
                     const Op& op);
  // Any of this team's blocking calls, made by `calls` in the order it makes them, as one
  // nonblocking call: `team.run_nonblocking([&] { team.alltoallv(...); })`. Every rank issues it
  // at the same place in the team's order. Arguments are checked when it runs: a bad one fails
  // the Request's wait. What `calls` uses must outlive the Request.
  Request run_nonblocking(std::function<void()> calls);

  // Memory inside the segment, in this rank's heap (Options::heap_bytes). A data-movement
  // collective whose send blocks (of a contiguous type) lie here and are at least
  // SHMCOLL_DIRECT_MIN bytes lets the receivers copy them straight out, one copy instead of two.
  // Not zeroed; valid until deallocate or the team's end; only this rank may deallocate it.
  // Backed when allocated: where /dev/shm cannot back it, out_of_memory (never a SIGBUS later).
  template <typename T>
  std::span<T> allocate(std::size_t count) {
    return {static_cast<T*>(allocate_array(count, sizeof(T), alignof(T) > 64 ? alignof(T) : 64)),
            count};
  }
  template <typename T>
  void deallocate(std::span<T> memory) {
    deallocate_bytes(memory.data());
  }
  void* allocate_bytes(std::size_t bytes, std::size_t alignment = 64);
  // `count` elements of `element_bytes` each (invalid_argument naming count when that overflows).
  void* allocate_array(std::size_t count, std::size_t element_bytes, std::size_t alignment = 64);
  void deallocate_bytes(void* memory);

  template <typename T>
  void allreduce(std::span<const T> send, std::span<T> recv, const Op& op) {
    check_spans(send.size(), recv.size());
    allreduce(send.data(), recv.data(), static_cast<std::int64_t>(recv.size()), dtype_of<T>(), op);
  }
  template <typename T>
  void allreduce_in_place(std::span<T> data, const Op& op) {
    allreduce(in_place, data.data(), static_cast<std::int64_t>(data.size()), dtype_of<T>(), op);
  }
  template <typename T>
  void bcast(std::span<T> data, int root) {
    bcast(data.data(), static_cast<std::int64_t>(data.size()), dtype_of<T>(), root);
  }

 private:
  explicit Team(std::unique_ptr<detail::TeamState> state);
  static void check_spans(std::size_t send_size, std::size_t recv_size);
  // Hands a checked call to the team's worker (made at the first).
  Request issue(std::function<void()> call);
  friend struct detail::TeamAccess;
  std::unique_ptr<detail::TeamState> state_;
};

// inout = in op inout, elementwise, in this process (MPI_Reduce_local).
SHMCOLL_API void reduce_local(const void* in, void* inout, std::int64_t count, Dtype dtype,
                              const Op& op);

// Forks n-1 children and runs fn on every rank (rank 0 in the caller's process); returns when all
// have finished. A rank that throws, exits non-zero, crashes or is killed makes run() throw
// Error(rank_failed) naming the first such rank and its exit status or signal; the other ranks'
// collectives fail with peer_failed instead of hanging.
SHMCOLL_API void run(int n, const Options& options, const std::function<void(Team&)>& fn);

}  // namespace shmcoll
