// Teams of processes that were not forked by shmcoll::run: shmcoll-run children, join(), and the
// sub-teams split() makes of a team.
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/checks.hpp"
#include "api/invited_team.hpp"
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

// A process that joins a team of processes not forked together: the MPI launcher (or nobody) has
// bound it, and the tree follows where it runs.
detail::RankSetup setup_for(const Options& options) {
  const topo::Topology& topology = topo::Topology::shared(options.topology);
  return {detail::locate_rank(topology, -1), detail::placement_from(options),
          options.processes_share_cpus};
}

// The last member to map a named segment removes its name, so nothing outlives the team.
void count_attached(shm::Segment& segment, const std::string& name, std::uint32_t size) {
  if (segment.header().attached.fetch_add(1, std::memory_order_acq_rel) + 1 == size) {
    shm::Segment::unlink_name(name);
  }
}

// What each member says at a split: its color and key, and the name of the segment it would
// create should it lead its color's team (the leader's is used), so one exchange tells all.
struct SplitEntry {
  std::int32_t color;
  std::int32_t key;
  char segment_name[56];
};
static_assert(sizeof(SplitEntry) == 64);

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
  shm::Segment segment = shm::Segment::from_fd_closing(fd, static_cast<std::uint32_t>(size));
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
  const detail::RankSetup setup = setup_for(options);
  shm::Segment segment =
      rank == 0 ? shm::Segment::create_named(
                      name, team_size, detail::segment_sizes_for(options, tunables, team_size))
                : shm::Segment::open_named(name, team_size, kJoinTimeoutMs);
  count_attached(segment, name, team_size);
  return detail::TeamAccess::make(std::move(segment), static_cast<std::uint32_t>(rank), tunables,
                                  setup);
}

std::optional<Team> Team::split(int color, int key, const Options& options) {
  const detail::Call call{"split", state_};
  if (color < 0 && color != kNoColor) {
    detail::reject(call, "color ", color, " must be non-negative or Team::kNoColor");
  }
  SplitEntry mine{color, key, {}};
  if (color >= 0) {
    const std::string name = unique_segment_name();
    if (name.size() >= sizeof mine.segment_name) {
      fail(Errc::system_error, "split: segment name \"", name, "\" is too long");
    }
    std::memcpy(mine.segment_name, name.c_str(), name.size() + 1);
  }
  std::vector<SplitEntry> all(static_cast<std::size_t>(size()));
  allgather(&mine, sizeof mine, Dtype::byte, all.data(), sizeof mine, Dtype::byte);

  // My color's members in their new order: by key, then by rank here.
  std::vector<int> members;
  for (int member = 0; member < size(); ++member) {
    if (all[member].color == color) members.push_back(member);
  }
  std::ranges::stable_sort(members, {}, [&](int member) { return all[member].key; });
  const auto new_rank =
      static_cast<std::uint32_t>(std::ranges::find(members, rank()) - members.begin());
  const auto new_size = static_cast<std::uint32_t>(members.size());
  const std::string name = all[members.front()].segment_name;

  // Each leader creates its team's segment before anyone opens one, and every member learns
  // whether all leaders could (else the others would wait for a segment that never comes).
  const auto& state = *state_;
  std::optional<shm::Segment> segment;
  std::int32_t failure = 0, any_failure = 0;  // an Errc
  std::string why;
  if (color >= 0 && new_rank == 0) {
    try {
      segment = shm::Segment::create_named(
          name, new_size, detail::segment_sizes_for(options, state.tunables, new_size));
    } catch (const Error& error) {
      failure = static_cast<std::int32_t>(error.code());
      why = error.what();
    }
  }
  allreduce(&failure, &any_failure, 1, Dtype::i32, Op::max);
  if (any_failure != 0) {
    if (segment) shm::Segment::unlink_name(name);
    fail(static_cast<Errc>(any_failure), "split: ",
         why.empty() ? "a new team's leader could not create its segment (its error says why)"
                     : why);
  }
  if (color < 0) return std::nullopt;
  if (new_rank != 0) segment = shm::Segment::open_named(name, new_size, kJoinTimeoutMs);
  count_attached(*segment, name, new_size);
  const detail::RankSetup setup{state.location, detail::placement_from(options),
                                options.processes_share_cpus};
  return detail::TeamAccess::make(std::move(*segment), new_rank, state.tunables, setup);
}

namespace detail {

shm::Segment make_invited_segment(int size, const Options& options, TeamInvitation* invitation) {
  if (size < 1) fail(Errc::invalid_argument, "a team's size must be at least 1, got ", size);
  const auto team_size = static_cast<std::uint32_t>(size);
  int fd = -1;
  shm::Segment segment = shm::Segment::create_unlinked(
      team_size, segment_sizes_for(options, coll::Tunables::from_env(), team_size), &fd);
  struct stat info {};
  std::uint64_t id = 0;
  if (fstat(fd, &info) != 0 || getrandom(&id, sizeof id, 0) != sizeof id) {
    ::close(fd);
    fail(Errc::system_error, "naming a new team's segment: ", std::strerror(errno));
  }
  *invitation = {static_cast<std::int32_t>(getpid()), fd, info.st_ino, info.st_dev, (id >> 2) | 1};
  return segment;
}

shm::Segment open_invited_segment(const TeamInvitation& invitation, int size) {
  const std::string path =
      "/proc/" + std::to_string(invitation.pid) + "/fd/" + std::to_string(invitation.fd);
  // Rank 0 is briefly not dumpable while it makes a memfd (new_private_memfd), which refuses
  // others its /proc/<pid>/fd: a refusal is tried again for a few milliseconds.
  int fd = -1;
  for (int tries = 0;
       (fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC)) < 0 && errno == EACCES && tries < 20;
       ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (fd < 0) {
    fail(Errc::system_error, "opening the team's segment at ", path,
         " (held by its rank 0): ", std::strerror(errno));
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || info.st_ino != invitation.inode ||
      info.st_dev != invitation.device) {
    ::close(fd);
    fail(Errc::system_error, path,
         " is not the team's segment (rank 0 is in another PID namespace)");
  }
  return shm::Segment::from_fd_closing(fd, static_cast<std::uint32_t>(size));
}

void close_invitation(const TeamInvitation& invitation) {
  if (invitation.fd >= 0 && invitation.pid == getpid()) ::close(invitation.fd);
}

Team join_invited_team(shm::Segment segment, int rank, const Options& options) {
  return TeamAccess::make(std::move(segment), static_cast<std::uint32_t>(rank),
                          coll::Tunables::from_env(), setup_for(options));
}

}  // namespace detail

}  // namespace shmcoll
