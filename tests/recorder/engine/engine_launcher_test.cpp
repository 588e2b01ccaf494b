// The engine with ranks started by node agents through a real launcher (Open MPI's mpirun on this
// host), or through a stand-in that plays two nodes on this host: a rank killed from outside
// mid-case is a crash of that case, named with its signal, and the pool replaces the world; an
// agent (or the launcher) that dies mid-case makes its case an infrastructure error naming the
// node and its host, later worlds go to the nodes left, and the run cannot go on once none is
// left. Nothing any agent started outlives the controller. Skips, saying why, when mpirun is not
// installed (tools/setup.sh installs it).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "recorder/launch/process.h"
#include "runtime/host_info.h"
#include "tests/recorder/engine/engine_support.h"

namespace cprr {
namespace {

using namespace engine_test;
using std::chrono::milliseconds;

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What /proc says of one live process: its pid, parent, command line (arguments NUL-separated).
struct ProcInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string cmdline;
};

// The first live process (zombies aside) that `match` takes, looking again every 50 ms for up
// to `limit`; nullopt when none appeared.
std::optional<pid_t> first_process(const std::function<bool(const ProcInfo&)>& match,
                                   std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = read_all(e.path() / "stat");
      const std::size_t close = stat.rfind(')');
      if (close == std::string::npos || close + 2 >= stat.size()) continue;
      std::istringstream rest(stat.substr(close + 2));
      char state = 0;
      ProcInfo info;
      rest >> state >> info.ppid;
      if (state == 'Z') continue;
      info.pid = static_cast<pid_t>(std::stol(name));
      info.cmdline = read_all(e.path() / "cmdline");
      if (match(info)) return info.pid;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(50));  // why: the poll of a wait with a deadline
  }
}

// The pid of the first process whose command line holds every one of `parts` (NUL-separated
// arguments are searched as one string with NULs), waiting up to 20 s for it to appear.
std::optional<pid_t> find_process(const std::vector<std::string>& parts) {
  return first_process(
      [&](const ProcInfo& p) {
        bool all = !p.cmdline.empty();
        for (const auto& part : parts) all = all && p.cmdline.find(part) != std::string::npos;
        return all;
      },
      std::chrono::seconds(20));
}

// The pid of this process's child running `program` (its command line's first word ends with
// it), waiting up to 20 s for it: this controller's launcher, not another test's.
std::optional<pid_t> child_running(const std::string& program) {
  return first_process(
      [&](const ProcInfo& p) {
        return p.ppid == ::getpid() && p.cmdline.substr(0, p.cmdline.find('\0')).ends_with(program);
      },
      std::chrono::seconds(20));
}

// Whether a process whose command line holds `part` still runs, after waiting up to 10 s for
// the last to go.
bool any_left(const std::string& part) {
  const auto none = [&] {
    return !first_process(
        [&](const ProcInfo& p) { return p.cmdline.find(part) != std::string::npos; },
        std::chrono::seconds(0));
  };
  return !wait_until(none, std::chrono::seconds(10));
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
    // The rank process itself (spawned by its node agent with --control-fd), not the agent.
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

// The case sleeps past its deadline: unless the agents' end is noticed while the case runs, the
// deadline ends it as a hang.
TEST_F(EngineLauncher, ALauncherKilledMidCaseIsAnInfrastructureErrorAndTheRunCannotGoOn) {
  const SignalFile started("launcher");
  ControllerConfig cc = mpirun_config();
  cc.env.emplace_back("CPRR_TEST_STARTED", started.path());
  cc.run.timeout_override_s = 60;
  Controller c(cc);
  std::thread killer([&] {
    const auto pid = child_running("mpirun");  // this controller's one launcher job
    if (pid && started.wait()) ::kill(*pid, SIGKILL);
  });
  const ExecutionResult r =
      c.run(with_params(inst(kFixture, "test/sleep{ms=10}@2"), {{"ms", "600000"}}), Mode::pool);
  killer.join();
  EXPECT_TRUE(started.wait(std::chrono::seconds(0))) << "the case never started: " << r.summary;
  EXPECT_EQ(r.status, ExecStatus::error) << r.summary << " (a hang: noticed only at the deadline)";
  EXPECT_NE(r.summary.find("infrastructure: the agent of node 0 ("), std::string::npos)
      << r.summary;
  EXPECT_TRUE(c.cannot_go_on().empty()) << "the world was placed before any node was lost";
  const ExecutionResult after = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
  EXPECT_EQ(after.status, ExecStatus::error);
  EXPECT_NE(after.summary.find("no node agent is left"), std::string::npos) << after.summary;
  EXPECT_EQ(c.cannot_go_on(), after.summary);
  c.close_pools();
  EXPECT_FALSE(any_left(world_dirs)) << "a rank of a dead agent outlived it";
}

class TwoNodes : public EngineLauncher {
 protected:
  void SetUp() override {
    EngineLauncher::SetUp();
    std::filesystem::create_directories(pids_);
    ::setenv("CPRR_TEST_AGENT_PIDS", pids_.c_str(), 1);  // the launcher's environment
  }
  void TearDown() override {
    ::unsetenv("CPRR_TEST_AGENT_PIDS");
    std::error_code ec;
    std::filesystem::remove_all(pids_, ec);
  }
  ControllerConfig two_nodes() {
    ControllerConfig c = mpirun_config();
    c.launch.program = std::string(CPRR_SOURCE_DIR) + "/tests/launch/nodes_on_this_host.sh";
    c.launch.hosts = {"node-a", "node-b"};
    return c;
  }
  pid_t agent(int node) {
    pid_t pid = 0;
    std::ifstream(pids_ + "/node-" + std::to_string(node) + ".pid") >> pid;
    return pid;
  }
  const std::string pids_ = ::testing::TempDir() + "cprr_agents_" + std::to_string(::getpid());
};

TEST_F(TwoNodes, AnAgentKilledMidCaseIsNamedAndTheOtherNodeHoldsTheNextWorlds) {
  const SignalFile started("agent");
  ControllerConfig cc = two_nodes();
  cc.env.emplace_back("CPRR_TEST_STARTED", started.path());
  cc.run.timeout_override_s = 60;
  Controller c(cc);
  const ExecutionResult first = c.run(inst(kFixture, "test/ok@2"), Mode::fresh);
  expect_pass(first);
  const pid_t node1 = agent(1);
  ASSERT_GT(node1, 0) << "the stand-in launcher wrote no pid for node 1";

  std::thread killer([&] {
    if (started.wait()) ::kill(node1, SIGKILL);
  });
  const ExecutionResult r =
      c.run(with_params(inst(kFixture, "test/sleep{ms=10}@2"), {{"ms", "600000"}}), Mode::fresh);
  killer.join();
  EXPECT_EQ(r.status, ExecStatus::error) << r.summary;
  EXPECT_NE(r.summary.find(fmt::format("the agent of node 1 ({}, pid {})", host_name(), node1)),
            std::string::npos)
      << r.summary;

  // Both ranks of the next worlds go to node 0, fresh and pooled, and the run goes on.
  for (Mode m : {Mode::fresh, Mode::pool, Mode::pool}) {
    const ExecutionResult next = c.run(inst(kFixture, "test/ok@2"), m);
    expect_pass(next);
  }
  EXPECT_TRUE(c.cannot_go_on().empty());
  // A rank that exits mid-case under its agent is that case's crash, named with its exit code.
  const ExecutionResult crash = c.run(inst(kFixture, "test/exit_mid_case{code=7}@2"), Mode::fresh);
  EXPECT_EQ(crash.status, ExecStatus::crash) << crash.summary;
  EXPECT_NE(crash.summary.find("rank 1 exited with code 7"), std::string::npos) << crash.summary;
  EXPECT_TRUE(c.cannot_go_on().empty());
  c.close_pools();
  EXPECT_FALSE(any_left(world_dirs)) << "a rank outlived its world";
}

TEST_F(TwoNodes, DestroyingTheControllerLeavesNoAgentAndNoRankBehind) {
  pid_t agents[2] = {0, 0};
  {
    Controller c(two_nodes());
    expect_pass(c.run(inst(kFixture, "test/ok@2"), Mode::pool));
    agents[0] = agent(0);
    agents[1] = agent(1);
  }
  for (pid_t pid : agents) {
    ASSERT_GT(pid, 0);
    const bool gone = wait_until(
        [&] {
          return !first_process([&](const ProcInfo& p) { return p.pid == pid; },
                                std::chrono::seconds(0));
        },
        std::chrono::seconds(20));
    EXPECT_TRUE(gone) << "agent pid " << pid << " outlived its controller";
  }
  EXPECT_FALSE(any_left(world_dirs));
}

}  // namespace
}  // namespace cprr
