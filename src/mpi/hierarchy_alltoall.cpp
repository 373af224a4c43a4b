// Alltoall(v/w) on a communicator spanning nodes (hierarchy.hpp). Each rank packs its blocks in
// node order and gathers them, with a row of their sizes, to its leader; the leaders exchange one
// run per pair of nodes (the sizes of the blocks in it, then the blocks, source member by source
// member); each leader then lays out every member's incoming blocks in source order and scatters
// them. Only leaders know the sizes that cross their node, so no rank computes a count it does
// not know.
#include <algorithm>
#include <cstring>

#include "mpi/hierarchy.hpp"
#include "util/copy.hpp"

namespace shmcoll::mpi {

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
  const auto in_pieces = [&](std::byte* data, std::int64_t bytes, auto&& post) {
    for (std::int64_t done = 0; done < bytes; done += kPieceBytes) {
      requests_.emplace_back();
      post(data + done, static_cast<int>(std::min<std::int64_t>(bytes - done, kPieceBytes)),
           &requests_.back());
    }
  };
  for (int n = 0; n < nodes; ++n) {
    if (n == node()) {
      copy_bytes(incoming + incoming_at_[n], runs + run_at_[n],
                 static_cast<std::size_t>(run_bytes_[n]));
      continue;
    }
    in_pieces(incoming + incoming_at_[n], incoming_bytes_[n],
              [&](std::byte* at, int n_bytes, MPI_Request* request) {
                PMPI_Irecv(at, n_bytes, MPI_BYTE, n, kResultTag, leaders_, request);
              });
    in_pieces(runs + run_at_[n], run_bytes_[n],
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

void NodeHierarchy::alltoall(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                             void* recvbuf, std::int64_t recvcount, const Datatype& recvtype) {
  const bool in_place = sendbuf == shmcoll::in_place;
  const auto* from = static_cast<const std::byte*>(in_place ? recvbuf : sendbuf);
  const Datatype& from_type = in_place ? recvtype : sendtype;
  const std::int64_t from_count = in_place ? recvcount : sendcount;
  auto* to = static_cast<std::byte*>(recvbuf);
  const auto block_bytes = from_count * static_cast<std::int64_t>(from_type.size());
  alltoall_packed([&](int) { return block_bytes; },
                  [&](int d, std::byte* into) {
                    from_type.pack_range(from + d * from_count * from_type.extent(), from_count, 0,
                                         static_cast<std::size_t>(block_bytes), into);
                  },
                  [&](int) { return recvcount * static_cast<std::int64_t>(recvtype.size()); },
                  [&](int s, const std::byte* packed) {
                    recvtype.unpack_range(packed, recvcount, 0, recvcount * recvtype.size(),
                                          to + s * recvcount * recvtype.extent());
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
  auto* to = static_cast<std::byte*>(recvbuf);
  alltoall_packed(
      [&](int d) { return from_counts[d] * static_cast<std::int64_t>(from_type.size()); },
      [&](int d, std::byte* into) {
        from_type.pack_range(from + from_displs[d] * from_type.extent(), from_counts[d], 0,
                             from_counts[d] * from_type.size(), into);
      },
      [&](int s) { return recvcounts[s] * static_cast<std::int64_t>(recvtype.size()); },
      [&](int s, const std::byte* packed) {
        recvtype.unpack_range(packed, recvcounts[s], 0, recvcounts[s] * recvtype.size(),
                              to + rdispls[s] * recvtype.extent());
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
  auto* to = static_cast<std::byte*>(recvbuf);
  alltoall_packed(
      [&](int d) { return from_counts[d] * static_cast<std::int64_t>(from_types[d].size()); },
      [&](int d, std::byte* into) {
        from_types[d].pack_range(from + from_displs[d], from_counts[d], 0,
                                 from_counts[d] * from_types[d].size(), into);
      },
      [&](int s) { return recvcounts[s] * static_cast<std::int64_t>(recvtypes[s].size()); },
      [&](int s, const std::byte* packed) {
        recvtypes[s].unpack_range(packed, recvcounts[s], 0, recvcounts[s] * recvtypes[s].size(),
                                  to + rdispls[s]);
      });
}

}  // namespace shmcoll::mpi
