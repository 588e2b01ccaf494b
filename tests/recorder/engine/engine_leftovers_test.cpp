// Processes a case leaves running, against the real fixture worker: a rank's child is killed
// after the case and named in its note (the world is kept: the case passed); one that left the
// world's process group (a daemon) is killed when the controller ends, naming it on stderr.
// Either way nothing the case started outlives the controller.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "recorder/engine/controller.h"
#include "recorder/launch/proc_tree.h"
#include "tests/recorder/engine/engine_support.h"
#include "tests/recorder/scoped_env.h"

namespace cprr {
namespace {

using namespace engine_test;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// The pid the case wrote to `path`.
pid_t left_pid(const fs::path& path) {
  pid_t pid = 0;
  std::ifstream(path) >> pid;
  return pid;
}

// Whether `pid` runs (a zombie does not) after at most 2 s of waiting for SIGKILL to land.
bool still_runs(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    const auto s = proc_stat(pid);
    if (!s || s->state == 'Z') return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // why: the wait's poll
  }
  return true;
}

struct PidFile {
  fs::path path =
      fs::temp_directory_path() / ("cprr-left-pid-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  test::ScopedEnv env{"CPRR_FIXTURE_LEFT_PID", path.string()};
  ~PidFile() { fs::remove(path); }
};

TEST(EngineLeftovers, ARanksChildIsKilledAfterTheCaseAndNamedInItsNote) {
  PidFile file;
  Controller c(config(kFixture));
  const ExecutionResult r = c.run(inst(kFixture, "test/leave_process{how=child}@2"), Mode::pool);
  expect_pass(r);
  const pid_t left = left_pid(file.path);
  ASSERT_GT(left, 0) << "the case wrote no pid";
  EXPECT_THAT(r.note,
              HasSubstr("rank 1 left 1 process running after case " + std::to_string(r.case_id) +
                        " (test/leave_process{how=child}@2): pid " + std::to_string(left) + " ("));
  EXPECT_THAT(r.note, HasSubstr("), killed"));
  EXPECT_FALSE(still_runs(left)) << "pid " << left << " outlived its case";
  // A passing case keeps its world, and the next case has nothing to say.
  const ExecutionResult next = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
  expect_pass(next);
  EXPECT_EQ(next.world_id, r.world_id);
  EXPECT_EQ(next.note, "");
}

TEST(EngineLeftovers, ADaemonOutsideTheWorldsGroupIsKilledWhenTheControllerEnds) {
  PidFile file;
  testing::internal::CaptureStderr();
  {
    Controller c(config(kFixture));
    expect_pass(c.run(inst(kFixture, "test/leave_process{how=daemon}@2"), Mode::fresh));
  }
  const std::string err = testing::internal::GetCapturedStderr();
  const pid_t left = left_pid(file.path);
  ASSERT_GT(left, 0) << "the case wrote no pid";
  EXPECT_FALSE(still_runs(left)) << "pid " << left << " outlived the controller";
  EXPECT_THAT(err, HasSubstr("the ranks left running, killed at exit: "));
  EXPECT_THAT(err, HasSubstr("pid " + std::to_string(left) + " ("));
}

}  // namespace
}  // namespace cprr
