// How the exchange engine (exchange.cpp) lays out a call: what round one's message line carries,
// how a sender's line and slots are divided among its receivers, and how many rounds blocks take.
// Internal to the engine.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "coll/exchange.hpp"
#include "coll/shared_inputs.hpp"
#include "shm/layout.hpp"
#include "shm/process_memory.hpp"

namespace shmcoll::coll::exchange_plan {

// Round one's message line: this header, then up to kLinePayload bytes of data.
struct LineHeader {
  std::uint32_t rounds;  // rounds this call needs, as far as the sender knows
  std::uint16_t mode;    // where the sender's blocks are
  std::uint16_t stride;  // in_lines: bytes from one block to the next
};
enum Mode : std::uint16_t { in_slots, in_line, in_heap, in_lines, in_pages, in_process, into_root };
constexpr std::size_t kHeaderBytes = sizeof(LineHeader);
// into_root: what a gatherv's root posts after its header: the note on its receive buffer (no
// bytes: it offers none, or declines), and whether it planned any block written into it (then
// the call closes with a round that says who missed). Its slot tells sender r its block's place
// in that buffer (entry r of a BlockPlace table at the slot's head).
struct RootOffer {
  shm::ProcessNote note;
  std::uint64_t planned;
};
constexpr std::size_t kLinePayload = shm::kMessageBytes - kHeaderBytes;

// in_pages: each receiver's slot region starts with the note on its block (shared_inputs.hpp),
// then the block's bytes in the partly used pages at the buffer's ends, less than a page each.
constexpr std::size_t kPagesRegionMin = sizeof(BufferNote) + 2 * shm::kPageBytes;

// How a sender's line and slots are divided among its receivers. Where a receiver cannot know
// the length of what it is sent from its own arguments (the rooted v forms, alltoallv/w), each
// block's length travels with it: a byte per block after the blocks of a line, a word per region
// after the regions of the first round's slot. A receiver that expects more than it is sent then
// fails with "mismatched counts" instead of taking what an earlier call left there.
struct Geometry {
  bool personalized;
  bool lengths_travel;
  std::uint32_t regions;
  std::size_t line_region;
  std::size_t slot_region;

  static Geometry of(const ExchangeShape& shape, std::uint32_t size, std::size_t slot_bytes) {
    const std::uint32_t regions = shape.personalized ? size - 1 : 1;
    const bool lengths_travel = shape.lengths_known_by != ExchangeShape::Knowledge::everyone;
    const std::size_t line_lengths = lengths_travel ? regions : 0;
    const std::size_t line_room = kLinePayload - std::min(line_lengths, kLinePayload);
    const std::size_t slot_lengths = lengths_travel
                                         ? (regions * sizeof(std::uint64_t) + shm::kLineBytes - 1) /
                                               shm::kLineBytes * shm::kLineBytes
                                         : 0;
    return {shape.personalized, lengths_travel, regions, line_room / regions / 8 * 8,
            (slot_bytes - slot_lengths) / regions / shm::kLineBytes * shm::kLineBytes};
  }

  // Whether blocks of up to `longest` bytes travel in the line, their lengths too.
  bool line_holds(std::size_t longest) const {
    return longest <= line_region && (!lengths_travel || regions <= kLinePayload);
  }
  // Where a line of `per_line` blocks `stride` bytes apart has its lengths.
  std::size_t line_lengths_at(std::size_t per_line, std::size_t stride) const {
    return kHeaderBytes + per_line * stride;
  }
  // Where the in_line mode has the length of `region`'s block.
  std::size_t line_length_at(std::uint32_t region) const {
    return line_lengths_at(regions, line_region) + region;
  }
  // How many blocks `stride` bytes apart one line holds, their lengths too.
  std::size_t blocks_per_line(std::size_t stride) const {
    return kLinePayload / (stride + (lengths_travel ? 1 : 0));
  }
  // Where the first round's slot has the length of `region`'s block.
  std::size_t slot_length_at(std::uint32_t region) const {
    return regions * slot_region + region * sizeof(std::uint64_t);
  }

  std::uint32_t region(std::uint32_t sender, std::uint32_t receiver) const {
    return personalized ? receiver - (receiver > sender) : 0;
  }
};

// A root's blocks that overflow one line but each fit one (scatter of small blocks to many
// ranks) fill the message lines of consecutive rounds, `per_line` blocks `stride` bytes apart in
// each, instead of the slots: a slot is rewritten only once every rank has read it (each call a
// barrier), a line only kMessageLines rounds later, so the root runs calls ahead of its readers
// where ranks share CPUs as it does with one line (16 ranks on 2 cores, 8 B: 41 us per call
// through the slots). Up to kMaxLineRounds rounds, so several calls still fit in the lines.
struct LinePlan {
  std::uint32_t rounds;
  std::uint16_t stride;
  std::uint16_t per_line;
};
constexpr std::uint32_t kMaxLineRounds = 8;
inline std::optional<LinePlan> plan_lines(const ExchangeShape& shape, const Geometry& geometry,
                                          std::size_t longest) {
  if (!shape.one_sender || geometry.line_holds(longest)) return {};
  const std::size_t stride = (longest + 7) / 8 * 8;
  const std::size_t per_line = geometry.blocks_per_line(stride);
  if (per_line == 0) return {};
  const std::uint32_t rounds = std::uint32_t((geometry.regions + per_line - 1) / per_line);
  if (rounds > kMaxLineRounds) return {};
  return LinePlan{rounds, static_cast<std::uint16_t>(stride), static_cast<std::uint16_t>(per_line)};
}
// Where a receiver finds its block of a sender in lines: flag, round index within the call,
// where the block's length is and where the block is in the line (ctx.line_arrival, 0: not in
// lines).
constexpr std::uint32_t kInLines = 1u << 31;
constexpr std::uint32_t in_lines_at(std::uint32_t index, std::size_t length_at, std::size_t at) {
  return kInLines | index << 16 | std::uint32_t(length_at) << 8 | std::uint32_t(at);
}

inline std::uint32_t rounds_needed(std::size_t longest, bool fits_line, std::size_t slot_region) {
  if (fits_line || longest == 0) return 1;
  return static_cast<std::uint32_t>((longest + slot_region - 1) / slot_region);
}

}  // namespace shmcoll::coll::exchange_plan
