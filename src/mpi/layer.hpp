// The PMPI drop-in layer (README, "From MPI"): MPI calls on a communicator whose members share
// this node run on a shmcoll team cached on the communicator; everything else goes to PMPI. Built
// once per MPI (the ABIs differ), from the same sources.
#pragma once

#include <mpi.h>

#include <chrono>
#include <optional>
#include <span>

#include "shmcoll/datatype.hpp"
#include "shmcoll/shmcoll.hpp"

namespace shmcoll::mpi {

class NodeHierarchy;

// Where a communicator's collectives run: on one team when all its members share this node, node
// by node (hierarchy.hpp) when it spans nodes, or neither: PMPI (the layer is off, an
// intercommunicator, the team cap reached). Made on first use by every member at once: this is
// itself collective on `comm`, so every intercepted collective asks it first, before anything
// else decides the path.
struct Route {
  Team* team = nullptr;
  NodeHierarchy* nodes = nullptr;
};
Route route_of(MPI_Comm comm);
// Joins a shmcoll team of all of `comm`'s members (collective on `comm`; the segment name goes
// out with PMPI_Bcast). Throws shmcoll::Error when this rank cannot join.
Team join_node_team(MPI_Comm comm);
// Frees what team_of cached on MPI_COMM_WORLD and MPI_COMM_SELF (their attributes are not
// deleted by MPI_Finalize in every MPI).
void release_world_teams();
// SHMCOLL_MPI_DISABLE=1, or MPI_THREAD_MULTIPLE: every call is a plain PMPI call.
bool layer_disabled();
void set_thread_level(int provided);

// Predefined MPI element types as shmcoll ones; nullopt: not an element type shmcoll reduces.
std::optional<Dtype> dtype_of(MPI_Datatype type);
// Any MPI datatype as a shmcoll Datatype: predefined ones, and derived ones decoded once with
// MPI_Type_get_envelope/contents and cached until MPI_Type_free. Null: one it cannot decode
// (MPI_Type_create_darray, Fortran parameterized types); the call goes to PMPI.
const Datatype* datatype_of(MPI_Datatype type);
void forget_datatype(MPI_Datatype type);
// Stands in for an argument the standard makes insignificant (never read).
const Datatype& unused_type();

// How a reduction over `type` with `op` runs on shmcoll: predefined types with the predefined
// ops MPI defines on them, or with user ops (MPI_Op_create), which get the caller's MPI type
// back, as MPI promises. nullopt: PMPI.
struct Reduction {
  Dtype dtype;
  Op op;
  std::size_t bytes(int count) const {
    return count > 0 ? static_cast<std::size_t>(count) * dtype_size(dtype) : 0;
  }
};
std::optional<Reduction> reduction_of(MPI_Datatype type, MPI_Op op);
void remember_user_op(MPI_Op op, MPI_User_function* function, bool commutative);
void forget_user_op(MPI_Op op);

// A shmcoll error as an MPI error code, raised through the communicator's error handler.
int raise_error(MPI_Comm comm, const Error& error);

inline const void* send_of(const void* buffer) {
  return buffer == MPI_IN_PLACE ? in_place : buffer;
}
inline void* recv_of(void* buffer) {
  return buffer == MPI_IN_PLACE ? in_place : buffer;
}
inline std::size_t bytes_of(int count, const Datatype& type) {
  return count > 0 ? static_cast<std::size_t>(count) * type.size() : 0;
}

// A v-collective's int counts or displacements as the int64 span shmcoll takes.
// The arrays are the layer's own, reused (slot 0-3), so once grown to the communicator's size a
// call allocates nothing. Null `values` (insignificant on this rank): an empty span.
std::span<const std::int64_t> widen(const int* values, int n, int slot);
// `n` copies of `value`, likewise.
std::span<const std::int64_t> repeat(std::int64_t value, int n, int slot);
// Alltoallw's per-peer types (slot 0 send, 1 recv); nullopt when one that moves data cannot be
// decoded.
std::optional<std::span<const Datatype>> datatypes_of(const MPI_Datatype* types, const int* counts,
                                                      int n, int slot);

// SHMCOLL_MPI_VERBOSE=1: per collective, calls and bytes through shmcoll and through PMPI, and
// time spent; printed at MPI_Finalize by rank 0 of MPI_COMM_WORLD. One row per collective
// (shmcoll::Collective), then one for MPI_Reduce_local.
inline constexpr int kReduceLocalRow = kCollectiveCount;
inline constexpr int kStatisticsRows = kCollectiveCount + 1;
class CallTimer {
 public:
  explicit CallTimer(Collective which) : CallTimer(static_cast<int>(which)) {}
  static CallTimer for_reduce_local() { return CallTimer(kReduceLocalRow); }
  // Records the call on destruction; `through_shmcoll()` before that marks the shmcoll path.
  ~CallTimer();
  void through_shmcoll(std::size_t bytes) {
    shmcoll_ = true;
    bytes_ = bytes;
  }

 private:
  explicit CallTimer(int row);
  int row_;
  bool shmcoll_ = false;
  std::size_t bytes_ = 0;
  std::chrono::steady_clock::time_point start_;
};
void print_statistics();

// Runs `call` on the shmcoll path: success is recorded as `bytes` through shmcoll, a shmcoll
// error is raised through the communicator's error handler.
template <typename Call>
int through_shmcoll(MPI_Comm comm, CallTimer& timer, std::size_t bytes, Call&& call) {
  try {
    call();
    timer.through_shmcoll(bytes);
    return MPI_SUCCESS;
  } catch (const Error& error) {
    return raise_error(comm, error);
  }
}

}  // namespace shmcoll::mpi
