// A communicator spanning nodes, run node by node: a shmcoll phase among each node's members,
// PMPI among one leader per node (the node's lowest rank), and a shmcoll phase again, so MPI
// stays the engine between nodes. Every intercepted collective takes this path (hierarchy.cpp,
// hierarchy_movement.cpp, hierarchy_alltoall.cpp).
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "mpi/layer.hpp"

namespace shmcoll::mpi {

// The op the node leaders combine with through the MPI: `op`, except for 8-bit integer sums and
// products, which Open MPI's op/avx saturates (its issue 8045) where C, the standard and the node
// teams wrap: those go through a user op of the layer's that wraps.
MPI_Op between_nodes(MPI_Op op, const Reduction& reduction);

class NodeHierarchy {
 public:
  // Collective on `comm`; `node` holds this rank's node-mates in `comm`'s rank order;
  // `serves_nonblocking`, as every member agreed (run_nonblocking). Throws shmcoll::Error when the
  // node team cannot be joined (the caller then agrees on PMPI).
  NodeHierarchy(MPI_Comm comm, MPI_Comm node, bool serves_nonblocking);
  ~NodeHierarchy();
  NodeHierarchy(const NodeHierarchy&) = delete;
  NodeHierarchy& operator=(const NodeHierarchy&) = delete;

  // Nodes hold contiguous, ascending rank ranges: a non-commutative op keeps its rank order when
  // reduced node by node.
  bool rank_ordered() const { return rank_ordered_; }

  // A nonblocking call node by node: `call` (this hierarchy's blocking calls) issued to the node
  // team's worker, which then calls the MPI for the leaders: only where every member agreed to
  // (SHMCOLL_MPI_NONBLOCKING_ACROSS_NODES=1 at MPI_THREAD_MULTIPLE), as serves_nonblocking says.
  bool serves_nonblocking() const { return serves_nonblocking_; }
  Request run_nonblocking(std::function<void()> call) {
    return node_team_->run_nonblocking(std::move(call));
  }
  // Runs to the end every call issued so far (on this thread where still queued): a blocking
  // call's leaders' PMPI steps must come after theirs, in the same order on every leader.
  void finish_issued();

  // Whether this node's team has ended (hierarchy calls then go to PMPI).
  bool ended() const { return node_team_->ended(); }
  int size() const { return static_cast<int>(node_of_rank_.size()); }
  int rank() const { return rank_; }
  void barrier();
  void bcast(void* buffer, int count, MPI_Datatype type, const Datatype& shm_type, int root);
  void reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
              const Reduction& reduction, int root);
  void allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                 const Reduction& reduction);
  // Prefix reductions; only where nodes hold ascending rank ranges (rank_ordered), as the prefix
  // of a rank is then its node's prefix after every earlier node's total.
  void scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
            const Reduction& reduction);
  void exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
              const Reduction& reduction);

  // Each rank's block of the reduction (MPI_Reduce_scatter(_block)): each node's team reduces the
  // whole vector to its leader, the leaders reduce-scatter whole nodes' blocks with PMPI, and each
  // node's team scatters its members' blocks. Only for commutative ops or rank_ordered nodes,
  // and for vectors within MPI's int counts (fits_int_counts).
  void reduce_scatter(const void* sendbuf, void* recvbuf, std::span<const std::int64_t> recvcounts,
                      MPI_Datatype type, MPI_Op op, const Reduction& reduction);
  void reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                            MPI_Op op, const Reduction& reduction);

  // Data movement on packed bytes: each node's team gathers its members' blocks to the leader
  // (scatters them from it), the leaders exchange whole nodes' blocks with PMPI in MPI_BYTE, and
  // each rank unpacks with its own type. Arguments as Team's (shmcoll::in_place for MPI_IN_PLACE).
  // Only for calls whose blocks together fit MPI's int counts (fits_int_counts).
  static bool fits_int_counts(std::int64_t total_bytes) { return total_bytes <= INT_MAX; }
  void allgather(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                 void* recvbuf, std::int64_t recvcount, const Datatype& recvtype);
  void allgatherv(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                  void* recvbuf, std::span<const std::int64_t> recvcounts,
                  std::span<const std::int64_t> displs, const Datatype& recvtype);
  void gather(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype, void* recvbuf,
              std::int64_t recvcount, const Datatype& recvtype, int root);
  void scatter(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype, void* recvbuf,
               std::int64_t recvcount, const Datatype& recvtype, int root);
  // The v forms: only the root knows every block's size, so each leader learns its members'
  // sizes from the node's team, and the leaders move their nodes' runs to or from the root's
  // leader with sized messages (sized_send), never counts any rank could not compute.
  void gatherv(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype, void* recvbuf,
               std::span<const std::int64_t> recvcounts, std::span<const std::int64_t> displs,
               const Datatype& recvtype, int root);
  void scatterv(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                std::span<const std::int64_t> displs, const Datatype& sendtype, void* recvbuf,
                std::int64_t recvcount, const Datatype& recvtype, int root);
  // Alltoall(v/w) (hierarchy_alltoall.cpp): every rank's blocks go to its leader, the leaders
  // exchange one run per pair of nodes (its sizes table first), and each leader hands its members
  // the blocks addressed to them; a block for another node past kAlltoallThroughLeadersBlockMost
  // goes straight to its rank instead (alltoall_blocks). Displacements as Team's: alltoallw's in
  // bytes.
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

 private:
  bool leader() const { return leaders_ != MPI_COMM_NULL; }
  // Node-local scratch for a leader's partial results, grown to the largest call seen, so later
  // calls of that size touch no new memory.
  void* scratch(int which, std::size_t bytes);
  // Lays out the packed buffer of one call: node after node, each node's members in their order,
  // `bytes(rank)` each (or elements, for the reductions); sets the offsets below and returns the
  // total.
  template <typename BytesOfRank>
  std::int64_t lay_out(BytesOfRank bytes);
  // Scan and exscan's step across nodes: `total` (the node's, held by its member `last`) to every
  // member, the leaders' exscan of the totals into `before`, and that to every member; false on
  // node 0, which has no earlier node.
  bool earlier_nodes_total(void* total, void* before, int last, int count, MPI_Datatype type,
                           MPI_Op op, const Reduction& reduction);
  // Reduce_scatter(_block)'s body: rank r's block holds count_of(r) elements.
  template <typename CountOf>
  void reduce_scatter_packed(const void* sendbuf, void* recvbuf, MPI_Datatype type, MPI_Op op,
                             const Reduction& reduction, CountOf count_of);
  // The leaders' way (alltoall_blocks): my block for rank d has send_bytes(d) bytes, which pack(d,
  // into) writes; rank s's block for me has recv_bytes(s), which unpack(s, from) reads. Every pack
  // comes before any unpack (in place, the blocks leave the receive buffer first).
  template <typename SendBytes, typename Pack, typename RecvBytes, typename Unpack>
  void alltoall_packed(SendBytes send_bytes, Pack pack, RecvBytes recv_bytes, Unpack unpack);
  // Alltoall(v/w)'s body, from each pair's block (send_block(d): my block for rank d;
  // recv_block(s): rank s's block for me), one of two ways: every block through the leaders
  // (alltoall_packed: one message per pair of nodes, which wins for small blocks), or direct:
  // each block for another node straight to its rank (point-to-point on peers_, posted first) while
  // node_own() moves the node's own through its team, so no leader carries its node's traffic.
  struct DirectBlock {
    const std::byte* at;
    std::int64_t count;
    const Datatype* type;
    std::int64_t bytes() const { return count * static_cast<std::int64_t>(type->size()); }
  };
  enum class Ways { through_leaders, direct };
  template <typename SendBlock, typename RecvBlock, typename NodeOwn>
  void alltoall_blocks(Ways ways, bool in_place, SendBlock send_block, RecvBlock recv_block,
                       NodeOwn node_own);
  // Posts `bytes` from `data` as messages within MPI's int counts (post(piece, bytes, request)),
  // their requests appended to requests_; an empty message posts nothing.
  template <typename Post>
  void post_in_pieces(const std::byte* data, std::int64_t bytes, Post post);
  // One of four per-member arrays: node_own()'s counts and displacements.
  std::span<std::int64_t> node_own_values(int which);
  // The leaders' part of it: from the gathered blocks and sizes, one run per destination node,
  // exchanged, then each member's blocks in source order into scratch 3; sets member_bytes_ and
  // member_at_ to them.
  void exchange_runs(const std::int64_t* table, const std::byte* gathered);
  // Allgather(v)'s leaders' step and spread on up to kSegmentedAllgatherNodesMost nodes: the
  // leaders exchange their nodes' runs in segments, point-to-point, and each node's team spreads a
  // segment as soon as its leader has it, while the next ones cross the network.
  void allgather_runs_in_segments(std::byte* packed);
  // Allgather(v)'s body: rank r's block holds count_of(r) elements at displacement_of(r).
  template <typename CountOf, typename DisplacementOf>
  void allgather_packed(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                        void* recvbuf, const Datatype& recvtype, CountOf count_of,
                        DisplacementOf displacement_of);
  // The packed blocks' type, between leaders and inside a node.
  static const Datatype& bytes_type();
  // The packed buffer of a rooted call (gather, scatter), `total` bytes where it holds them all.
  std::byte* packed_for_root(std::int64_t total, bool at_root);
  // Gathers this node's blocks (each rank's send data) to the leader's packed buffer, as laid out
  // in member_at_ and member_bytes_ from `node_start` (the node's offset in it).
  void gather_to_leader(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                        std::byte* node_start);
  // Tells the leader my block's bytes: member_bytes_ and member_at_ (from 0) there; returns the
  // node's total on the leader.
  std::int64_t learn_member_bytes(std::int64_t mine);
  // A message of any size: its bytes first, then the data in pieces within MPI's int counts.
  // sized_receive grows scratch `which` to fit, at `offset`, and returns the bytes received.
  static void sized_send(const std::byte* data, std::int64_t bytes, int peer, MPI_Comm comm);
  std::int64_t sized_receive(int which, std::int64_t offset, int peer, MPI_Comm comm);
  // Moves the first `bytes` of scratch `which` between a root that is not its node's leader and
  // that leader, as a sized message on the node's communicator (the receiver's scratch grows to
  // fit, whatever `bytes` it passes); nothing where the root leads its node or lives elsewhere.
  bool root_apart_from_leader_here(int root) const;
  void root_to_leader(int which, std::int64_t bytes, int root);
  void leader_to_root(int which, std::int64_t bytes, int root);
  int node() const { return node_of_rank_[rank_]; }
  int size_of_nodes() const { return static_cast<int>(members_.size()); }
  // The leaders' binomial tree from root_node: sets tree_children_ to my children (nearest
  // first) and returns my parent (-1 at the root).
  int binomial_links(int root_node);
  // The same for a chain from root_node through the nodes in order (one child at most).
  int chain_links(int root_node);
  // A bcast among the leaders in a binomial tree of point-to-point messages, each leader
  // receiving once and passing on, for data up to kLeadersTreeBcastBytesMost.
  void leaders_binomial_bcast(void* buffer, int count, MPI_Datatype type, int root_node);
  // A larger bcast's leaders' step and its spread inside the nodes other than the root's, in
  // segments of kBcastSegmentBytes down the same tree (or, for many segments on few nodes, a
  // chain: kChainBcastNodesMost): each node's team spreads segment k while the next ones cross
  // the network, where the whole would cross first and then be spread.
  void bcast_in_segments(void* buffer, int count, const Datatype& shm_type, int root_node);
  // The leaders' step of a barrier: on 3 to kFanInBarrierNodesMost nodes, node 0's leader
  // gathers the others' arrivals and releases them; else PMPI_Barrier among the leaders.
  void leaders_barrier();
  // The tag of the layer's point-to-point messages between a root and its node's leader, out of
  // the way of small application tags (on the node's own communicator anyway).
  static constexpr int kResultTag = 0x5c01;
  static constexpr int kDirectTag = 0x5c02;   // alltoall_blocks' direct blocks, on peers_
  static constexpr int kTreeTag = 0x5c03;     // the leaders' bcast trees' messages, on leaders_
  static constexpr int kBarrierTag = 0x5c04;  // leaders_barrier's arrivals and releases
  static constexpr std::int64_t kPieceBytes = std::int64_t{1} << 30;  // sized_send's pieces

  int rank_ = 0;
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Comm leaders_ = MPI_COMM_NULL;  // MPI_COMM_NULL on non-leaders
  MPI_Comm peers_ = MPI_COMM_NULL;    // the communicator's ranks, for the layer's point-to-point
  std::optional<Team> node_team_;
  std::vector<int> node_of_rank_;       // the node (its leader's rank in leaders_) of each rank
  std::vector<int> node_rank_of_rank_;  // each rank's rank inside its node
  bool rank_ordered_ = false;
  bool serves_nonblocking_ = false;
  std::vector<std::vector<int>> members_;  // each node's ranks, in their order inside it
  std::vector<int> column_at_;  // where each node's ranks start in node order (nodes + 1 entries)
  std::vector<std::int64_t> run_at_, run_bytes_, incoming_at_, incoming_bytes_;  // per node
  std::vector<MPI_Request> requests_;
  std::vector<int> tree_children_;  // binomial_links'
  // alltoall: where each source's block arrives (per rank); on the direct way, where each rank's
  // packed block lies (packed_at_ then holds where my packed block for it lies).
  std::vector<std::int64_t> received_at_;
  std::vector<std::int64_t> cursor_;  // alltoall: the leader's fill point per member
  // One call's packed layout (lay_out): where each rank's block and each node's blocks start
  // (int, as PMPI takes them), and my node's members' blocks relative to its start.
  std::vector<std::int64_t> packed_at_;
  std::vector<int> node_at_, node_bytes_;
  std::vector<std::int64_t> member_at_, member_bytes_;
  std::vector<std::int64_t> node_own_values_;                        // node_own_values' arrays
  std::vector<Datatype> node_own_send_types_, node_own_recv_types_;  // alltoallw's, per member
  std::vector<std::byte> scratch_[6];
};

template <typename BytesOfRank>
inline std::int64_t NodeHierarchy::lay_out(BytesOfRank bytes) {
  std::int64_t total = 0;
  for (std::size_t n = 0; n < members_.size(); ++n) {
    const std::int64_t node_start = total;
    for (int member : members_[n]) {
      packed_at_[member] = total;
      total += bytes(member);
    }
    // Past INT_MAX the caller goes to PMPI before these are used.
    node_at_[n] = static_cast<int>(std::min<std::int64_t>(node_start, INT_MAX));
    node_bytes_[n] = static_cast<int>(std::min<std::int64_t>(total - node_start, INT_MAX));
  }
  const auto& mine = members_[node()];
  for (std::size_t i = 0; i < mine.size(); ++i) {
    member_at_[i] = packed_at_[mine[i]] - node_at_[node()];
    member_bytes_[i] = bytes(mine[i]);
  }
  return total;
}

// Whether a call on `route` may take the shmcoll path as far as its size goes: node by node, the
// leaders' PMPI calls take int counts, and past them the call goes to PMPI (every rank computes
// the same `total`, in bytes or elements as the call's counts are).
inline bool fits_node_by_node(const Route& route, std::int64_t total) {
  if (!route.nodes || NodeHierarchy::fits_int_counts(total)) return true;
  note_pmpi_reason(PmpiReason::too_large_for_nodes);
  return false;
}

// Node by node moves every byte that leaves a node through its leader. For alltoall, measured
// across a real network hop (docs/clusters-measured.md: 2 nodes x 2 ranks, Open MPI 4.1.4,
// OSU-style), that loses to the MPI's own exchange from blocks of 16 KiB (0.41-0.81x) and wins up
// to 1 KiB (1.06-1.57x): larger blocks go straight to their ranks instead (alltoall_blocks).
inline constexpr std::size_t kAlltoallThroughLeadersBlockMost = 8 * 1024;

// The leaders' step of a small bcast runs the layer's own binomial tree rather than PMPI_Bcast:
// Open MPI 4.1's tuned chooses a chain ("pipeline") below 32 bytes on fewer than 4 ranks, each
// leader waiting for the one before it: on 3 pretend nodes of 2 ranks (docs/clusters-measured.md),
// a bcast of 8 B took 70-85 us that way and 55-62 through the tree. Up to this size a tree of whole
// messages is what the MPIs run anyway (64 B-1 KiB: even).
inline constexpr std::size_t kLeadersTreeBcastBytesMost = 1024;

// A larger bcast crosses the nodes in segments (bcast_in_segments), each node's team spreading
// one while the next crosses the network, as Open MPI's coll/han pipelines (its bcast segments
// are 64 KiB too, the size of Open MPI's TCP eager messages, which a sender pushes without waiting
// for the receiver). On 2 pretend nodes of 2 ranks (docs/clusters-measured.md) the whole crossing
// first and then spread took a 1 MiB bcast 850-920 us where han took 550. Past a few nodes the
// binomial tree's root sends every segment once per child (log2 of the nodes), where the MPI's own
// large bcasts (scatter and allgather) send it about twice in all: there the leaders call
// PMPI_Bcast.
inline constexpr std::size_t kBcastSegmentBytes = 64 * 1024;
inline constexpr int kBcastSegmentsInFlight = 8;
inline constexpr int kSegmentedBcastNodesMost = 4;

// Many segments on 3 nodes go down a chain instead (root, then the next node, then the last),
// each leader sending each segment once, where the tree's root sends it to both others: on 3
// pretend nodes of 2 ranks, round-robin, 1 MiB took 1.42-1.44 ms against the tree's 2.24 (han:
// 2.7-2.8), 4 MiB 6.5-7.0 ms against 12.3-14.3 (han: 10.1-10.2), 256 KiB 434-451 us against
// 481-489, and a single segment was slower (two hops where the tree has one). On 4 nodes the
// chain measured even with the tree from 1 MiB and slower at 256 KiB, so there the tree stays.
inline constexpr int kChainBcastNodesMost = 3;
inline constexpr std::int64_t kChainBcastSegmentsLeast = 4;

// The leaders' barrier: on 2 nodes the MPI's is one exchange, a single hop. On 3, Open MPI 4.1's
// (Bruck's: two rounds in which every leader sends and receives) measured 77-81 us on 3 pretend
// nodes of 2 ranks, round-robin (0.78-0.84x the MPI alone), and the same two rounds written here
// 69; node 0's leader gathering the others' arrivals and then releasing them, where the others
// only send and wait, took 57-58 (1.07-1.10x). On 4 nodes the two were even (72 and 74 us); on 2
// the gather-release took 23 us against the exchange's 17 (docs/clusters-measured.md). Past 4, one
// leader's serial receives grow with the nodes, and the MPI's barrier scales.
inline constexpr int kFanInBarrierNodesMost = 4;

// An allgather past one segment on 2 nodes exchanges the two runs the same way
// (allgather_runs_in_segments): at 2x2, 1-4 MiB blocks went from 0.87-1.12x han to 1.34-1.37x.
// On 3 pretend nodes, round-robin, it measured 0.97-0.99x han at 1-4 MiB where the leaders'
// PMPI_Allgatherv and one spread took 1.05-1.07x (docs/clusters-measured.md), so there they still
// do.
inline constexpr int kSegmentedAllgatherNodesMost = 2;

}  // namespace shmcoll::mpi
