// The differential tester's runner: each call on the team, from Team::allocate memory, the kept
// buffer or private vectors, and its results compared with the model's (differential.cpp).
#include <algorithm>
#include <span>

#include "differential.hpp"

namespace shmcoll::differential {

namespace {

// Folds `bytes` into `digest` in four independent lanes of one multiply each, mixed at the end:
// a chain of full mixes, one per 8 bytes, cost more than the calls it checks (a byte at a time,
// more again).
std::uint64_t digest_of(std::uint64_t digest, std::span<const std::byte> bytes) {
  constexpr std::uint64_t kOdd = 0xff51afd7ed558ccdull;
  std::uint64_t lanes[4] = {digest, digest + 1, digest + 2, digest + 3};
  std::size_t i = 0;
  for (; i + 32 <= bytes.size(); i += 32) {
    for (int lane = 0; lane < 4; ++lane) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + i + 8 * lane, 8);
      lanes[lane] = (lanes[lane] ^ word) * kOdd;
    }
  }
  for (; i < bytes.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, std::min<std::size_t>(8, bytes.size() - i));
    lanes[0] = (lanes[0] ^ word) * kOdd;
  }
  for (const std::uint64_t lane : lanes) digest = mix(digest, lane);
  return mix(digest, bytes.size());
}

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

std::byte* kept_buffer() {
  static std::byte* const kept = static_cast<std::byte*>(std::malloc(kKeptBytes));
  return kept;
}

// Where a call sends from the kept buffer (16-byte aligned, as any element needs), or nullptr
// when it does not.
std::byte* in_kept_buffer(const Team& team, const Call& call, std::size_t bytes) {
  const std::size_t offset = (call.seed % 61) * 16 + ((call.seed >> 3) % 2) * 4096;
  const bool chosen = (call.seed >> 9) % 2 == 0 && team.size() <= kMostKeptRanks;
  return chosen && bytes > 0 && offset + bytes <= kKeptBytes ? kept_buffer() + offset : nullptr;
}

std::string check_reduction(Team& team, const Call& call, const std::vector<Reduction>& reductions,
                            std::uint64_t& digest, std::uint64_t& common_digest) {
  const int me = team.rank(), p = team.size();
  const Reduction& reduction = reductions[call.reduction];
  const std::size_t element_bytes = dtype_size(reduction.dtype);
  const bool scatters =
      call.kind == Kind::reduce_scatter || call.kind == Kind::reduce_scatter_block;
  std::size_t total = std::size_t(call.count), first = 0;
  if (scatters) {
    total = 0;
    for (int rank = 0; rank < p; ++rank) {
      if (rank == me) first = total;
      total += std::size_t(call.counts[rank]);
    }
  }
  const std::size_t result_count = scatters ? std::size_t(call.counts[me]) : total;
  const std::vector<std::byte> input = reduction_input(call, me, total, reduction);
  const bool in_place = call.in_place && (call.kind != Kind::reduce || me == call.root);
  std::vector<std::byte> recv =
      initial_bytes(call, me, 'r', (in_place ? total : result_count) * element_bytes);
  if (in_place) recv = input;
  const std::vector<std::byte> before = recv;
  std::byte* kept = in_place ? nullptr : in_kept_buffer(team, call, input.size());
  if (kept) std::copy(input.begin(), input.end(), kept);
  const void* send = in_place ? shmcoll::in_place : kept ? kept : input.data();
  const auto dtype = reduction.dtype;
  const Op& op = reduction.op;
  switch (call.kind) {
    case Kind::reduce:
      team.reduce(send, recv.data(), call.count, dtype, op, call.root);
      break;
    case Kind::allreduce:
      team.allreduce(send, recv.data(), call.count, dtype, op);
      break;
    case Kind::reduce_scatter:
      team.reduce_scatter(send, recv.data(), call.counts, dtype, op);
      break;
    case Kind::reduce_scatter_block:
      team.reduce_scatter_block(send, recv.data(), call.count, dtype, op);
      break;
    case Kind::scan:
      team.scan(send, recv.data(), call.count, dtype, op);
      break;
    default:
      team.exscan(send, recv.data(), call.count, dtype, op);
      break;
  }
  digest = digest_of(digest, recv);
  if (call.kind == Kind::allreduce) {
    common_digest = digest_of(common_digest, recv);
  }

  // Which ranks' inputs make my result, in rank order; none: recv must be untouched.
  int contributors = p;
  if (call.kind == Kind::reduce && me != call.root) contributors = 0;
  if (call.kind == Kind::scan) contributors = me + 1;
  if (call.kind == Kind::exscan) contributors = me;
  if (contributors == 0 || result_count == 0) {
    return same_bytes(recv, before) ? "" : "receive buffer changed where the call must not write";
  }
  std::vector<std::byte> want;
  for (int rank = 0; rank < contributors; ++rank) {
    const std::vector<std::byte> theirs = reduction_input(call, rank, total, reduction);
    const std::byte* slice = theirs.data() + first * element_bytes;
    if (rank == 0) {
      want.assign(slice, slice + result_count * element_bytes);
    } else {
      fold(call.reduction, want.data(), slice, result_count);
    }
  }
  if (!close_enough(reduction, recv.data(), want.data(), result_count, contributors)) {
    return "result differs from the rank-ordered reference";
  }
  return "";
}

std::string check_movement(Team& team, const Call& call, const TypeMenu& menu,
                           std::uint64_t& digest, std::uint64_t& common_digest) {
  const int me = team.rank(), p = team.size(), root = call.root;
  const bool at_root = me == root;
  const Sides sides = sides_of(call, me, p, menu);
  const std::vector<std::byte> send_bytes = initial_bytes(call, me, 's', sides.send.buffer_bytes);
  // Half the calls send from Team::allocate memory, where receivers may read it directly; of
  // the others, half from the kept buffer (shared pages), when it holds them.
  const bool from_heap = (call.seed >> 7) % 2 == 0 && !send_bytes.empty();
  std::byte* const kept = from_heap ? nullptr : in_kept_buffer(team, call, send_bytes.size());
  std::vector<std::byte> private_send = from_heap || kept ? std::vector<std::byte>{} : send_bytes;
  const std::span<std::byte> send = from_heap ? team.allocate<std::byte>(send_bytes.size())
                                    : kept    ? std::span<std::byte>(kept, send_bytes.size())
                                              : std::span<std::byte>(private_send);
  std::copy(send_bytes.begin(), send_bytes.end(), send.begin());
  std::vector<std::byte> recv = initial_bytes(call, me, 'r', sides.recv.buffer_bytes);
  const std::vector<std::byte>& send_before = send_bytes;
  const Side& s = sides.send;
  const Side& r = sides.recv;
  const void* sendbuf = call.in_place ? shmcoll::in_place : send.data();
  const auto& stype = [&](int peer) -> const Datatype& { return s.datatypes[peer]; };
  const auto& rtype = [&](int peer) -> const Datatype& { return r.datatypes[peer]; };
  switch (call.kind) {
    case Kind::bcast:  // each rank with its own type map of the same signature
      if (at_root) recv = send_before;
      team.bcast(recv.data(), at_root ? s.counts[0] : r.counts[root],
                 at_root ? stype(0) : rtype(root), root);
      break;
    case Kind::scatter:  // off the root, the send side must not be read: pass nonsense
      team.scatter(at_root ? send.data() : nullptr, at_root ? s.counts[0] : -1, stype(0),
                   call.in_place && at_root ? shmcoll::in_place : recv.data(), r.counts[root],
                   rtype(root), root);
      break;
    case Kind::scatterv:
      team.scatterv(at_root ? send.data() : nullptr, s.counts, s.displs, stype(0),
                    call.in_place && at_root ? shmcoll::in_place : recv.data(), r.counts[root],
                    rtype(root), root);
      break;
    case Kind::gather:
      team.gather(call.in_place && at_root ? shmcoll::in_place : send.data(), s.counts[root],
                  stype(root), at_root ? recv.data() : nullptr, at_root ? r.counts[0] : -1,
                  rtype(0), root);
      break;
    case Kind::gatherv:
      team.gatherv(call.in_place && at_root ? shmcoll::in_place : send.data(), s.counts[root],
                   stype(root), at_root ? recv.data() : nullptr, r.counts, r.displs, rtype(0),
                   root);
      break;
    case Kind::allgather:
      team.allgather(sendbuf, s.counts[0], stype(0), recv.data(), r.counts[0], rtype(0));
      break;
    case Kind::allgatherv:
      team.allgatherv(sendbuf, s.counts[0], stype(0), recv.data(), r.counts, r.displs, rtype(0));
      break;
    case Kind::alltoall:
      team.alltoall(sendbuf, s.counts[0], stype(0), recv.data(), r.counts[0], rtype(0));
      break;
    case Kind::alltoallv:
      team.alltoallv(sendbuf, s.counts, s.displs, stype(0), recv.data(), r.counts, r.displs,
                     rtype(0));
      break;
    default:
      team.alltoallw(sendbuf, s.counts, s.displs, s.datatypes, recv.data(), r.counts, r.displs,
                     r.datatypes);
      break;
  }
  const bool send_unchanged = same_bytes(send, send_before);
  if (from_heap) team.deallocate(send);
  digest = digest_of(digest, recv);
  if (call.kind == Kind::bcast) {  // what every rank holds alike: the packed bytes
    const Datatype& type = at_root ? stype(0) : rtype(root);
    const std::int64_t count = at_root ? s.counts[0] : r.counts[root];
    std::vector<std::byte> packed(type.size() * std::size_t(count));
    type.pack(recv.data(), count, packed.data());
    common_digest = digest_of(common_digest, packed);
    if (at_root) return same_bytes(recv, send_before) ? "" : "the root's bcast buffer changed";
  }
  if (!send_unchanged) return "the send buffer changed";
  // Off the root of a scatter in place there is no receive buffer; of a gather, none is read.
  const bool no_recv = (call.kind == Kind::scatter || call.kind == Kind::scatterv)
                           ? call.in_place && at_root
                           : (call.kind == Kind::gather || call.kind == Kind::gatherv) && !at_root;
  if (no_recv) return "";
  const std::vector<std::byte> want = expected_movement(call, me, p, menu);
  if (!same_bytes(recv, want)) {
    std::size_t at = 0;
    while (recv[at] == want[at]) ++at;
    return "receive buffer differs at byte " + std::to_string(at) + " of " +
           std::to_string(recv.size());
  }
  return "";
}

}  // namespace

void share_kept_buffer(Team& team) {
  if (team.size() > kMostKeptRanks) return;
  std::vector<std::byte> everyone(kKeptBytes * std::size_t(team.size()));
  for (int call = 0; call < 2; ++call) {
    team.allgather(kept_buffer(), std::int64_t(kKeptBytes), Dtype::u8, everyone.data(),
                   std::int64_t(kKeptBytes), Dtype::u8);
  }
}

std::string run_and_check(Team& team, const Call& call, const TypeMenu& menu,
                          const std::vector<Reduction>& reductions, std::uint64_t& digest,
                          std::uint64_t& common_digest) {
  if (call.kind == Kind::barrier) {
    team.barrier();
    return "";
  }
  if (is_reduction(call.kind)) {
    return check_reduction(team, call, reductions, digest, common_digest);
  }
  return check_movement(team, call, menu, digest, common_digest);
}

}  // namespace shmcoll::differential
