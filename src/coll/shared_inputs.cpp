#include "coll/shared_inputs.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <span>
#include <string>

#include "ops/reduce.hpp"
#include "shm/shared_pages.hpp"
#include "util/fail.hpp"

namespace shmcoll::coll {

namespace {

// Where a rank's send buffer is: bytes [head, tail_from) in its memfd from `offset`; the rest
// (before head, then from tail_from) in its slot of the call's round, one after the other.
struct InputNote {
  std::int32_t fd;  // -1: not shared
  std::uint32_t head;
  std::uint64_t inode;
  std::uint64_t memfd_bytes;
  std::uint64_t offset;
  std::uint64_t tail_from;
};
static_assert(sizeof(InputNote) <= shm::kMessageBytes);

// The parts of the buffer split where a user operation may see a run begin: on 64-byte
// boundaries of the message (limits.md), and whole elements.
std::size_t split_unit(Dtype dtype) {
  return std::lcm<std::size_t>(64, dtype_size(dtype));
}

InputNote my_note(const Context& ctx, const std::byte* send, std::size_t bytes, Dtype dtype) {
  InputNote note{-1, 0, 0, 0, 0, 0};
  const std::optional<shm::SharedPages> pages = shm::shared_pages_for(send, bytes);
  if (!pages) return note;
  const std::size_t unit = split_unit(dtype);
  const std::byte* pages_end = pages->begin + pages->bytes;
  const std::size_t before = pages->begin > send ? std::size_t(pages->begin - send) : 0;
  const std::size_t head = (before + unit - 1) / unit * unit;
  const std::size_t tail_from =
      std::min<std::size_t>(bytes, std::size_t(pages_end - send)) / unit * unit;
  if (tail_from <= head || head + (bytes - tail_from) > ctx.rounds.slot_bytes()) return note;
  return {pages->fd,
          std::uint32_t(head),
          pages->inode,
          pages->bytes,
          std::uint64_t(send + head - pages->begin),
          tail_from};
}

// Byte `at` of `source`'s buffer (read from its note and pages).
const std::byte* locate(const InputNote& note, const std::byte* pages, const std::byte* slot,
                        std::size_t at) {
  if (at < note.head) return slot + at;
  if (at < note.tail_from) return pages + note.offset + (at - note.head);
  return slot + note.head + (at - note.tail_from);
}

// The reader: recv = every rank's buffer reduced, in rank order, part by part, where a part
// ends wherever a buffer passes from its slot to its pages or back (the notes of `round`).
void reduce_inputs(Context& ctx, std::uint32_t round, const std::byte* send, std::byte* recv,
                   std::size_t count, Dtype dtype, const Op& op) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::size_t element_bytes = dtype_size(dtype);
  const std::size_t bytes = count * element_bytes;
  auto note_of = [&](std::uint32_t peer) {
    InputNote theirs;
    std::memcpy(&theirs, rounds.wait_message(peer, round), sizeof theirs);
    return theirs;
  };
  std::size_t cut_count = 0;
  ctx.cuts[cut_count++] = 0;
  ctx.cuts[cut_count++] = bytes;
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    if (peer == me) continue;
    const InputNote theirs = note_of(peer);
    std::string why;
    ctx.peer_pages[peer] =
        shm::map_peer_pages(rounds.segment().profile(peer).pid.load(std::memory_order_relaxed),
                            {nullptr, theirs.memfd_bytes, theirs.fd, theirs.inode}, why);
    if (!ctx.peer_pages[peer]) {
      fail(Errc::system_error, "rank ", me, ": cannot map the send buffer rank ", peer, " shares (",
           why, "); SHMCOLL_SHARE_PAGES_MIN=0 turns sharing off");
    }
    ctx.cuts[cut_count++] = theirs.head;
    ctx.cuts[cut_count++] = theirs.tail_from;
  }
  const auto cuts = std::span(ctx.cuts).first(cut_count);
  std::sort(cuts.begin(), cuts.end());
  const auto last = std::unique(cuts.begin(), cuts.end());
  for (auto cut = cuts.begin(); cut + 1 < last; ++cut) {
    for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
      ctx.inputs[peer] =
          peer == me ? send + *cut
                     : locate(note_of(peer), ctx.peer_pages[peer], rounds.slot(peer, round), *cut);
    }
    ops::reduce_kary(dtype, op, recv + *cut, ctx.inputs.data(), static_cast<int>(rounds.size()),
                     (cut[1] - cut[0]) / element_bytes);
  }
}

}  // namespace

bool allreduce_from_shared_pages(Context& ctx, const std::byte* send, std::byte* recv,
                                 std::size_t count, Dtype dtype, const Op& op) {
  shm::Rounds& rounds = ctx.rounds;
  const std::size_t bytes = count * dtype_size(dtype);
  const std::uint64_t least = ctx.tunables.share_pages_min;
  // In place, every rank is (the standard asks it of all), so all skip alike.
  if (least == 0 || bytes < least || ctx.tree_shape.ranks_share_cpus || split_unit(dtype) > 4096 ||
      send == recv) {
    return false;
  }
  const std::uint32_t me = rounds.rank();
  const InputNote note = my_note(ctx, send, bytes, dtype);
  const std::uint32_t round = rounds.begin();
  if (note.fd >= 0) {
    rounds.wait_slot_free(round);
    std::byte* slot = rounds.slot(me, round);
    std::memcpy(slot, send, note.head);
    std::memcpy(slot + note.head, send + note.tail_from, bytes - note.tail_from);
  }
  rounds.publish_message(round, &note, sizeof note);
  // Every rank reads every note, so that all decide alike.
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    InputNote theirs = note;
    if (peer != me) std::memcpy(&theirs, rounds.wait_message(peer, round), sizeof theirs);
    if (theirs.fd < 0) return false;
  }
  reduce_inputs(ctx, round, send, recv, count, dtype, op);
  rounds.release(round);
  // My buffer may change once I return: only once every reader is done with it.
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    if (peer != me) rounds.wait_released(peer, round);
  }
  return true;
}

}  // namespace shmcoll::coll
