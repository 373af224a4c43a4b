// Broadcast of a typed block: every rank runs the same algorithm, chosen from the bytes all ranks
// agree on, and packs or unpacks with its own type map (MPI requires the ranks' type signatures
// to match, not their layouts: a root may send contiguous ints that others receive as a column).
#include <cstring>

#include "coll/chunks.hpp"
#include "coll/collectives.hpp"
#include "coll/shared_inputs.hpp"
#include "coll/store.hpp"
#include "coll/tree_steps.hpp"
#include "util/fail.hpp"

namespace shmcoll::coll {

namespace {

// One round: the root posts the payload in its message line pair; the others copy it out (a
// contiguous layout straight, as the packing would only add its bookkeeping to a few bytes).
void bcast_inline(Context& ctx, const Block& data, std::size_t bytes, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t round = rounds.begin();
  const bool contiguous = data.type->is_contiguous();
  std::byte* first = data.base + data.type->lb();
  if (rounds.rank() == root) {
    alignas(8) std::byte line[shm::kMessageBytes];
    if (!contiguous) data.type->pack_range(data.base, data.count, 0, bytes, line);
    rounds.publish_message(round, contiguous ? first : line, bytes);
    return;
  }
  rounds.publish(round);
  const std::byte* posted = rounds.wait_message(root, round);
  if (contiguous) {
    std::memcpy(first, posted, bytes);
  } else {
    data.type->unpack_range(posted, data.count, 0, bytes, data.base);
  }
}

// One round per chunk (stream_chunk_bytes), the root filling its two slots alternately, so it
// packs chunk k+1 while the others still unpack chunk k.
void bcast_chunks(Context& ctx, const Block& data, std::size_t bytes, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const bool streaming = streams_between_cores(ctx, bytes);
  for_each_chunk(bytes, stream_chunk_bytes(ctx), [&](std::size_t first, std::size_t n) {
    const std::uint32_t round = rounds.begin();
    if (rounds.rank() == root) {
      rounds.wait_slot_free(round);
      pack_into_slot(data, first, n, rounds.slot(root, round), streaming);
      rounds.publish(round);
      return;
    }
    rounds.publish(round);
    rounds.wait_for(root, round);
    data.type->unpack_range(rounds.slot(root, round), data.count, first, n, data.base);
  });
}

// A message that fits one slot: in pieces (chunks.hpp) when the root's last bcast found its
// slot already holding the data, as in a loop that broadcasts the same parameters or a benchmark
// (the root then only compares, and readers copy each piece as soon as it is compared); else in
// one piece. Data that changes goes faster whole: readers of a piece just written fetch every
// line from the root's cache, where a whole slot's early lines have reached the shared cache
// (2 ranks, 1 MiB, shmcoll-bench --vary-data: 97-110 us whole, 139-185 in pieces). Not where
// ranks share CPUs, where every round may cost a switch. The root says how many in round one.
void bcast_one_slot(Context& ctx, const Block& data, std::size_t bytes, std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t first_round = rounds.begin();
  std::byte* const slot = rounds.slot(root, first_round);
  if (rounds.rank() == root) {
    const bool in_pieces = ctx.bcast_data_was_unchanged && !ctx.tree_shape.ranks_share_cpus;
    const std::uint32_t pieces = in_pieces ? piece_count(bytes) : 1;
    const bool streaming = streams_between_cores(ctx, bytes);
    rounds.wait_slot_free(first_round);
    const bool changed = publish_pieces(
        rounds, first_round, bytes, pieces, &pieces, sizeof pieces, [&](const Piece& piece) {
          return pack_into_slot(data, piece.first, piece.bytes, slot + piece.first, streaming);
        });
    ctx.bcast_data_was_unchanged = !changed;
    return;
  }
  rounds.publish(first_round);
  std::uint32_t pieces;
  std::memcpy(&pieces, rounds.wait_message(root, first_round), sizeof pieces);
  for (std::uint32_t index = 0; index < pieces; ++index) {
    if (index > 0) {
      const std::uint32_t round = rounds.begin();
      rounds.publish(round);
      rounds.wait_for(root, round);
    }
    const Piece piece = piece_of(bytes, pieces, index);
    data.type->unpack_range(slot + piece.first, data.count, piece.first, piece.bytes, data.base);
  }
}

// The root's buffer read where it is, when its pages are shared (shared_inputs.hpp): readers
// copy straight out of it, one copy where the slots take two, and every rank returns once every
// reader has said it is done (or could not reach it: then all go on through the slots). When
// they are not shared, the call goes on as usual, one round later. From a
// slot's length up: below it, a slot in pieces already overlaps the two copies (2 ranks, 256 KiB:
// 0.86-1.04x; 1 MiB one call after a barrier 25.7 -> 22.3 us, 4 MiB 136 -> 115).
bool bcast_from_shared_pages(Context& ctx, const Block& data, std::size_t bytes,
                             std::uint32_t root) {
  if (bytes < ctx.rounds.slot_bytes() || !sharing_applies(ctx, bytes)) return false;
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t round = rounds.begin();
  if (rounds.rank() == root) {
    const std::byte* first = data.type->is_contiguous() ? data.base + data.type->lb() : nullptr;
    if (post_buffer_note(ctx, round, first, bytes, shm::kLineBytes).fd < 0) return false;
    return every_rank_reached(ctx, rounds.begin(), true);
  }
  rounds.publish(round);
  const BufferNote note = buffer_note_of(ctx, root, round);
  if (note.fd < 0) return false;
  const std::byte* pages = map_shared_buffer(ctx, root, note);
  if (pages) unpack_shared(data, note, pages, rounds.slot(root, round));
  return every_rank_reached(ctx, rounds.begin(), pages != nullptr);
}

// The bytes at the end of each receiver's buffer that a bcast_from_root_memory root writes itself:
// a 1/size share, whole pages, so the root's CPU copies while every reader does (2 bound ranks,
// 4 MiB: 175 us split in halves against 288 read by the receiver alone, 308 against 582 on data
// that changes every call). Both sides compute it from what both know.
std::size_t root_share_bytes(std::size_t bytes, std::uint32_t size) {
  constexpr std::size_t kPage = 4096;
  return bytes / size / kPage * kPage;
}

// Beyond one slot, where the kernel's cross-memory copy applies: the readers copy the root's
// buffer straight out of its memory (process_vm_readv), one copy where streaming through the
// slots takes two, while the root writes the last share of each receiver's buffer into it
// (process_vm_writev, root_share_bytes) where that buffer is contiguous; every rank returns once
// every rank has said it is done (what_any_rank_missed_writing: a root's writes into a receiver
// end before the receiver returns). A stream rewrites the slots every call, so its readers fetch
// every line from the root's core, where a buffer the program did not change since its last bcast
// is read from caches that already hold it: 2 bound ranks, 2 MiB and 4 MiB, A/B in alternating
// runs, the receiver reading it all: 92-148 and 179-279 us against 274-355 and 558-603 through
// the slots; data that changes every call (--vary-data) about even (medians 271 and 569 against
// 271 and 650). Not where ranks share CPUs: 4 ranks on 2 cores, 2 MiB changing data took
// 1.1-1.25x longer than through the slots. A root whose buffer has gaps posts no note, and a rank
// that is refused the copy says so: then all go on through the slots, one round later (the
// kernel's copy off for the team where it was refused).
bool bcast_from_root_memory(Context& ctx, const Block& data, std::size_t bytes,
                            std::uint32_t root) {
  shm::Rounds& rounds = ctx.rounds;
  if (bytes <= rounds.slot_bytes() || !kernel_copy_applies(ctx, bytes) ||
      ctx.tree_shape.ranks_share_cpus) {
    return false;
  }
  const std::uint32_t round = rounds.begin(), me = rounds.rank();
  const auto note_on_my_buffer = [&] {
    return data.type->is_contiguous() ? shm::process_note(data.base + data.type->lb(), bytes)
                                      : shm::ProcessNote{};
  };
  const auto mismatched = [&](std::uint64_t theirs, std::uint32_t rank) {
    fail(Errc::invalid_argument, "rank ", me, ": bcast rank ", rank, " has ", theirs,
         " bytes, not the ", bytes, " this rank has (mismatched counts)");
  };
  const std::size_t root_share = root_share_bytes(bytes, rounds.size());
  if (me == root) {
    const shm::ProcessNote note = note_on_my_buffer();
    rounds.publish_message(round, &note, sizeof note);
    if (note.bytes == 0) return false;
    unsigned missed = kMissedNothing;
    for (std::uint32_t reader = 0; reader < rounds.size() && root_share > 0; ++reader) {
      if (reader == root) continue;
      shm::ProcessNote destination;
      std::memcpy(&destination, rounds.wait_message(reader, round), sizeof destination);
      if (destination.bytes == 0 || missed != kMissedNothing) continue;
      if (destination.bytes != bytes) mismatched(destination.bytes, reader);
      const std::size_t share_from = bytes - root_share;
      const bool wrote = write_into_rank_memory(ctx, reader, destination, share_from, data,
                                                share_from, root_share);
      if (!wrote) missed = kMissedProcess;
    }
    return what_any_rank_missed_writing(ctx, rounds.begin(), missed, kEveryRank) == kMissedNothing;
  }
  const shm::ProcessNote mine = note_on_my_buffer();
  rounds.publish_message(round, &mine, sizeof mine);
  shm::ProcessNote note;
  std::memcpy(&note, rounds.wait_message(root, round), sizeof note);
  if (note.bytes == 0) return false;
  if (note.bytes != bytes) mismatched(note.bytes, root);
  const std::size_t to_read = mine.bytes == 0 ? bytes : bytes - root_share;
  const bool read = read_from_rank_memory(ctx, root, note, data, to_read);
  return what_any_rank_missed_writing(ctx, rounds.begin(), read ? kMissedNothing : kMissedProcess,
                                      kEveryRank) == kMissedNothing;
}

}  // namespace

void bcast(Context& ctx, const Block& data, int root) {
  const std::size_t bytes = data.bytes();
  if (bytes == 0) return;  // sizes agree on every rank, so all skip the rounds alike
  const auto root_rank = static_cast<std::uint32_t>(root);
  switch (select_bcast(ctx.tunables, ctx.tree_shape, bytes)) {
    case Algorithm::bcast_inline:
      return bcast_inline(ctx, data, bytes, root_rank);
    case Algorithm::bcast_tree:
      return for_each_chunk(bytes, ctx.rounds.slot_bytes(), [&](std::size_t first, std::size_t n) {
        pass_down_tree(ctx, data, first, n, root_rank);
      });
    default:
      if (bcast_from_shared_pages(ctx, data, bytes, root_rank)) return;
      if (bcast_from_root_memory(ctx, data, bytes, root_rank)) return;
      if (bytes <= ctx.rounds.slot_bytes()) return bcast_one_slot(ctx, data, bytes, root_rank);
      return bcast_chunks(ctx, data, bytes, root_rank);
  }
}

}  // namespace shmcoll::coll
