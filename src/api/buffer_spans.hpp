// Where the data of a data-movement call lies, so the API can refuse send and receive sides that
// overlap without in_place and receive blocks that overlap each other (MPI makes both erroneous;
// here they are invalid_argument instead of a silent mix of old and new bytes).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "coll/blocks.hpp"
#include "util/address_space.hpp"

namespace shmcoll::detail {

// The addresses [first, end) between a block's first and last byte of data; empty when it
// moves nothing. Its holes (derived types) are inside, so two spans may overlap where the bytes
// do not; only the receive-block check, which sees contiguous blocks only, is exact.
struct DataSpan {
  std::int64_t first = 0, end = 0;
  std::uint32_t rank = 0;  // whose block, in a layout
  bool empty() const { return first == end; }
  bool overlaps(const DataSpan& other) const {
    return !empty() && !other.empty() && first < other.end && other.first < end;
  }
};

// `bytes` contiguous bytes at `address`.
inline DataSpan data_span(const void* address, std::size_t bytes) {
  if (bytes == 0) return {};
  const std::int64_t first = address_value(address);
  return {first, first + static_cast<std::int64_t>(bytes)};
}

// Offsets are bounded by check_span (2^56), so the sums fit.
inline DataSpan data_span(const coll::Block& block, std::uint32_t rank = 0) {
  if (block.bytes() == 0) return {};
  const std::int64_t first = address_value(block.base) + block.type->true_lb();
  const std::int64_t last = (block.count - 1) * block.type->extent();
  return {first + std::min<std::int64_t>(0, last),
          first + std::max<std::int64_t>(0, last) + block.type->true_extent(), rank};
}

inline DataSpan data_span(const coll::Layout& layout, std::uint32_t ranks) {
  DataSpan hull;
  for (std::uint32_t rank = 0; rank < ranks; ++rank) {
    const DataSpan span = data_span(layout.block(rank), rank);
    if (span.empty()) continue;
    hull = hull.empty() ? span
                        : DataSpan{std::min(hull.first, span.first), std::max(hull.end, span.end)};
  }
  return hull;
}

// The hull of one side of a call: one block, or a layout of `ranks` blocks.
inline DataSpan hull_of(const coll::Block& block, std::uint32_t) {
  return data_span(block);
}
inline DataSpan hull_of(const coll::Layout& layout, std::uint32_t ranks) {
  return data_span(layout, ranks);
}

// Appends the blocks' spans of one side, `side` in their rank field.
inline void add_spans(const coll::Block& block, std::uint32_t, std::uint32_t side,
                      std::vector<DataSpan>& spans) {
  if (DataSpan span = data_span(block); !span.empty())
    spans.push_back({span.first, span.end, side});
}
inline void add_spans(const coll::Layout& layout, std::uint32_t ranks, std::uint32_t side,
                      std::vector<DataSpan>& spans) {
  for (std::uint32_t rank = 0; rank < ranks; ++rank) add_spans(layout.block(rank), 0, side, spans);
}

// Whether a call's send and receive sides (each a block or a layout of `ranks` blocks) share an
// address: their hulls first, then, where those meet (as variables named from MPI_BOTTOM, which
// lie anywhere in memory, do), block by block. `spans` is scratch space with room for 2 * ranks
// entries (reserved once).
template <typename Send, typename Recv>
bool sides_overlap(const Send& send, const Recv& recv, std::uint32_t ranks,
                   std::vector<DataSpan>& spans) {
  if (!hull_of(send, ranks).overlaps(hull_of(recv, ranks))) return false;
  spans.clear();
  add_spans(send, ranks, 0, spans);
  add_spans(recv, ranks, 1, spans);
  std::sort(spans.begin(), spans.end(),
            [](const DataSpan& a, const DataSpan& b) { return a.first < b.first; });
  // In order of their first byte, a span meets an earlier one of the other side exactly when it
  // starts before the furthest end among those.
  std::int64_t furthest_end[2] = {INT64_MIN, INT64_MIN};
  for (const DataSpan& span : spans) {
    if (span.first < furthest_end[1 - span.rank]) return true;
    furthest_end[span.rank] = std::max(furthest_end[span.rank], span.end);
  }
  return false;
}

// Two blocks of a layout of `ranks` blocks that overlap, if any. Looked for only where every
// block's type is contiguous, so a span is exactly the bytes written. `spans` is scratch space
// with room for `ranks` entries (reserved once, so nothing is allocated here).
inline std::optional<std::pair<std::uint32_t, std::uint32_t>> overlapping_blocks(
    const coll::Layout& layout, std::uint32_t ranks, std::vector<DataSpan>& spans) {
  spans.clear();
  for (std::uint32_t rank = 0; rank < ranks; ++rank) {
    const coll::Block block = layout.block(rank);
    if (block.bytes() == 0) continue;
    if (!block.type->is_contiguous()) return std::nullopt;
    spans.push_back(data_span(block, rank));
  }
  std::sort(spans.begin(), spans.end(),
            [](const DataSpan& a, const DataSpan& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < spans.size(); ++i) {
    if (spans[i - 1].overlaps(spans[i])) {
      return std::minmax(spans[i - 1].rank, spans[i].rank);
    }
  }
  return std::nullopt;
}

}  // namespace shmcoll::detail
