// The shared segment: joining by name (the MPI layer's path), name removal, and refusal of
// segments with a wrong magic, layout version, team size or file size.
#include "shm/segment.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "api/invited_team.hpp"
#include "shm/layout.hpp"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Errc;
namespace shm = shmcoll::shm;

bool name_exists(const std::string& name) {
  return access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

// Each member's part of a team of 3: the sum of rank + 1 over the team (6).
bool sums_ranks(shmcoll::Team& team) {
  std::int64_t value = team.rank() + 1, sum = 0;
  team.allreduce(&value, &sum, 1, shmcoll::Dtype::i64, shmcoll::Op::sum);
  return sum == 6;
}

void expect_children_passed(const std::vector<pid_t>& children) {
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
}

TEST(Join, ProcessesNotForkedTogetherFormATeamAndTheNameIsRemoved) {
  const std::string name = shmcoll::Team::unique_segment_name();
  constexpr int kSize = 3;
  const std::vector<pid_t> children = shmcoll::testing::fork_members(kSize, [&](int rank) {
    shmcoll::Team team = shmcoll::Team::join(name, rank, kSize);
    return sums_ranks(team) ? 0 : 2;
  });
  shmcoll::Team team = shmcoll::Team::join(name, 0, kSize);
  EXPECT_FALSE(name_exists(name)) << "the name must be gone once every member has mapped it";
  EXPECT_TRUE(sums_ranks(team));
  expect_children_passed(children);
}

TEST(Join, SegmentIsPrivateToItsOwner) {
  const std::string name = shmcoll::Team::unique_segment_name();
  shm::Segment segment = shm::Segment::create_named(name, 2, 4096);
  struct stat info {};
  ASSERT_EQ(stat(("/dev/shm" + name).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  shm::Segment::unlink_name(name);
}

// The MPI layer's teams: rank 0's segment never has a name, the others open it through rank 0's
// descriptor, and a member killed at any moment leaves nothing in /dev/shm.
TEST(InvitedTeam, MembersOpenRankZerosSegmentThroughItsDescriptorAndNoNameEverExists) {
  constexpr int kSize = 3;
  const auto entries_before = shmcoll::testing::dev_shm_entries();
  shmcoll::detail::TeamInvitation invitation;
  shm::Segment segment = shmcoll::detail::make_invited_segment(kSize, {}, &invitation);
  EXPECT_EQ(shmcoll::testing::dev_shm_entries(), entries_before)
      << "the segment has a name in /dev/shm";
  EXPECT_NE(invitation.id, 0u);
  const std::vector<pid_t> children = shmcoll::testing::fork_members(kSize, [&](int rank) {
    shmcoll::Team team = shmcoll::detail::join_invited_team(
        shmcoll::detail::open_invited_segment(invitation, kSize), rank, {});
    return sums_ranks(team) ? 0 : 2;
  });
  shmcoll::Team team = shmcoll::detail::join_invited_team(std::move(segment), 0, {});
  shmcoll::detail::close_invitation(invitation);
  EXPECT_TRUE(sums_ranks(team));
  expect_children_passed(children);
}

TEST(InvitedTeam, AnInvitationThatNamesAnotherFileIsRefused) {
  shmcoll::detail::TeamInvitation invitation;
  shm::Segment segment = shmcoll::detail::make_invited_segment(2, {}, &invitation);
  shmcoll::detail::TeamInvitation wrong = invitation;
  wrong.inode += 1;  // as where rank 0's pid names another process here (another PID namespace)
  try {
    shmcoll::detail::open_invited_segment(wrong, 2);
    ADD_FAILURE() << "a descriptor of another file was taken for the team's segment";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), Errc::system_error);
    EXPECT_NE(std::string(error.what()).find("is not the team's segment"), std::string::npos)
        << error.what();
  }
  shmcoll::detail::close_invitation(invitation);
}

// Writes a segment under `name` with the given identity and file size.
void write_fake_segment(const std::string& name, shm::SegmentIdentity identity, std::size_t bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  void* page = mmap(nullptr, shm::kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  auto* header = new (page) shm::SegmentHeader{};
  header->identity = identity;
  header->initialized.store(1);
  munmap(page, shm::kPageBytes);
  close(fd);
}

void expect_refused(shm::SegmentIdentity identity, std::size_t bytes, int team_size,
                    const char* word) {
  const std::string name = shmcoll::Team::unique_segment_name();
  write_fake_segment(name, identity, bytes);
  try {
    shmcoll::Team::join(name, 1, team_size);
    ADD_FAILURE() << "a bad segment was accepted (expected complaint about " << word << ")";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), Errc::segment_mismatch) << error.what();
    EXPECT_NE(std::string(error.what()).find(word), std::string::npos) << error.what();
  }
  shm::Segment::unlink_name(name);
}

TEST(Validation, WrongMagicVersionTeamSizeOrFileSizeIsRefused) {
  const shm::SegmentLayout layout = shm::SegmentLayout::compute(2, 4096, 8192);
  const shm::SegmentIdentity good{shm::kMagic,       shm::kLayoutVersion, 2,
                                  layout.slot_bytes, layout.heap_bytes,   layout.total_bytes};
  shm::SegmentIdentity bad_magic = good;
  bad_magic.magic = 0x1234;
  expect_refused(bad_magic, layout.total_bytes, 2, "magic");
  shm::SegmentIdentity bad_version = good;
  bad_version.layout_version = 99;
  expect_refused(bad_version, layout.total_bytes, 2, "layout version");
  expect_refused(good, layout.total_bytes, 3, "team of 2");
  expect_refused(good, layout.total_bytes - shm::kPageBytes, 2, "size");
  shm::SegmentIdentity bad_heap = good;
  bad_heap.heap_bytes = 4096;
  expect_refused(bad_heap, layout.total_bytes, 2, "heaps");
}

TEST(Layout, EachRankOwnsWholePagesAfterTheProfiles) {
  const shm::SegmentLayout layout = shm::SegmentLayout::compute(5, 10000);
  EXPECT_EQ(layout.slot_bytes % shm::kPageBytes, 0u);
  EXPECT_GE(layout.slot_bytes, 10000u);
  EXPECT_GE(layout.areas_offset, layout.profiles_offset + 5 * sizeof(shm::RankProfile));
  for (std::uint32_t rank = 0; rank < 5; ++rank) {
    // Page-aligned areas: a rank's pages can be placed on its NUMA node, and nobody else's
    // data shares them.
    EXPECT_EQ(layout.area_offset(rank) % shm::kPageBytes, 0u);
    EXPECT_EQ(layout.control_offset(rank), layout.area_offset(rank));
    EXPECT_GE(layout.slot_offset(rank, 0), layout.control_offset(rank) + sizeof(shm::RankControl));
    EXPECT_EQ(layout.slot_offset(rank, 1), layout.slot_offset(rank, 0) + layout.slot_bytes);
    EXPECT_LE(layout.slot_offset(rank, 1) + layout.slot_bytes,
              layout.area_offset(rank) + layout.area_bytes);
  }
  EXPECT_EQ(layout.area_offset(4) + layout.area_bytes, layout.total_bytes);
}

// Runs `body` in a child process that sees a private tmpfs of `size` (as "4m") on /dev/shm
// and exits with what body returns; its wait status, or -1 when the machine does not allow a
// private mount (not root).
int in_small_dev_shm(const char* size, const std::function<int()>& body) {
  const pid_t child = fork();
  if (child == 0) {
    const std::string options = std::string("size=") + size;
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, options.c_str()) != 0) {
      _exit(77);
    }
    int verdict = 3;
    try {
      verdict = body();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "unexpected exception: %s\n", error.what());
    }
    std::fflush(nullptr);
    _exit(verdict);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 77 ? -1 : status;
}

// Docker's /dev/shm is 64 MiB: a team that needs more gets an error naming the cause on its
// ranks, never a SIGBUS. A private mount namespace (root only) gives a 4 MiB /dev/shm; a team of
// 16 needs about 8 MiB of it.
TEST(SmallDevShm, ATeamThatDoesNotFitFailsWithAnErrorInsteadOfSigbus) {
  const int status = in_small_dev_shm("4m", [] {
    try {
      shmcoll::run(16, {}, [](shmcoll::Team& team) { team.barrier(); });
    } catch (const shmcoll::Error& error) {
      const std::string what = error.what();
      // Rank 0's own backing fails, or the first rank that failed is reported.
      const bool named = (error.code() == Errc::out_of_memory &&
                          what.find("bytes of /dev/shm, which has") != std::string::npos) ||
                         (error.code() == Errc::rank_failed &&
                          what.find("exited with status 1") != std::string::npos);
      if (!named) std::fprintf(stderr, "unexpected error: %s\n", what.c_str());
      return named ? 0 : 4;
    }
    return 3;
  });
  if (status == -1) GTEST_SKIP() << "needs root (mount namespace)";
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the team ran although it cannot fit; 4: another error";
}

// Team::allocate backs what it hands out: beyond what /dev/shm has left it is an out_of_memory
// error, never a SIGBUS at the first store; what fits is usable.
TEST(SmallDevShm, AllocationsBeyondWhatIsLeftAreAnErrorNotASigbus) {
  const int status = in_small_dev_shm("4m", [] {
    int verdict = 0;
    shmcoll::run(2, {}, [&](shmcoll::Team& team) {
      auto fits = team.allocate<std::byte>(256 << 10);
      std::memset(fits.data(), 1, fits.size());
      team.barrier();  // a failing allocation holds pages until it gives them back
      try {
        team.allocate<std::byte>(8 << 20);
        verdict = 5;  // handed out memory that cannot be backed
      } catch (const shmcoll::Error& error) {
        if (error.code() != Errc::out_of_memory ||
            std::string(error.what()).find("/dev/shm") == std::string::npos) {
          std::fprintf(stderr, "unexpected error: %s\n", error.what());
          verdict = 4;
        }
      }
      team.barrier();
      if (team.rank() != 0) _exit(verdict);
    });
    return verdict;
  });
  if (status == -1) GTEST_SKIP() << "needs root (mount namespace)";
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "4: another error; 5: no error";
}

// The launcher in a /dev/shm too small for its team: every rank stops with the message, none is
// killed by a signal, and the launcher exits non-zero.
TEST(SmallDevShm, TheLauncherStopsWithTheMessageInsteadOfASignal) {
  const int status = in_small_dev_shm("256k", [] {
    const auto result = shmcoll::testing::run_command(
        std::string(SHMCOLL_RUN) + " -n 4 " + LAUNCHER_CHILD + " allreduce",
        shmcoll::testing::Capture::stderr_only);
    const bool named = result.output.find("/dev/shm") != std::string::npos;
    const bool signalled = result.output.find("killed by signal") != std::string::npos;
    if (!named || signalled || result.status == 0) {
      std::fprintf(stderr, "status %d: %s\n", result.status, result.output.c_str());
    }
    return result.status != 0 && named && !signalled ? 0 : 4;
  });
  if (status == -1) GTEST_SKIP() << "needs root (mount namespace)";
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
