// One team's shared segment: creation, mapping, validation, and the abort word.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shm/layout.hpp"

namespace shmcoll::shm {

// Per-rank sizes a segment is created with (see SegmentLayout::compute).
struct SegmentSizes {
  SegmentSizes(std::size_t slot, std::size_t heap = 0) : slot_bytes(slot), heap_bytes(heap) {}
  std::size_t slot_bytes;
  std::size_t heap_bytes;
};

// For errors when /dev/shm cannot back `needed` bytes: how much it has free and what to do.
std::string shared_memory_shortage(std::size_t needed);
// Why MADV_POPULATE_WRITE failed, from its errno: EFAULT is a page tmpfs could not back (what a
// store would have died of with SIGBUS).
const char* populate_failure(int error);

class Segment {
 public:
  // A new anonymous-to-the-world segment: a file of /dev/shm without a name (mode 0600), that
  // others open only through a descriptor. `fd_out`, when given, receives a descriptor (for
  // children that exec); otherwise the descriptor is closed.
  static Segment create_unlinked(std::uint32_t team_size, const SegmentSizes& sizes,
                                 int* fd_out = nullptr);
  // A new segment under `name` that other processes open with open_named(); unlink_name() removes
  // it.
  static Segment create_named(const std::string& name, std::uint32_t team_size,
                              const SegmentSizes& sizes);
  // Opens a segment another process created, waiting up to `timeout_ms` for it to appear.
  static Segment open_named(const std::string& name, std::uint32_t expected_team_size,
                            int timeout_ms);
  // Maps and validates a segment's descriptor (inherited by shmcoll-run children, or our own).
  static Segment from_fd(int fd, std::uint32_t expected_team_size);
  // from_fd, then closes `fd` whether or not the mapping worked: for a descriptor opened only
  // to map it.
  static Segment from_fd_closing(int fd, std::uint32_t expected_team_size);
  static std::string unique_name();
  static void unlink_name(const std::string& name);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  const SegmentLayout& layout() const { return layout_; }
  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  RankControl& control(std::uint32_t rank) const {
    return *reinterpret_cast<RankControl*>(base_ + layout_.control_offset(rank));
  }
  RankProfile& profile(std::uint32_t rank) const {
    return reinterpret_cast<RankProfile*>(base_ + layout_.profiles_offset)[rank];
  }
  // Rank `rank`'s control page, slots and heap, for NUMA placement before they are first touched.
  std::byte* area(std::uint32_t rank) const { return base_ + layout_.area_offset(rank); }
  std::byte* slot(std::uint32_t rank, std::uint32_t parity) const {
    return base_ + layout_.slot_offset(rank, parity);
  }
  std::byte* heap(std::uint32_t rank) const { return base_ + layout_.heap_offset(rank); }

  // Writes the owner's pages (control page and slots) once so no collective ever takes a
  // first-touch page fault (and, under the default first-touch NUMA policy, the pages land on the
  // owner's node).
  void prefault_own_pages(std::uint32_t rank) const;

  // Marks the team failed because of `failed_rank` (first caller wins) and wakes every sleeper.
  // failed_rank == team size means no rank failed: the launcher stopped the team.
  void abort(std::uint32_t failed_rank) const;
  // -1 while healthy, otherwise the rank whose failure ended the team.
  int aborted_by() const;

 private:
  static void initialize(int fd, const SegmentLayout& layout);
  std::byte* base_ = nullptr;
  SegmentLayout layout_;
};

}  // namespace shmcoll::shm
