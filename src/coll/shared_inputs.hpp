// Collectives that read a peer's send buffer where it is: in the buffer's shared pages
// (shm/shared_pages.hpp), with no copy into the slots. In the call's first round each rank whose
// buffer is read posts a note in its message line (where its buffer is shared, or that it is
// not); the bytes of its buffer in the partly used pages at its ends travel in its slot. A call
// takes this path only when the notes of every rank whose buffer is read say shared: every rank
// reads the same notes, so all agree. Otherwise the caller goes on with its usual algorithm, one
// round later. A rank may still fail to map a peer's pages (its descriptor limit, permissions):
// the path closes with a round in which every rank says whether it reached them, and where one
// did not, all go on with the usual algorithm from there (every_rank_reached). Used by bcast (its
// root's buffer), the 2-rank allreduce (every rank's) and reduce (every rank's, each reducing a
// slice into the root's shared receive buffer: the root alone reading the senders' buffers measured
// no faster than reading the slots they fill at the same time, 0.86-1.19x), and the other way round
// by gather, whose senders write into the root's receive buffer. The exchange engine writes the
// same notes, one per block, into its slot regions (exchange.cpp, in_pages).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "coll/collectives.hpp"
#include "shm/process_memory.hpp"
#include "shm/shared_pages.hpp"

namespace shmcoll::coll {

// A send buffer (or block) of `bytes`: its bytes [head, tail_from) are at `offset` in its
// owner's memfd; the rest (before head, then from tail_from) travel beside the note, one after
// the other: in its owner's slot of the round (bcast, allreduce) or after the note in the slot
// region (the exchange engine). The shared part may be empty (a block inside a partly used end
// page).
struct BufferNote {
  std::int32_t fd;  // -1: not shared
  std::uint32_t head;
  std::uint64_t key;  // names the memfd to its owner (shm::SharedPages::key)
  std::uint64_t memfd_bytes;
  std::uint64_t offset;
  std::uint64_t tail_from;
  std::uint64_t bytes;

  std::uint64_t outside() const { return head + (bytes - tail_from); }
};

// The note on `bytes` at `data` within `pages`; the shared part starts and ends on multiples of
// `unit` bytes from `data`.
BufferNote note_on(const shm::SharedPages& pages, const std::byte* data, std::size_t bytes,
                   std::size_t unit);
// The note on `bytes` at `data` (nullptr: none) where some of it lies in shared pages (moved
// there on this use, perhaps, where the team moves pages), else one that says not shared (fd -1).
BufferNote note_if_shared(const Context& ctx, const std::byte* data, std::size_t bytes,
                          std::size_t unit);
// Whether a note a peer posted is sound: its parts in order within its bytes, its shared part
// within its memfd.
bool note_is_sound(const BufferNote& note);
// The bytes of `data` outside its shared part, to `to` (note.outside() of them).
void copy_outside(const BufferNote& note, const std::byte* data, std::byte* to);
// A reader's side: `to` from the owner's mapped `pages` and the bytes `outside` them.
void unpack_shared(const Block& to, const BufferNote& note, const std::byte* pages,
                   const std::byte* outside);

// Whether a call of `bytes` may read buffers where they are (SHMCOLL_SHARE_PAGES_MIN; not where
// ranks share CPUs, where the extra round may cost a switch).
bool sharing_applies(const Context& ctx, std::size_t bytes);
// Whether blocks of `bytes` may be copied by the kernel's cross-memory copy: from
// SHMCOLL_CMA_MIN, until a rank of the team is refused it. Every rank knows the block length and
// the team's settings, so all decide alike.
bool kernel_copy_applies(const Context& ctx, std::size_t bytes);
// Whether a gather's (gatherv's) senders write blocks of `bytes` into the root's memory with the
// kernel's copy, where one round through the slots carries `one_round` bytes of a block: where
// kernel_copy_applies, but where ranks share CPUs only blocks that take more than one round (8
// ranks on 2 cores, osu_gatherv of 256 KiB: 38-45 us through the slots, 91-94 written; of 1 MiB,
// 558-658 through the slots, 324-408 written).
bool kernel_write_pays(const Context& ctx, std::size_t bytes, std::size_t one_round);
// The first `bytes` packed bytes of `to`, read with the kernel's copy from the block `note`
// names in `rank`'s memory (into a layout with gaps through a buffer on the stack). False where
// the kernel refuses; `to` may then hold part of them.
bool read_from_rank_memory(const Context& ctx, std::uint32_t rank, const shm::ProcessNote& note,
                           const Block& to, std::size_t bytes);
// The other way: `bytes` packed bytes of `from`, from its packed byte `first`, written with the
// kernel's copy at byte `at` of the block `note` names in `rank`'s memory, in pieces
// (write_in_pieces, below). False where the kernel refuses.
bool write_into_rank_memory(Context& ctx, std::uint32_t rank, const shm::ProcessNote& note,
                            std::size_t at, const Block& from, std::size_t first,
                            std::size_t bytes);

// Publishes my note for `bytes` at `send` (nullptr: not shared) in `round`, which has begun,
// after writing the bytes outside the shared pages into my slot; the shared part starts and ends
// on multiples of `unit` bytes. Returns the note. share_buffer: the same, not published.
BufferNote post_buffer_note(Context& ctx, std::uint32_t round, const std::byte* send,
                            std::size_t bytes, std::size_t unit);
BufferNote share_buffer(Context& ctx, std::uint32_t round, const std::byte* send, std::size_t bytes,
                        std::size_t unit);
// The note number `index` in `rank`'s line of `round`.
BufferNote buffer_note_of(Context& ctx, std::uint32_t rank, std::uint32_t round,
                          std::size_t index = 0);

// `rank`'s shared pages, and where byte `at` of its buffer is read. Writable: for a gather's
// senders, which write into the root's receive buffer. nullptr when this rank cannot reach them
// (at its descriptor or address-space limit, not permitted to open the peer's memfd): a reason to
// take the copy path, never to end the team (every_rank_reached).
const std::byte* map_shared_buffer(Context& ctx, std::uint32_t rank, const BufferNote& note);
std::byte* map_shared_buffer_to_write(Context& ctx, std::uint32_t rank, const BufferNote& note);
// A call from shared pages closes with round `round` (begun), in which every rank says whether it
// reached every peer's buffer it had to, once done with them; each waits for every rank's word.
// True when all did. Otherwise every rank goes on through the slots, where nobody's memory is
// mapped (the buffers written so far are written again), and the team stays usable.
bool every_rank_reached(Context& ctx, std::uint32_t round, bool reached);
// What a rank could not reach in a call that read peers' memory where it is.
// kMissedDeclined: a receiver's buffer could not take blocks written into it (gaps in its layout).
enum Missed : unsigned char {
  kMissedNothing = 0,
  kMissedPages = 1,
  kMissedProcess = 2,
  kMissedDeclined = 4
};
// every_rank_reached, saying what was missed: the union of every rank's `missed` (Missed bits).
// Where a rank was refused the kernel's copy, the team leaves it off from then on (cma_refused,
// set alike on every rank).
unsigned what_any_rank_missed(Context& ctx, std::uint32_t round, unsigned missed);

// Writes into another rank's memory go in pieces of at most this many bytes, each inside a
// shm::WriteInto: a member that leaves a call with an error waits for the pieces begun into its
// memory, and a piece of 4 MiB takes about a millisecond here.
inline constexpr std::size_t kWritePieceBytes = std::size_t{4} << 20;
// Calls write(offset, n) on the pieces of [0, bytes), each a multiple of `unit` bytes but the last,
// each inside a WriteInto `owner`; false at the first write that returns false.
template <typename Write>
bool write_in_pieces(Context& ctx, std::uint32_t owner, std::size_t bytes, std::size_t unit,
                     Write&& write) {
  const std::size_t piece = std::max(unit, kWritePieceBytes / unit * unit);
  for (std::size_t at = 0; at < bytes; at += piece) {
    const shm::WriteInto writing(ctx.rounds, owner);
    if (!write(at, std::min(piece, bytes - at))) return false;
  }
  return true;
}

inline constexpr std::uint32_t kEveryRank = ~0u;
// what_any_rank_missed for a call in which ranks wrote into `owner`'s memory (kEveryRank: into
// each other's): every rank says what it missed once its writes are done; `owner` answers, in the
// same round, with what all missed once it has heard every rank, and the others return on that
// answer (kEveryRank: a second round, in which every rank says it heard all). So a writer
// reports success only where the owner did: an owner that fails ends the team instead, and the
// writers' wait for its answer fails.
unsigned what_any_rank_missed_writing(Context& ctx, std::uint32_t round, unsigned missed,
                                      std::uint32_t owner);
inline const std::byte* locate(const BufferNote& note, const std::byte* pages,
                               const std::byte* slot, std::size_t at) {
  if (at < note.head) return slot + at;
  if (at < note.tail_from) return pages + note.offset + (at - note.head);
  return slot + note.head + (at - note.tail_from);
}

// reduce and allreduce with the work shared, where every rank's send buffer is shared: every rank
// reduces one slice of all of them, in rank order, into the root's receive buffer (reduce) or
// into its own, then copies it into every other rank's (allreduce), where those are shared too
// (their notes ride in the same lines); the bytes in a receive buffer's partly used end pages
// its owner reduces itself. An allreduce whose receive buffers are not all shared has every
// rank reduce everything itself, still straight from the send buffers. True when the call was
// done this way. Not in place (reduce: not at a root in place).
bool reduce_from_shared_pages(Context& ctx, const std::byte* send, std::byte* recv,
                              std::size_t count, Dtype dtype, const Op& op, std::uint32_t root);
bool allreduce_from_shared_pages(Context& ctx, const std::byte* send, std::byte* recv,
                                 std::size_t count, Dtype dtype, const Op& op);

}  // namespace shmcoll::coll
