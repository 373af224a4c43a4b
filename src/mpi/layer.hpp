// The PMPI drop-in layer (README, "From MPI"): MPI calls on a communicator whose members share
// this node run on a shmcoll team cached on the communicator; everything else goes to PMPI. Built
// once per MPI (the ABIs differ), from the same sources.
#pragma once

#include <mpi.h>

#include <chrono>
#include <optional>

#include "shmcoll/shmcoll.hpp"

namespace shmcoll::mpi {

// The team of a communicator, or null when this communicator's calls go to PMPI (the layer is
// off, the communicator is an intercommunicator or spans nodes, or the team cap is reached).
// Created on first use, by every member at once (this is itself collective on `comm`).
Team* team_of(MPI_Comm comm);
// Frees what team_of cached on MPI_COMM_WORLD and MPI_COMM_SELF (their attributes are not
// deleted by MPI_Finalize in every MPI).
void release_world_teams();
// SHMCOLL_MPI_DISABLE=1, or MPI_THREAD_MULTIPLE: every call is a plain PMPI call.
bool layer_disabled();
void set_thread_level(int provided);

// Predefined MPI types and ops as shmcoll ones; nullopt: not mappable (the call goes to PMPI).
std::optional<Dtype> dtype_of(MPI_Datatype type);
// `type` is the call's MPI type (`dtype` its shmcoll form): user ops (MPI_Op_create) get it
// back, as MPI promises.
std::optional<Op> op_of(MPI_Op op, MPI_Datatype type, Dtype dtype);
void remember_user_op(MPI_Op op, MPI_User_function* function, bool commutative);
void forget_user_op(MPI_Op op);

// A shmcoll error as an MPI error code, raised through the communicator's error handler.
int raise_error(MPI_Comm comm, const Error& error);

// SHMCOLL_MPI_VERBOSE=1: per collective, calls and bytes through shmcoll and through PMPI, and
// time spent; printed at MPI_Finalize by rank 0 of MPI_COMM_WORLD.
enum class Collective {
  barrier,
  bcast,
  reduce,
  allreduce,
  reduce_scatter,
  reduce_scatter_block,
  scatter,
  scatterv,
  gather,
  gatherv,
  allgather,
  allgatherv,
  scan,
  exscan,
  alltoall,
  alltoallv,
  alltoallw,
  reduce_local,
  count_
};
class CallTimer {
 public:
  explicit CallTimer(Collective which);
  // Records the call on destruction; `through_shmcoll()` before that marks the shmcoll path.
  ~CallTimer();
  void through_shmcoll(std::size_t bytes) {
    shmcoll_ = true;
    bytes_ = bytes;
  }

 private:
  Collective which_;
  bool shmcoll_ = false;
  std::size_t bytes_ = 0;
  std::chrono::steady_clock::time_point start_;
};
void print_statistics();

}  // namespace shmcoll::mpi
