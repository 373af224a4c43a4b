// The receiving side of shared pages (shared_pages.hpp): a peer's memfd, asked for by its key
// (descriptor_passing.hpp), mapped once and kept for later calls, within bounds.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "shm/descriptor_passing.hpp"
#include "shm/shared_pages.hpp"

namespace shmcoll::shm {

namespace {

constexpr std::size_t kMostPeerMappings = 32;  // then the least recently used is unmapped
// Nor more bytes than this, the one just mapped aside: a peer's mapping keeps its pages alive
// after their owner freed them, and so do a sender's retired descriptors (issue 43, row 10: a
// 64 MiB buffer allocated and freed per phase once left 2 GiB of shared memory behind).
constexpr std::size_t kMostPeerMappedBytes = std::size_t{256} << 20;

struct PeerMapping {
  std::int32_t pid;
  SharedPages theirs;
  bool writable;
  std::byte* base;
  std::uint64_t last_use;
};

class PeerMappings {
 public:
  std::byte* map(std::int32_t pid, const SharedPages& theirs, bool writable, std::string& why) {
    std::lock_guard lock(mutex_);
    ++clock_;
    for (PeerMapping& m : mappings_) {
      if (m.pid == pid && m.theirs.key == theirs.key && m.theirs.bytes >= theirs.bytes &&
          m.writable == writable) {
        m.last_use = clock_;
        return m.base;
      }
    }
    if (still_refused(pid, theirs.key, why)) return nullptr;
    const int fd = fetch_descriptor(pid, theirs.key, why);
    if (fd < 0) {
      refused(pid, theirs.key);
      return nullptr;
    }
    struct stat about {};
    void* base = MAP_FAILED;
    if (fstat(fd, &about) != 0 || std::size_t(about.st_size) < theirs.bytes) {
      why = "process " + std::to_string(pid) + "'s memfd is shorter than its note says";
    } else {
      // Not populated: the pages of a sparse allocation a call never reads stay unallocated.
      base =
          mmap(nullptr, theirs.bytes, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
      if (base == MAP_FAILED) why = std::string("mmap of a peer's memfd: ") + std::strerror(errno);
    }
    close(fd);
    if (base == MAP_FAILED) return nullptr;
    mappings_.push_back({pid, theirs, writable, static_cast<std::byte*>(base), clock_});
    mapped_bytes_ += theirs.bytes;
    // The least recently used go (never the one just mapped, the most recent).
    while (mappings_.size() > kMostPeerMappings ||
           (mappings_.size() > 1 && mapped_bytes_ > kMostPeerMappedBytes)) {
      auto oldest = std::min_element(
          mappings_.begin(), mappings_.end(),
          [](const PeerMapping& a, const PeerMapping& b) { return a.last_use < b.last_use; });
      munmap(oldest->base, oldest->theirs.bytes);
      mapped_bytes_ -= oldest->theirs.bytes;
      mappings_.erase(oldest);
    }
    return static_cast<std::byte*>(base);
  }

 private:
  // A memfd its owner did not hand out (its server stopped, busy or gone: a fetch may have waited
  // seconds) is not asked for again on the next uses, but only after 1, 2, 4, ... up to 1,024
  // of them: every use would otherwise cost the same wait again.
  struct Refusal {
    std::int32_t pid;
    std::uint64_t key;
    unsigned times;
    unsigned uses_to_skip;
  };
  static constexpr unsigned kMostDoublings = 10;  // then every 1,024th use asks again
  static constexpr std::size_t kMostRefusals = 32;

  bool still_refused(std::int32_t pid, std::uint64_t key, std::string& why) {
    for (Refusal& r : refusals_) {
      if (r.pid != pid || r.key != key || r.uses_to_skip == 0) continue;
      --r.uses_to_skip;
      why = "process " + std::to_string(pid) + " did not hand out that memory lately";
      return true;
    }
    return false;
  }
  void refused(std::int32_t pid, std::uint64_t key) {
    auto r = std::find_if(refusals_.begin(), refusals_.end(),
                          [&](const Refusal& x) { return x.pid == pid && x.key == key; });
    if (r == refusals_.end()) {
      if (refusals_.size() == kMostRefusals) refusals_.erase(refusals_.begin());
      refusals_.push_back({pid, key, 0, 0});
      r = refusals_.end() - 1;
    }
    r->uses_to_skip = 1u << std::min(r->times, kMostDoublings);
    ++r->times;
  }

  std::mutex mutex_;
  std::vector<Refusal> refusals_;  // oldest first
  std::vector<PeerMapping> mappings_;
  std::size_t mapped_bytes_ = 0;
  std::uint64_t clock_ = 0;
};

PeerMappings& peer_mappings() {
  static PeerMappings* mappings = new PeerMappings;  // never destroyed: peers' calls may outlive
  return *mappings;
}

}  // namespace

const std::byte* map_peer_pages(std::int32_t pid, const SharedPages& theirs, std::string& why) {
  return peer_mappings().map(pid, theirs, false, why);
}

std::byte* map_peer_pages_to_write(std::int32_t pid, const SharedPages& theirs, std::string& why) {
  return peer_mappings().map(pid, theirs, true, why);
}

}  // namespace shmcoll::shm
