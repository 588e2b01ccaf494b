// What the engine leaves behind: no process of a catalog run or a world, no per-world directory,
// also when the recorder is stopped (stop descriptor, InterruptWatch) or was killed earlier.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "recorder/engine/world.h"
#include "recorder/launch/interrupt.h"
#include "recorder/launch/process.h"
#include "tests/recorder/engine/engine_support.h"

namespace cprr {
namespace {

using namespace engine_test;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

struct ProcStat {
  pid_t pid = 0;
  char state = '?';
  pid_t ppid = 0;
  pid_t pgrp = 0;
};

// Every process visible in /proc ("pid (comm) state ppid pgrp ...": comm may hold anything, so
// the fields are read after its last ')').
std::vector<ProcStat> all_processes() {
  std::vector<ProcStat> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line) || line.rfind(')') == std::string::npos) continue;
    ProcStat p;
    p.pid = static_cast<pid_t>(std::atol(line.c_str()));
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    rest >> p.state >> p.ppid >> p.pgrp;
    out.push_back(p);
  }
  return out;
}

// Members of process group `pgrp` that still run (a zombie has ended; its reaping is its
// parent's business, init's for an orphan).
std::vector<pid_t> live_members(pid_t pgrp) {
  std::vector<pid_t> out;
  for (const ProcStat& p : all_processes()) {
    if (p.pgrp == pgrp && p.state != 'Z' && p.state != 'X') out.push_back(p.pid);
  }
  return out;
}

// This test process's children, reaped or not: after a run() every rank must be gone and reaped.
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  for (const ProcStat& p : all_processes()) {
    if (p.ppid == ::getpid()) out.push_back(p.pid);
  }
  return out;
}

// This process's per-world directories.
std::vector<fs::path> own_world_dirs() {
  std::vector<fs::path> out;
  const std::string prefix = "cprr-world-" + std::to_string(::getpid()) + "-";
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
    if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path());
  }
  return out;
}

// ---- orphans and litter ----

TEST(EngineLifecycle, CatalogFetchLeavesNoProcessOfItsGroupBehind) {
  const fs::path file =
      fs::temp_directory_path() / ("cprr-catalog-fork-" + std::to_string(::getpid()));
  ::setenv("CPRR_FIXTURE_FORK_AT_CATALOG", file.c_str(), 1);
  const Catalog cat = fetch_catalog(kFixture);
  ::unsetenv("CPRR_FIXTURE_FORK_AT_CATALOG");
  EXPECT_FALSE(cat.cases.empty());
  pid_t child = 0, group = 0;
  std::ifstream(file) >> child >> group;
  fs::remove(file);
  ASSERT_GT(child, 0) << "the fixture worker did not fork";
  ASSERT_GT(group, 0);
  EXPECT_NE(group, ::getpgrp()) << "the catalog run must lead its own process group";
  // SIGKILL is delivered at once, but give the kernel a moment to end the processes.
  std::vector<pid_t> left = live_members(group);
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // why: the wait's poll
    left = live_members(group);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) of the catalog run survive, e.g. "
                            << left.front();
  ::kill(-group, SIGKILL);  // litter of a failing run
}

TEST(EngineLifecycle, StaleWorldDirectoriesOfDeadRecordersAreRemoved) {
  ChildProcess gone = ChildProcess::spawn(SpawnSpec{.argv = {"/bin/true"}});
  const pid_t dead = gone.pid();
  ASSERT_TRUE(gone.wait(5000).has_value());
  gone.reap();
  ChildProcess alive = ChildProcess::spawn(SpawnSpec{.argv = {"/bin/sleep", "60"}});
  const fs::path tmp = fs::temp_directory_path();
  const fs::path stale = tmp / ("cprr-world-" + std::to_string(dead) + "-stale1");
  const fs::path live = tmp / ("cprr-world-" + std::to_string(alive.pid()) + "-live01");
  const fs::path unowned = tmp / "cprr-world-Xy12ab";  // the old naming: owner unknown, kept
  for (const fs::path& d : {stale, live, unowned}) {
    fs::create_directories(d);
    std::ofstream(d / "rank0") << "x";
  }
  Controller c(config(kFixture));
  expect_pass(c.run(inst(kFixture, "test/ok@2"), Mode::fresh));
  EXPECT_FALSE(fs::exists(stale)) << "litter of a dead recorder survived a world's creation";
  EXPECT_TRUE(fs::exists(live)) << "a live process's directory was removed";
  EXPECT_TRUE(fs::exists(unowned));
  for (const fs::path& d : {stale, live, unowned}) fs::remove_all(d);
}

// ---- the stop descriptor ----

struct Pipe {
  UniqueFd read, write;
  Pipe() {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    read.reset(p[0]);
    write.reset(p[1]);
  }
};

TEST(EngineLifecycle, StopFdEndsTheRunningExecutionPromptly) {
  for (Mode mode : {Mode::pool, Mode::fresh}) {
    SCOPED_TRACE(std::string(mode_name(mode)));
    Pipe stop;
    const SignalFile started(std::string(mode_name(mode)));
    ControllerConfig cc = config(kFixture);
    cc.stop_fd = stop.read.get();
    cc.env.emplace_back("CPRR_TEST_STARTED", started.path());
    Controller c(cc);
    expect_pass(c.run(inst(kFixture, "test/ok@2"), mode));
    std::thread writer([&stop, &started] {
      EXPECT_TRUE(started.wait()) << "the stalling case never started";  // stopped mid-case
      const char byte = 1;
      EXPECT_EQ(::write(stop.write.get(), &byte, 1), 1);
    });
    // Sleeps a minute, within the deadline (60 s): only the stop ends it before it passes.
    const ExecutionResult r = c.run(inst(kFixture, "test/stall@2"), mode);
    writer.join();
    EXPECT_TRUE(r.interrupted) << r.summary;
    EXPECT_EQ(r.status, ExecStatus::error);
    EXPECT_FALSE(r.as_expected);
    EXPECT_THAT(r.summary, HasSubstr("interrupted"));
    EXPECT_THAT(r.summary, Not(HasSubstr("before it started")));
    EXPECT_TRUE(children().empty()) << "a rank survived (or was not reaped)";
    EXPECT_TRUE(own_world_dirs().empty()) << "the world's directory survived";
    // Every later execution returns at once, without starting a world.
    const ExecutionResult later = c.run(inst(kFixture, "test/ok@2"), mode);
    EXPECT_TRUE(later.interrupted);
    EXPECT_EQ(later.status, ExecStatus::error);
    EXPECT_EQ(later.world_id, 0u);
    EXPECT_TRUE(children().empty());
  }
}

TEST(EngineLifecycle, StopFdWithoutAStopChangesNothing) {
  Pipe stop;
  ControllerConfig cc = config(kFixture);
  cc.stop_fd = stop.read.get();
  Controller c(cc);
  const ExecutionResult r = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
  expect_pass(r);
  EXPECT_FALSE(r.interrupted);
}

// ---- InterruptWatch ----

TEST(InterruptWatch, FirstSignalMakesTheFdReadableAndTheDispositionIsRestored) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &before), 0);
  {
    InterruptWatch watch;
    EXPECT_FALSE(stop_requested(watch.fd()));
    EXPECT_EQ(watch.signal(), 0);
    EXPECT_THROW(InterruptWatch second, Error) << "two watches would share one handler";
    ASSERT_EQ(::raise(SIGTERM), 0);  // handled: the test process lives on
    EXPECT_TRUE(stop_requested(watch.fd()));
    EXPECT_TRUE(stop_requested(watch.fd())) << "reading the state must not drain it";
    EXPECT_EQ(watch.signal(), SIGTERM);
  }
  struct sigaction after {};
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  InterruptWatch again;  // the slot is free once the first watch is gone
  EXPECT_EQ(again.signal(), 0);
}

}  // namespace
}  // namespace cprr
