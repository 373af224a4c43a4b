// The datatype engine on long elements: one element of vector(N, 1, 2, i32) (a column, the
// everyday MPI pattern) against N elements of an i32 resized to 8 bytes, the same bytes in the
// same places. Each is timed packed in slot-sized windows (how the exchange moves it) and moved
// by a 2-rank allgather; runs interleave the two, and medians are reported with their ratio.
//
//   build/bin/shmcoll-bench-datatype [--elements N] [--runs R] [--window BYTES]
#include <sys/mman.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench_timing.hpp"
#include "shmcoll/shmcoll.hpp"

namespace {

using shmcoll::Datatype;
using shmcoll::Dtype;

using bench::median;
using bench::now_seconds;

// One layout of the data: `count` elements of `type`.
struct Layout {
  const char* name;
  Datatype type;
  std::int64_t count;
};

// Packs the whole stream in windows of `window` bytes, as the exchange does.
double time_windowed_pack(const Layout& layout, const std::vector<std::int32_t>& source,
                          std::vector<std::byte>& packed, std::size_t window) {
  const std::size_t bytes = layout.type.size() * std::size_t(layout.count);
  const double start = now_seconds();
  for (std::size_t offset = 0; offset < bytes; offset += window) {
    layout.type.pack_range(source.data(), layout.count, offset, window, packed.data() + offset);
  }
  return now_seconds() - start;
}

// A 2-rank allgather of the layout (each rank sends its column, receives both contiguously);
// the slowest rank's time, from shared memory.
double time_allgather(const Layout& layout, std::size_t elements) {
  auto* seconds = static_cast<double*>(
      mmap(nullptr, 2 * sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  shmcoll::run(2, {}, [&](shmcoll::Team& team) {
    std::vector<std::int32_t> send(2 * elements, team.rank());
    std::vector<std::int32_t> recv(2 * elements);
    team.barrier();
    const double start = now_seconds();
    team.allgather(send.data(), layout.count, layout.type, recv.data(), std::int64_t(elements),
                   Dtype::i32);
    seconds[team.rank()] = now_seconds() - start;
  });
  const double slowest = std::max(seconds[0], seconds[1]);
  munmap(seconds, 2 * sizeof(double));
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Packing and moving one long derived-type element against many short ones of the same "
      "bytes (medians of interleaved runs, and their ratio).\n"
      "Example: shmcoll-bench-datatype --elements 1048576 --runs 5"};
  std::size_t elements = 1 << 20;
  int runs = 5;
  std::size_t window = 256 << 10;
  app.add_option("--elements", elements, "ints in the column (N)")->check(CLI::PositiveNumber);
  app.add_option("--runs", runs, "interleaved runs; medians are reported")
      ->check(CLI::PositiveNumber);
  app.add_option("--window", window, "bytes packed per window (the slot size)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const auto n = std::int64_t(elements);
  const Layout layouts[] = {
      {"one element of vector(N, 1, 2, i32)", Datatype::vector(n, 1, 2, Dtype::i32), 1},
      {"N elements of i32 resized to 8 bytes", Datatype::resized(Dtype::i32, 0, 8), n},
  };
  std::vector<std::int32_t> source(2 * elements, 7);
  std::vector<std::byte> packed(4 * elements);
  std::vector<double> pack[2], move[2];
  for (int run = 0; run < runs; ++run) {
    for (int which = 0; which < 2; ++which) {
      pack[which].push_back(time_windowed_pack(layouts[which], source, packed, window));
      move[which].push_back(time_allgather(layouts[which], elements));
    }
  }
  std::printf("# N = %zu ints, %zu-byte windows, median of %d interleaved runs\n", elements, window,
              runs);
  std::printf("%-40s %14s %16s\n", "layout", "pack (ms)", "allgather (ms)");
  for (int which = 0; which < 2; ++which) {
    std::printf("%-40s %14.3f %16.3f\n", layouts[which].name, 1e3 * median(pack[which]),
                1e3 * median(move[which]));
  }
  std::printf("# one long element / many short ones: pack %.2fx, allgather %.2fx\n",
              median(pack[0]) / median(pack[1]), median(move[0]) / median(move[1]));
  return 0;
}
