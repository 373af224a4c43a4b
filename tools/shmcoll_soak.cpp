// shmcoll-soak: a long run of random mixed collectives on N forked ranks, every result checked
// against a reference computed from the inputs (the differential model, tests/differential.hpp),
// with each rank's private resident memory sampled after a warm-up and at the end. Exits 1 on
// any wrong result or when a rank's memory grew by more than --max-growth.
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <new>
#include <string>

#include "differential.hpp"

namespace {

using namespace shmcoll::differential;

constexpr int kMaxRanks = 64;

struct RankReport {
  long long checked = 0;
  long long wrong = 0;
  long rss_start_kib = 0;
  long rss_end_kib = 0;
};

// Filled in by every rank, read by the parent after the run.
struct Report {
  char first_problem[512];
  RankReport ranks[kMaxRanks];
};

// Private resident memory (RssAnon): what a leak grows. Shared pages of the segment that this
// rank touches (peers' heaps it reads directly) count in RSS too, but are bounded by the segment.
long private_resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stol(line.substr(8));
  }
  return -1;
}

Report* shared_report() {
  void* memory =
      mmap(nullptr, sizeof(Report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    std::perror("shmcoll-soak: mmap");
    std::exit(2);
  }
  return new (memory) Report{};
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 8;
  long long ops = 1'000'000;
  std::uint64_t seed = 1;
  long long warmup = 1000;
  long max_growth_kib = 16 * 1024;
  std::size_t slot_bytes = 0;
  std::int64_t largest = 3000;
  CLI::App app{
      "Random mixed collectives on N forked ranks, every result checked, resident memory "
      "sampled after a warm-up and at the end.\n"
      "Example: shmcoll-soak -n 8 --ops 1000000"};
  app.add_option("-n,--np", ranks, "ranks")->check(CLI::Range(1, kMaxRanks));
  app.add_option("--ops", ops, "collective calls each rank makes")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "seed of the call sequence (the same seed, the same calls)");
  app.add_option("--warmup", warmup, "calls before the first memory sample")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-growth", max_growth_kib,
                 "most KiB a rank's private resident memory may grow between the samples")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slot-bytes", slot_bytes, "slot size (0: SHMCOLL_SLOT_BYTES or the default)");
  app.add_option("--largest", largest,
                 "most elements of the one call in ten that may be large (i32 x 6 per rank pair "
                 "for data movement); the differential test goes to 40000")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  warmup = std::min(warmup, ops);

  Report* report = shared_report();
  const auto start = std::chrono::steady_clock::now();
  shmcoll::Options options;
  options.slot_bytes = slot_bytes;
  try {
    shmcoll::run(ranks, options, [&](shmcoll::Team& team) {
      const shmcoll::Op matrix = shmcoll::Op::create(shmcoll::testing::matrix_product, false);
      const TypeMenu menu;
      const std::vector<Reduction> reductions = reduction_menu(matrix);
      RankReport& mine = report->ranks[team.rank()];
      std::uint64_t digest = 0, common = 0;
      for (long long index = 0; index < ops; ++index) {
        if (index == warmup) mine.rss_start_kib = private_resident_kib();
        const Call call =
            describe_call(seed, static_cast<int>(index), team.size(), menu, reductions, largest);
        const std::string problem = run_and_check(team, call, menu, reductions, digest, common);
        ++mine.checked;
        if (!problem.empty() && mine.wrong++ == 0 && team.rank() == 0) {
          std::snprintf(report->first_problem, sizeof report->first_problem,
                        "call %lld (%s): rank %d: %s", index, shmcoll::collective_name(call.kind),
                        team.rank(), problem.c_str());
        }
        if (team.rank() == 0 && ops >= 100'000 && (index + 1) % (ops / 10) == 0) {
          const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
          std::fprintf(stderr, "shmcoll-soak: %lld of %lld calls, %.0f s\n", index + 1, ops,
                       took.count());
        }
      }
      if (warmup == ops) mine.rss_start_kib = private_resident_kib();
      mine.rss_end_kib = private_resident_kib();
    });
  } catch (const shmcoll::Error& error) {
    std::fprintf(stderr, "shmcoll-soak: %s\n", error.what());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  long long checked = 0, wrong = 0;
  long worst_growth = 0;
  std::printf(
      "rank  calls_checked  wrong  anon_rss_after_warmup_KiB  anon_rss_at_end_KiB  growth_KiB\n");
  for (int rank = 0; rank < ranks; ++rank) {
    const RankReport& r = report->ranks[rank];
    const long growth = r.rss_end_kib - r.rss_start_kib;
    std::printf("%4d  %13lld  %5lld  %25ld  %19ld  %10ld\n", rank, r.checked, r.wrong,
                r.rss_start_kib, r.rss_end_kib, growth);
    checked += r.checked;
    wrong += r.wrong;
    worst_growth = std::max(worst_growth, growth);
  }
  std::printf(
      "shmcoll-soak: %d ranks, %lld calls per rank (seed %llu), %lld results checked, %lld "
      "wrong, largest growth of private resident memory %ld KiB, %.1f s (%.0f calls/s per rank)\n",
      ranks, ops, static_cast<unsigned long long>(seed), checked, wrong, worst_growth, seconds,
      static_cast<double>(ops) / seconds);
  if (wrong > 0) std::printf("first wrong result: %s\n", report->first_problem);
  if (worst_growth > max_growth_kib) {
    std::printf("memory grew by %ld KiB, more than --max-growth %ld KiB\n", worst_growth,
                max_growth_kib);
  }
  return wrong == 0 && worst_growth <= max_growth_kib ? 0 : 1;
}
