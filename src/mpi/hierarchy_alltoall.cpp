// Alltoall(v/w) on a communicator spanning nodes (hierarchy.hpp), one of two ways. Through the
// leaders (small alltoall blocks): each rank packs its blocks in node order and gathers them, with
// a row of their sizes, to its leader; the leaders exchange one run per pair of nodes (the sizes
// of the blocks in it, then the blocks, source member by source member); each leader then lays out
// every member's incoming blocks in source order and scatters them. Only leaders know the sizes
// that cross their node, so no rank computes a count it does not know. Direct (large alltoall
// blocks, alltoallv, alltoallw): each block for another node goes straight to its rank, the
// node's own through its team.
#include <algorithm>
#include <cstring>

#include "mpi/hierarchy.hpp"
#include "util/copy.hpp"

namespace shmcoll::mpi {

template <typename Post>
void NodeHierarchy::post_in_pieces(const std::byte* data, std::int64_t bytes, Post post) {
  for (std::int64_t done = 0; done < bytes; done += kPieceBytes) {
    requests_.emplace_back();
    post(const_cast<std::byte*>(data) + done,
         static_cast<int>(std::min<std::int64_t>(bytes - done, kPieceBytes)), &requests_.back());
  }
}

void NodeHierarchy::exchange_runs(const std::int64_t* table, const std::byte* gathered) {
  const int nodes = static_cast<int>(members_.size());
  const int ranks = size();
  const auto& mine = members_[node()];
  const auto here = static_cast<std::int64_t>(mine.size());
  // Where member i's blocks start in `gathered`, and where its block for column j starts.
  const auto block_at = [&](std::int64_t i, int column) {
    std::int64_t at = member_at_[i];
    for (int j = 0; j < column; ++j) at += table[i * ranks + j];
    return at;
  };
  // One run per destination node m: the sizes (here x |m|), then the blocks, member by member.
  std::int64_t total = 0;
  for (int m = 0; m < nodes; ++m) {
    const auto there = static_cast<std::int64_t>(members_[m].size());
    run_at_[m] = total;
    run_bytes_[m] = here * there * static_cast<std::int64_t>(sizeof(std::int64_t));
    for (std::int64_t i = 0; i < here; ++i) {
      for (int j = column_at_[m]; j < column_at_[m + 1]; ++j) run_bytes_[m] += table[i * ranks + j];
    }
    total += run_bytes_[m];
  }
  auto* runs = static_cast<std::byte*>(scratch(4, static_cast<std::size_t>(total)));
  for (int m = 0; m < nodes; ++m) {
    auto* sizes = reinterpret_cast<std::int64_t*>(runs + run_at_[m]);
    std::byte* data = runs + run_at_[m] +
                      here * static_cast<std::int64_t>(members_[m].size()) *
                          static_cast<std::int64_t>(sizeof(std::int64_t));
    for (std::int64_t i = 0; i < here; ++i) {
      const std::int64_t first = block_at(i, column_at_[m]);
      std::int64_t bytes = 0;
      for (int j = column_at_[m]; j < column_at_[m + 1]; ++j) {
        *sizes++ = table[i * ranks + j];
        bytes += table[i * ranks + j];
      }
      copy_bytes(data, gathered + first, static_cast<std::size_t>(bytes));  // i's blocks for m
      data += bytes;
    }
  }
  // The runs' sizes, then the runs, in pieces within MPI's int counts.
  PMPI_Alltoall(run_bytes_.data(), 1, MPI_INT64_T, incoming_bytes_.data(), 1, MPI_INT64_T,
                leaders_);
  std::int64_t incoming_total = 0;
  for (int n = 0; n < nodes; ++n) {
    incoming_at_[n] = incoming_total;
    incoming_total += incoming_bytes_[n];
  }
  auto* incoming = static_cast<std::byte*>(scratch(5, static_cast<std::size_t>(incoming_total)));
  requests_.clear();
  for (int n = 0; n < nodes; ++n) {
    if (n == node()) {
      copy_bytes(incoming + incoming_at_[n], runs + run_at_[n],
                 static_cast<std::size_t>(run_bytes_[n]));
      continue;
    }
    post_in_pieces(incoming + incoming_at_[n], incoming_bytes_[n],
                   [&](std::byte* at, int n_bytes, MPI_Request* request) {
                     PMPI_Irecv(at, n_bytes, MPI_BYTE, n, kResultTag, leaders_, request);
                   });
    post_in_pieces(runs + run_at_[n], run_bytes_[n],
                   [&](std::byte* at, int n_bytes, MPI_Request* request) {
                     PMPI_Isend(at, n_bytes, MPI_BYTE, n, kResultTag, leaders_, request);
                   });
  }
  PMPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);

  // Each member's blocks, in source order (node after node, each node's members in order).
  const auto sizes_of = [&](int n) {
    return reinterpret_cast<const std::int64_t*>(incoming + incoming_at_[n]);
  };
  const auto data_of = [&](int n) {
    return incoming + incoming_at_[n] +
           static_cast<std::int64_t>(members_[n].size()) * here *
               static_cast<std::int64_t>(sizeof(std::int64_t));
  };
  std::int64_t out_total = 0;
  for (std::int64_t t = 0; t < here; ++t) {
    member_at_[t] = out_total;
    for (int n = 0; n < nodes; ++n) {
      for (std::int64_t s = 0; s < static_cast<std::int64_t>(members_[n].size()); ++s) {
        out_total += sizes_of(n)[s * here + t];
      }
    }
    member_bytes_[t] = out_total - member_at_[t];
  }
  auto* out = static_cast<std::byte*>(scratch(3, static_cast<std::size_t>(out_total)));
  std::vector<std::int64_t>& cursor = cursor_;  // where member t's next block goes
  cursor.assign(member_at_.begin(), member_at_.end());
  for (int n = 0; n < nodes; ++n) {
    const std::byte* from = data_of(n);
    for (std::int64_t s = 0; s < static_cast<std::int64_t>(members_[n].size()); ++s) {
      for (std::int64_t t = 0; t < here; ++t) {
        const std::int64_t bytes = sizes_of(n)[s * here + t];
        copy_bytes(out + cursor[t], from, static_cast<std::size_t>(bytes));
        cursor[t] += bytes;
        from += bytes;
      }
    }
  }
}

template <typename SendBytes, typename Pack, typename RecvBytes, typename Unpack>
void NodeHierarchy::alltoall_packed(SendBytes send_bytes, Pack pack, RecvBytes recv_bytes,
                                    Unpack unpack) {
  const int ranks = size();
  // My blocks in node order, and their sizes.
  const std::int64_t sent_total = lay_out(send_bytes);
  auto* sent = static_cast<std::byte*>(scratch(0, static_cast<std::size_t>(sent_total)));
  auto* row = static_cast<std::int64_t*>(scratch(1, ranks * sizeof(std::int64_t)));
  for (int n = 0, column = 0; n < static_cast<int>(members_.size()); ++n) {
    for (int d : members_[n]) {
      pack(d, sent + packed_at_[d]);
      row[column++] = send_bytes(d);
    }
  }
  const std::size_t here = members_[node()].size();
  auto* table =
      static_cast<std::int64_t*>(scratch(2, leader() ? here * ranks * sizeof(std::int64_t) : 0));
  node_team_->gather(row, ranks, Dtype::i64, table, ranks, Dtype::i64, 0);
  std::byte* gathered = nullptr;
  if (leader()) {
    std::int64_t total = 0;
    for (std::size_t i = 0; i < here; ++i) {
      member_at_[i] = total;
      for (int j = 0; j < ranks; ++j) total += table[i * ranks + j];
      member_bytes_[i] = total - member_at_[i];
    }
    gathered = static_cast<std::byte*>(scratch(3, static_cast<std::size_t>(total)));
  }
  node_team_->gatherv(sent, sent_total, bytes_type(), gathered, member_bytes_, member_at_,
                      bytes_type(), 0);
  if (leader()) exchange_runs(table, gathered);
  // My incoming blocks, in source order (node after node).
  std::int64_t received_total = 0;
  for (const auto& members : members_) {
    for (int source : members) {
      received_at_[source] = received_total;
      received_total += recv_bytes(source);
    }
  }
  auto* received = static_cast<std::byte*>(scratch(0, static_cast<std::size_t>(received_total)));
  node_team_->scatterv(leader() ? scratch_[3].data() : nullptr, member_bytes_, member_at_,
                       bytes_type(), received, received_total, bytes_type(), 0);
  for (int source = 0; source < ranks; ++source) unpack(source, received + received_at_[source]);
}

template <typename SendBlock, typename RecvBlock, typename NodeOwn>
void NodeHierarchy::alltoall_blocks(Ways ways, bool in_place, SendBlock send_block,
                                    RecvBlock recv_block, NodeOwn node_own) {
  if (ways == Ways::through_leaders) {
    return alltoall_packed([&](int d) { return send_block(d).bytes(); },
                           [&](int d, std::byte* into) {
                             const DirectBlock out = send_block(d);
                             out.type->pack(out.at, out.count, into);
                           },
                           [&](int s) { return recv_block(s).bytes(); },
                           [&](int s, const std::byte* packed) {
                             const DirectBlock in = recv_block(s);
                             in.type->unpack(packed, in.count, const_cast<std::byte*>(in.at));
                           });
  }
  // Direct: the blocks for other nodes, posted first. Blocks that are not one run go through
  // packed copies; in place, each leaves the receive buffer before any incoming one can land
  // there.
  const auto remote = [&](int r) { return node_of_rank_[r] != node(); };
  const auto packed_out = [&](const DirectBlock& out) {
    return in_place || !out.type->is_contiguous();
  };
  std::int64_t out_bytes = 0, in_bytes = 0;
  for (int r = 0; r < size(); ++r) {
    const DirectBlock out = send_block(r), in = recv_block(r);
    packed_at_[r] = out_bytes;
    if (remote(r) && packed_out(out)) out_bytes += out.bytes();
    received_at_[r] = in_bytes;
    if (remote(r) && !in.type->is_contiguous()) in_bytes += in.bytes();
  }
  auto* outgoing = static_cast<std::byte*>(scratch(0, static_cast<std::size_t>(out_bytes)));
  auto* incoming = static_cast<std::byte*>(scratch(1, static_cast<std::size_t>(in_bytes)));
  for (int r = 0; r < size(); ++r) {
    const DirectBlock out = send_block(r);
    if (remote(r) && packed_out(out)) {
      out.type->pack(out.at, out.count, outgoing + packed_at_[r]);
    }
  }
  requests_.clear();
  for (int r = 0; r < size(); ++r) {
    if (!remote(r)) continue;
    const DirectBlock in = recv_block(r);
    const std::byte* at =
        in.type->is_contiguous() ? in.at + in.type->lb() : incoming + received_at_[r];
    post_in_pieces(at, in.bytes(), [&](std::byte* piece, int bytes, MPI_Request* request) {
      PMPI_Irecv(piece, bytes, MPI_BYTE, r, kDirectTag, peers_, request);
    });
  }
  for (int r = 0; r < size(); ++r) {
    if (!remote(r)) continue;
    const DirectBlock out = send_block(r);
    const std::byte* at = packed_out(out) ? outgoing + packed_at_[r] : out.at + out.type->lb();
    post_in_pieces(at, out.bytes(), [&](std::byte* piece, int bytes, MPI_Request* request) {
      PMPI_Isend(piece, bytes, MPI_BYTE, r, kDirectTag, peers_, request);
    });
  }
  // The node's own blocks through its team, the network's meanwhile (the team's waits keep the
  // MPI progressing: the idle hook).
  node_own();
  PMPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  for (int r = 0; r < size(); ++r) {
    const DirectBlock in = recv_block(r);
    if (remote(r) && !in.type->is_contiguous()) {
      in.type->unpack(incoming + received_at_[r], in.count, const_cast<std::byte*>(in.at));
    }
  }
}

std::span<std::int64_t> NodeHierarchy::node_own_values(int which) {
  const auto here = members_[node()].size();
  node_own_values_.resize(4 * here);
  return {node_own_values_.data() + which * here, here};
}

void NodeHierarchy::alltoall(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                             void* recvbuf, std::int64_t recvcount, const Datatype& recvtype) {
  const bool in_place = sendbuf == shmcoll::in_place;
  const auto* from = static_cast<const std::byte*>(in_place ? recvbuf : sendbuf);
  const Datatype& from_type = in_place ? recvtype : sendtype;
  const std::int64_t from_count = in_place ? recvcount : sendcount;
  const auto* to = static_cast<const std::byte*>(recvbuf);
  // Every rank's block has the same size: all take the same ways.
  const bool large =
      static_cast<std::size_t>(recvcount) * recvtype.size() > kAlltoallThroughLeadersBlockMost;
  alltoall_blocks(
      large ? Ways::direct : Ways::through_leaders, in_place,
      [&](int d) {
        return DirectBlock{from + d * from_count * from_type.extent(), from_count, &from_type};
      },
      [&](int s) {
        return DirectBlock{to + s * recvcount * recvtype.extent(), recvcount, &recvtype};
      },
      [&] {
        const auto& mine = members_[node()];
        const auto send_counts = node_own_values(0), send_displs = node_own_values(1),
                   recv_counts = node_own_values(2), recv_displs = node_own_values(3);
        for (std::size_t i = 0; i < mine.size(); ++i) {
          send_counts[i] = from_count;
          send_displs[i] = mine[i] * from_count;
          recv_counts[i] = recvcount;
          recv_displs[i] = mine[i] * recvcount;
        }
        node_team_->alltoallv(sendbuf, send_counts, send_displs, sendtype, recvbuf, recv_counts,
                              recv_displs, recvtype);
      });
}

void NodeHierarchy::alltoallv(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                              std::span<const std::int64_t> sdispls, const Datatype& sendtype,
                              void* recvbuf, std::span<const std::int64_t> recvcounts,
                              std::span<const std::int64_t> rdispls, const Datatype& recvtype) {
  const bool in_place = sendbuf == shmcoll::in_place;
  const auto* from = static_cast<const std::byte*>(in_place ? recvbuf : sendbuf);
  const Datatype& from_type = in_place ? recvtype : sendtype;
  const auto from_counts = in_place ? recvcounts : sendcounts;
  const auto from_displs = in_place ? rdispls : sdispls;
  const auto* to = static_cast<const std::byte*>(recvbuf);
  const auto& mine = members_[node()];
  const auto send_counts = node_own_values(0), send_displs = node_own_values(1),
             recv_counts = node_own_values(2), recv_displs = node_own_values(3);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    send_counts[i] = from_counts[mine[i]];
    send_displs[i] = from_displs[mine[i]];
    recv_counts[i] = recvcounts[mine[i]];
    recv_displs[i] = rdispls[mine[i]];
  }
  // No rank knows every block's size, so none can choose the leaders' way for small ones; direct
  // loses little there (docs/clusters-measured.md) and never funnels large ones through a leader.
  alltoall_blocks(
      Ways::direct, in_place,
      [&](int d) {
        return DirectBlock{from + from_displs[d] * from_type.extent(), from_counts[d], &from_type};
      },
      [&](int s) {
        return DirectBlock{to + rdispls[s] * recvtype.extent(), recvcounts[s], &recvtype};
      },
      [&] {
        node_team_->alltoallv(sendbuf, send_counts, send_displs, sendtype, recvbuf, recv_counts,
                              recv_displs, recvtype);
      });
}

void NodeHierarchy::alltoallw(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                              std::span<const std::int64_t> sdispls,
                              std::span<const Datatype> sendtypes, void* recvbuf,
                              std::span<const std::int64_t> recvcounts,
                              std::span<const std::int64_t> rdispls,
                              std::span<const Datatype> recvtypes) {
  const bool in_place = sendbuf == shmcoll::in_place;
  const auto* from = static_cast<const std::byte*>(in_place ? recvbuf : sendbuf);
  const auto from_types = in_place ? recvtypes : sendtypes;
  const auto from_counts = in_place ? recvcounts : sendcounts;
  const auto from_displs = in_place ? rdispls : sdispls;
  const auto* to = static_cast<const std::byte*>(recvbuf);
  const auto& mine = members_[node()];
  const auto send_counts = node_own_values(0), send_displs = node_own_values(1),
             recv_counts = node_own_values(2), recv_displs = node_own_values(3);
  node_own_send_types_.clear();
  node_own_recv_types_.clear();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    send_counts[i] = from_counts[mine[i]];
    send_displs[i] = from_displs[mine[i]];
    recv_counts[i] = recvcounts[mine[i]];
    recv_displs[i] = rdispls[mine[i]];
    node_own_send_types_.push_back(from_types[mine[i]]);
    node_own_recv_types_.push_back(recvtypes[mine[i]]);
  }
  // (Displacements in bytes, as MPI has them for alltoallw.) Direct, as alltoallv.
  alltoall_blocks(
      Ways::direct, in_place,
      [&](int d) {
        return DirectBlock{from + from_displs[d], from_counts[d], &from_types[d]};
      },
      [&](int s) {
        return DirectBlock{to + rdispls[s], recvcounts[s], &recvtypes[s]};
      },
      [&] {
        node_team_->alltoallw(sendbuf, send_counts, send_displs, node_own_send_types_, recvbuf,
                              recv_counts, recv_displs, node_own_recv_types_);
      });
}

}  // namespace shmcoll::mpi
