// A controller that is a child subreaper (recorder/launch/process.h): an orphan it inherits is
// reaped by reap_orphans(), a child a ChildProcess owns never is (its owner still learns how it
// ended), and nothing is reaped while a child is on its way to its owner. An ended child's
// process group is signalled only while its pid cannot be a stranger's.
#include "recorder/launch/process.h"

#include <gtest/gtest.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "recorder/engine/rank_process.h"

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
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // why: the wait's poll
  return done();
}

// A shell that leaves a child behind and exits: the child becomes ours. Returns its pid.
pid_t orphan_that_ends_soon(const fs::path& pid_file) {
  ChildProcess sh = ChildProcess::spawn(
      SpawnSpec{.argv = {"/bin/sh", "-c",
                         "sleep 0.2 & echo $! > " + pid_file.string()}});  // why: lives, ends
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

// A process at pid `pid` (clone3's set_tid, which needs CAP_SYS_ADMIN) that leads a session and
// a process group of that id, as any daemon does, and sleeps; -1 with errno when it cannot be made.
pid_t stranger_at(pid_t pid) {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&pid);
  args.set_tid_size = 1;
  const long r = ::syscall(SYS_clone3, &args, sizeof args);
  if (r == 0) {
    ::setsid();
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return static_cast<pid_t>(r);
}

TEST(ChildReaping, AnEndedRanksGroupIsNeverSignalledOnceItsPidMayBeAStrangers) {
  ChildProcess leader = ChildProcess::spawn(SpawnSpec{.argv = {"/bin/true"}});  // its own group
  const pid_t pid = leader.pid();
  ASSERT_TRUE(leader.wait(5000).has_value());
  // Ended but not reaped: nobody can take the pid, so signalling its group reaches no stranger.
  errno = 0;
  const pid_t early = stranger_at(pid);
  if (early < 0 && errno == EPERM) GTEST_SKIP() << "choosing a pid (clone3 set_tid) needs root";
  if (early > 0) {
    ::kill(early, SIGKILL);
    ::waitpid(early, nullptr, 0);
  }
  EXPECT_EQ(early, -1) << "the pid of an ended, unreaped child was free for another process";
  EXPECT_EQ(errno, EEXIST);

  LocalRank rank(std::move(leader), pid);
  rank.reap();
  const pid_t stranger = stranger_at(pid);
  if (stranger < 0 && errno == EEXIST) GTEST_SKIP() << "pid " << pid << " was reused meanwhile";
  ASSERT_EQ(stranger, pid) << std::strerror(errno);
  ASSERT_TRUE(eventually([&] { return ::getpgid(stranger) == pid; }));
  rank.signal(SIGKILL);
  // A window for a wrong signal to land in: none must, however long it is.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // why: the window above
  EXPECT_EQ(::waitpid(stranger, nullptr, WNOHANG), 0) << "a reaped rank's signal killed a stranger";
  ::kill(stranger, SIGKILL);
  ::waitpid(stranger, nullptr, 0);
}

}  // namespace
}  // namespace cprr
