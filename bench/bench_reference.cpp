#include "bench_reference.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "topo/topology.hpp"

namespace bench {

namespace {

struct alignas(128) Line {
  std::atomic<std::uint64_t> value;
};

void wait_for(const Line& line, std::uint64_t value) {
  while (line.value.load(std::memory_order_acquire) < value) __builtin_ia32_pause();
}

constexpr int kSamples = 31;
constexpr int kTripsPerSample = 2000;

// lines[0]: A's line, lines[1]: B's line. Phase 1 ping-pong, phase 2 symmetric exchange.
void run_partner(Line* lines) {
  std::uint64_t step = 0;
  for (int i = 0; i < kSamples * kTripsPerSample; ++i) {
    ++step;
    wait_for(lines[0], step);
    lines[1].value.store(step, std::memory_order_release);
  }
  for (int i = 0; i < kSamples * kTripsPerSample; ++i) {
    ++step;
    lines[1].value.store(step, std::memory_order_release);
    wait_for(lines[0], step);
  }
}

void measure_lines(References& refs) {
  void* memory = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* lines = new (memory) Line[2]{};
  const shmcoll::topo::Topology machine("");  // the real cores, whatever SHMCOLL_TOPOLOGY says
  // The binding is for this measurement only: teams forked later inherit our CPU mask, and
  // unbound ranks must be free to run anywhere.
  cpu_set_t original;
  const bool restore = sched_getaffinity(0, sizeof original, &original) == 0;
  machine.bind_to_core(0);
  const pid_t parent = getpid();
  const pid_t partner = fork();
  if (partner == 0) {
    // The partner spins until its parent's lines move: it dies with the parent, whenever the
    // benchmark is killed (a parent already gone before the request counts too).
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
    machine.bind_to_core(1 % machine.core_count());
    run_partner(lines);
    _exit(0);
  }
  // Our side is the same in both phases (write, then wait for the partner); only the partner's
  // order differs, which turns a round trip into an exchange.
  std::uint64_t step = 0;
  auto median_trip = [&] {
    std::vector<double> samples;
    for (int sample = 0; sample < kSamples; ++sample) {
      const double start = now_seconds();
      for (int i = 0; i < kTripsPerSample; ++i) {
        ++step;
        lines[0].value.store(step, std::memory_order_release);
        wait_for(lines[1], step);
      }
      samples.push_back((now_seconds() - start) / kTripsPerSample);
    }
    return median(samples);
  };
  refs.line_round_trip_seconds = median_trip();
  refs.line_exchange_seconds = median_trip();
  waitpid(partner, nullptr, 0);
  munmap(memory, 4096);
  if (restore) sched_setaffinity(0, sizeof original, &original);
}

double measure_memcpy(std::size_t bytes) {
  std::vector<char> from(bytes, 1), to(bytes, 2);
  const int reps = static_cast<int>(
      std::clamp<std::size_t>((64u << 20) / std::max<std::size_t>(bytes, 1), 3, 10000));
  std::vector<double> samples;
  for (int sample = 0; sample < 11; ++sample) {
    const double start = now_seconds();
    for (int i = 0; i < reps; ++i) {
      std::memcpy(to.data(), from.data(), bytes);
      asm volatile("" : : "r"(to.data()) : "memory");
    }
    samples.push_back((now_seconds() - start) / reps);
  }
  return median(samples);
}

}  // namespace

double measure_line_exchange() {
  References refs;
  measure_lines(refs);
  return refs.line_exchange_seconds;
}

References measure_references(const std::vector<std::size_t>& memcpy_sizes) {
  References refs;
  measure_lines(refs);
  for (std::size_t bytes : memcpy_sizes) refs.memcpy_by_size[bytes] = measure_memcpy(bytes);
  return refs;
}

}  // namespace bench
