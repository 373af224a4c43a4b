// A communicator spanning nodes, run node by node: a shmcoll phase among each node's members,
// PMPI among one leader per node (the node's lowest rank), and a shmcoll phase again, so MPI
// stays the engine between nodes. Barrier, bcast, reduce and allreduce take this path; the other
// collectives on such a communicator are plain PMPI calls.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "mpi/layer.hpp"

namespace shmcoll::mpi {

class NodeHierarchy {
 public:
  // Collective on `comm`; `node` holds this rank's node-mates in `comm`'s rank order. Throws
  // shmcoll::Error when the node team cannot be joined (the caller then agrees on PMPI).
  NodeHierarchy(MPI_Comm comm, MPI_Comm node);
  ~NodeHierarchy();
  NodeHierarchy(const NodeHierarchy&) = delete;
  NodeHierarchy& operator=(const NodeHierarchy&) = delete;

  // Nodes hold contiguous, ascending rank ranges: a non-commutative op keeps its rank order when
  // reduced node by node.
  bool rank_ordered() const { return rank_ordered_; }

  // Whether this node's team has ended (hierarchy calls then go to PMPI).
  bool ended() const { return node_team_->ended(); }
  int size() const { return static_cast<int>(node_of_rank_.size()); }
  void barrier();
  void bcast(void* buffer, int count, MPI_Datatype type, const Datatype& shm_type, int root);
  void reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
              const Reduction& reduction, int root);
  void allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                 const Reduction& reduction);

 private:
  bool leader() const { return leaders_ != MPI_COMM_NULL; }
  // Node-local scratch for a leader's partial results, grown to the largest call seen, so later
  // calls of that size touch no new memory.
  void* scratch(int which, std::size_t bytes);

  int rank_ = 0;
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Comm leaders_ = MPI_COMM_NULL;  // MPI_COMM_NULL on non-leaders
  std::optional<Team> node_team_;
  std::vector<int> node_of_rank_;       // the node (its leader's rank in leaders_) of each rank
  std::vector<int> node_rank_of_rank_;  // each rank's rank inside its node
  bool rank_ordered_ = false;
  std::vector<std::byte> scratch_[2];
};

}  // namespace shmcoll::mpi
