// reduce_scatter (and reduce_scatter_block, its equal-counts case): each rank posts, for every
// rank, the next piece of that rank's block in a region of its slot (of its message line when
// every block fits), then reduces its own block's pieces from all ranks in rank order. All ranks
// reduce at once, and each element is read by one reducer only.
#include <algorithm>
#include <cstring>

#include "coll/chunks.hpp"
#include "coll/collectives.hpp"
#include "coll/store.hpp"
#include "ops/reduce.hpp"
#include "util/copy.hpp"

namespace shmcoll::coll {

void reduce_scatter(Context& ctx, const void* send, void* recv,
                    std::span<const std::int64_t> counts, Dtype dtype, const Op& op,
                    bool in_place) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::uint32_t size = rounds.size();
  const std::size_t element_bytes = dtype_size(dtype);
  std::size_t longest = 0, total = 0;
  for (std::uint32_t rank = 0; rank < size; ++rank) {
    ctx.offsets[rank] = total;
    total += std::size_t(counts[rank]);
    longest = std::max(longest, std::size_t(counts[rank]));
  }
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  if (longest == 0) return;  // counts agree on every rank, so all skip the rounds alike
  if (size == 1) {
    if (!in_place) copy_bytes(out, in, total * element_bytes);
    return;
  }

  // Regions hold whole elements and keep them 8-byte aligned (64 in slots).
  const std::size_t quantum = std::max<std::size_t>(8, element_bytes);
  const std::size_t line_region = shm::kMessageBytes / size / quantum * quantum;
  const std::size_t slot_region = rounds.slot_bytes() / size / shm::kLineBytes * shm::kLineBytes;
  const bool fits_line = longest * element_bytes <= line_region;
  const std::size_t region = fits_line ? line_region : slot_region;
  const std::size_t piece = region / element_bytes;
  const std::size_t total_rounds = fits_line ? 1 : (longest + piece - 1) / piece;
  auto piece_of = [&](std::uint32_t rank, std::size_t first) {
    const auto count = std::size_t(counts[rank]);
    return first < count ? std::min(piece, count - first) : std::size_t{0};
  };

  const bool streaming = streams_between_cores(ctx, total * element_bytes);
  alignas(8) std::byte line[shm::kMessageBytes];
  for (std::size_t k = 0; k < total_rounds; ++k) {
    const std::size_t first = k * piece;
    const std::uint32_t round = rounds.begin();
    if (!fits_line) rounds.wait_slot_free(round);
    std::byte* posted = fits_line ? line : rounds.slot(me, round);
    // In place my own piece is posted too: my result overwrites the input it is computed from.
    // Into the slot, as reduce's pieces go (store.hpp, chunks.hpp): only the 4 KiB blocks that
    // changed, past this core's caches where the reader has a core of its own. 2 ranks,
    // shmcoll-bench --method single --written, 2 runs each, us before/after: 512 KiB
    // 48-49/12.5-12.7, 4 MiB 412-421/134-168; data that changes every call (--vary-data):
    // 55-56/24-29, 421-435/208-209.
    for (std::uint32_t dest = 0; dest < size; ++dest) {
      if (dest == me && !in_place) continue;
      const std::byte* block = in + (ctx.offsets[dest] + first) * element_bytes;
      const std::size_t bytes = piece_of(dest, first) * element_bytes;
      if (fits_line) {
        copy_bytes(posted + dest * region, block, bytes);
      } else {
        store_changes(posted + dest * region, block, bytes, streaming);
      }
    }
    if (fits_line) {
      rounds.publish_message(round, line, size * region);
    } else {
      rounds.publish(round);
    }

    const std::size_t mine = piece_of(me, first);
    if (mine == 0) continue;
    for (std::uint32_t source = 0; source < size; ++source) {
      const std::byte* from;
      if (source == me) {
        from = in_place ? posted : in + (ctx.offsets[me] + first) * element_bytes;
      } else if (fits_line) {
        from = rounds.wait_message(source, round);
      } else {
        rounds.wait_for(source, round);
        from = rounds.slot(source, round);
      }
      ctx.inputs[source] = source == me && !in_place ? from : from + me * region;
    }
    ops::reduce_kary(dtype, op, out + first * element_bytes, ctx.inputs.data(), int(size), mine);
  }
}

}  // namespace shmcoll::coll
