// Typed blocks of user memory, and how a buffer is divided into one block per rank: the
// arguments of every data-movement collective, once the API layer has checked them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "shmcoll/datatype.hpp"
#include "util/address_space.hpp"

namespace shmcoll::coll {

// `count` elements of `type` at `base`; a Block with count 0 moves nothing.
struct Block {
  std::byte* base = nullptr;
  std::int64_t count = 0;
  const Datatype* type = nullptr;
  std::size_t bytes() const { return count > 0 ? std::size_t(count) * type->size() : 0; }
};

// `buffer` may be null (MPI_BOTTOM, absolute displacements): address arithmetic.
inline Block block_at(const void* buffer, std::int64_t offset_bytes, std::int64_t count,
                      const Datatype& type) {
  return {address_plus(static_cast<std::byte*>(const_cast<void*>(buffer)), offset_bytes), count,
          &type};
}

// Copies the packed bytes of `from` into the layout of `to` (the shorter length wins).
void copy_block(const Block& from, const Block& to);

// `bytes` in pieces that fit a buffer on the stack: step(offset, length, buffer) for each, in
// order; false as soon as a step fails.
template <typename Step>
bool through_stack(std::size_t bytes, Step&& step) {
  std::byte staging[16384];
  for (std::size_t offset = 0; offset < bytes; offset += sizeof staging) {
    if (!step(offset, std::min(sizeof staging, bytes - offset), staging)) return false;
  }
  return true;
}

// Fills `to`'s layout with `bytes` packed bytes that `fetch(offset, n, staging)` writes into a
// buffer on the stack a piece at a time, for a layout that cannot take them in one piece; false
// as soon as a fetch fails.
template <typename Fetch>
bool unpack_through_stack(const Block& to, std::size_t bytes, Fetch&& fetch) {
  return through_stack(bytes, [&](std::size_t offset, std::size_t n, std::byte* staging) {
    if (!fetch(offset, n, staging)) return false;
    to.type->unpack_range(staging, to.count, offset, n, to.base);
    return true;
  });
}

// Where one rank's block lies in a buffer another rank fills or reads: `at` bytes from its start,
// `bytes` long. A table of them, one per rank, heads a slot (scatterv's small blocks, a gatherv's
// blocks written into its root's buffer).
struct BlockPlace {
  std::uint64_t at = 0, bytes = 0;

  static std::size_t table_bytes(std::uint32_t ranks) { return ranks * sizeof(BlockPlace); }
  void put(std::byte* table, std::uint32_t rank) const {
    std::memcpy(table + rank * sizeof(BlockPlace), this, sizeof(BlockPlace));
  }
  static BlockPlace in(const std::byte* table, std::uint32_t rank) {
    BlockPlace place;
    std::memcpy(&place, table + rank * sizeof(BlockPlace), sizeof place);
    return place;
  }
};

// One block per rank in a buffer, in MPI's three forms: regular (alltoall: `count` elements per
// rank, back to back), v (counts and displacements in extents of one type) and w (counts,
// displacements in bytes, a type per rank).
class Layout {
 public:
  static Layout regular(const void* buffer, std::int64_t count, const Datatype& type) {
    return Layout(buffer, count, {}, {}, &type, {});
  }
  static Layout v(const void* buffer, std::span<const std::int64_t> counts,
                  std::span<const std::int64_t> displacements, const Datatype& type) {
    return Layout(buffer, 0, counts, displacements, &type, {});
  }
  static Layout w(const void* buffer, std::span<const std::int64_t> counts,
                  std::span<const std::int64_t> byte_displacements,
                  std::span<const Datatype> types) {
    return Layout(buffer, 0, counts, byte_displacements, nullptr, types);
  }

  Block block(std::uint32_t rank) const {
    if (!types_.empty())
      return block_at(buffer_, displacements_[rank], counts_[rank], types_[rank]);
    if (counts_.empty()) return block_at(buffer_, rank * count_ * type_->extent(), count_, *type_);
    return block_at(buffer_, displacements_[rank] * type_->extent(), counts_[rank], *type_);
  }
  // The longest block's bytes (for a regular layout, every block's).
  std::size_t longest_bytes() const {
    if (counts_.empty()) return std::size_t(count_) * type_->size();
    std::size_t longest = 0;
    for (std::uint32_t rank = 0; rank < counts_.size(); ++rank) {
      longest = std::max(longest, block(rank).bytes());
    }
    return longest;
  }

 private:
  Layout(const void* buffer, std::int64_t count, std::span<const std::int64_t> counts,
         std::span<const std::int64_t> displacements, const Datatype* type,
         std::span<const Datatype> types)
      : buffer_(buffer),
        count_(count),
        counts_(counts),
        displacements_(displacements),
        type_(type),
        types_(types) {}
  const void* buffer_;
  std::int64_t count_;
  std::span<const std::int64_t> counts_;
  std::span<const std::int64_t> displacements_;
  const Datatype* type_;
  std::span<const Datatype> types_;
};

}  // namespace shmcoll::coll
