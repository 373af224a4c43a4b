#include "coll/tunables.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "shm/layout.hpp"
#include "util/fail.hpp"

namespace shmcoll::coll {

namespace {

// Defaults and the measurement behind each (2-core AMD EPYC VM, see README, Benchmarks).
constexpr TunableInfo kTunables[] = {
    {"SHMCOLL_SLOT_BYTES", "262144",
     "bytes of each of a rank's two data slots (= pipeline chunk); memory is 2 * size * slot"},
    {"SHMCOLL_ALLREDUCE_SMALL_MAX", "16384",
     "largest allreduce (bytes) where every rank reduces all slots itself"},
    {"SHMCOLL_REDUCE_SMALL_MAX", "16384",
     "largest reduce (bytes) where the root reduces all slots itself"},
    {"SHMCOLL_SLICES_MIN_RANKS", "3",
     "smallest team where large (all)reduces split the reduction into per-rank slices; at 2 ranks "
     "reading all slots is 1.7-2x faster (measured), above it slices move less data per rank"},
    {"SHMCOLL_SPIN_NS", "50000, or 2000 when ranks outnumber cores",
     "busy-wait before sleeping on a futex"},
    {"SHMCOLL_TIMEOUT_MS", "0 (off)", "a wait longer than this fails with timeout"},
    {"SHMCOLL_ALLREDUCE_ALGORITHM", "auto",
     "force allreduce_inline (<= 120 bytes), allreduce_all_read or allreduce_slices"},
    {"SHMCOLL_BCAST_ALGORITHM", "auto", "force bcast_inline (<= 120 bytes) or bcast_pipelined"},
    {"SHMCOLL_REDUCE_ALGORITHM", "auto",
     "force reduce_inline (<= 120 bytes), reduce_root_reads or reduce_slices"},
};

long long env_number(const char* name, long long fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  switch (*end) {  // size suffixes, as in 256K or 1M
    case 'K':
    case 'k':
      value <<= 10;
      ++end;
      break;
    case 'M':
    case 'm':
      value <<= 20;
      ++end;
      break;
    case 'G':
    case 'g':
      value <<= 30;
      ++end;
      break;
    default:
      break;
  }
  if (end == text || *end != '\0' || value < 0) {
    fail(Errc::invalid_argument, "environment variable ", name, "=\"", text,
         "\" is not a non-negative number (K, M, G suffixes allowed)");
  }
  return value;
}

int env_algorithm(const char* name, std::initializer_list<Algorithm> choices) {
  const char* text = std::getenv(name);
  if (!text || !*text || std::string(text) == "auto") return -1;
  std::string allowed = "auto";
  for (Algorithm candidate : choices) {
    if (std::string(text) == algorithm_name(candidate)) return static_cast<int>(candidate);
    allowed += std::string(", ") + algorithm_name(candidate);
  }
  fail(Errc::invalid_argument, "environment variable ", name, "=\"", text, "\" must be one of ",
       allowed);
}

}  // namespace

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::barrier_flat:
      return "barrier_flat";
    case Algorithm::bcast_inline:
      return "bcast_inline";
    case Algorithm::bcast_pipelined:
      return "bcast_pipelined";
    case Algorithm::reduce_inline:
      return "reduce_inline";
    case Algorithm::reduce_root_reads:
      return "reduce_root_reads";
    case Algorithm::reduce_slices:
      return "reduce_slices";
    case Algorithm::allreduce_inline:
      return "allreduce_inline";
    case Algorithm::allreduce_all_read:
      return "allreduce_all_read";
    case Algorithm::allreduce_slices:
      return "allreduce_slices";
  }
  return "?";
}

Tunables Tunables::from_env(std::uint32_t team_size) {
  const bool oversubscribed = team_size > static_cast<std::uint32_t>(sysconf(_SC_NPROCESSORS_ONLN));
  Tunables t;
  t.slot_bytes = static_cast<std::size_t>(env_number("SHMCOLL_SLOT_BYTES", 256 << 10));
  t.allreduce_small_max =
      static_cast<std::size_t>(env_number("SHMCOLL_ALLREDUCE_SMALL_MAX", 16 << 10));
  t.reduce_small_max = static_cast<std::size_t>(env_number("SHMCOLL_REDUCE_SMALL_MAX", 16 << 10));
  t.slices_min_ranks = static_cast<std::uint32_t>(env_number("SHMCOLL_SLICES_MIN_RANKS", 3));
  t.spin_ns = static_cast<long>(env_number("SHMCOLL_SPIN_NS", oversubscribed ? 2'000 : 50'000));
  t.timeout_ms = static_cast<long>(env_number("SHMCOLL_TIMEOUT_MS", 0));
  t.forced_allreduce = env_algorithm(
      "SHMCOLL_ALLREDUCE_ALGORITHM",
      {Algorithm::allreduce_inline, Algorithm::allreduce_all_read, Algorithm::allreduce_slices});
  t.forced_bcast = env_algorithm("SHMCOLL_BCAST_ALGORITHM",
                                 {Algorithm::bcast_inline, Algorithm::bcast_pipelined});
  t.forced_reduce = env_algorithm(
      "SHMCOLL_REDUCE_ALGORITHM",
      {Algorithm::reduce_inline, Algorithm::reduce_root_reads, Algorithm::reduce_slices});
  return t;
}

namespace {

// A forced algorithm applies where it can: an inline one only when the payload fits a message
// line. Otherwise: inline when it fits, else `larger`.
Algorithm choose(int forced, Algorithm inline_algorithm, std::size_t bytes, Algorithm larger) {
  const bool fits_message = bytes <= shm::kMessageBytes;
  const auto forced_algorithm = static_cast<Algorithm>(forced);
  if (forced >= 0 && (fits_message || forced_algorithm != inline_algorithm)) {
    return forced_algorithm;
  }
  return fits_message ? inline_algorithm : larger;
}

}  // namespace

Algorithm select_bcast(const Tunables& tunables, std::size_t bytes) {
  return choose(tunables.forced_bcast, Algorithm::bcast_inline, bytes, Algorithm::bcast_pipelined);
}

Algorithm select_reduce(const Tunables& tunables, std::size_t bytes, std::uint32_t ranks) {
  const bool slices = bytes > tunables.reduce_small_max && ranks >= tunables.slices_min_ranks;
  return choose(tunables.forced_reduce, Algorithm::reduce_inline, bytes,
                slices ? Algorithm::reduce_slices : Algorithm::reduce_root_reads);
}

Algorithm select_allreduce(const Tunables& tunables, std::size_t bytes, std::uint32_t ranks) {
  const bool slices = bytes > tunables.allreduce_small_max && ranks >= tunables.slices_min_ranks;
  return choose(tunables.forced_allreduce, Algorithm::allreduce_inline, bytes,
                slices ? Algorithm::allreduce_slices : Algorithm::allreduce_all_read);
}

std::span<const TunableInfo> tunable_table() {
  return kTunables;
}

}  // namespace shmcoll::coll
