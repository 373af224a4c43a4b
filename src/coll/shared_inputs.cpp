#include "coll/shared_inputs.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <span>
#include <string>

#include "ops/reduce.hpp"
#include "shm/shared_pages.hpp"
#include "util/copy.hpp"
#include "util/fail.hpp"

namespace shmcoll::coll {

static_assert(sizeof(BufferNote) <= shm::kMessageBytes);

namespace {

// The parts of the buffer split where a user operation may see a run begin: on 64-byte
// boundaries of the message (limits.md), and whole elements.
std::size_t split_unit(Dtype dtype) {
  return std::lcm<std::size_t>(64, dtype_size(dtype));
}

// Every rank's buffer reduced, in rank order, over bytes [from, to), part by part, where a part
// ends wherever a buffer passes from its slot to its pages or back (the notes of `round`); each
// part's result goes to out(its first byte). False, with nothing reduced, when a peer's pages
// cannot be reached.
template <typename Out>
bool reduce_inputs(Context& ctx, std::uint32_t round, const std::byte* send, std::size_t from,
                   std::size_t to, Dtype dtype, const Op& op, Out&& out) {
  if (from >= to) return true;
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  auto note_of = [&](std::uint32_t peer) { return buffer_note_of(ctx, peer, round); };
  std::size_t cut_count = 0;
  auto cut_at = [&](std::size_t at) { ctx.cuts[cut_count++] = std::clamp(at, from, to); };
  cut_at(from);
  cut_at(to);
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    if (peer == me) continue;
    const BufferNote theirs = note_of(peer);
    ctx.peer_pages[peer] = map_shared_buffer(ctx, peer, theirs);
    if (!ctx.peer_pages[peer]) return false;
    cut_at(theirs.head);
    cut_at(theirs.tail_from);
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
    ops::reduce_kary(dtype, op, out(*cut), ctx.inputs.data(), static_cast<int>(rounds.size()),
                     (cut[1] - cut[0]) / dtype_size(dtype));
  }
  return true;
}

// Whether every rank's note of `round` (the first in its line) says shared: all read the same
// notes, so all decide alike.
bool all_shared(Context& ctx, std::uint32_t round, const BufferNote& mine) {
  for (std::uint32_t rank = 0; rank < ctx.rounds.size(); ++rank) {
    if ((rank == ctx.rounds.rank() ? mine : buffer_note_of(ctx, rank, round)).fd < 0) return false;
  }
  return true;
}

}  // namespace

bool sharing_applies(const Context& ctx, std::size_t bytes) {
  const std::uint64_t least = ctx.tunables.share_pages_min;
  return least > 0 && bytes >= least && !ctx.tree_shape.ranks_share_cpus;
}

bool kernel_copy_applies(const Context& ctx, std::size_t bytes) {
  const std::uint64_t least = ctx.tunables.cma_min;
  return least != 0 && bytes >= least && !ctx.cma_refused;
}

bool kernel_write_pays(const Context& ctx, std::size_t bytes, std::size_t one_round) {
  return kernel_copy_applies(ctx, bytes) && (!ctx.tree_shape.ranks_share_cpus || bytes > one_round);
}

bool read_from_rank_memory(const Context& ctx, std::uint32_t rank, const shm::ProcessNote& note,
                           const Block& to, std::size_t bytes) {
  const pid_t pid = ctx.rounds.segment().profile(rank).pid.load(std::memory_order_relaxed);
  if (to.type->is_contiguous()) {
    return shm::read_process_memory(pid, note, 0, to.base + to.type->lb(), bytes);
  }
  return unpack_through_stack(to, bytes,
                              [&](std::size_t offset, std::size_t n, std::byte* staging) {
                                return shm::read_process_memory(pid, note, offset, staging, n);
                              });
}

bool write_into_rank_memory(Context& ctx, std::uint32_t rank, const shm::ProcessNote& note,
                            std::size_t at, const Block& from, std::size_t first,
                            std::size_t bytes) {
  const pid_t pid = ctx.rounds.segment().profile(rank).pid.load(std::memory_order_relaxed);
  if (from.type->is_contiguous()) {
    const std::byte* data = from.base + from.type->lb() + first;
    return write_in_pieces(ctx, rank, bytes, 1, [&](std::size_t offset, std::size_t n) {
      return shm::write_process_memory(pid, note, at + offset, data + offset, n);
    });
  }
  return through_stack(bytes, [&](std::size_t offset, std::size_t n, std::byte* staging) {
    from.type->pack_range(from.base, from.count, first + offset, n, staging);
    const shm::WriteInto writing(ctx.rounds, rank);
    return shm::write_process_memory(pid, note, at + offset, staging, n);
  });
}

BufferNote note_on(const shm::SharedPages& pages, const std::byte* data, std::size_t bytes,
                   std::size_t unit) {
  const auto within = [&](const std::byte* at) {
    return std::size_t(std::clamp<std::ptrdiff_t>(at - data, 0, std::ptrdiff_t(bytes)));
  };
  const std::size_t head = std::min(bytes, (within(pages.begin) + unit - 1) / unit * unit);
  const std::size_t tail_from = std::max(head, within(pages.begin + pages.bytes) / unit * unit);
  const std::uint64_t offset = tail_from > head ? std::uint64_t(data + head - pages.begin) : 0;
  return {pages.fd, std::uint32_t(head), pages.key, pages.bytes, offset, tail_from, bytes};
}

BufferNote note_if_shared(const Context& ctx, const std::byte* data, std::size_t bytes,
                          std::size_t unit) {
  if (data) {
    if (const auto pages = shm::shared_pages_for(data, bytes, ctx.tunables.move_pages)) {
      const BufferNote shared = note_on(*pages, data, bytes, unit);
      if (shared.tail_from > shared.head) return shared;
    }
  }
  return {-1, 0, 0, 0, 0, 0, bytes};
}

bool note_is_sound(const BufferNote& note) {
  return note.head <= note.tail_from && note.tail_from <= note.bytes &&
         note.offset <= note.memfd_bytes &&
         note.tail_from - note.head <= note.memfd_bytes - note.offset;
}

void copy_outside(const BufferNote& note, const std::byte* data, std::byte* to) {
  copy_bytes(to, data, note.head);
  copy_bytes(to + note.head, data + note.tail_from, note.bytes - note.tail_from);
}

void unpack_shared(const Block& to, const BufferNote& note, const std::byte* pages,
                   const std::byte* outside) {
  to.type->unpack_range(outside, to.count, 0, note.head, to.base);
  if (note.tail_from > note.head) {
    to.type->unpack_range(pages + note.offset, to.count, note.head, note.tail_from - note.head,
                          to.base);
  }
  to.type->unpack_range(outside + note.head, to.count, note.tail_from, note.bytes - note.tail_from,
                        to.base);
}

BufferNote post_buffer_note(Context& ctx, std::uint32_t round, const std::byte* send,
                            std::size_t bytes, std::size_t unit) {
  const BufferNote note = share_buffer(ctx, round, send, bytes, unit);
  ctx.rounds.publish_message(round, &note, sizeof note);
  return note;
}

BufferNote share_buffer(Context& ctx, std::uint32_t round, const std::byte* send, std::size_t bytes,
                        std::size_t unit) {
  shm::Rounds& rounds = ctx.rounds;
  const BufferNote note = note_if_shared(ctx, send, bytes, unit);
  if (note.fd < 0 || note.outside() > rounds.slot_bytes()) return {-1, 0, 0, 0, 0, 0, bytes};
  rounds.wait_slot_free(round);
  copy_outside(note, send, rounds.slot(rounds.rank(), round));
  return note;
}

BufferNote buffer_note_of(Context& ctx, std::uint32_t rank, std::uint32_t round,
                          std::size_t index) {
  BufferNote note;
  std::memcpy(&note, ctx.rounds.wait_message(rank, round) + index * sizeof note, sizeof note);
  return note;
}

namespace {

template <typename Map>
auto map_peer_buffer(Context& ctx, std::uint32_t rank, const BufferNote& note, Map&& map) {
  std::string why;
  return map(ctx.rounds.segment().profile(rank).pid.load(std::memory_order_relaxed),
             shm::SharedPages{nullptr, note.memfd_bytes, note.fd, note.key}, why);
}

}  // namespace

const std::byte* map_shared_buffer(Context& ctx, std::uint32_t rank, const BufferNote& note) {
  return map_peer_buffer(ctx, rank, note, shm::map_peer_pages);
}

std::byte* map_shared_buffer_to_write(Context& ctx, std::uint32_t rank, const BufferNote& note) {
  return map_peer_buffer(ctx, rank, note, shm::map_peer_pages_to_write);
}

unsigned what_any_rank_missed(Context& ctx, std::uint32_t round, unsigned missed) {
  shm::Rounds& rounds = ctx.rounds;
  const auto mine = static_cast<unsigned char>(missed);
  rounds.publish_message(round, &mine, sizeof mine);
  for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
    if (peer != rounds.rank())
      missed |= std::to_integer<unsigned>(*rounds.wait_message(peer, round));
  }
  if (missed & kMissedProcess) ctx.cma_refused = true;  // every rank alike, for good
  return missed;
}

unsigned what_any_rank_missed_writing(Context& ctx, std::uint32_t round, unsigned missed,
                                      std::uint32_t owner) {
  shm::Rounds& rounds = ctx.rounds;
  if (owner == kEveryRank) {
    missed = what_any_rank_missed(ctx, round, missed);
    return what_any_rank_missed(ctx, rounds.begin(), missed);
  }
  if (rounds.rank() == owner) {
    for (std::uint32_t peer = 0; peer < rounds.size(); ++peer) {
      if (peer != owner) missed |= std::to_integer<unsigned>(*rounds.wait_message(peer, round));
    }
    const auto all = static_cast<unsigned char>(missed);
    rounds.publish_message(round, &all, sizeof all);
  } else {
    const auto mine = static_cast<unsigned char>(missed);
    rounds.publish_message(round, &mine, sizeof mine);
    missed = std::to_integer<unsigned>(*rounds.wait_message(owner, round));
  }
  if (missed & kMissedProcess) ctx.cma_refused = true;  // every rank alike, for good
  return missed;
}

bool every_rank_reached(Context& ctx, std::uint32_t round, bool reached) {
  return what_any_rank_missed(ctx, round, reached ? kMissedNothing : kMissedPages) == 0;
}

namespace {

// reduce (root) or allreduce (kEveryRank) with the work shared: every rank reduces one slice of
// every rank's buffer, in rank order; in a reduce straight into the root's receive buffer, in an
// allreduce into its own, then copied into every other rank's. Receive buffers are written only
// where shared (their notes ride beside the send buffers' in the first round's lines); the bytes
// of its own buffer in its partly used end pages, which no other rank reaches, each receiver
// reduces itself. An allreduce whose receive buffers are not all shared has every rank reduce
// everything itself, still straight from the send buffers. A second round says who is done; where
// receive buffers were written, their owners answer it (what_any_rank_missed_writing), and the
// writes go in pieces (write_in_pieces).
bool reduce_in_slices(Context& ctx, const std::byte* send, std::byte* recv, std::size_t count,
                      Dtype dtype, const Op& op, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::size_t unit = split_unit(dtype);
  const std::size_t bytes = count * dtype_size(dtype);
  const bool everyone = root == kEveryRank;
  const std::uint32_t me = rounds.rank(), size = rounds.size();
  // An allreduce in place is in place on every rank (the standard asks it of all): all skip alike.
  if (size == 1 || !sharing_applies(ctx, bytes) || unit > 4096 || (everyone && send == recv)) {
    return false;
  }
  const bool receives = everyone || me == root;
  const std::uint32_t round = rounds.begin();
  // My line: the note on my send buffer, then (where I receive) on my receive buffer (none in
  // place).
  const BufferNote notes[2] = {
      share_buffer(ctx, round, send, bytes, unit),
      note_if_shared(ctx, receives && send != recv ? recv : nullptr, bytes, unit)};
  rounds.publish_message(round, notes, receives ? sizeof notes : sizeof notes[0]);
  if (!all_shared(ctx, round, notes[0])) return false;
  bool outputs_shared = true;
  for (std::uint32_t rank = 0; rank < size; ++rank) {
    if (everyone || rank == root) {
      outputs_shared &= (rank == me ? notes[1] : buffer_note_of(ctx, rank, round, 1)).fd >= 0;
    }
  }
  if (!outputs_shared && !everyone) return false;

  const std::size_t slice = (bytes / size + unit - 1) / unit * unit;
  const std::size_t from = outputs_shared ? std::min(bytes, me * slice) : 0;
  const std::size_t to = outputs_shared ? std::min(bytes, from + slice) : bytes;
  const auto into_recv = [&](std::size_t at) { return recv + at; };
  const std::uint32_t done = rounds.begin();
  bool reached = !receives || reduce_inputs(ctx, round, send, from, to, dtype, op, into_recv);
  for (std::uint32_t rank = 0; rank < size && outputs_shared && reached; ++rank) {
    if (rank == me || (!everyone && rank != root)) continue;
    const BufferNote theirs = buffer_note_of(ctx, rank, round, 1);
    if (theirs.bytes != bytes || !note_is_sound(theirs)) {
      fail(Errc::invalid_argument, "rank ", me, ": rank ", rank, " receives ", theirs.bytes,
           " bytes, not this rank's ", bytes, " (mismatched counts)");
    }
    std::byte* const mapped = map_shared_buffer_to_write(ctx, rank, theirs);
    reached = mapped != nullptr;
    if (!reached) break;
    std::byte* const pages = mapped + theirs.offset;
    const std::size_t in_from = std::max<std::size_t>(from, theirs.head);
    const std::size_t in_to = std::min<std::size_t>(to, theirs.tail_from);
    if (in_from >= in_to) continue;
    reached = write_in_pieces(ctx, rank, in_to - in_from, unit, [&](std::size_t at, std::size_t n) {
      const std::size_t piece_from = in_from + at;
      if (receives) {  // my slice is in my receive buffer already
        copy_bytes(pages + (piece_from - theirs.head), recv + piece_from, n);
        return true;
      }
      return reduce_inputs(ctx, round, send, piece_from, piece_from + n, dtype, op,
                           [&](std::size_t byte) { return pages + (byte - theirs.head); });
    });
  }
  if (reached && receives && outputs_shared) {
    reached = reduce_inputs(ctx, round, send, 0, notes[1].head, dtype, op, into_recv) &&
              reduce_inputs(ctx, round, send, notes[1].tail_from, bytes, dtype, op, into_recv);
  }
  // Done reading my buffers and writing mine; where a rank could not reach one, all go through
  // the slots (the receive buffers are written again).
  if (!outputs_shared) return every_rank_reached(ctx, done, reached);  // nobody wrote elsewhere
  return what_any_rank_missed_writing(ctx, done, reached ? kMissedNothing : kMissedPages,
                                      everyone ? kEveryRank : root) == kMissedNothing;
}

}  // namespace

bool reduce_from_shared_pages(Context& ctx, const std::byte* send, std::byte* recv,
                              std::size_t count, Dtype dtype, const Op& op, std::uint32_t root) {
  return reduce_in_slices(ctx, send, recv, count, dtype, op, root);
}

bool allreduce_from_shared_pages(Context& ctx, const std::byte* send, std::byte* recv,
                                 std::size_t count, Dtype dtype, const Op& op) {
  return reduce_in_slices(ctx, send, recv, count, dtype, op, kEveryRank);
}

}  // namespace shmcoll::coll
