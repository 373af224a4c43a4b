// Splitting a message into slot-sized chunks, and a chunk into per-rank slices.
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
