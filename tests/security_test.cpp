// Who can touch a team's memory: segments are 0600, made with O_EXCL under an unguessable name,
// and gone from /dev/shm before user code runs; a process of another user cannot open one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <regex>
#include <string>

#include "shm/segment.hpp"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Errc;
namespace shm = shmcoll::shm;

TEST(Security, SegmentNamesAreUnguessableAndNeverReused) {
  const std::string name = shmcoll::Team::unique_segment_name();
  // 128 random bits, in hex.
  EXPECT_TRUE(std::regex_match(name, std::regex("/shmcoll-[0-9a-f]{32}"))) << name;
  EXPECT_NE(shmcoll::Team::unique_segment_name(), name);
  shm::Segment segment = shm::Segment::create_named(name, 2, 4096);
  // O_EXCL: a name that exists (planted by someone else, say) is never opened as ours.
  try {
    shm::Segment::create_named(name, 2, 4096);
    ADD_FAILURE() << "a second segment was created under an existing name";
  } catch (const shmcoll::Error& error) {
    EXPECT_EQ(error.code(), Errc::system_error) << error.what();
    EXPECT_NE(std::string(error.what()).find("exists"), std::string::npos) << error.what();
  }
  shm::Segment::unlink_name(name);
}

TEST(Security, ForkedTeamsLeaveNoNameInDevShmWhileUserCodeRuns) {
  const auto before = shmcoll::testing::dev_shm_entries();
  auto* differs = shmcoll::testing::shared_block<int>();
  shmcoll::run(3, {}, [&](shmcoll::Team& team) {
    if (shmcoll::testing::dev_shm_entries() != before) *differs = 1 + team.rank();
    team.barrier();
  });
  EXPECT_EQ(*differs, 0) << "rank " << *differs - 1 << " saw a new name in /dev/shm";
}

// As root, a child that becomes `nobody` tries to open a team's segment, by name and through
// Team::join, for reading and for writing.
TEST(Security, AnotherUserCannotOpenTheSegment) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to become another user";
  const passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  const std::string name = shmcoll::Team::unique_segment_name();
  shm::Segment segment = shm::Segment::create_named(name, 2, 4096);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0) _exit(10);
    if (geteuid() == 0) _exit(11);
    for (int flags : {O_RDONLY, O_RDWR}) {
      const int fd = shm_open(name.c_str(), flags, 0);
      if (fd >= 0) _exit(12);          // opened: the segment is not private
      if (errno != EACCES) _exit(13);  // refused, but not for the right reason
    }
    try {
      shmcoll::Team::join(name, 1, 2);
      _exit(14);
    } catch (const shmcoll::Error& error) {
      const bool names_permission =
          std::string(error.what()).find("Permission denied") != std::string::npos;
      _exit(error.code() == Errc::system_error && names_permission ? 0 : 15);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: could not become nobody, 11: still root, 12: nobody opened the segment, 13: "
         "refused with another errno than EACCES, 14: nobody joined the team, 15: join failed "
         "with another error";
  shm::Segment::unlink_name(name);
}

}  // namespace
