#include "shm/process_memory.hpp"

#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

namespace shmcoll::shm {

namespace {

// Drawn anew in each process that posts a note: a forked child would otherwise hold its parent's
// token at the same address, and ranks forked from one parent would all look alike.
struct Token {
  std::mutex mutex;
  pid_t owner = 0;
  std::uint64_t value = 0;
};
Token token;

std::atomic<std::uint64_t> blocks_read{0}, writes{0}, refused{0};

bool refuse() {
  refused.fetch_add(1, std::memory_order_relaxed);
  return false;
}

const std::uint64_t& my_token() {
  std::lock_guard lock(token.mutex);
  if (token.owner != getpid()) {
    std::uint64_t value = 0;
    while (getrandom(&value, sizeof value, 0) != ssize_t(sizeof value) && errno == EINTR) {
    }
    token.value = value | 1;  // never 0, which a read of zeroed memory would give
    token.owner = getpid();
  }
  return token.value;
}

}  // namespace

ProcessNote process_note(const std::byte* data, std::size_t bytes) {
  const std::uint64_t& token = my_token();
  return {reinterpret_cast<std::uint64_t>(data), bytes, reinterpret_cast<std::uint64_t>(&token),
          token};
}

bool read_process_memory(pid_t pid, const ProcessNote& note, std::size_t at, std::byte* to,
                         std::size_t n) {
  if (at > note.bytes || n > note.bytes - at) return false;
  std::uint64_t token = 0;
  iovec local[2] = {{&token, sizeof token}, {to, n}};
  iovec remote[2] = {{reinterpret_cast<void*>(note.token_address), sizeof token},
                     {reinterpret_cast<void*>(note.address + at), n}};
  const ssize_t got = process_vm_readv(pid, local, 2, remote, 2, 0);
  if (got < ssize_t(sizeof token) || token != note.token) return refuse();
  // The kernel may stop short (a fault in the remote range, a signal): go on from there.
  std::size_t done = std::size_t(got) - sizeof token;
  while (done < n) {
    iovec rest_local{to + done, n - done};
    iovec rest_remote{reinterpret_cast<void*>(note.address + at + done), n - done};
    const ssize_t more = process_vm_readv(pid, &rest_local, 1, &rest_remote, 1, 0);
    if (more <= 0) return refuse();
    done += std::size_t(more);
  }
  if (at == 0) blocks_read.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool write_process_memory(pid_t pid, const ProcessNote& note, std::size_t at, const std::byte* from,
                          std::size_t n) {
  if (at > note.bytes || n > note.bytes - at) return false;
  // The token first: a write, unlike a read, must never reach a process that only shares a pid.
  std::uint64_t token = 0;
  iovec local{&token, sizeof token};
  iovec remote{reinterpret_cast<void*>(note.token_address), sizeof token};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != ssize_t(sizeof token) ||
      token != note.token) {
    return refuse();
  }
  for (std::size_t done = 0; done < n;) {
    iovec rest_local{const_cast<std::byte*>(from) + done, n - done};
    iovec rest_remote{reinterpret_cast<void*>(note.address + at + done), n - done};
    const ssize_t more = process_vm_writev(pid, &rest_local, 1, &rest_remote, 1, 0);
    if (more <= 0) return refuse();
    done += std::size_t(more);
  }
  writes.fetch_add(1, std::memory_order_relaxed);
  return true;
}

ProcessCopyCounts process_copy_counts() {
  return {blocks_read.load(std::memory_order_relaxed),
          writes.load(std::memory_order_relaxed), refused.load(std::memory_order_relaxed)};
}

}  // namespace shmcoll::shm
