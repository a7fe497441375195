// A member maps the segment member 0 made only if the object under that name is member 0's
// (shm/segment.hpp, map_creators_segment): fstat's owner against the creator's uid, before the
// mapping. Another user's object planted under the name, or one of the wrong size, is refused
// with one line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "shm/segment.hpp"

using hier::shm::map_creators_segment;

namespace {
// A fresh object of `bytes` under a name of this test's; "" when it cannot be made.
std::string make_object(size_t bytes) {
  const std::string name = "/libhier-test-owner." + std::to_string(getpid());
  shm_unlink(name.c_str());
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return {};
  const bool ok = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
  close(fd);
  return ok ? name : std::string();
}
}  // namespace

TEST(ShmOwner, TheCreatorsObjectIsMapped) {
  const std::string name = make_object(8192);
  ASSERT_FALSE(name.empty());
  std::string why;
  void* m = map_creators_segment(name.c_str(), 8192, geteuid(), why);
  EXPECT_NE(m, nullptr) << why;
  if (m) munmap(m, 8192);
  // Another size than the creator made: refused.
  EXPECT_EQ(map_creators_segment(name.c_str(), 4096, geteuid(), why), nullptr);
  EXPECT_EQ(why, "8192 bytes, not 4096");
  // A creator of another uid than this process's: refused before anything is opened.
  EXPECT_EQ(map_creators_segment(name.c_str(), 8192, geteuid() + 1, why), nullptr);
  EXPECT_EQ(why, "its creator's uid " + std::to_string(geteuid() + 1) + " is not this process's (" +
                     std::to_string(geteuid()) + ")");
  shm_unlink(name.c_str());
}

TEST(ShmOwner, AnotherUsersObjectIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the object to another user";
  const std::string name = make_object(8192);
  ASSERT_FALSE(name.empty());
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchown(fd, 65534, 65534), 0);  // planted by "nobody" under the name member 0 sent
  close(fd);
  std::string why;
  EXPECT_EQ(map_creators_segment(name.c_str(), 8192, geteuid(), why), nullptr);
  EXPECT_EQ(why, "owned by uid 65534, not by its creator's (uid 0)");
  shm_unlink(name.c_str());
}
