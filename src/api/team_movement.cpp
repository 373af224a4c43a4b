// The Team's data-movement collectives: argument checks and in-place rules (MPI's, see
// ../shared/spec), then the exchange engine (coll/exchange.hpp) through coll::scatter, gather,
// allgather and alltoall.
#include "api/checks.hpp"

namespace shmcoll {

using namespace detail;

namespace {

// The block a rank sends or receives with a regular count.
coll::Block checked_block(const Call& call, const char* buffer_name, const void* buffer,
                          const char* count_name, std::int64_t count, const Datatype& type) {
  check_typed_buffer(call, buffer_name, buffer, checked_bytes(call, count_name, count, type), type);
  check_span(call, count_name, count, type);
  return coll::block_at(buffer, 0, count, type);
}

// A buffer of one regular block per rank.
coll::Layout checked_regular(const Call& call, const char* buffer_name, const void* buffer,
                             const char* count_name, std::int64_t count, const Datatype& type) {
  checked_block(call, buffer_name, buffer, count_name, count, type);
  check_span(call, count_name, count, type, static_cast<std::int64_t>(call.state.rounds.size()));
  return coll::Layout::regular(buffer, count, type);
}

coll::Layout checked_v(const Call& call, const char* buffer_name, const void* buffer,
                       const char* counts_name, std::span<const std::int64_t> counts,
                       const char* displs_name, std::span<const std::int64_t> displs,
                       const Datatype& type) {
  check_layout(call, buffer_name, buffer, counts_name, counts, displs_name, displs, &type);
  return coll::Layout::v(buffer, counts, displs, type);
}

// One block's bytes, for the call signature: the one quantity both sides of a block agree on.
std::uint64_t bytes_of(std::int64_t count, const Datatype& type) {
  return static_cast<std::uint64_t>(count) * type.size();
}

void check_receive_blocks(const Call& call, const coll::Layout& recv, TeamState& state) {
  if (const auto ranks = overlapping_blocks(recv, state.rounds.size(), state.block_spans)) {
    reject(call, "recvbuf blocks of ranks ", ranks->first, " and ", ranks->second,
           " overlap; every receive block needs memory of its own");
  }
}

// Send and receive sides (blocks or layouts) without a byte in common, unless in place.
template <typename Send, typename Recv>
void check_apart(const Call& call, const Send& send, const Recv& recv, TeamState& state) {
  if (sides_overlap(send, recv, state.rounds.size(), state.block_spans)) {
    reject(call, "sendbuf and recvbuf overlap; pass shmcoll::in_place as sendbuf instead");
  }
}

// Where the standard makes a rank's side of the call insignificant.
const Datatype kByte{Dtype::byte};
const coll::Layout kNoLayout = coll::Layout::regular(nullptr, 0, kByte);

// The one block of a scatter receiver or gather contributor: empty when the root passes
// in_place (its block stays where it is), which nobody else may.
coll::Block root_block(const Call& call, const char* buffer_name, const void* buffer,
                       const char* count_name, std::int64_t count, const Datatype& type,
                       bool at_root, int root) {
  if (buffer != in_place) return checked_block(call, buffer_name, buffer, count_name, count, type);
  if (!at_root) {
    reject(call, buffer_name, " is in_place, which only the root (", root, ") may pass");
  }
  return {};
}

}  // namespace

void Team::bcast(void* buffer, std::int64_t count, const Datatype& type, int root) {
  const Call call{"bcast", state_};
  check_root(call, root);
  if (type.is_contiguous()) {  // every predefined type: no layout to check or walk
    const std::size_t bytes = checked_bytes(call, "count", count, type);
    check_typed_buffer(call, "buffer", buffer, bytes, type);
    return run_contiguous_bcast(*state_, address_plus(buffer, type.lb()), bytes, root);
  }
  const coll::Block data = checked_block(call, "buffer", buffer, "count", count, type);
  run_call(*state_, {Collective::bcast, root, {}, {}, bytes_of(count, type)},
           [&] { coll::bcast(state_->context, data, root); });
}

void Team::scatter(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                   void* recvbuf, std::int64_t recvcount, const Datatype& recvtype, int root) {
  const Call call{"scatter", state_};
  check_root(call, root);
  const bool at_root = rank() == root;
  const coll::Block recv =
      root_block(call, "recvbuf", recvbuf, "recvcount", recvcount, recvtype, at_root, root);
  const coll::Layout send =
      at_root ? checked_regular(call, "sendbuf", sendbuf, "sendcount", sendcount, sendtype)
              : kNoLayout;
  const std::uint64_t block_bytes =
      at_root ? bytes_of(sendcount, sendtype) : bytes_of(recvcount, recvtype);
  if (at_root) check_apart(call, send, recv, *state_);
  run_call(*state_, {Collective::scatter, root, {}, {}, block_bytes},
           [&] { coll::scatter(state_->context, send, recv, root, false); });
}

void Team::scatterv(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                    std::span<const std::int64_t> displs, const Datatype& sendtype, void* recvbuf,
                    std::int64_t recvcount, const Datatype& recvtype, int root) {
  const Call call{"scatterv", state_};
  check_root(call, root);
  const bool at_root = rank() == root;
  const coll::Block recv =
      root_block(call, "recvbuf", recvbuf, "recvcount", recvcount, recvtype, at_root, root);
  const coll::Layout send = at_root ? checked_v(call, "sendbuf", sendbuf, "sendcounts", sendcounts,
                                                "displs", displs, sendtype)
                                    : kNoLayout;
  if (at_root) check_apart(call, send, recv, *state_);
  run_call(*state_, {Collective::scatterv, root},
           [&] { coll::scatter(state_->context, send, recv, root, true); });
}

void Team::gather(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                  void* recvbuf, std::int64_t recvcount, const Datatype& recvtype, int root) {
  const Call call{"gather", state_};
  check_root(call, root);
  const bool at_root = rank() == root;
  const coll::Block send =
      root_block(call, "sendbuf", sendbuf, "sendcount", sendcount, sendtype, at_root, root);
  const coll::Layout recv =
      at_root ? checked_regular(call, "recvbuf", recvbuf, "recvcount", recvcount, recvtype)
              : kNoLayout;
  const std::uint64_t block_bytes =
      at_root ? bytes_of(recvcount, recvtype) : bytes_of(sendcount, sendtype);
  if (at_root) check_apart(call, send, recv, *state_);
  run_call(*state_, {Collective::gather, root, {}, {}, block_bytes},
           [&] { coll::gather(state_->context, send, recv, root, false); });
}

void Team::gatherv(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                   void* recvbuf, std::span<const std::int64_t> recvcounts,
                   std::span<const std::int64_t> displs, const Datatype& recvtype, int root) {
  const Call call{"gatherv", state_};
  check_root(call, root);
  const bool at_root = rank() == root;
  const coll::Block send =
      root_block(call, "sendbuf", sendbuf, "sendcount", sendcount, sendtype, at_root, root);
  const coll::Layout recv = at_root ? checked_v(call, "recvbuf", recvbuf, "recvcounts", recvcounts,
                                                "displs", displs, recvtype)
                                    : kNoLayout;
  if (at_root) {
    check_apart(call, send, recv, *state_);
    check_receive_blocks(call, recv, *state_);
  }
  run_call(*state_, {Collective::gatherv, root},
           [&] { coll::gather(state_->context, send, recv, root, true); });
}

void Team::allgather(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                     void* recvbuf, std::int64_t recvcount, const Datatype& recvtype) {
  const Call call{"allgather", state_};
  const bool in_place_send = sendbuf == in_place;
  const coll::Block send =
      in_place_send ? coll::Block{}
                    : checked_block(call, "sendbuf", sendbuf, "sendcount", sendcount, sendtype);
  const coll::Layout recv =
      checked_regular(call, "recvbuf", recvbuf, "recvcount", recvcount, recvtype);
  const std::uint64_t block_bytes =
      in_place_send ? bytes_of(recvcount, recvtype) : bytes_of(sendcount, sendtype);
  check_apart(call, send, recv, *state_);  // send is empty in place
  run_call(*state_, {Collective::allgather, {}, {}, {}, block_bytes},
           [&] { coll::allgather(state_->context, send, recv, in_place_send); });
}

void Team::allgatherv(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                      void* recvbuf, std::span<const std::int64_t> recvcounts,
                      std::span<const std::int64_t> displs, const Datatype& recvtype) {
  const Call call{"allgatherv", state_};
  const bool in_place_send = sendbuf == in_place;
  const coll::Block send =
      in_place_send ? coll::Block{}
                    : checked_block(call, "sendbuf", sendbuf, "sendcount", sendcount, sendtype);
  const coll::Layout recv =
      checked_v(call, "recvbuf", recvbuf, "recvcounts", recvcounts, "displs", displs, recvtype);
  check_apart(call, send, recv, *state_);
  check_receive_blocks(call, recv, *state_);
  run_call(*state_,
           {Collective::allgatherv, {}, {}, {}, coll::hash_counts(recvcounts, recvtype.size())},
           [&] { coll::allgather(state_->context, send, recv, in_place_send); });
}

void Team::alltoall(const void* sendbuf, std::int64_t sendcount, const Datatype& sendtype,
                    void* recvbuf, std::int64_t recvcount, const Datatype& recvtype) {
  const Call call{"alltoall", state_};
  const coll::Layout recv =
      checked_regular(call, "recvbuf", recvbuf, "recvcount", recvcount, recvtype);
  const bool in_place_send = sendbuf == in_place;
  const coll::Layout send =
      in_place_send ? recv
                    : checked_regular(call, "sendbuf", sendbuf, "sendcount", sendcount, sendtype);
  const std::uint64_t block_bytes =
      in_place_send ? bytes_of(recvcount, recvtype) : bytes_of(sendcount, sendtype);
  if (!in_place_send) check_apart(call, send, recv, *state_);
  run_call(*state_, {Collective::alltoall, {}, {}, {}, block_bytes},
           [&] { coll::alltoall(state_->context, send, recv, in_place_send, false); });
}

void Team::alltoallv(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                     std::span<const std::int64_t> sdispls, const Datatype& sendtype, void* recvbuf,
                     std::span<const std::int64_t> recvcounts,
                     std::span<const std::int64_t> rdispls, const Datatype& recvtype) {
  const Call call{"alltoallv", state_};
  const coll::Layout recv =
      checked_v(call, "recvbuf", recvbuf, "recvcounts", recvcounts, "rdispls", rdispls, recvtype);
  const bool in_place_send = sendbuf == in_place;
  const coll::Layout send = in_place_send ? recv
                                          : checked_v(call, "sendbuf", sendbuf, "sendcounts",
                                                      sendcounts, "sdispls", sdispls, sendtype);
  if (!in_place_send) check_apart(call, send, recv, *state_);
  check_receive_blocks(call, recv, *state_);
  run_call(*state_, {Collective::alltoallv},
           [&] { coll::alltoall(state_->context, send, recv, in_place_send, true); });
}

void Team::alltoallw(const void* sendbuf, std::span<const std::int64_t> sendcounts,
                     std::span<const std::int64_t> sdispls, std::span<const Datatype> sendtypes,
                     void* recvbuf, std::span<const std::int64_t> recvcounts,
                     std::span<const std::int64_t> rdispls, std::span<const Datatype> recvtypes) {
  const Call call{"alltoallw", state_};
  check_per_rank(call, "recvtypes", recvtypes);
  check_layout(call, "recvbuf", recvbuf, "recvcounts", recvcounts, "rdispls", rdispls, nullptr,
               recvtypes);
  const coll::Layout recv = coll::Layout::w(recvbuf, recvcounts, rdispls, recvtypes);
  const bool in_place_send = sendbuf == in_place;
  if (!in_place_send) {
    check_per_rank(call, "sendtypes", sendtypes);
    check_layout(call, "sendbuf", sendbuf, "sendcounts", sendcounts, "sdispls", sdispls, nullptr,
                 sendtypes);
  }
  const coll::Layout send =
      in_place_send ? recv : coll::Layout::w(sendbuf, sendcounts, sdispls, sendtypes);
  if (!in_place_send) check_apart(call, send, recv, *state_);
  check_receive_blocks(call, recv, *state_);
  run_call(*state_, {Collective::alltoallw},
           [&] { coll::alltoall(state_->context, send, recv, in_place_send, true); });
}

}  // namespace shmcoll
