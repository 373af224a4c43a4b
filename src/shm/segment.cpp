#include "shm/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "shm/futex.hpp"
#include "util/address_space.hpp"
#include "util/fail.hpp"

namespace shmcoll::shm {

SegmentLayout SegmentLayout::compute(std::uint32_t team_size, std::size_t slot_bytes,
                                     std::size_t heap_bytes) {
  // Every size is checked before it is rounded or multiplied, so none wraps: the whole segment
  // must fit in an address space.
  constexpr auto kMost = static_cast<std::size_t>(kMostAddressBytes);
  auto round_up = [](std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; };
  if (slot_bytes > kMost / 2) {
    fail(Errc::invalid_argument, "slot_bytes (Options::slot_bytes or SHMCOLL_SLOT_BYTES) of ",
         slot_bytes, " bytes: two slots are more than any address space");
  }
  if (heap_bytes > kMost) {
    fail(Errc::invalid_argument, "heap_bytes (Options::heap_bytes or SHMCOLL_HEAP_BYTES) of ",
         heap_bytes, " bytes is more than any address space");
  }
  SegmentLayout layout;
  layout.team_size = team_size;
  // A slot holds at least one cache line per rank: exchanges split it into per-rank regions.
  const std::size_t smallest = std::max<std::size_t>(kLineBytes * team_size, 1);
  layout.slot_bytes = round_up(std::max(slot_bytes, smallest), kPageBytes);
  layout.profiles_offset = kPageBytes;
  layout.areas_offset =
      round_up(layout.profiles_offset + team_size * sizeof(RankProfile), kPageBytes);
  layout.heap_bytes = round_up(heap_bytes, kPageBytes);
  layout.area_bytes = kPageBytes + 2 * layout.slot_bytes + layout.heap_bytes;
  if (layout.area_bytes > (kMost - layout.areas_offset) / std::max<std::uint32_t>(team_size, 1)) {
    fail(Errc::invalid_argument, "a segment for ", team_size, " ranks with ", layout.slot_bytes,
         "-byte slots (slot_bytes) and ", layout.heap_bytes,
         "-byte heaps (heap_bytes) is more than any address space");
  }
  layout.total_bytes = layout.areas_offset + std::size_t{team_size} * layout.area_bytes;
  return layout;
}

namespace {

void close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace

std::string shared_memory_shortage(std::size_t needed) {
  std::string text = "needs " + std::to_string(needed) + " bytes of /dev/shm";
  struct statvfs shm {};
  if (statvfs("/dev/shm", &shm) == 0) {
    const auto block = static_cast<unsigned long long>(shm.f_frsize);
    text += ", which has " + std::to_string(shm.f_bavail * block) + " bytes free of " +
            std::to_string(shm.f_blocks * block);
  }
  return text +
         " (a bigger /dev/shm: Docker's --shm-size; or a smaller SHMCOLL_SLOT_BYTES or "
         "SHMCOLL_HEAP_BYTES, or fewer ranks)";
}

const char* populate_failure(int error) {
  return error == EFAULT ? "no room left in /dev/shm" : std::strerror(error);
}

std::string Segment::unique_name() {
  unsigned char random[16];
  if (getrandom(random, sizeof random, 0) != sizeof random) fail_errno("getrandom");
  std::string name = "/shmcoll-";
  static const char* hex = "0123456789abcdef";
  for (unsigned char byte : random) {
    name += hex[byte >> 4];
    name += hex[byte & 15];
  }
  return name;
}

void Segment::unlink_name(const std::string& name) {
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) fail_errno("shm_unlink(", name, ")");
}

void Segment::initialize(int fd, const SegmentLayout& layout) {
  if (ftruncate(fd, static_cast<off_t>(layout.total_bytes)) != 0) {
    fail_errno("ftruncate of the shared segment to ", layout.total_bytes, " bytes");
  }
  // The header and profiles are written by everyone: back them now, so a full /dev/shm is an
  // error here instead of a SIGBUS at the first store.
  if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(layout.areas_offset))) {
    if (error == ENOSPC) {
      fail(Errc::out_of_memory, "creating a team of ", layout.team_size, ": its segment ",
           shared_memory_shortage(layout.areas_offset), " to start");
    }
    errno = error;
    fail_errno("reserving the first ", layout.areas_offset, " bytes of the shared segment");
  }
  void* page = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (page == MAP_FAILED) fail_errno("mmap of the segment header");
  auto* header = new (page) SegmentHeader{};
  header->identity = {kMagic,
                      kLayoutVersion,
                      layout.team_size,
                      layout.slot_bytes,
                      layout.heap_bytes,
                      layout.total_bytes};
  header->initialized.store(1, std::memory_order_release);
  munmap(page, kPageBytes);
}

Segment Segment::create_named(const std::string& name, std::uint32_t team_size,
                              const SegmentSizes& sizes) {
  if (team_size == 0) fail(Errc::invalid_argument, "team size must be at least 1");
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fail_errno("shm_open(", name, ", O_CREAT|O_EXCL)");
  try {
    initialize(fd, SegmentLayout::compute(team_size, sizes.slot_bytes, sizes.heap_bytes));
    Segment segment = from_fd(fd, team_size);
    close_quietly(fd);
    return segment;
  } catch (...) {
    close_quietly(fd);
    shm_unlink(name.c_str());
    throw;
  }
}

Segment Segment::create_unlinked(std::uint32_t team_size, const SegmentSizes& sizes, int* fd_out) {
  if (team_size == 0) fail(Errc::invalid_argument, "team size must be at least 1");
  // A file in /dev/shm that never has a name (O_TMPFILE), so that nothing is left there whatever
  // kills us; where tmpfs cannot (kernels before 3.11), one named and unlinked at once.
  int fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    const std::string name = unique_name();
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) fail_errno("shm_open(", name, ", O_CREAT|O_EXCL)");
    shm_unlink(name.c_str());
  }
  try {
    initialize(fd, SegmentLayout::compute(team_size, sizes.slot_bytes, sizes.heap_bytes));
    Segment segment = from_fd(fd, team_size);
    if (fd_out) {
      *fd_out = fd;
    } else {
      close_quietly(fd);
    }
    return segment;
  } catch (...) {
    close_quietly(fd);
    throw;
  }
}

Segment Segment::open_named(const std::string& name, std::uint32_t expected_team_size,
                            int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause_or_fail = [&](const char* what) {
    if (std::chrono::steady_clock::now() > deadline) {
      fail(Errc::timeout, "segment ", name, " ", what, " within ", timeout_ms, " ms");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  };
  int fd;
  while ((fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0)) < 0) {
    if (errno != ENOENT) fail_errno("shm_open(", name, ")");
    pause_or_fail("did not appear");
  }
  try {
    // The creator truncates, then fills the header and sets `initialized` last.
    for (;;) {
      struct stat info {};
      if (fstat(fd, &info) != 0) fail_errno("fstat of segment ", name);
      if (static_cast<std::size_t>(info.st_size) >= kPageBytes) {
        void* page = mmap(nullptr, kPageBytes, PROT_READ, MAP_SHARED, fd, 0);
        if (page == MAP_FAILED) fail_errno("mmap of segment header ", name);
        const bool ready =
            static_cast<SegmentHeader*>(page)->initialized.load(std::memory_order_acquire) != 0;
        munmap(page, kPageBytes);
        if (ready) break;
      }
      pause_or_fail("was not initialized");
    }
  } catch (...) {
    close_quietly(fd);
    throw;
  }
  return from_fd_closing(fd, expected_team_size);
}

Segment Segment::from_fd_closing(int fd, std::uint32_t expected_team_size) {
  try {
    Segment segment = from_fd(fd, expected_team_size);
    close_quietly(fd);
    return segment;
  } catch (...) {
    close_quietly(fd);
    throw;
  }
}

Segment Segment::from_fd(int fd, std::uint32_t expected_team_size) {
  struct stat info {};
  if (fstat(fd, &info) != 0) fail_errno("fstat of the shared segment");
  const auto file_bytes = static_cast<std::size_t>(info.st_size);
  if (file_bytes < kPageBytes) {
    fail(Errc::segment_mismatch, "shared segment is ", file_bytes,
         " bytes, too small for a header");
  }
  void* header_page = mmap(nullptr, kPageBytes, PROT_READ, MAP_SHARED, fd, 0);
  if (header_page == MAP_FAILED) fail_errno("mmap of the segment header");
  const SegmentIdentity h = static_cast<const SegmentHeader*>(header_page)->identity;
  munmap(header_page, kPageBytes);
  if (h.magic != kMagic) {
    fail(Errc::segment_mismatch, "shared segment has magic 0x", std::hex, h.magic, ", expected 0x",
         kMagic, ": not a shmcoll segment");
  }
  if (h.layout_version != kLayoutVersion) {
    fail(Errc::segment_mismatch, "shared segment has layout version ", h.layout_version,
         ", this library uses ", kLayoutVersion);
  }
  if (h.team_size != expected_team_size) {
    fail(Errc::segment_mismatch, "shared segment is for a team of ", h.team_size,
         ", this process expects ", expected_team_size);
  }
  SegmentLayout layout;
  try {
    layout = SegmentLayout::compute(h.team_size, h.slot_bytes, h.heap_bytes);
  } catch (const Error& error) {
    fail(Errc::segment_mismatch,
         "shared segment header describes no possible layout: ", error.what());
  }
  if (layout.slot_bytes != h.slot_bytes || layout.heap_bytes != h.heap_bytes ||
      layout.total_bytes != h.total_bytes || file_bytes != layout.total_bytes) {
    fail(Errc::segment_mismatch, "shared segment size ", file_bytes, " (header says ",
         h.total_bytes, ") does not match the layout for ", h.team_size, " ranks with ",
         h.slot_bytes, "-byte slots and ", h.heap_bytes, "-byte heaps (", layout.total_bytes,
         " bytes)");
  }
  void* base = mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) fail_errno("mmap of ", layout.total_bytes, " bytes of shared segment");
  Segment segment;
  segment.base_ = static_cast<std::byte*>(base);
  segment.layout_ = layout;
  return segment;
}

Segment::Segment(Segment&& other) noexcept : base_(other.base_), layout_(other.layout_) {
  other.base_ = nullptr;
}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (base_) munmap(base_, layout_.total_bytes);
    base_ = other.base_;
    layout_ = other.layout_;
    other.base_ = nullptr;
  }
  return *this;
}

Segment::~Segment() {
  if (base_) munmap(base_, layout_.total_bytes);
}

void Segment::prefault_own_pages(std::uint32_t rank) const {
  // Backs my control page and slots at once, failing cleanly where /dev/shm is too small for
  // the team (a store into a page tmpfs cannot back is a SIGBUS).
  const std::size_t bytes = kPageBytes + 2 * layout_.slot_bytes;
  if (madvise(&control(rank), bytes, MADV_POPULATE_WRITE) == 0) return;
  if (errno != EINVAL) {
    fail(Errc::out_of_memory, "rank ", rank, ": backing its ", bytes,
         " bytes of the shared segment failed (", populate_failure(errno), "): a team of ",
         layout_.team_size, " ", shared_memory_shortage(layout_.team_size * bytes));
  }
  // Kernels before 5.14 lack MADV_POPULATE_WRITE: store to the pages instead. The control page
  // is written through atomics only; touching it by reading a word would map a shared zero
  // page, so store to it (zeros are what a new segment holds anyway).
  std::memset(reinterpret_cast<std::byte*>(&control(rank)) + sizeof(RankControl), 0,
              kPageBytes - sizeof(RankControl));
  control(rank).round.store(0, std::memory_order_relaxed);
  for (std::uint32_t parity = 0; parity < 2; ++parity) {
    std::memset(slot(rank, parity), 0, layout_.slot_bytes);
  }
}

void Segment::abort(std::uint32_t failed_rank) const {
  std::uint32_t healthy = 0;
  header().abort_word.compare_exchange_strong(healthy, failed_rank + 1, std::memory_order_seq_cst);
  // Sleepers wait on round words (or, while joining, on joined words, or on released words);
  // wake them all so they look at the abort word.
  for (std::uint32_t rank = 0; rank < layout_.team_size; ++rank) {
    futex_wake_all(profile(rank).joined);
    futex_wake_all(control(rank).round);
    futex_wake_all(futex_word_of(control(rank).released));
  }
}

int Segment::aborted_by() const {
  return static_cast<int>(header().abort_word.load(std::memory_order_acquire)) - 1;
}

}  // namespace shmcoll::shm
