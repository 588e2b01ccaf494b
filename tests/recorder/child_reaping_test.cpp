// A controller that is a child subreaper (recorder/launch/process.h): an orphan it inherits is
// reaped by reap_orphans(), a child a ChildProcess owns never is (its owner still learns how it
// ended), and nothing is reaped while a child is on its way to its owner.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "recorder/launch/process.h"

namespace cprr {
namespace {

namespace fs = std::filesystem;

// The state letter /proc gives `pid` ('?' when there is no such process).
char state_of(pid_t pid) {
  std::ifstream in(fs::path("/proc") / std::to_string(pid) / "stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind(')') == std::string::npos) return '?';
  return line[line.rfind(')') + 2];
}

template <class F>
bool eventually(F done) {
  for (int k = 0; k < 250 && !done(); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return done();
}

// A shell that leaves a child behind and exits: the child becomes ours. Returns its pid.
pid_t orphan_that_ends_soon(const fs::path& pid_file) {
  ChildProcess sh = ChildProcess::spawn(
      SpawnSpec{.argv = {"/bin/sh", "-c", "sleep 0.2 & echo $! > " + pid_file.string()}});
  EXPECT_TRUE(sh.wait(10000).has_value());
  std::ifstream in(pid_file);
  pid_t orphan = 0;
  in >> orphan;
  return orphan;
}

TEST(ChildReaping, OrphansAreReapedOwnedChildrenNever) {
  become_subreaper();
  const fs::path pid_file =
      fs::temp_directory_path() / ("cprr-orphan-" + std::to_string(::getpid()));
  ChildProcess owned = ChildProcess::spawn(SpawnSpec{.argv = {"/bin/sh", "-c", "exit 7"}});
  const pid_t orphan = orphan_that_ends_soon(pid_file);
  fs::remove(pid_file);
  ASSERT_GT(orphan, 0);
  ASSERT_TRUE(eventually([&] { return state_of(orphan) == 'Z' && state_of(owned.pid()) == 'Z'; }))
      << "orphan " << state_of(orphan) << ", owned " << state_of(owned.pid());
  {
    ChildArrival arriving;  // a child on its way to its owner: nothing is told from an orphan
    EXPECT_EQ(reap_orphans(), 0);
  }
  EXPECT_EQ(state_of(orphan), 'Z');
  EXPECT_EQ(reap_orphans(), 1);
  EXPECT_EQ(state_of(orphan), '?');
  const auto& exit = owned.wait(1000);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 7);  // reaped by its owner, not taken for an orphan
}

}  // namespace
}  // namespace cprr
