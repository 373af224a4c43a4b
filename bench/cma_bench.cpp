// shmcoll-bench-cma: what the kernel's cross-memory copy (CMA, process_vm_readv) gives here, beside
// a plain copy out of shared memory (what single copy from shared pages does) and a copy within
// one process (memcpy's floor). A reader process bound to the second core copies a buffer its
// parent, bound to the first, wrote; each size is timed over repeated calls (median), with the
// source on small pages and on transparent huge pages, and CMA both as one iovec and as one iovec
// per 4 KiB page. Issue 43 asks this before a CMA path is judged: whether it beats the two-copy
// pipeline through the segment (shmcoll-bench's own figures) on the machine at hand.
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "util/copy.hpp"

namespace {

constexpr std::size_t kPage = 4096, kHuge = 2 << 20;

void bind_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

std::byte* map(std::size_t bytes, bool shared, bool huge) {
  void* memory = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE,
                      (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  auto* aligned = reinterpret_cast<std::byte*>(
      (reinterpret_cast<std::uintptr_t>(memory) + kHuge - 1) & ~(kHuge - 1));
  if (huge) madvise(aligned, bytes, MADV_HUGEPAGE);
  std::memset(aligned, 1, bytes);
  return aligned;
}

// Seconds per copy of `bytes`, the median of `reps` copies done by `copy`.
template <typename Copy>
double time_copies(int reps, Copy&& copy) {
  copy();  // faults and first-touch paid before timing
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) {
    const double start = bench::now_seconds();
    copy();
    samples.push_back(bench::now_seconds() - start);
  }
  return bench::median(samples);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "What the kernel's cross-memory copy (process_vm_readv) gives on this machine, beside a copy "
      "out of shared memory and a copy within one process, reader and writer on two cores"};
  std::vector<std::string> size_names{"64K", "256K", "1M", "4M", "16M"};
  int reps = 200;
  app.footer("Example: shmcoll-bench-cma --sizes 256K,1M,4M --reps 300");
  app.add_option("--sizes", size_names, "buffer sizes (K, M suffixes)")->delimiter(',');
  app.add_option("--reps", reps, "copies timed per size and method (median)")
      ->check(CLI::Range(3, 100000));
  CLI11_PARSE(app, argc, argv);
  std::vector<std::size_t> sizes;
  for (const std::string& name : size_names) {
    char* end = nullptr;
    std::size_t value = std::strtoull(name.c_str(), &end, 10);
    if (*end == 'K' || *end == 'k') value <<= 10;
    if (*end == 'M' || *end == 'm') value <<= 20;
    if (value == 0 || value % kPage != 0) {
      std::fprintf(stderr, "--sizes: %s is not a positive multiple of 4 KiB\n", name.c_str());
      return 2;
    }
    sizes.push_back(value);
  }

  std::printf(
      "| bytes | memcpy in one process | from shared memory | CMA, one iovec | CMA, "
      "one iovec per page | CMA from huge pages | CMA / shared |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  bind_to(0);
  for (const std::size_t bytes : sizes) {
    std::byte* source = map(bytes, false, false);
    std::byte* huge_source = map(bytes, false, true);
    std::byte* shared_source = map(bytes, true, false);
    auto* results = reinterpret_cast<double*>(map(kPage, true, false));
    const pid_t writer = getpid();
    const pid_t reader = fork();
    if (reader == 0) {
      bind_to(1);
      std::byte* into = map(bytes, false, false);
      std::vector<iovec> pages(bytes / kPage), to_pages(bytes / kPage);
      for (std::size_t i = 0; i < pages.size(); ++i) {
        pages[i] = {source + i * kPage, kPage};
        to_pages[i] = {into + i * kPage, kPage};
      }
      auto read_from = [&](std::byte* from) {
        const iovec to{into, bytes}, remote{from, bytes};
        if (process_vm_readv(writer, &to, 1, &remote, 1, 0) != ssize_t(bytes)) {
          std::perror("process_vm_readv");
          _exit(1);
        }
      };
      results[0] = time_copies(reps, [&] { shmcoll::copy_bytes(into, shared_source, bytes); });
      results[1] = time_copies(reps, [&] { read_from(source); });
      results[2] = time_copies(reps, [&] {
        for (std::size_t at = 0; at < pages.size(); at += IOV_MAX) {
          const std::size_t n = std::min<std::size_t>(IOV_MAX, pages.size() - at);
          process_vm_readv(writer, &to_pages[at], n, &pages[at], n, 0);
        }
      });
      results[3] = time_copies(reps, [&] { read_from(huge_source); });
      _exit(0);
    }
    int status = 0;
    waitpid(reader, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    std::byte* local = map(bytes, false, false);
    const double in_process = time_copies(reps, [&] { shmcoll::copy_bytes(local, source, bytes); });
    auto us = [](double seconds) { return seconds * 1e6; };
    std::printf("| %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", bytes, us(in_process),
                us(results[0]), us(results[1]), us(results[2]), us(results[3]),
                results[1] / results[0]);
    for (std::byte* memory : {source, huge_source, shared_source, local}) munmap(memory, bytes);
  }
  std::printf("\nMedian µs per copy of %d; the reader on core 1, the writer on core 0.\n", reps);
  return 0;
}
