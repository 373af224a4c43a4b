// The segment layout, computed in one place (SegmentLayout::compute) and nowhere else.
//
//   offset 0               SegmentHeader     one page. Fixed fields (magic, layout version, team
//                                             size, slot bytes, total bytes) written once by the
//                                             creator before `initialized`; then, each on its own
//                                             128-byte line pair: the abort word, the attach
//                                             count, the warning flag,
//                                             the first call mismatch seen, what rank 0
//                                             publishes for the team (shared tunables), the
//                                             arrival count and the result line of the calls
//                                             that the last rank to arrive completes for all.
//   profiles_offset        RankProfile[n]    per rank two line pairs written when it joins: its
//                                             pid and what the layers above publish (where it
//                                             runs, the CPUs it may use), then `joined`. Members
//                                             wait for each other here, so nobody touches a rank's
//                                             area before it is placed.
//   area_offset(r)         rank r's area     page-aligned, written only by rank r, so its pages
//                                             can be placed on r's NUMA node before first touch:
//     + 0                    RankControl       a 128-byte line pair with its round number (a futex
//                                             word) and its `released` round, one with the CPU
//                                             it last waited on, the count of peers asleep on
//                                             its words (the one field others write) and whose
//                                             memory it is writing a piece into, then
//                                             kMessageLines message line pairs (round robin by
//                                             round) that carry payloads of up to kMessageBytes
//                                             beside their own round number and call signature,
//                                             so a reader gets flag, signature and data in one
//                                             transfer (the flag's 64-byte line holds the first
//                                             48 payload bytes; the adjacent-line prefetcher
//                                             brings the pair's second line with the first);
//                                             padded to a page.
//     + kPageBytes           two slots         of slot_bytes each, used by round parity.
//     + 2 slots              heap              heap_bytes (0 or more whole pages) that
//                                             Team::allocate hands out; collectives let peers
//                                             read a block there directly instead of copying
//                                             it through a slot.
//
// Rounds: every collective is a fixed sequence of rounds, the same on every rank. Rank r publishes
// round k (control[r].round = k) when its slot k%2 holds its data for round k AND it has finished
// reading every slot of rounds < k. So a rank about to write its slot for round k waits until every
// rank has published k-1: nobody can still be reading round k-2 from that slot. Round numbers only
// grow. In the segment they are 32-bit futex words; each rank counts its own rounds in 64 bits and
// reads a peer's word relative to its own count, which is exact because no rank can publish more
// than kMessageLines rounds ahead of another (below). Values that may be read long after they
// were written (`released`, which only data-movement calls write) are stored in 64 bits.
// Message lines follow the same rule over kMessageLines rounds: writing the line of round k waits
// until every rank has published k - kMessageLines + 1. Every round, with a message or not,
// writes its line's round and signature, so whoever waits for a peer's round can check that
// both are in the same call.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace shmcoll::shm {

inline constexpr std::size_t kLinePair = 128;  // adjacent-line prefetch makes 64 B lines act as 128
inline constexpr std::size_t kPageBytes = 4096;
inline constexpr std::size_t kLineBytes = 64;
inline constexpr std::uint64_t kMagic = 0x4c4f43434d4853ull;  // "SHMCCOL"
inline constexpr std::uint32_t kLayoutVersion = 11;

// What a member checks before trusting a segment; written once by the creator.
struct SegmentIdentity {
  std::uint64_t magic;
  std::uint32_t layout_version;
  std::uint32_t team_size;
  std::uint64_t slot_bytes;
  std::uint64_t heap_bytes;
  std::uint64_t total_bytes;
};

// A collective call's signature as the rounds carry it: what every rank's call must agree on,
// encoded by the layer above (coll/signature.hpp): the kind of call and its arguments in `call`,
// the count that must be equal in full in `count`. call == 0: the call is not checked.
struct Signature {
  std::uint64_t call = 0;
  std::uint64_t count = 0;
  bool checked() const { return call != 0; }
  friend bool operator==(const Signature&, const Signature&) = default;
};

// Written once, by the first member that sees a peer's call signature differ from its own.
struct MismatchRecord {
  enum : std::uint32_t { none = 0, writing = 1, written = 2 };
  std::atomic<std::uint32_t> state;
  std::uint32_t reporter;
  std::uint32_t peer;
  Signature reporter_signature;
  Signature peer_signature;
};

inline constexpr std::size_t kMessageBytes = 104;

// What the last rank to arrive at a call posts for all (Rounds::arrive): the call's round in 64
// bits (the line may be read many calls later; sleepers wait on its low half), who is computing
// it (round and rank, so waiters know whose liveness to watch), the count of ranks asleep on it,
// and the payload.
struct alignas(kLinePair) ResultLine {
  std::atomic<std::uint64_t> round;
  std::atomic<std::uint64_t> combiner;  // round << 32 | rank
  std::atomic<std::uint32_t> sleepers;
  alignas(8) std::byte data[kMessageBytes];
};
static_assert(sizeof(ResultLine) == kLinePair);

inline constexpr std::size_t kTeamDataBytes = 256;
inline constexpr std::uint32_t kPlacementWarning = 1;  // SegmentHeader::warned bits
inline constexpr std::uint32_t kTunablesWarning = 2;

struct SegmentHeader {
  SegmentIdentity identity;
  std::atomic<std::uint32_t> initialized;  // creator sets 1 (release) after `identity`
  // 0 while the team is healthy; otherwise 1 + the rank whose failure ended it.
  alignas(kLinePair) std::atomic<std::uint32_t> abort_word;
  // Members that have mapped the segment (join mode unlinks the name when it reaches team_size).
  alignas(kLinePair) std::atomic<std::uint32_t> attached;
  // One bit per kind of team-wide warning, set by the first member that prints it, so each is
  // printed once.
  alignas(kLinePair) std::atomic<std::uint32_t> warned;
  // The first call mismatch a member saw (Rounds reads it back to tell every member what it was).
  alignas(kLinePair) MismatchRecord mismatch;
  // What rank 0 publishes for the whole team before it joins (meaning given by the layers above:
  // the tunables every member must share).
  alignas(kLinePair) std::byte team_data[kTeamDataBytes];
  // Arrivals at the calls in which the last rank to arrive works for all (Rounds::arrive),
  // counted since the team began, and the line where that rank posts the call's result.
  alignas(kLinePair) std::atomic<std::uint64_t> arrivals;
  alignas(kLinePair) ResultLine result;
};
static_assert(sizeof(SegmentHeader) <= kPageBytes);

// Message lines per rank, used round robin: a rank may post small payloads this many rounds
// minus one ahead of the slowest reader, so rooted small collectives in a row (bcast, scatter,
// gather, scan) pipeline instead of waiting for a round trip each. As many as fill the control
// page: where ranks share CPUs, a root that runs ahead further gets more calls done per turn on
// its CPU (8 ranks on 2 cores, 8 B: bcast 3.4 us with 8 lines, 1.5 with 16, 1.1 with 30; reduce
// 3.5, 1.8, 1.1), although alltoall loses 1.2x with 30 against 16 (measured, not understood).
inline constexpr std::uint32_t kMessageLines = 30;

// Every round a rank publishes has a record here, message or not: its round number, the
// signature of the collective call it belongs to and a digest of the signature of the call
// before (0: not checked), which readers compare with their own. All of it sits in the flag's
// 64-byte line, so a check costs no second line; that line also carries 40 bytes of data.
struct alignas(kLinePair) MessageLine {
  std::atomic<std::uint32_t> round;  // set (release) after the rest
  std::atomic<std::uint32_t> previous_digest;
  std::atomic<std::uint64_t> signature_call;
  std::atomic<std::uint64_t> signature_count;
  alignas(8) std::byte data[kMessageBytes];  // 8-aligned for every element type up to 64 bits
};
static_assert(sizeof(MessageLine) == kLinePair);

struct alignas(kLinePair) RankControl {
  std::atomic<std::uint32_t> round;
  // The last round (in 64 bits: it may be compared many calls later) whose direct reads from
  // other ranks' heaps this rank finished. Sleepers wait on its low half (futex_word_of).
  alignas(64) std::atomic<std::uint64_t> released;
  // The CPU this rank last started a slow wait on (sched_getcpu), so a rank that waits for it
  // can tell that it shares that CPU and that spinning there only delays it.
  alignas(kLinePair) std::atomic<std::int32_t> cpu;
  // Peers asleep on a futex word of this rank (round, released or its profile's joined): this
  // rank issues FUTEX_WAKE after writing one only while it is non-zero, so publishing costs no
  // system call unless someone waits for this rank in particular.
  std::atomic<std::uint32_t> sleepers;
  // 1 + the rank whose memory (a receive buffer it shared, or its memory through the kernel's
  // copy) this rank is writing a piece into; 0 while it writes none (Rounds::begin_write_into).
  std::atomic<std::uint32_t> writing_into;
  MessageLine messages[kMessageLines];
};
static_assert(sizeof(RankControl) == (2 + kMessageLines) * kLinePair);
static_assert(sizeof(RankControl) <= kPageBytes);

inline constexpr std::size_t kProfileBytes = 2 * kLinePair - 16;

struct alignas(kLinePair) RankProfile {
  std::atomic<std::uint32_t> joined;  // futex word: 1 (release) once the rest is written
  std::atomic<std::int32_t> pid;
  // When the process started (clock ticks after boot; 0: unknown): with the pid, names it even
  // after the pid is recycled (process_has_exited).
  std::atomic<std::uint64_t> start_ticks;
  std::byte data[kProfileBytes];  // meaning given by the layers above; 8-aligned
};
static_assert(sizeof(RankProfile) == 2 * kLinePair);

static_assert(std::endian::native == std::endian::little, "futex_word_of takes the low half first");
// The low half of a 64-bit word, which changes whenever the word does (by less than 2^32): a
// futex sleeps on it.
inline const std::atomic<std::uint32_t>& futex_word_of(const std::atomic<std::uint64_t>& word) {
  return *reinterpret_cast<const std::atomic<std::uint32_t>*>(&word);
}

struct SegmentLayout {
  std::uint32_t team_size = 0;
  std::size_t slot_bytes = 0;
  std::size_t heap_bytes = 0;
  std::size_t profiles_offset = 0;
  std::size_t areas_offset = 0;
  std::size_t area_bytes = 0;  // one rank's control page, two slots and heap
  std::size_t total_bytes = 0;

  // Both sizes are rounded up to whole pages (a slot to at least one).
  static SegmentLayout compute(std::uint32_t team_size, std::size_t slot_bytes,
                               std::size_t heap_bytes = 0);
  std::size_t area_offset(std::uint32_t rank) const { return areas_offset + rank * area_bytes; }
  std::size_t control_offset(std::uint32_t rank) const { return area_offset(rank); }
  std::size_t slot_offset(std::uint32_t rank, std::uint32_t parity) const {
    return area_offset(rank) + kPageBytes + parity * slot_bytes;
  }
  std::size_t heap_offset(std::uint32_t rank) const {
    return area_offset(rank) + kPageBytes + 2 * slot_bytes;
  }
};

}  // namespace shmcoll::shm
