#include "coll/exchange.hpp"

#include <algorithm>
#include <cstring>

namespace shmcoll::coll {

namespace {

// Round one's message line: this header, then up to kLinePayload bytes of data.
struct LineHeader {
  std::uint32_t rounds;       // rounds this sender needs
  std::uint32_t data_inline;  // 1: its blocks are in the line, not in its slot
};
constexpr std::size_t kHeaderBytes = sizeof(LineHeader);
constexpr std::size_t kLinePayload = shm::kMessageBytes - kHeaderBytes;

std::uint32_t rounds_needed(std::size_t longest, bool fits_line, std::size_t slot_region) {
  if (fits_line || longest == 0) return 1;
  return static_cast<std::uint32_t>((longest + slot_region - 1) / slot_region);
}

// How a sender's line and slots are divided among its receivers.
struct Geometry {
  bool personalized;
  std::size_t line_region;
  std::size_t slot_region;

  std::uint32_t region(std::uint32_t sender, std::uint32_t receiver) const {
    return personalized ? receiver - (receiver > sender) : 0;
  }
};

}  // namespace

void copy_block(const Block& from, const Block& to) {
  const std::size_t bytes = std::min(from.bytes(), to.bytes());
  if (bytes == 0) return;
  if (from.type->is_contiguous()) {
    to.type->unpack_range(from.base + from.type->lb(), to.count, 0, bytes, to.base);
    return;
  }
  if (to.type->is_contiguous()) {
    from.type->pack_range(from.base, from.count, 0, bytes, to.base + to.type->lb());
    return;
  }
  std::byte staging[4096];  // both layouts scattered: through the stack, a page at a time
  for (std::size_t offset = 0; offset < bytes; offset += sizeof staging) {
    const std::size_t n = std::min(sizeof staging, bytes - offset);
    from.type->pack_range(from.base, from.count, offset, n, staging);
    to.type->unpack_range(staging, to.count, offset, n, to.base);
  }
}

void exchange(Context& ctx, const ExchangeSpec& spec, const ExchangeShape& shape) {
  shm::Rounds& rounds = ctx.rounds;
  const std::uint32_t me = rounds.rank();
  const std::uint32_t size = rounds.size();
  using Knowledge = ExchangeShape::Knowledge;
  const bool all_known = shape.lengths_known_by == Knowledge::everyone;
  if (size == 1 || (all_known && shape.longest == 0)) return spec.copy_own();

  const std::uint32_t regions = shape.personalized ? size - 1 : 1;
  const Geometry geometry{shape.personalized, kLinePayload / regions / 8 * 8,
                          rounds.slot_bytes() / regions / shm::kLineBytes * shm::kLineBytes};
  auto for_each_outgoing = [&](auto&& fn) {
    if (!shape.personalized) return fn(spec.outgoing(ExchangeSpec::kEveryone), 0u);
    for (std::uint32_t dest = 0; dest < size; ++dest) {
      if (dest != me) fn(spec.outgoing(dest), geometry.region(me, dest));
    }
  };

  std::size_t my_longest = 0;
  for_each_outgoing(
      [&](const Block& block, std::uint32_t) { my_longest = std::max(my_longest, block.bytes()); });
  const bool my_inline = my_longest <= geometry.line_region;
  const std::uint32_t my_rounds = rounds_needed(my_longest, my_inline, geometry.slot_region);
  // The rounds this call needs as far as I know: my sends', and those of what I receive (each
  // sender decides inline the same way).
  std::uint32_t known_rounds = my_rounds;
  for (std::uint32_t source = 0; source < size; ++source) {
    const std::size_t bytes = source == me ? 0 : spec.incoming(source).bytes();
    known_rounds = std::max(
        known_rounds, rounds_needed(bytes, bytes <= geometry.line_region, geometry.slot_region));
  }

  // Round one: blocks (or their first pieces) and my round count, all published at once.
  std::uint32_t round = rounds.begin();
  alignas(8) std::byte line[shm::kMessageBytes];
  const LineHeader header{known_rounds, my_inline ? 1u : 0u};
  std::memcpy(line, &header, kHeaderBytes);
  std::size_t line_bytes = kHeaderBytes;
  if (!my_inline) rounds.wait_slot_free(round);
  std::byte* slot = rounds.slot(me, round);
  for_each_outgoing([&](const Block& block, std::uint32_t region) {
    if (block.bytes() == 0) return;
    if (my_inline) {
      const std::size_t at = kHeaderBytes + region * geometry.line_region;
      line_bytes = std::max(line_bytes, at + block.bytes());
      block.type->pack_range(block.base, block.count, 0, block.bytes(), line + at);
    } else {
      block.type->pack_range(block.base, block.count, 0, geometry.slot_region,
                             slot + region * geometry.slot_region);
    }
  });
  rounds.publish_message(round, line, line_bytes);
  spec.copy_own();

  std::uint32_t total_rounds = known_rounds;
  auto rounds_known_by = [&](std::uint32_t peer) {
    LineHeader theirs;
    std::memcpy(&theirs, rounds.wait_message(peer, round), kHeaderBytes);
    return theirs.rounds;
  };
  switch (shape.lengths_known_by) {
    case Knowledge::everyone:
      total_rounds =
          rounds_needed(shape.longest, shape.longest <= geometry.line_region, geometry.slot_region);
      break;
    case Knowledge::root:
      if (me != shape.root) total_rounds = rounds_known_by(shape.root);
      break;
    case Knowledge::nobody:
      for (std::uint32_t peer = 0; peer < size; ++peer) {
        if (peer != me) total_rounds = std::max(total_rounds, rounds_known_by(peer));
      }
      break;
  }
  for (std::uint32_t source = 0; source < size; ++source) {
    const Block in = source == me ? Block{} : spec.incoming(source);
    if (in.bytes() == 0) continue;
    const std::byte* their_line = rounds.wait_message(source, round);
    LineHeader theirs;
    std::memcpy(&theirs, their_line, kHeaderBytes);
    const std::uint32_t region = geometry.region(source, me);
    const std::byte* from = theirs.data_inline != 0
                                ? their_line + kHeaderBytes + region * geometry.line_region
                                : rounds.slot(source, round) + region * geometry.slot_region;
    in.type->unpack_range(from, in.count, 0, geometry.slot_region, in.base);
  }

  // Later rounds: the next slot-region-sized piece of every block still longer than that.
  for (std::uint32_t k = 1; k < total_rounds; ++k) {
    const std::size_t offset = k * geometry.slot_region;
    round = rounds.begin();
    if (k < my_rounds) {
      rounds.wait_slot_free(round);
      slot = rounds.slot(me, round);
      for_each_outgoing([&](const Block& block, std::uint32_t region) {
        if (block.bytes() <= offset) return;
        block.type->pack_range(block.base, block.count, offset, geometry.slot_region,
                               slot + region * geometry.slot_region);
      });
    }
    rounds.publish(round);
    for (std::uint32_t source = 0; source < size; ++source) {
      const Block in = source == me ? Block{} : spec.incoming(source);
      if (in.bytes() <= offset) continue;
      rounds.wait_for(source, round);
      in.type->unpack_range(
          rounds.slot(source, round) + geometry.region(source, me) * geometry.slot_region, in.count,
          offset, geometry.slot_region, in.base);
    }
  }
}

}  // namespace shmcoll::coll
