// Gather, scatter, allgather(v) and reduce_scatter(_block) on a communicator spanning nodes
// (hierarchy.hpp): blocks travel packed, node after node, so the leaders' PMPI calls move each
// node's blocks as one run whatever the ranks' types.
#include <algorithm>
#include <climits>
#include <cstring>

#include "mpi/hierarchy.hpp"
#include "util/copy.hpp"

namespace shmcoll::mpi {

std::byte* NodeHierarchy::packed_for_root(std::int64_t total, bool at_root) {
  // Only the leaders and the root hold every block; the others move theirs through the node team.
  const bool holds_all = leader() || at_root;
  return static_cast<std::byte*>(scratch(0, static_cast<std::size_t>(holds_all ? total : 0)));
}

void NodeHierarchy::gather_to_leader(const void* sendbuf, std::int64_t sendcount,
                                     const Datatype& sendtype, std::byte* node_start) {
  node_team_->gatherv(sendbuf, sendcount, sendtype, leader() ? node_start : nullptr, member_bytes_,
                      member_at_, bytes_type(), 0);
}

std::int64_t NodeHierarchy::learn_member_bytes(std::int64_t mine) {
  node_team_->gather(&mine, 1, Dtype::i64, member_bytes_.data(), 1, Dtype::i64, 0);
  if (!leader()) return 0;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < member_bytes_.size(); ++i) {
    member_at_[i] = total;
    total += member_bytes_[i];
  }
  return total;
}

void NodeHierarchy::sized_send(const std::byte* data, std::int64_t bytes, int peer, MPI_Comm comm) {
  PMPI_Send(&bytes, 1, MPI_INT64_T, peer, kResultTag, comm);
  for (std::int64_t sent = 0; sent < bytes; sent += kPieceBytes) {
    const auto piece = static_cast<int>(std::min<std::int64_t>(bytes - sent, kPieceBytes));
    PMPI_Send(data + sent, piece, MPI_BYTE, peer, kResultTag, comm);
  }
}

std::int64_t NodeHierarchy::sized_receive(int which, std::int64_t offset, int peer, MPI_Comm comm) {
  std::int64_t bytes = 0;
  PMPI_Recv(&bytes, 1, MPI_INT64_T, peer, kResultTag, comm, MPI_STATUS_IGNORE);
  // Grown, keeping what lies before `offset`.
  auto& buffer = scratch_[which];
  if (buffer.size() < static_cast<std::size_t>(offset + bytes)) buffer.resize(offset + bytes);
  for (std::int64_t received = 0; received < bytes; received += kPieceBytes) {
    const auto piece = static_cast<int>(std::min<std::int64_t>(bytes - received, kPieceBytes));
    PMPI_Recv(buffer.data() + offset + received, piece, MPI_BYTE, peer, kResultTag, comm,
              MPI_STATUS_IGNORE);
  }
  return bytes;
}

bool NodeHierarchy::root_apart_from_leader_here(int root) const {
  return node_rank_of_rank_[root] != 0 && node() == node_of_rank_[root];
}

void NodeHierarchy::root_to_leader(int which, std::int64_t bytes, int root) {
  if (!root_apart_from_leader_here(root)) return;
  if (rank_ == root) {
    sized_send(scratch_[which].data(), bytes, 0, node_);
  } else if (leader()) {
    sized_receive(which, 0, node_rank_of_rank_[root], node_);
  }
}

void NodeHierarchy::leader_to_root(int which, std::int64_t bytes, int root) {
  if (!root_apart_from_leader_here(root)) return;
  if (leader()) {
    sized_send(scratch_[which].data(), bytes, node_rank_of_rank_[root], node_);
  } else if (rank_ == root) {
    sized_receive(which, 0, 0, node_);
  }
}

void NodeHierarchy::allgather_runs_in_segments(std::byte* packed) {
  const int nodes = size_of_nodes();
  const std::int64_t segment_bytes = kBcastSegmentBytes;
  auto segments_of = [&](int n) -> std::int64_t {
    return node_bytes_[n] == 0 ? 0 : (node_bytes_[n] - 1) / segment_bytes + 1;
  };
  std::int64_t steps = 0;
  for (int n = 0; n < nodes; ++n) steps = std::max(steps, segments_of(n));
  auto at = [&](int n, std::int64_t k) { return packed + node_at_[n] + k * segment_bytes; };
  auto length = [&](int n, std::int64_t k) {
    return static_cast<int>(
        std::min<std::int64_t>(segment_bytes, node_bytes_[n] - k * segment_bytes));
  };
  auto spread = [&](int n, std::int64_t k) {
    node_team_->bcast(at(n, k), length(n, k), bytes_type(), 0);
  };
  // Every member spreads in the same order: step k, segment k of my node's run, then of each
  // other node's, from the next node on.
  const int others = nodes - 1;
  auto other = [&](int i) { return (node() + 1 + i) % nodes; };
  if (!leader()) {
    for (std::int64_t k = 0; k < steps; ++k) {
      for (int j = 0; j < nodes; ++j) {
        const int n = (node() + j) % nodes;
        if (k < segments_of(n)) spread(n, k);
      }
    }
    return;
  }
  // The leaders go in step: a leader posts segment k + window (its send, and its receive from
  // each other leader) only once its segment k has gone and come, so a send waits at most for a
  // receive its peer posted a window of steps before, whatever protocol the MPI's sends take.
  const int window = kBcastSegmentsInFlight;
  requests_.assign(static_cast<std::size_t>(window) * others * 2, MPI_REQUEST_NULL);
  MPI_Request* receives = requests_.data();  // [other][step % window]
  MPI_Request* sends = receives + static_cast<std::size_t>(window) * others;
  auto post = [&](std::int64_t k) {
    for (int i = 0; i < others; ++i) {
      const int n = other(i);
      if (k < segments_of(n)) {
        PMPI_Irecv(at(n, k), length(n, k), MPI_BYTE, n, kTreeTag, leaders_,
                   &receives[i * window + k % window]);
      }
      if (k < segments_of(node())) {
        PMPI_Isend(at(node(), k), length(node(), k), MPI_BYTE, n, kTreeTag, leaders_,
                   &sends[i * window + k % window]);
      }
    }
  };
  for (int k = 0; k < window; ++k) post(k);
  for (std::int64_t k = 0; k < steps; ++k) {
    if (k < segments_of(node())) spread(node(), k);
    for (int i = 0; i < others; ++i) {
      PMPI_Wait(&receives[i * window + k % window], MPI_STATUS_IGNORE);
      if (k < segments_of(other(i))) spread(other(i), k);
    }
    for (int i = 0; i < others; ++i) PMPI_Wait(&sends[i * window + k % window], MPI_STATUS_IGNORE);
    post(k + window);
  }
}

template <typename CountOf, typename DisplacementOf>
void NodeHierarchy::allgather_packed(const void* sendbuf, std::int64_t sendcount,
                                     const Datatype& sendtype, void* recvbuf,
                                     const Datatype& recvtype, CountOf count_of,
                                     DisplacementOf displacement_of) {
  const auto bytes = [&](int r) {
    return count_of(r) * static_cast<std::int64_t>(recvtype.size());
  };
  const std::int64_t total = lay_out(bytes);
  auto* received = static_cast<std::byte*>(recvbuf);
  const auto block = [&](int r) { return received + displacement_of(r) * recvtype.extent(); };
  // Where my receive buffer holds the blocks one after another as they are packed (node after
  // node: ranks in blocks on their nodes, a contiguous type, no gaps), they travel in it, and
  // nothing is unpacked. Each rank decides alone: the packed order is the same on every rank.
  bool direct = recvtype.is_contiguous();
  for (int r = 0; r < size() && direct; ++r) {
    direct = displacement_of(r) * recvtype.extent() == packed_at_[r];
  }
  auto* packed = direct ? received + recvtype.lb()
                        : static_cast<std::byte*>(scratch(0, static_cast<std::size_t>(total)));
  const bool in_place = sendbuf == shmcoll::in_place;
  if (in_place && direct && leader()) {
    gather_to_leader(shmcoll::in_place, 0, recvtype, packed + node_at_[node()]);
  } else if (in_place) {
    gather_to_leader(block(rank_), count_of(rank_), recvtype, packed + node_at_[node()]);
  } else {
    gather_to_leader(sendbuf, sendcount, sendtype, packed + node_at_[node()]);
  }
  if (total > static_cast<std::int64_t>(kBcastSegmentBytes) &&
      size_of_nodes() <= kSegmentedAllgatherNodesMost) {
    allgather_runs_in_segments(packed);
  } else {
    if (leader()) {
      PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, packed, node_bytes_.data(), node_at_.data(),
                      MPI_BYTE, leaders_);
    }
    if (total > 0) node_team_->bcast(packed, total, Dtype::byte, 0);
  }
  for (int r = 0; r < size() && !direct; ++r) {
    if (r == rank_ && in_place) continue;
    recvtype.unpack_range(packed + packed_at_[r], count_of(r), 0,
                          static_cast<std::size_t>(bytes(r)), block(r));
  }
}

void NodeHierarchy::allgather(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                              void* recvbuf, std::int64_t recvcount, const Datatype& recvtype) {
  allgather_packed(
      sendbuf, sendcount, sendtype, recvbuf, recvtype, [&](int) { return recvcount; },
      [&](int r) { return r * recvcount; });
}

void NodeHierarchy::allgatherv(const void* sendbuf, std::int64_t sendcount,
                               const Datatype& sendtype, void* recvbuf,
                               std::span<const std::int64_t> recvcounts,
                               std::span<const std::int64_t> displs, const Datatype& recvtype) {
  allgather_packed(
      sendbuf, sendcount, sendtype, recvbuf, recvtype, [&](int r) { return recvcounts[r]; },
      [&](int r) { return displs[r]; });
}

void NodeHierarchy::gather(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                           void* recvbuf, std::int64_t recvcount, const Datatype& recvtype,
                           int root) {
  const bool at_root = rank_ == root;
  const bool in_place = sendbuf == shmcoll::in_place;
  // Every block has the same bytes: the root's recvcount, every rank's sendcount.
  const std::int64_t block_bytes = at_root ? recvcount * static_cast<std::int64_t>(recvtype.size())
                                           : sendcount * static_cast<std::int64_t>(sendtype.size());
  const std::int64_t total = lay_out([&](int) { return block_bytes; });
  std::byte* packed = packed_for_root(total, at_root);
  auto* received = static_cast<std::byte*>(recvbuf);
  const auto block = [&](int r) { return received + r * recvcount * recvtype.extent(); };
  if (in_place) {
    gather_to_leader(block(rank_), recvcount, recvtype, packed + node_at_[node()]);
  } else {
    gather_to_leader(sendbuf, sendcount, sendtype, packed + node_at_[node()]);
  }
  const int root_node = node_of_rank_[root];
  if (leader()) {
    const bool root_leader = node() == root_node;
    PMPI_Gatherv(root_leader ? MPI_IN_PLACE : packed + node_at_[node()], node_bytes_[node()],
                 MPI_BYTE, packed, node_bytes_.data(), node_at_.data(), MPI_BYTE, root_node,
                 leaders_);
  }
  leader_to_root(0, total, root);
  if (!at_root) return;
  packed = scratch_[0].data();
  for (int r = 0; r < size(); ++r) {
    if (r == rank_ && in_place) continue;
    recvtype.unpack_range(packed + packed_at_[r], recvcount, 0,
                          static_cast<std::size_t>(block_bytes), block(r));
  }
}

void NodeHierarchy::scatter(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                            void* recvbuf, std::int64_t recvcount, const Datatype& recvtype,
                            int root) {
  const bool at_root = rank_ == root;
  const bool in_place = recvbuf == shmcoll::in_place;  // the root's only
  const std::int64_t block_bytes = at_root ? sendcount * static_cast<std::int64_t>(sendtype.size())
                                           : recvcount * static_cast<std::int64_t>(recvtype.size());
  const std::int64_t total = lay_out([&](int) { return block_bytes; });
  std::byte* packed = packed_for_root(total, at_root);
  if (at_root) {
    const auto* sent = static_cast<const std::byte*>(sendbuf);
    for (int r = 0; r < size(); ++r) {
      sendtype.pack_range(sent + r * sendcount * sendtype.extent(), sendcount, 0,
                          static_cast<std::size_t>(block_bytes), packed + packed_at_[r]);
    }
  }
  root_to_leader(0, total, root);
  packed = scratch_[0].data();
  const int root_node = node_of_rank_[root];
  if (leader()) {
    const bool root_leader = node() == root_node;
    PMPI_Scatterv(packed, node_bytes_.data(), node_at_.data(), MPI_BYTE,
                  root_leader ? MPI_IN_PLACE : packed + node_at_[node()], node_bytes_[node()],
                  MPI_BYTE, root_node, leaders_);
  }
  // A root that keeps its block in place takes its copy into scratch, never into its send buffer.
  void* into = recvbuf;
  std::int64_t count = recvcount;
  const Datatype* type = &recvtype;
  if (in_place) {
    if (leader()) {
      into = shmcoll::in_place;
    } else {
      into = scratch(1, static_cast<std::size_t>(block_bytes));
      count = block_bytes;
      type = &bytes_type();
    }
  }
  node_team_->scatterv(packed + node_at_[node()], member_bytes_, member_at_, bytes_type(), into,
                       count, *type, 0);
}

template <typename CountOf>
void NodeHierarchy::reduce_scatter_packed(const void* sendbuf, void* recvbuf, MPI_Datatype type,
                                          MPI_Op op, const Reduction& reduction, CountOf count_of) {
  const std::int64_t total = lay_out(count_of);  // in elements
  const std::size_t element = dtype_size(reduction.dtype);
  const void* input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  std::byte* node_part = nullptr;
  if (leader()) {
    auto* partial = static_cast<std::byte*>(scratch(0, total * element));
    node_team_->reduce(input, partial, total, reduction.dtype, reduction.op, 0);
    // The leaders' blocks must follow each other node by node: where nodes do not hold
    // ascending rank ranges, the vector is reordered first.
    std::byte* in_node_order = partial;
    if (!rank_ordered_) {
      in_node_order = static_cast<std::byte*>(scratch(1, total * element));
      std::int64_t at = 0;
      for (int r = 0; r < size(); ++r) {
        copy_bytes(in_node_order + packed_at_[r] * element, partial + at * element,
                   count_of(r) * element);
        at += count_of(r);
      }
    }
    node_part = static_cast<std::byte*>(scratch(2, node_bytes_[node()] * element));
    PMPI_Reduce_scatter(in_node_order, node_part, node_bytes_.data(), type,
                        between_nodes(op, reduction), leaders_);
  } else {
    node_team_->reduce(input, nullptr, total, reduction.dtype, reduction.op, 0);
  }
  const Datatype element_type(reduction.dtype);
  node_team_->scatterv(node_part, member_bytes_, member_at_, element_type, recvbuf, count_of(rank_),
                       element_type, 0);
}

void NodeHierarchy::reduce_scatter(const void* sendbuf, void* recvbuf,
                                   std::span<const std::int64_t> recvcounts, MPI_Datatype type,
                                   MPI_Op op, const Reduction& reduction) {
  reduce_scatter_packed(sendbuf, recvbuf, type, op, reduction,
                        [&](int r) { return recvcounts[r]; });
}

void NodeHierarchy::reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                                         MPI_Datatype type, MPI_Op op, const Reduction& reduction) {
  reduce_scatter_packed(sendbuf, recvbuf, type, op, reduction,
                        [&](int) { return std::int64_t{recvcount}; });
}

void NodeHierarchy::gatherv(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                            void* recvbuf, std::span<const std::int64_t> recvcounts,
                            std::span<const std::int64_t> displs, const Datatype& recvtype,
                            int root) {
  const bool at_root = rank_ == root;
  const bool in_place = sendbuf == shmcoll::in_place;
  auto* received = static_cast<std::byte*>(recvbuf);
  const auto block = [&](int r) { return received + displs[r] * recvtype.extent(); };
  const std::int64_t mine = in_place
                                ? recvcounts[rank_] * static_cast<std::int64_t>(recvtype.size())
                                : sendcount * static_cast<std::int64_t>(sendtype.size());
  const std::int64_t node_total = learn_member_bytes(mine);
  const int root_node = node_of_rank_[root];
  // The root's leader collects the nodes' runs in node order (its own first where it is node 0's
  // or not: each run goes where the nodes before it end).
  auto* own_run = static_cast<std::byte*>(scratch(0, static_cast<std::size_t>(node_total)));
  if (in_place) {
    gather_to_leader(block(rank_), recvcounts[rank_], recvtype, own_run);
  } else {
    gather_to_leader(sendbuf, sendcount, sendtype, own_run);
  }
  std::int64_t total = node_total;
  if (leader() && node() == root_node) {
    // Node order: runs of earlier nodes, mine, later ones (scratch 1 holds them all).
    total = 0;
    for (int n = 0; n < static_cast<int>(members_.size()); ++n) {
      if (n == node()) {
        auto& all = scratch_[1];
        if (all.size() < static_cast<std::size_t>(total + node_total))
          all.resize(total + node_total);
        copy_bytes(all.data() + total, scratch_[0].data(), static_cast<std::size_t>(node_total));
        total += node_total;
      } else {
        total += sized_receive(1, total, n, leaders_);
      }
    }
  } else if (leader()) {
    sized_send(own_run, node_total, root_node, leaders_);
  }
  leader_to_root(1, total, root);  // a root that is not its node's leader gets every run
  if (!at_root) return;
  const std::byte* packed = scratch_[1].data();
  lay_out([&](int r) { return recvcounts[r] * static_cast<std::int64_t>(recvtype.size()); });
  for (int r = 0; r < size(); ++r) {
    if (r == rank_ && in_place) continue;
    recvtype.unpack_range(packed + packed_at_[r], recvcounts[r], 0,
                          static_cast<std::size_t>(recvcounts[r]) * recvtype.size(), block(r));
  }
}

void NodeHierarchy::scatterv(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                             std::span<const std::int64_t> displs, const Datatype& sendtype,
                             void* recvbuf, std::int64_t recvcount, const Datatype& recvtype,
                             int root) {
  const bool at_root = rank_ == root;
  const bool in_place = recvbuf == shmcoll::in_place;  // the root's only
  const int root_node = node_of_rank_[root];
  const int nodes = static_cast<int>(members_.size());
  // The root packs every block in node order, and tells its leader where each node's run starts
  // (one int64 per node, then the end).
  if (at_root) {
    const auto bytes = [&](int r) {
      return sendcounts[r] * static_cast<std::int64_t>(sendtype.size());
    };
    const std::int64_t total = lay_out(bytes);
    auto* packed = static_cast<std::byte*>(scratch(1, static_cast<std::size_t>(total)));
    const auto* sent = static_cast<const std::byte*>(sendbuf);
    for (int r = 0; r < size(); ++r) {
      sendtype.pack_range(sent + displs[r] * sendtype.extent(), sendcounts[r], 0,
                          static_cast<std::size_t>(bytes(r)), packed + packed_at_[r]);
    }
    auto* starts = static_cast<std::int64_t*>(scratch(2, (nodes + 1) * sizeof(std::int64_t)));
    for (int n = 0; n < nodes; ++n) starts[n] = packed_at_[members_[n].front()];
    starts[nodes] = total;
    if (!leader()) PMPI_Send(starts, nodes + 1, MPI_INT64_T, 0, kResultTag, node_);
    root_to_leader(1, total, root);
  } else if (leader() && node() == root_node) {
    PMPI_Recv(scratch(2, (nodes + 1) * sizeof(std::int64_t)), nodes + 1, MPI_INT64_T,
              node_rank_of_rank_[root], kResultTag, node_, MPI_STATUS_IGNORE);
    root_to_leader(1, 0, root);
  }
  // The root's leader sends every other node its run; the others' leaders receive theirs.
  std::byte* node_run = nullptr;
  if (leader() && node() == root_node) {
    const auto* starts = static_cast<const std::int64_t*>(scratch(2, 0));
    for (int n = 0; n < nodes; ++n) {
      if (n != node())
        sized_send(scratch_[1].data() + starts[n], starts[n + 1] - starts[n], n, leaders_);
    }
    node_run = scratch_[1].data() + starts[node()];
  } else if (leader()) {
    sized_receive(1, 0, root_node, leaders_);
    node_run = scratch_[1].data();
  }
  // Each leader scatters its node's blocks; a root keeping its block in place takes its copy into
  // scratch, never into its send buffer.
  const std::int64_t mine = in_place
                                ? sendcounts[rank_] * static_cast<std::int64_t>(sendtype.size())
                                : recvcount * static_cast<std::int64_t>(recvtype.size());
  learn_member_bytes(mine);
  void* into = recvbuf;
  std::int64_t count = recvcount;
  const Datatype* type = &recvtype;
  if (in_place) {
    into = scratch(0, static_cast<std::size_t>(mine));
    count = mine;
    type = &bytes_type();
  }
  node_team_->scatterv(node_run, member_bytes_, member_at_, bytes_type(), into, count, *type, 0);
}

}  // namespace shmcoll::mpi
