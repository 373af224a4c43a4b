// Splitting a message into slot-sized chunks, a chunk into per-rank slices, and one slot into
// pieces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "coll/collectives.hpp"

namespace shmcoll::coll {

// Calls fn(first, count) for consecutive chunks of at most chunk_count elements.
template <typename Fn>
void for_each_chunk(std::size_t count, std::size_t chunk_count, Fn&& fn) {
  for (std::size_t first = 0; first < count; first += chunk_count) {
    fn(first, std::min(chunk_count, count - first));
  }
}

// A message that fits one slot may move in pieces, one round each, so that readers copy piece k
// while the writer fills piece k+1 (2 ranks, one bcast of 256 KiB after a barrier, data that
// does not change: 9.4-10.3 us in one piece, 6.0-7.2 in 64 KiB chunks). Every piece lands in
// the slot of the first round, at its own offset, so the slot holds the whole message between
// calls and store_changes still finds what did not change. The pieces are an odd count, so the
// next call's first round takes the other slot, which wait_slot_free has freed, while readers
// may still copy this call's last piece.
// A piece is an eighth of the message, within 8-64 KiB: the first piece is what nobody overlaps,
// so a short message wants short pieces too. 2 ranks, shmcoll-bench --method single --written,
// 3 interleaved runs, 64 KiB pieces against an eighth: bcast of 16 KiB 0.53-0.61 us against
// 0.45, of 64 KiB 2.34-2.43 against 1.56, of 128 KiB 3.2-3.6 against 2.85; reduce of 64 KiB
// 2.95-2.97 against 2.18-2.22; from 512 KiB alike. Pieces of 8 KiB throughout were 3-55% slower
// from 1 MiB (reduce of 1 MiB 36 us against 56).
inline constexpr std::size_t kPieceBytesLeast = 8 << 10;
inline constexpr std::size_t kPieceBytesMost = 64 << 10;
inline constexpr std::size_t kPiecesWanted = 8;

// A message longer than a slot streams through the two slots in chunks of at most this size
// where ranks do not share CPUs: readers start on the first chunk sooner, while the writer fills
// the next. 2 ranks, shmcoll-bench -n 2 --method single --written, 3 interleaved runs on
// 2026-11-30 with the chunks' streaming stores, 256 KiB / 512 KiB / slot-sized (1 MiB) chunks,
// us: bcast of 4 MiB 137-141 / 139-144 / 185-218, of 16 MiB 578-615 / 557-602 / 612-655; reduce
// of 4 MiB 161-171 / 153-192 / 195-218; allreduce of 16 MiB 1573-1669 / 1516-1625 / 1644-1807;
// scan of 4 MiB 268-302 / 257-296 / 229-282. (With ordinary stores, 2026-11-28, 1 MiB had won
// the bcast: of 4 MiB 392-407 / 240-256 / 170-172.) Where ranks share CPUs every round may cost
// a switch: chunks stay a slot long there.
inline constexpr std::size_t kStreamChunkBytes = 512 << 10;

inline std::size_t stream_chunk_bytes(const Context& ctx) {
  const std::size_t slot = ctx.rounds.slot_bytes();
  return ctx.tree_shape.ranks_share_cpus ? slot : std::min(slot, kStreamChunkBytes);
}

// Slot writes of a message (or an exchange's block) from SHMCOLL_STREAM_MIN bytes (4 KiB by
// default), between ranks with CPUs of their own, go past the writer's caches (copy_streaming):
// the reader, on another core, takes the lines from memory sooner than out of the writer's cache
// on the AMD family 26 VM. 2 bound ranks, A/B in alternating runs (2026-11-30, shmcoll-bench -n 2
// --vary-data, data that changes every call, 2 runs each, us ordinary/streaming): bcast of 16 KiB
// 3.0/1.7, of 256 KiB 36-41/10-11; reduce of 64 KiB 10-11/4.6-5.1, of 4 MiB 552-661/252-266;
// allreduce of 1 MiB 217-219/97-111; alltoall of 64 KiB blocks 18-20/11-15. On an Intel Xeon VM
// (2026-12-05) the same stores made 1-4 MiB calls 15-25% slower, so machines differ: it is one
// of the settings tools/shmcoll-tune measures per machine. Data unchanged since the last call is
// not stored at all (store_changes). Not where ranks share CPUs, where reader and writer may
// take turns on one core and its cache.
inline bool streams_between_cores(const Context& ctx, std::size_t bytes) {
  const std::uint64_t least = ctx.tunables.stream_min;
  return !ctx.tree_shape.ranks_share_cpus && least != 0 && bytes >= least;
}

struct Piece {
  std::size_t first;  // bytes into the chunk
  std::size_t bytes;
};

inline std::uint32_t piece_count(std::size_t chunk_bytes) {
  const std::size_t piece_bytes =
      std::clamp(chunk_bytes / kPiecesWanted, kPieceBytesLeast, kPieceBytesMost);
  const auto pieces = static_cast<std::uint32_t>(
      std::max<std::size_t>(1, (chunk_bytes + piece_bytes / 2) / piece_bytes));
  return pieces | 1u;
}

// Piece `index` of `pieces` near-equal pieces of a chunk, each starting on a cache line (none
// empty: the rounding adds less than a line per piece).
inline Piece piece_of(std::size_t chunk_bytes, std::uint32_t pieces, std::uint32_t index) {
  constexpr std::size_t kLine = 64;
  const std::size_t per = ((chunk_bytes + pieces - 1) / pieces + kLine - 1) / kLine * kLine;
  const std::size_t first = std::min(chunk_bytes, per * index);
  return {first, std::min(per, chunk_bytes - first)};
}

// The writer's side of a call in pieces, once the slot of `first_round` (already begun) is free:
// fills each piece (fill(piece) says whether it stored anything) and publishes its round, the
// first carrying `note_bytes` of `note` for the readers. Returns whether any fill stored.
template <typename Fill>
bool publish_pieces(shm::Rounds& rounds, std::uint32_t first_round, std::size_t bytes,
                    std::uint32_t pieces, const void* note, std::size_t note_bytes, Fill&& fill) {
  bool stored = false;
  for (std::uint32_t index = 0; index < pieces; ++index) {
    stored = fill(piece_of(bytes, pieces, index)) || stored;
    if (index == 0) {
      rounds.publish_message(first_round, note, note_bytes);
    } else {
      rounds.publish(rounds.begin());
    }
  }
  return stored;
}

struct Slice {
  std::size_t first;
  std::size_t count;
};

// Slice `index` of `parts` near-equal slices of n elements, each starting on a cache line.
inline Slice slice_of(std::size_t n, std::uint32_t parts, std::uint32_t index,
                      std::size_t element_bytes) {
  const std::size_t line_elements = std::max<std::size_t>(1, 64 / element_bytes);
  std::size_t per = (n + parts - 1) / parts;
  per = (per + line_elements - 1) / line_elements * line_elements;
  const std::size_t first = std::min(n, per * index);
  return {first, std::min(per, n - first)};
}

// Waits for `round` of ranks [0, ranks), then reduces their round slots in rank order into
// `out`, taking my own contribution (when I am among them) from `mine`, not my slot.
void reduce_all_slots(Context& ctx, std::uint32_t round, const std::byte* mine, std::byte* out,
                      std::size_t count, Dtype dtype, const Op& op, std::uint32_t ranks);

// Copies every rank's reduced slice of a chunk (published in `result_round`) into `out`.
void gather_reduced_slices(Context& ctx, std::uint32_t result_round, std::byte* out,
                           std::size_t count, Dtype dtype);

// Every rank reduces its slice of one chunk: round one, each copies the others' slices into its
// slot; then each reduces its own slice over all ranks, in rank order, into its slot for round
// two, which it publishes. Returns round two: wait for it before reading anyone's reduced slice.
std::uint32_t reduce_own_slice(Context& ctx, const std::byte* send, std::size_t count, Dtype dtype,
                               const Op& op);

}  // namespace shmcoll::coll
