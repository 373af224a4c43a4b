// Collectives on a communicator spanning nodes: shmcoll inside each node, PMPI among the node
// leaders. A rank's node and its rank inside it are tabled once, at creation, for every rank of
// the communicator, so a call needs no lookup through MPI.
#include "mpi/hierarchy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "api/team_state.hpp"
#include "util/copy.hpp"

namespace shmcoll::mpi {

namespace {

// 8-bit sums and products wrap, as C's arithmetic and the node teams' own do.
void wrapping_sum8(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint8_t*>(in);
  auto* b = static_cast<std::uint8_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<std::uint8_t>(a[i] + b[i]);
}
void wrapping_prod8(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint8_t*>(in);
  auto* b = static_cast<std::uint8_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<std::uint8_t>(a[i] * b[i]);
}

// PMPI_Op_create: the layer's MPI_Op_create would take it for one of the program's own ops.
MPI_Op commutative_op(MPI_User_function* function) {
  MPI_Op made = MPI_OP_NULL;
  PMPI_Op_create(function, 1, &made);
  return made;
}

}  // namespace

MPI_Op between_nodes(MPI_Op op, const Reduction& reduction) {
  if (reduction.dtype != Dtype::i8 && reduction.dtype != Dtype::u8) return op;
  if (op != MPI_SUM && op != MPI_PROD) return op;
  static const MPI_Op sum = commutative_op(wrapping_sum8);
  static const MPI_Op prod = commutative_op(wrapping_prod8);
  return op == MPI_SUM ? sum : prod;
}

NodeHierarchy::NodeHierarchy(MPI_Comm comm, MPI_Comm node, bool serves_nonblocking)
    : node_(node), serves_nonblocking_(serves_nonblocking) {
  int size = 0, node_rank = 0;
  PMPI_Comm_rank(comm, &rank_);
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(node, &node_rank);
  PMPI_Comm_split(comm, node_rank == 0 ? 0 : MPI_UNDEFINED, rank_, &leaders_);
  // A split, not a dup: a dup would run the program's attribute copy callbacks.
  PMPI_Comm_split(comm, 0, rank_, &peers_);
  int node_index = 0;
  if (leader()) PMPI_Comm_rank(leaders_, &node_index);
  PMPI_Bcast(&node_index, 1, MPI_INT, 0, node);

  const int mine[2] = {node_index, node_rank};
  std::vector<int> all(2 * static_cast<std::size_t>(size));
  PMPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm);
  node_of_rank_.resize(size);
  node_rank_of_rank_.resize(size);
  for (int r = 0; r < size; ++r) {
    node_of_rank_[r] = all[2 * r];
    node_rank_of_rank_[r] = all[2 * r + 1];
  }
  rank_ordered_ = std::is_sorted(node_of_rank_.begin(), node_of_rank_.end());
  int nodes = 0;
  if (leader()) PMPI_Comm_size(leaders_, &nodes);
  PMPI_Bcast(&nodes, 1, MPI_INT, 0, node);
  members_.resize(nodes);
  for (int r = 0; r < size; ++r) members_[node_of_rank_[r]].push_back(r);
  for (auto& members : members_) {
    std::ranges::sort(members, {}, [&](int r) { return node_rank_of_rank_[r]; });
  }
  column_at_.assign(nodes + 1, 0);
  for (int n = 0; n < nodes; ++n) {
    column_at_[n + 1] = column_at_[n] + static_cast<int>(members_[n].size());
  }
  for (auto* per_node : {&run_at_, &run_bytes_, &incoming_at_, &incoming_bytes_}) {
    per_node->resize(nodes);
  }
  packed_at_.resize(size);
  received_at_.resize(size);
  node_at_.resize(nodes);
  node_bytes_.resize(nodes);
  member_at_.resize(members_[node_of_rank_[rank_]].size());
  member_bytes_.resize(member_at_.size());
  try {
    node_team_.emplace(join_node_team(node));
  } catch (...) {
    if (leader()) PMPI_Comm_free(&leaders_);
    PMPI_Comm_free(&peers_);
    throw;
  }
}

NodeHierarchy::~NodeHierarchy() {
  finish_issued();  // (a call pending when the program freed the communicator uses all of this)
  node_team_.reset();
  if (leader()) PMPI_Comm_free(&leaders_);
  PMPI_Comm_free(&peers_);
  PMPI_Comm_free(&node_);
}

void NodeHierarchy::finish_issued() {
  const auto& worker = detail::TeamAccess::state(*node_team_).worker;
  if (worker) worker->drain();
}

const Datatype& NodeHierarchy::bytes_type() {
  static const Datatype byte(Dtype::byte);
  return byte;
}

void* NodeHierarchy::scratch(int which, std::size_t bytes) {
  auto& buffer = scratch_[which];
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

void NodeHierarchy::barrier() {
  node_team_->barrier();  // everyone on this node has arrived
  if (leader()) leaders_barrier();
  node_team_->barrier();  // ... and on every node
}

void NodeHierarchy::leaders_barrier() {
  const int nodes = size_of_nodes();
  if (nodes < 3 || nodes > kFanInBarrierNodesMost) {
    PMPI_Barrier(leaders_);
    return;
  }
  // Node 0's leader hears from every other leader, then releases them (kFanInBarrierNodesMost
  // says why).
  if (node() == 0) {
    for (int arrived = 1; arrived < nodes; ++arrived) {
      PMPI_Recv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, kBarrierTag, leaders_, MPI_STATUS_IGNORE);
    }
    for (int other = 1; other < nodes; ++other) {
      PMPI_Send(nullptr, 0, MPI_BYTE, other, kBarrierTag, leaders_);
    }
  } else {
    PMPI_Send(nullptr, 0, MPI_BYTE, 0, kBarrierTag, leaders_);
    PMPI_Recv(nullptr, 0, MPI_BYTE, 0, kBarrierTag, leaders_, MPI_STATUS_IGNORE);
  }
}

void NodeHierarchy::bcast(void* buffer, int count, MPI_Datatype type, const Datatype& shm_type,
                          int root) {
  const int root_node = node_of_rank_[root];
  const int root_in_node = node_rank_of_rank_[root];
  const bool with_root = node() == root_node;
  // The leaders' step needs the data at the root's leader. A root that leads its node spreads it
  // to its members only after it left the node: they are not the last to get it, and the other
  // nodes then wait for one node's step, not two.
  const bool root_spreads_first = with_root && root_in_node != 0;
  if (root_spreads_first) node_team_->bcast(buffer, count, shm_type, root_in_node);
  const std::size_t bytes = static_cast<std::size_t>(count) * shm_type.size();
  if (bytes > kLeadersTreeBcastBytesMost && size_of_nodes() <= kSegmentedBcastNodesMost) {
    bcast_in_segments(buffer, count, shm_type, root_node);
  } else {
    if (leader()) {
      if (bytes <= kLeadersTreeBcastBytesMost) {
        leaders_binomial_bcast(buffer, count, type, root_node);
      } else {
        PMPI_Bcast(buffer, count, type, root_node, leaders_);
      }
    }
    if (!with_root) node_team_->bcast(buffer, count, shm_type, 0);
  }
  if (with_root && !root_spreads_first) node_team_->bcast(buffer, count, shm_type, 0);
}

int NodeHierarchy::binomial_links(int root_node) {
  const int nodes = size_of_nodes();
  const int relative = (node() - root_node + nodes) % nodes;
  int lowest_bit = 1;  // below it, my children; at it, my parent (the root has none)
  while (lowest_bit < nodes && (relative & lowest_bit) == 0) lowest_bit <<= 1;
  // Nearest child first, as Open MPI's binomial tree sends: measured on 3 pretend nodes, where the
  // farthest-first order of MPICH's took 58-63 us at 64 B-1 KiB against 50-55.
  tree_children_.clear();
  for (int bit = 1; bit < lowest_bit && relative + bit < nodes; bit <<= 1) {
    tree_children_.push_back((relative + bit + root_node) % nodes);
  }
  return relative == 0 ? -1 : (relative - lowest_bit + root_node) % nodes;
}

int NodeHierarchy::chain_links(int root_node) {
  const int nodes = size_of_nodes();
  const int relative = (node() - root_node + nodes) % nodes;
  tree_children_.clear();
  if (relative + 1 < nodes) tree_children_.push_back((node() + 1) % nodes);
  return relative == 0 ? -1 : (node() - 1 + nodes) % nodes;
}

void NodeHierarchy::leaders_binomial_bcast(void* buffer, int count, MPI_Datatype type,
                                           int root_node) {
  const int parent = binomial_links(root_node);
  if (parent >= 0) PMPI_Recv(buffer, count, type, parent, kTreeTag, leaders_, MPI_STATUS_IGNORE);
  for (int child : tree_children_) PMPI_Send(buffer, count, type, child, kTreeTag, leaders_);
}

void NodeHierarchy::bcast_in_segments(void* buffer, int count, const Datatype& shm_type,
                                      int root_node) {
  const bool spreads = node() != root_node;  // the root's node spreads the whole after (bcast)
  if (!leader() && !spreads) return;
  // Segments are byte ranges of the packed data, as ranks may describe it with different types
  // (a root's n ints, a column elsewhere): where a rank's type is not one run, the data passes
  // through scratch, packed whole at the root's leader and unpacked segment by segment elsewhere.
  const std::int64_t bytes = static_cast<std::int64_t>(count) * shm_type.size();
  const bool contiguous = shm_type.is_contiguous();
  std::byte* packed = contiguous ? static_cast<std::byte*>(buffer) + shm_type.lb()
                                 : static_cast<std::byte*>(scratch(1, bytes));
  const std::int64_t segment_bytes = kBcastSegmentBytes;
  const std::int64_t segments = (bytes - 1) / segment_bytes + 1;
  auto length = [&](std::int64_t k) {
    return static_cast<int>(std::min(segment_bytes, bytes - k * segment_bytes));
  };
  auto spread = [&](std::int64_t k) {
    if (!spreads) return;
    std::byte* at = packed + k * segment_bytes;
    node_team_->bcast(at, length(k), bytes_type(), 0);
    if (!contiguous) shm_type.unpack_range(at, count, k * segment_bytes, length(k), buffer);
  };
  if (!leader()) {
    for (std::int64_t k = 0; k < segments; ++k) spread(k);
    return;
  }
  if (!spreads && !contiguous) shm_type.pack(buffer, count, packed);
  // A window of segments in flight: receives posted ahead (matched in posting order), and each
  // child's send of segment k waits for its send of k - window, so no call holds more requests.
  const bool chain =
      size_of_nodes() <= kChainBcastNodesMost && segments >= kChainBcastSegmentsLeast;
  const int parent = chain ? chain_links(root_node) : binomial_links(root_node);
  const int children = static_cast<int>(tree_children_.size());
  const int window = kBcastSegmentsInFlight;
  requests_.assign(static_cast<std::size_t>(window) * (1 + children), MPI_REQUEST_NULL);
  MPI_Request* receives = requests_.data();
  MPI_Request* sends = receives + window;
  auto post_receive = [&](std::int64_t k) {
    if (parent < 0 || k >= segments) return;
    PMPI_Irecv(packed + k * segment_bytes, length(k), MPI_BYTE, parent, kTreeTag, leaders_,
               &receives[k % window]);
  };
  for (int k = 0; k < window; ++k) post_receive(k);
  for (std::int64_t k = 0; k < segments; ++k) {
    PMPI_Wait(&receives[k % window], MPI_STATUS_IGNORE);
    post_receive(k + window);
    for (int c = 0; c < children; ++c) {
      MPI_Request& send = sends[(k % window) * children + c];
      PMPI_Wait(&send, MPI_STATUS_IGNORE);
      PMPI_Isend(packed + k * segment_bytes, length(k), MPI_BYTE, tree_children_[c], kTreeTag,
                 leaders_, &send);
    }
    spread(k);
  }
  PMPI_Waitall(window * children, sends, MPI_STATUSES_IGNORE);
}

void NodeHierarchy::reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                           MPI_Op op, const Reduction& reduction, int root) {
  const std::size_t bytes = reduction.bytes(count);
  const void* input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;  // in place: the root only
  void* partial = leader() ? scratch(0, bytes) : nullptr;
  node_team_->reduce(input, partial, count, reduction.dtype, reduction.op, 0);
  const int root_node = node_of_rank_[root];
  const bool root_is_leader = node_rank_of_rank_[root] == 0;
  if (leader()) {
    const bool with_root = node_of_rank_[rank_] == root_node;
    void* result = nullptr;
    if (with_root) result = rank_ == root ? recvbuf : scratch(1, bytes);
    // Out of place even at the root: MPICH 4.0.2 crashes on in-place reduce at a non-zero root.
    PMPI_Reduce(partial, result, count, type, between_nodes(op, reduction), root_node, leaders_);
    if (with_root && !root_is_leader) {
      PMPI_Send(result, count, type, node_rank_of_rank_[root], kResultTag, node_);
    }
  } else if (rank_ == root) {
    PMPI_Recv(recvbuf, count, type, 0, kResultTag, node_, MPI_STATUS_IGNORE);
  }
}

void NodeHierarchy::allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                              MPI_Op op, const Reduction& reduction) {
  if (leader()) {
    node_team_->reduce(send_of(sendbuf), recvbuf, count, reduction.dtype, reduction.op, 0);
    PMPI_Allreduce(MPI_IN_PLACE, recvbuf, count, type, between_nodes(op, reduction), leaders_);
  } else {
    const void* input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    node_team_->reduce(input, nullptr, count, reduction.dtype, reduction.op, 0);
  }
  node_team_->bcast(recvbuf, count, reduction.dtype, 0);
}

bool NodeHierarchy::earlier_nodes_total(void* total, void* before, int last, int count,
                                        MPI_Datatype type, MPI_Op op, const Reduction& reduction) {
  node_team_->bcast(total, count, reduction.dtype, last);
  if (leader()) PMPI_Exscan(total, before, count, type, between_nodes(op, reduction), leaders_);
  if (node() == 0) return false;  // (every member of node 0 knows it: no earlier node)
  node_team_->bcast(before, count, reduction.dtype, 0);
  return true;
}

void NodeHierarchy::scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                         MPI_Op op, const Reduction& reduction) {
  const std::size_t bytes = reduction.bytes(count);
  if (bytes == 0) return;  // (count is the same on every rank)
  node_team_->scan(send_of(sendbuf), recvbuf, count, reduction.dtype, reduction.op);
  // The node's total is its last member's result; the leaders' exscan of the totals is what
  // every earlier node adds, put before each member's own prefix (rank order is kept).
  auto* total = static_cast<std::byte*>(scratch(0, 2 * bytes));
  auto* before = total + bytes;
  const int last = static_cast<int>(members_[node()].size()) - 1;
  if (node_rank_of_rank_[rank_] == last) copy_bytes(total, recvbuf, bytes);
  if (!earlier_nodes_total(total, before, last, count, type, op, reduction)) return;
  reduce_local(before, recvbuf, count, reduction.dtype, reduction.op);
}

void NodeHierarchy::exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                           MPI_Op op, const Reduction& reduction) {
  const std::size_t bytes = reduction.bytes(count);
  if (bytes == 0) return;
  auto* total = static_cast<std::byte*>(scratch(0, 2 * bytes));
  auto* before = total + bytes;
  const int node_rank = node_rank_of_rank_[rank_];
  const int last = static_cast<int>(members_[node()].size()) - 1;
  // The last member's own input, before an in-place exscan replaces it: with its exscan result it
  // makes the node's total.
  if (node_rank == last) copy_bytes(total, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, bytes);
  node_team_->exscan(send_of(sendbuf), recvbuf, count, reduction.dtype, reduction.op);
  if (node_rank == last && last > 0) {
    reduce_local(recvbuf, total, count, reduction.dtype, reduction.op);  // earlier ones first
  }
  if (!earlier_nodes_total(total, before, last, count, type, op, reduction)) return;
  if (node_rank == 0) {
    copy_bytes(recvbuf, before, bytes);  // nothing on its node comes before the first member
  } else {
    reduce_local(before, recvbuf, count, reduction.dtype, reduction.op);
  }
}

}  // namespace shmcoll::mpi
