// Process-shared futex calls on 32-bit words inside the segment (never FUTEX_PRIVATE: the waiters
// are other processes).
#pragma once

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace shmcoll::shm {

// Sleeps while *word == expected, at most timeout_ns; spurious returns are fine for callers.
inline void futex_wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       long timeout_ns) {
  timespec timeout{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
  syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(&word), FUTEX_WAIT, expected, &timeout,
          nullptr, 0);
}

inline void futex_wake_all(const std::atomic<std::uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

// membarrier(2), global expedited: a full memory barrier on every CPU that runs a thread of a
// process that registered (sleepers use it so that publishers need no fence of their own).
// Registration is once per process; false where the kernel or a seccomp filter refuses it.
inline bool register_for_global_membarrier() {
  static const bool registered =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  return registered;
}
inline void global_membarrier() {
  syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace shmcoll::shm
