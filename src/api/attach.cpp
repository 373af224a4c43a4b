// Teams of processes that were not forked by shmcoll::run: shmcoll-run children and join().
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "api/launch_env.hpp"
#include "api/team_state.hpp"
#include "util/fail.hpp"

namespace shmcoll {

namespace {

std::atomic<bool> attached_to_launcher{false};

int env_int(const char* name) {
  const char* text = std::getenv(name);
  if (!text) {
    fail(Errc::invalid_argument, "Team::attach: ", name,
         " is not set; start this program with shmcoll-run");
  }
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < 0 || value > 1'000'000) {
    fail(Errc::invalid_argument, "Team::attach: ", name, "=\"", text, "\" is not a valid number");
  }
  return static_cast<int>(value);
}

constexpr int kJoinTimeoutMs = 60'000;

}  // namespace

Team Team::attach() {
  if (attached_to_launcher.load()) {
    fail(Errc::invalid_argument, "Team::attach: this process has already attached to its team");
  }
  const int rank = env_int(detail::kRankEnv);
  const int size = env_int(detail::kSizeEnv);
  const int fd = env_int(detail::kSegmentFdEnv);
  if (size < 1 || rank >= size) {
    fail(Errc::invalid_argument, "Team::attach: rank ", rank, " is out of range for size ", size);
  }
  const int core = std::getenv(detail::kCoreEnv) ? env_int(detail::kCoreEnv) : -1;
  shm::Segment segment = shm::Segment::from_fd(fd, static_cast<std::uint32_t>(size));
  ::close(fd);
  const auto tunables = coll::Tunables::from_env();
  // shmcoll-run has bound this process already; SHMCOLL_PLACEMENT is read here.
  const detail::RankSetup setup{detail::locate_rank(topo::Topology::shared(), core),
                                detail::placement_from(Options{})};
  Team team = detail::TeamAccess::make(std::move(segment), static_cast<std::uint32_t>(rank),
                                       tunables, setup);
  attached_to_launcher = true;
  return team;
}

std::string Team::unique_segment_name() {
  return shm::Segment::unique_name();
}

Team Team::join(const std::string& name, int rank, int size, const Options& options) {
  if (size < 1) fail(Errc::invalid_argument, "Team::join: size must be at least 1, got ", size);
  if (rank < 0 || rank >= size) {
    fail(Errc::invalid_argument, "Team::join: rank ", rank, " is out of range [0, ", size, ")");
  }
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos) {
    fail(Errc::invalid_argument, "Team::join: name \"", name,
         "\" must be one '/' followed by a name without '/'");
  }
  const auto team_size = static_cast<std::uint32_t>(size);
  const auto tunables = coll::Tunables::from_env();
  // The MPI launcher (or nobody) has bound this process: the tree follows where it runs.
  const topo::Topology& topology = topo::Topology::shared(options.topology);
  const detail::RankSetup setup{detail::locate_rank(topology, -1), detail::placement_from(options)};
  shm::Segment segment =
      rank == 0 ? shm::Segment::create_named(
                      name, team_size, detail::segment_sizes_for(options, tunables, team_size))
                : shm::Segment::open_named(name, team_size, kJoinTimeoutMs);
  // The last member to map the segment removes its name, so nothing outlives the team.
  if (segment.header().attached.fetch_add(1, std::memory_order_acq_rel) + 1 == team_size) {
    shm::Segment::unlink_name(name);
  }
  return detail::TeamAccess::make(std::move(segment), static_cast<std::uint32_t>(rank), tunables,
                                  setup);
}

}  // namespace shmcoll
