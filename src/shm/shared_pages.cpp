#include "shm/shared_pages.hpp"

#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "shm/descriptor_passing.hpp"
#include "shm/fork_child.hpp"
#include "shm/mappings.hpp"

namespace shmcoll::shm {

namespace {

constexpr std::uintptr_t kPage = 4096;
constexpr char kMemfdName[] = "shmcoll-pages";
constexpr unsigned kUsesToPay = 8;              // uses of moved pages that make their move worth it
constexpr std::size_t kMostRegistrations = 16;  // then the least recently used is forgotten
constexpr std::size_t kMostMovedRanges = 64;    // then the two nearest merge
constexpr std::size_t kRetiredDescriptors = 16;  // of forgotten registrations, kept open
constexpr std::size_t kMostRetiredBytes = std::size_t{256} << 20;  // nor more bytes than this

// Set once any page has moved (cleared in a forked child): until then madvise and fork cost
// nothing more.
std::atomic<bool> anything_moved{false};

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}
std::byte* pointer(std::uintptr_t a) {
  return reinterpret_cast<std::byte*>(a);
}

bool is_moved_page_mapping(const Mapping& m) {
  return std::strstr(m.path, kMemfdName) != nullptr;
}

// Replaces the pages [begin, end) by fresh zero pages with protection `prot`, as a discarding
// madvise leaves private memory. False when they stay as they were.
bool make_zero_pages(std::uintptr_t begin, std::uintptr_t end, int prot) {
  return mmap(pointer(begin), end - begin, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
         MAP_FAILED;
}

struct Registration {
  SharedPages pages;
  std::uint64_t last_use = 0;
  unsigned uses = 0;
  bool allocated = false;  // by allocate_shared_pages: kept until freed, never forgotten for age
  std::uintptr_t end() const { return address(pages.begin) + pages.bytes; }
};

struct Sighting {
  std::uintptr_t begin = 0, end = 0;
  unsigned uses = 0;
  unsigned times_unpaid = 0;  // moved, then unmapped or replaced before kUsesToPay uses
  bool refused = false;       // not private anonymous memory, or the move failed: not tried again
  std::uint64_t last_use = 0;
};

struct Range {
  std::uintptr_t begin, end;
};

class Registry {
 public:
  static Registry& instance() {
    static Registry* registry = new Registry;  // never destroyed: used from atfork and madvise
    return *registry;
  }

  std::optional<SharedPages> pages_for(std::uintptr_t begin, std::uintptr_t end, bool may_move) {
    std::lock_guard lock(mutex_);
    ++clock_;
    for (std::size_t i = registrations_.size(); i-- > 0;) {
      Registration& r = registrations_[i];
      if (end <= address(r.pages.begin) || begin >= r.end()) continue;
      // Allocated memory is the library's until the program frees it through the library; only
      // moved pages can go stale under the program's own calls.
      if (!r.allocated && !pages_present_and_shared(address(r.pages.begin), r.end())) {
        // Unmapped or replaced since: whatever is left of it stays shared, harmlessly. A buffer
        // allocated and freed around every few calls would pay the move again and again: after
        // twice, it stays with the copy path.
        Sighting& sighting = sighting_of(address(r.pages.begin), r.end());
        sighting.uses = 0;
        sighting.refused = r.uses < kUsesToPay && ++sighting.times_unpaid >= 2;
        forget(i);
        continue;
      }
      if (address(r.pages.begin) <= begin && end <= r.end()) {
        r.last_use = clock_;
        ++r.uses;
        return r.pages;
      }
      // A wider buffer may take in registrations it covers (a program calls with parts of a
      // buffer, then with all of it); buffers that cross take turns with the copy path, not
      // moving pages back and forth.
      if (address(r.pages.begin) < begin || r.end() > end) return {};
    }
    if (!may_move) return {};
    Sighting& sighting = sighting_of(begin, end);
    sighting.last_use = clock_;
    if (sighting.refused || ++sighting.uses < kUsesBeforeSharing) return {};
    std::optional<SharedPages> moved = move(begin, end);
    sighting.refused = !moved;
    return moved;
  }

  std::size_t count() {
    std::lock_guard lock(mutex_);
    return registrations_.size();
  }

  // A new descriptor of the memfd that `key` names, for a peer (descriptor_passing.hpp): of a
  // live registration, or of a forgotten one still kept open; -1 for any other key.
  static int descriptor_of(std::uint64_t key) {
    Registry& registry = instance();
    std::lock_guard lock(registry.mutex_);
    int fd = -1;
    for (const Registration& r : registry.registrations_) {
      if (r.pages.key == key) fd = r.pages.fd;
    }
    for (const Retired& r : registry.retired_) {
      if (r.key == key) fd = r.fd;
    }
    return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
  }

  void* allocate(std::size_t bytes) {
    bytes = (bytes + kPage - 1) & ~(kPage - 1);
    std::lock_guard lock(mutex_);
    if (bytes == 0 || allocations_.size() == kMostAllocations ||
        !serve_descriptors(descriptor_of)) {
      return nullptr;
    }
    const int fd = new_private_memfd(kMemfdName);
    if (fd < 0) return nullptr;
    void* memory = MAP_FAILED;
    if (ftruncate(fd, off_t(bytes)) == 0) {
      memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    // Pages are allocated as they are first touched, where the toucher runs, as private memory
    // is: a sparse window or hash table commits only what it uses. A memfd has no size limit of
    // its own, so a touch fails only where private memory would (out of memory), except under
    // strict overcommit, which charges private memory when it is mapped but a memfd's pages when
    // they are touched: there every page is allocated now, or the memory is not there.
    if (memory != MAP_FAILED && strict_overcommit() && fallocate(fd, 0, 0, off_t(bytes)) != 0) {
      munmap(memory, bytes);
      memory = MAP_FAILED;
    }
    if (memory == MAP_FAILED) {
      close(fd);
      return nullptr;
    }
    const std::uintptr_t begin = address(memory);
    allocations_.push_back({begin, begin + bytes});
    registrations_.push_back(
        {{pointer(begin), bytes, fd, new_memfd_key()}, ++clock_, kUsesToPay, true});
    remember_moved({begin, begin + bytes});
    anything_moved.store(true, std::memory_order_release);
    return memory;
  }

  bool free(void* memory) {
    std::lock_guard lock(mutex_);
    const auto allocation = std::find_if(allocations_.begin(), allocations_.end(),
                                         [&](Range r) { return r.begin == address(memory); });
    if (allocation == allocations_.end()) return false;
    for (std::size_t i = registrations_.size(); i-- > 0;) {
      const Registration& r = registrations_[i];
      if (address(r.pages.begin) >= allocation->end || r.end() <= allocation->begin) continue;
      if (!r.allocated) {
        forget(i);
        continue;
      }
      // Its memory goes now, whoever still maps it: peers keep mappings of it cached, which no
      // call names again (a new memfd has a new key). No call can still be reading it: the
      // program frees memory only once its calls on it completed, and a call completes once
      // every peer is done with it. Punched out, not cut short: a forked child's view of it
      // (after_fork_in_child) then reads zeros where it wrote nothing, never SIGBUS.
      fallocate(r.pages.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(r.pages.bytes));
      close(r.pages.fd);
      registrations_.erase(registrations_.begin() + std::ptrdiff_t(i));
    }
    munmap(memory, allocation->end - allocation->begin);
    allocations_.erase(allocation);
    return true;
  }

  // madvise(begin, bytes, a discarding advice): moved pages in the range become zero pages, as
  // private memory would.
  void discard(std::uintptr_t begin, std::uintptr_t end) {
    std::lock_guard lock(mutex_);
    if (!near_moved(begin, end)) return;
    for (std::size_t i = registrations_.size(); i-- > 0;) {
      if (begin < registrations_[i].end() && end > address(registrations_[i].pages.begin)) {
        forget(i);
      }
    }
    std::vector<std::pair<Range, int>> found;
    for_each_mapping([&](const Mapping& m) {
      if (is_moved_page_mapping(m) && begin < m.end && end > m.begin) {
        found.push_back({{std::max(begin, m.begin), std::min(end, m.end)}, prot_of(m)});
      }
      return true;
    });
    for (const auto& [range, prot] : found) make_zero_pages(range.begin, range.end, prot);
  }

  // pthread_atfork. Before fork returns in it, the child makes every page this process shares
  // its own, and nothing waits in the parent. Memory allocated as shared pages (MPI_Alloc_mem) it
  // views copy on write: its writes stay its own, no page is copied until it writes it (a fork
  // costs what it costs without the layer), and a page it has not written shows what the memfd
  // holds, the parent's (and its peers') writes since the fork included, as a private mapping of
  // a file does (docs/limits.md says what a child may rely on). Moved pages, the program's own
  // memory (the opt-in), it copies into private memory, so that they stay what they were before
  // the move: anonymous memory that mremap may grow and a later move may take again. While it
  // copies, the parent waits: its writes to moved pages (its heap's own bookkeeping, where moved
  // pages were reused) would otherwise show in the copy. A thread of the parent that writes moved
  // pages while another forks still can; POSIX lets such a child call only async-signal-safe
  // functions until it execs anyway.
  void before_fork() {
    mutex_.lock();
    fork_pipe_[0] = fork_pipe_[1] = -1;
    if (program_pages_moved_) pipe2(fork_pipe_, O_CLOEXEC);
  }
  void after_fork_in_parent() {
    if (fork_pipe_[1] >= 0) {
      close(fork_pipe_[1]);
      char byte;
      while (read(fork_pipe_[0], &byte, 1) < 0 && errno == EINTR) {
      }
      close(fork_pipe_[0]);
    }
    mutex_.unlock();
  }
  void after_fork_in_child() {
    if (anything_moved.load(std::memory_order_relaxed)) {
      // The allocations' memfds, by inode: a shared mapping of one is viewed privately; any
      // other (moved pages) is copied.
      struct Held {
        std::uint64_t inode;
        int fd;
      };
      std::array<Held, kMostAllocations> held{};
      std::size_t held_count = 0;
      for (const Registration& r : registrations_) {
        struct stat about {};
        if (r.allocated && held_count < held.size() && fstat(r.pages.fd, &about) == 0) {
          held[held_count++] = {std::uint64_t(about.st_ino), r.pages.fd};
        }
      }
      auto allocation_of_inode = [&](std::uint64_t inode) {
        for (std::size_t i = 0; i < held_count; ++i) {
          if (held[i].inode == inode) return held[i].fd;
        }
        return -1;
      };
      // This process's own shared pages (not its views of peers', named alike, which may be
      // stale), collected first, as many as fit, then again while there were more: replacing
      // mappings while reading the maps file could skip lines. A replaced mapping is private, so
      // it is not found again.
      std::array<Mapping, 128> found;
      for (bool more = true; more;) {
        std::size_t count = 0;
        for_each_mapping([&](const Mapping& m) {
          if (m.perms[3] == 's' && is_moved_page_mapping(m) && near_moved(m.begin, m.end)) {
            found[count] = m;
            found[count++].path = "";
          }
          return count < found.size();
        });
        for (std::size_t i = 0; i < count; ++i) {
          const Mapping& m = found[i];
          const int fd = allocation_of_inode(m.inode);
          const bool own = fd >= 0
                               ? view_privately_in_child(m.begin, m.end, prot_of(m), fd, m.offset)
                               : copy_privately_in_child(m.begin, m.end, prot_of(m));
          if (!own) refuse_in_child(m.begin, m.end);
        }
        more = count == found.size();
      }
      for (const Registration& r : registrations_) close(r.pages.fd);
      for (const Retired& r : retired_) close(r.fd);
      registrations_.clear();
      retired_.clear();
      retired_bytes_ = 0;
      program_pages_moved_ = false;
      // moved_ and anything_moved stay: the child's views of allocations are named as shared
      // pages are, and a madvise that discards them must leave zero pages, as on private memory
      // (discard).
    }
    if (fork_pipe_[1] >= 0) {
      close(fork_pipe_[0]);
      close(fork_pipe_[1]);  // the parent's read returns
    }
    mutex_.unlock();
  }

 private:
  Registry() {
    registrations_.reserve(kMostRegistrations + kMostAllocations);
    allocations_.reserve(kMostAllocations);
    retired_.reserve(kRetiredDescriptors + 1);
    moved_.reserve(kMostMovedRanges + 1);
    pthread_atfork([] { instance().before_fork(); }, [] { instance().after_fork_in_parent(); },
                   [] { instance().after_fork_in_child(); });
  }

  Sighting& sighting_of(std::uintptr_t begin, std::uintptr_t end) {
    Sighting* oldest = &sightings_[0];
    for (Sighting& s : sightings_) {
      if (s.begin == begin && s.end == end) return s;
      if (s.last_use < oldest->last_use) oldest = &s;
    }
    *oldest = Sighting{begin, end};
    return *oldest;
  }

  // Moves [begin, end) onto a new memfd (see the header); nullopt, with nothing changed, when
  // the memory does not qualify or the memfd cannot hold it.
  std::optional<SharedPages> move(std::uintptr_t begin, std::uintptr_t end) {
    const std::size_t bytes = end - begin;
    for (const std::uintptr_t page : {begin, end - kPage}) {
      if (policy_at(page) != MPOL_DEFAULT) return {};
    }
    if (on_my_stack(begin, end) || !private_anonymous(begin, end, kMemfdName) ||
        !keeps_nothing_a_move_drops(begin, end) || !serve_descriptors(descriptor_of)) {
      return {};
    }
    const int fd = new_private_memfd(kMemfdName);
    if (fd < 0) return {};
    auto give_up = [&] {
      close(fd);
      return std::nullopt;
    };
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) return give_up();
    for (std::size_t done = 0; done < bytes;) {  // allocates the pages: no SIGBUS later
      const ssize_t wrote = pwrite(fd, pointer(begin + done), bytes - done, off_t(done));
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) return give_up();
      done += static_cast<std::size_t>(wrote);
    }
    // Populated: every page present, as pages_present_and_shared expects of moved pages.
    if (mmap(pointer(begin), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
             fd, 0) == MAP_FAILED) {
      return give_up();  // the old pages may be gone; the program will fault, not read wrong data
    }
    forget_the_oldest_if_full();
    for (std::size_t i = registrations_.size(); i-- > 0;) {
      const Registration& r = registrations_[i];
      if (address(r.pages.begin) >= begin && r.end() <= end) forget(i);  // taken in
    }
    const SharedPages pages{pointer(begin), bytes, fd, new_memfd_key()};
    registrations_.push_back({pages, clock_, 1});
    remember_moved({begin, end});
    program_pages_moved_ = true;
    anything_moved.store(true, std::memory_order_release);
    return pages;
  }

  // Forgets the least recently used registration once kMostRegistrations were moved (allocated
  // ones are not counted: they stay until freed).
  void forget_the_oldest_if_full() {
    std::size_t moved = 0, oldest = registrations_.size();
    for (std::size_t i = 0; i < registrations_.size(); ++i) {
      if (registrations_[i].allocated) continue;
      ++moved;
      if (oldest == registrations_.size() ||
          registrations_[i].last_use < registrations_[oldest].last_use) {
        oldest = i;
      }
    }
    if (moved >= kMostRegistrations) forget(oldest);
  }

  // Stops handing out registration i. Its pages stay mapped where the program has them: they are
  // the program's memory (madvise and fork still find them by name). Its descriptor stays open
  // while fewer than kRetiredDescriptors (and kMostRetiredBytes) more are forgotten: a call of
  // another thread, or a nonblocking one, may have named it to a peer that has yet to open it
  // (one that comes too late takes the copy path).
  void forget(std::size_t i) {
    const SharedPages& pages = registrations_[i].pages;
    retired_.push_back({pages.fd, pages.bytes, pages.key});
    retired_bytes_ += registrations_[i].pages.bytes;
    registrations_.erase(registrations_.begin() + std::ptrdiff_t(i));
    while (retired_.size() > kRetiredDescriptors ||
           (retired_.size() > 1 && retired_bytes_ > kMostRetiredBytes)) {
      close(retired_.front().fd);
      retired_bytes_ -= retired_.front().bytes;
      retired_.erase(retired_.begin());
    }
  }

  // Whether [begin, end) overlaps where this process's own shared pages may be.
  bool near_moved(std::uintptr_t begin, std::uintptr_t end) const {
    return std::any_of(moved_.begin(), moved_.end(),
                       [&](const Range& r) { return begin < r.end && end > r.begin; });
  }

  // Where moved pages may be, as few ranges: madvise looks at the maps only near them.
  void remember_moved(Range range) {
    moved_.push_back(range);
    if (moved_.size() <= kMostMovedRanges) return;
    std::sort(moved_.begin(), moved_.end(), [](Range a, Range b) { return a.begin < b.begin; });
    std::size_t nearest = 0;
    for (std::size_t i = 1; i + 1 < moved_.size(); ++i) {
      if (moved_[i + 1].begin - moved_[i].end < moved_[nearest + 1].begin - moved_[nearest].end) {
        nearest = i;
      }
    }
    moved_[nearest].end = std::max(moved_[nearest].end, moved_[nearest + 1].end);
    moved_.erase(moved_.begin() + std::ptrdiff_t(nearest) + 1);
  }

  std::mutex mutex_;
  std::vector<Registration> registrations_;
  std::array<Sighting, 16> sightings_{};
  std::vector<Range> moved_;
  struct Retired {
    int fd;
    std::size_t bytes;
    std::uint64_t key;
  };
  std::vector<Retired> retired_;  // descriptors of forgotten registrations, oldest first
  std::size_t retired_bytes_ = 0;
  std::vector<Range> allocations_;  // by allocate_shared_pages; kept in a forked child, whose copy
                                    // of them its own free unmaps
  std::uint64_t clock_ = 0;
  bool program_pages_moved_ = false;  // by move(): a fork copies them (after_fork_in_child)
  int fork_pipe_[2] = {-1, -1};
};

bool discards(int advice) {
  return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE
#ifdef MADV_DONTNEED_LOCKED
         || advice == MADV_DONTNEED_LOCKED
#endif
      ;
}

}  // namespace

std::optional<SharedPages> shared_pages_for(const std::byte* data, std::size_t bytes,
                                            bool may_move) {
  const std::uintptr_t begin = (address(data) + kPage - 1) & ~(kPage - 1);
  const std::uintptr_t end = (address(data) + bytes) & ~(kPage - 1);
  if (end <= begin) return std::nullopt;
  if (!may_move && !anything_moved.load(std::memory_order_acquire)) return std::nullopt;
  return Registry::instance().pages_for(begin, end, may_move);
}

void* allocate_shared_pages(std::size_t bytes) {
  return Registry::instance().allocate(bytes);
}

bool free_shared_pages(void* begin) {
  return Registry::instance().free(begin);
}

std::size_t shared_page_registrations() {
  return Registry::instance().count();
}

}  // namespace shmcoll::shm

// Programs and allocators that discard pages with madvise expect zeros back from private
// memory, where moved pages would keep their contents (jemalloc counts on it). glibc's own
// calls do not come through here, and do not count on it.
extern "C" __attribute__((visibility("default"))) int madvise(void* addr, std::size_t length,
                                                              int advice) {
  if (shmcoll::shm::anything_moved.load(std::memory_order_acquire) &&
      shmcoll::shm::discards(advice) && length > 0) {
    const auto begin = reinterpret_cast<std::uintptr_t>(addr);
    shmcoll::shm::Registry::instance().discard(begin, begin + length);
  }
  return static_cast<int>(syscall(SYS_madvise, addr, length, advice));
}
