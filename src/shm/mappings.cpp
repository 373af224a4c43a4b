#include "shm/mappings.hpp"

#include <numaif.h>
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace shmcoll::shm {

int prot_of(const Mapping& m) {
  return (m.perms[0] == 'r' ? PROT_READ : 0) | (m.perms[1] == 'w' ? PROT_WRITE : 0) |
         (m.perms[2] == 'x' ? PROT_EXEC : 0);
}

int policy_at(std::uintptr_t page) {
  int mode = -1;
  if (get_mempolicy(&mode, nullptr, 0, reinterpret_cast<void*>(page), MPOL_F_ADDR) != 0) return -1;
  return mode;
}

bool strict_overcommit() {
  static const bool strict = [] {
    const int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
    char mode = '0';
    if (fd >= 0) {
      if (read(fd, &mode, 1) != 1) mode = '0';
      close(fd);
    }
    return mode == '2';
  }();
  return strict;
}

bool private_anonymous(std::uintptr_t begin, std::uintptr_t end, const char* moved_name) {
  std::uintptr_t covered = begin;
  bool ok = true;
  for_each_mapping([&](const Mapping& m) {
    if (m.end <= covered) return true;
    const bool anonymous = std::strcmp(m.perms, "rw-p") == 0 && m.inode == 0 &&
                           (m.path[0] == '\0' || std::strcmp(m.path, "[heap]") == 0);
    const bool moved =
        std::strcmp(m.perms, "rw-s") == 0 && std::strstr(m.path, moved_name) != nullptr;
    if (m.begin > covered || !(anonymous || moved)) {
      ok = false;
      return false;
    }
    covered = m.end;
    return covered < end;
  });
  return ok && covered >= end;
}

bool keeps_nothing_a_move_drops(std::uintptr_t begin, std::uintptr_t end) {
  static constexpr const char* kDropped[] = {"lo", "hg", "dc", "wf", "dd", "um", "uw", "ui", "mg"};
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &from, &to) == 2 && line.find(':') > line.find(' ')) {
      if (from >= end) break;
      inside = to > begin;
      continue;
    }
    if (!inside) continue;
    unsigned long value = 0;
    if ((std::sscanf(line.c_str(), "AnonHugePages: %lu", &value) == 1 ||
         std::sscanf(line.c_str(), "ProtectionKey: %lu", &value) == 1) &&
        value != 0) {
      return false;
    }
    if (line.rfind("VmFlags:", 0) == 0) {
      std::istringstream flags(line.substr(8));
      for (std::string flag; flags >> flag;) {
        if (std::find(std::begin(kDropped), std::end(kDropped), flag) != std::end(kDropped)) {
          return false;
        }
      }
    }
  }
  return true;
}

bool on_my_stack(std::uintptr_t begin, std::uintptr_t end) {
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) return true;
  void* stack = nullptr;
  std::size_t bytes = 0;
  const int got = pthread_attr_getstack(&attributes, &stack, &bytes);
  pthread_attr_destroy(&attributes);
  const auto low = reinterpret_cast<std::uintptr_t>(stack);
  return got != 0 || (begin < low + bytes && end > low);
}

namespace {

// This process's /proc/self/pagemap, opened once per thread (each check would otherwise pay an
// open and a close) and again in a child after fork: an inherited descriptor reads the parent's
// pages. Per thread, so that the program's thread and the progress worker need no lock (which a
// fork could leave held in the child).
class Pagemap {
 public:
  ~Pagemap() {
    if (fd_ >= 0 && owner_ == getpid()) close(fd_);
  }
  int fd() {
    if (owner_ != getpid()) {
      if (fd_ >= 0) close(fd_);  // the parent's, inherited
      fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
      owner_ = getpid();
    }
    return fd_;
  }

 private:
  int fd_ = -1;
  pid_t owner_ = 0;
};
thread_local Pagemap pagemap;

}  // namespace

bool pages_present_and_shared(std::uintptr_t begin, std::uintptr_t end) {
  constexpr std::uint64_t kPresent = 1ull << 63, kFileOrShared = 1ull << 61;
  constexpr std::uintptr_t kPage = 4096;
  const int fd = pagemap.fd();
  if (fd < 0) return false;
  std::uint64_t entries[512];
  bool all = true;
  for (std::uintptr_t page = begin; all && page < end;) {
    const std::size_t wanted = std::min<std::size_t>(std::size(entries), (end - page) / kPage);
    const ssize_t got =
        pread(fd, entries, wanted * sizeof entries[0], off_t(page / kPage * sizeof entries[0]));
    if (got < 0 && errno == EINTR) continue;
    if (got < ssize_t(sizeof entries[0])) {
      all = false;
      break;
    }
    const std::size_t read = std::size_t(got) / sizeof entries[0];
    for (std::size_t i = 0; i < read; ++i) {
      all = all && (entries[i] & (kPresent | kFileOrShared)) == (kPresent | kFileOrShared);
    }
    page += read * kPage;
  }
  return all;
}

}  // namespace shmcoll::shm
