// The rank's descriptors and exec: what it inherited stays as it was, what it opened since is
// made close-on-exec (recorder/rank/descriptors.h).
#include "recorder/rank/descriptors.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/fd.h"

namespace cprr {
namespace {

bool inheritable(int fd) { return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) == 0; }

TEST(InheritedDescriptors, OnlyWhatWasOpenedAfterTheCaptureIsMadeCloseOnExec) {
  const UniqueFd passed(::open("/dev/null", O_RDONLY));  // as a launcher passes one on purpose
  ASSERT_GE(passed.get(), 0);
  const InheritedDescriptors inherited = InheritedDescriptors::capture();
  EXPECT_THAT(inherited.fds(), testing::Contains(passed.get()));

  const UniqueFd low(::open("/dev/null", O_RDONLY));
  // One far above the rest, so the flagged range runs past a gap.
  const UniqueFd high(::fcntl(low.get(), F_DUPFD, 900));
  ASSERT_GE(low.get(), 0);
  ASSERT_GE(high.get(), 900);
  ASSERT_TRUE(inheritable(low.get()) && inheritable(high.get()));

  inherited.close_on_exec_rest();
  EXPECT_FALSE(inheritable(low.get()));
  EXPECT_FALSE(inheritable(high.get()));
  EXPECT_TRUE(inheritable(passed.get())) << "an inherited descriptor is left as it was";
  for (int fd : {0, 1, 2}) {
    if (::fcntl(fd, F_GETFD) >= 0) {
      EXPECT_TRUE(inheritable(fd)) << "stdio " << fd;
    }
  }
}

}  // namespace
}  // namespace cprr
