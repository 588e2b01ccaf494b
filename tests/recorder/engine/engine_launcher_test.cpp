// The engine with ranks started through a real launcher (Open MPI's mpirun on this host): a rank
// killed from outside mid-case is a crash of that case, named with its signal, and the pool
// replaces the world; a launcher that dies mid-case is a crash of its world, not of the run.
// Skips, saying why, when mpirun is not installed (tools/setup.sh installs it).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "recorder/launch/process.h"
#include "tests/recorder/engine/engine_support.h"

namespace cprr {
namespace {

using namespace engine_test;
using std::chrono::milliseconds;

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The pid of the first process whose command line holds every one of `parts` (NUL-separated
// arguments are searched as one string with NULs), waiting up to 20 s for it to appear.
std::optional<pid_t> find_process(const std::vector<std::string>& parts) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string cmd = read_all(e.path() / "cmdline");
      bool all = !cmd.empty();
      for (const auto& p : parts) all = all && cmd.find(p) != std::string::npos;
      if (all) return static_cast<pid_t>(std::stol(name));
    }
    std::this_thread::sleep_for(milliseconds(50));  // why: the poll of a wait with a deadline
  }
  return std::nullopt;
}

class EngineLauncher : public ::testing::Test {
 protected:
  void SetUp() override {
    if (find_on_path("mpirun").empty()) {
      GTEST_SKIP() << "Open MPI's mpirun is not on PATH (tools/setup.sh installs openmpi-bin)";
    }
    if (::geteuid() == 0) {  // Open MPI's documented switches for running as root (CI)
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
  }
  ControllerConfig mpirun_config() {
    ControllerConfig c = config(kFixture);
    c.launch.kind = LauncherKind::mpirun;
    c.after_death = milliseconds(1000);
    return c;
  }
  // This controller's world directories are named after its pid: the ranks' command lines say so.
  const std::string world_dirs = fmt::format("cprr-world-{}-", ::getpid());
};

TEST_F(EngineLauncher, ARankKilledFromOutsideIsACrashOfTheRunningCase) {
  Controller c(mpirun_config());
  const ExecutionResult first = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
  expect_pass(first);

  std::thread killer([&] {
    // The rank process itself (spawned by its supervisor with --control-fd), not the supervisor.
    const auto pid = find_process({world_dirs, "--control-fd",
                                   std::string("--rank\0"
                                               "1\0",
                                               9)});
    if (pid) ::kill(*pid, SIGKILL);
  });
  const ExecutionResult killed =
      c.run(with_params(inst(kFixture, "test/sleep{ms=10}@2"), {{"ms", "8000"}}), Mode::pool);
  killer.join();
  EXPECT_EQ(killed.status, ExecStatus::crash) << killed.summary;
  EXPECT_NE(killed.summary.find("rank 1 killed by signal 9 (SIGKILL)"), std::string::npos)
      << killed.summary;
  ASSERT_EQ(killed.ranks.size(), 2u);
  ASSERT_TRUE(killed.ranks[1].exit.has_value());
  EXPECT_EQ(killed.ranks[1].exit->signal, SIGKILL);
  EXPECT_EQ(killed.world_id, first.world_id);  // it happened in the pooled world

  const ExecutionResult after = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
  expect_pass(after);
  EXPECT_NE(after.world_id, first.world_id);  // the broken world was replaced
}

// The case sleeps past its deadline: unless the launcher's death is noticed while the case runs,
// the deadline ends it as a hang.
TEST_F(EngineLauncher, ALauncherKilledMidCaseIsACrashOfItsWorldNotOfTheRun) {
  const SignalFile started("launcher");
  ControllerConfig cc = mpirun_config();
  cc.env.emplace_back("CPRR_TEST_STARTED", started.path());
  cc.run.timeout_override_s = 60;
  Controller c(cc);
  std::thread killer([&] {
    // mpirun's own command line holds the rank command, and with it this controller's world dir.
    const auto pid = find_process({"mpirun", world_dirs, "--connect"});
    if (pid && started.wait()) ::kill(*pid, SIGKILL);
  });
  const ExecutionResult r =
      c.run(with_params(inst(kFixture, "test/sleep{ms=10}@2"), {{"ms", "600000"}}), Mode::pool);
  killer.join();
  EXPECT_TRUE(started.wait(std::chrono::seconds(0))) << "the case never started: " << r.summary;
  EXPECT_EQ(r.status, ExecStatus::crash) << r.summary << " (a hang: noticed only at the deadline)";
  const ExecutionResult after = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
  expect_pass(after);
}

}  // namespace
}  // namespace cprr
