// cprecord and cpreplay with ranks started by a real launcher (Open MPI's mpirun on this host):
// the corpus at W=2 and W=4 in both modes gets the same results as with local ranks, the run
// records its launcher and cpreplay starts its worlds the same way, and a connection with a wrong
// token is refused with nothing recorded from it. Skips, saying why, when mpirun is not
// installed (tools/setup.sh installs it, so CI runs these).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "recorder/launch/process.h"
#include "tests/cli/cli_run.h"

namespace cprr {
namespace {

using json = nlohmann::json;
using test::kRecord;
using test::kReplay;
using test::run;
using test::Stderr;

const std::string kWrapper =
    std::string(CPRR_SOURCE_DIR) + "/tests/replayer/fixture/launcher_wrapper.sh";

class LauncherCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (find_on_path("mpirun").empty()) {
      GTEST_SKIP() << "Open MPI's mpirun is not on PATH (tools/setup.sh installs openmpi-bin)";
    }
    // Open MPI refuses root unless told twice; these are its documented switches (CI runs as
    // root). A user's own runs pass them the same way, or --launcher-arg=--allow-run-as-root.
    if (::geteuid() == 0) {
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    dir_ = ::testing::TempDir() + "cprr_launcher_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
           std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

std::string read_file(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What must not depend on how ranks were started: per case its status, verdict and expectation,
// and every execution's mode and status, keyed by label. Not a collective mismatch's statuses: a
// launched world has no live mismatch check (its flight records are not shipped), so whether the
// transport's own error (crash) or the deadline (hang) ends it first is timing; the mismatch is
// named either way (as tests/python/test_launchers.py compares).
std::map<std::string, std::string> results_of(const std::string& doc) {
  std::map<std::string, std::string> out;
  const json parsed = json::parse(doc);  // a range-for over a temporary's member would dangle
  for (const json& c : parsed.at("cases")) {
    const bool mismatch = c.at("verdict") == "collective_mismatch";
    std::string line = fmt::format(
        "status={} verdict={} as_expected={}", mismatch ? "-" : c.at("status").get<std::string>(),
        c.at("verdict").is_null() ? "-" : c.at("verdict").dump(), c.at("as_expected").dump());
    for (const json& e : c.at("executions")) {
      if (mismatch) {
        line += fmt::format(" {}", e.at("mode").get<std::string>());
        continue;
      }
      line +=
          fmt::format(" {}={}", e.at("mode").get<std::string>(), e.at("status").get<std::string>());
    }
    out[c.at("label").get<std::string>()] = line;
  }
  return out;
}

// Records the corpus at W=2 and W=4 in both modes with local ranks and with `launcher_flags`, and
// expects the same results case by case; returns the launched run's JSON document.
json expect_same_results_as_local(const std::string& dir, const std::string& launcher_flags) {
  const auto local = run(kRecord + " --backend cpu --mode both --json --db " + dir + "/local.db");
  EXPECT_EQ(local.code, 0) << local.out.substr(0, 2000);
  const auto launched = run(kRecord + " --backend cpu --mode both --json " + launcher_flags +
                            " --db " + dir + "/launched.db");
  EXPECT_EQ(launched.code, 0) << launched.out.substr(0, 2000);
  const auto a = results_of(local.out);
  const auto b = results_of(launched.out);
  EXPECT_GE(a.size(), 80u) << local.out.substr(0, 3000);
  bool w2 = false, w4 = false;
  for (const auto& [label, line] : a) {
    w2 = w2 || label.ends_with("@2");
    w4 = w4 || label.ends_with("@4");
    EXPECT_TRUE(b.count(label)) << label << " missing from the launched run";
    if (b.count(label)) {
      EXPECT_EQ(b.at(label), line) << label;
    }
  }
  EXPECT_EQ(a.size(), b.size());
  EXPECT_TRUE(w2 && w4);
  // The crashes and hangs came through the launcher with the same attribution.
  EXPECT_NE(launched.out.find("rank 1 killed by signal 11 (SIGSEGV)"), std::string::npos);
  EXPECT_NE(launched.out.find("rank 1 never joined collective #1"), std::string::npos);
  return json::parse(launched.out);
}

// Pool mode kept one world per size alive across cases: far fewer pooled worlds than pooled
// executions (a world is replaced only after a crash or hang).
void expect_pooled_worlds_reused(const json& doc) {
  std::set<int64_t> pool_worlds;
  std::size_t pooled = 0;
  for (const json& c : doc.at("cases")) {
    for (const json& e : c.at("executions")) {
      if (e.at("mode") != "pool") continue;
      ++pooled;
      pool_worlds.insert(e.at("world").get<int64_t>());
    }
  }
  EXPECT_LT(pool_worlds.size() * 4, pooled) << pool_worlds.size() << " worlds for " << pooled;
}

// Run by ctest as `mpirun_corpus_matches_local`, which starts it early (tests/CMakeLists.txt).
TEST_F(LauncherCli, CorpusThroughMpirunMatchesLocalAtW2AndW4InBothModes) {
  const json doc = expect_same_results_as_local(dir_, "--launcher mpirun");
  EXPECT_EQ(doc.at("launcher"), "mpirun");
  expect_pooled_worlds_reused(doc);
}

// A case whose rank leaves a process running (a child in the rank's group, or a daemon that left
// it with setsid) through mpirun: nothing of it outlives cprecord, whatever the launcher.
TEST_F(LauncherCli, NothingACaseLeftRunningOutlivesCprecordThroughMpirun) {
  for (const std::string how : {"child", "daemon"}) {
    SCOPED_TRACE(how);
    const std::string pid_file = path("left-" + how);
    const auto rec = run(
        "CPRR_FIXTURE_LEFT_PID=" + pid_file + " " + kRecord +
            " --backend cpu --launcher mpirun --worker " CPRR_FIXTURE_WORKER_PATH " --json --db " +
            path(how + ".db") + " --filter '^test/leave_process\\{how=" + how + "\\}@2$'",
        Stderr::merged);
    EXPECT_EQ(rec.code, 0) << rec.out.substr(0, 3000);
    pid_t left = 0;
    std::ifstream(pid_file) >> left;
    ASSERT_GT(left, 0) << "the case wrote no pid: " << rec.out.substr(0, 3000);
    // Gone, or at most a zombie that init reaps: never running after cprecord ended.
    bool runs = false;
    for (int i = 0; i < 100; ++i) {
      const std::string stat = read_file("/proc/" + std::to_string(left) + "/stat");
      const std::size_t close = stat.rfind(')');
      runs = close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
      if (!runs) break;
      ::usleep(20000);  // why: the poll of a wait with a bound
    }
    EXPECT_FALSE(runs) << "pid " << left << " outlived cprecord";
  }
}

// Run by ctest as `srun_corpus_matches_local`, after tests/launch/slurm_cluster.sh started a
// private single-node Slurm (root, Slurm installed) and with SLURM_CONF pointing at it.
TEST(SrunCli, CorpusThroughSrunMatchesLocalAtW2AndW4InBothModes) {
  const char* conf = std::getenv("SLURM_CONF");
  if (conf == nullptr || !std::filesystem::exists(conf) || find_on_path("srun").empty()) {
    GTEST_SKIP() << "no Slurm cluster to run on: ctest's srun_corpus_matches_local starts a "
                    "private one (as root, with Slurm installed by tools/setup.sh)";
  }
  const std::string dir = ::testing::TempDir() + "cprr_srun_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const json doc = expect_same_results_as_local(dir, "--launcher srun");
  EXPECT_EQ(doc.at("launcher"), "srun");
  expect_pooled_worlds_reused(doc);
  std::filesystem::remove_all(dir);
}

TEST_F(LauncherCli, TheRunRecordsItsLauncherAndCpreplayStartsWorldsTheSameWay) {
  const std::string log = path("launches.log");
  ::setenv("CPRR_TEST_LAUNCH_LOG", log.c_str(), 1);
  const auto rec = run(kRecord +
                       " --backend cpu --mode pool --filter 'bug/config_mutation' "
                       "--launcher mpirun --launcher-path " +
                       kWrapper + " --launcher-arg=--tag-output --json --db " + path("r.db"));
  ASSERT_EQ(rec.code, 0) << rec.out.substr(0, 2000);
  // One launcher job for the whole run, pooled and fresh worlds alike: one node agent.
  const std::string recorded = read_file(log);
  EXPECT_EQ(std::count(recorded.begin(), recorded.end(), '\n'), 1) << recorded;
  EXPECT_NE(recorded.find("launch -np 1"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find(" --agent "), std::string::npos) << recorded;
  EXPECT_NE(recorded.find("--tag-output"), std::string::npos) << recorded;
  const auto list = run(kReplay + " --list --db " + path("r.db"));
  EXPECT_NE(list.out.find("launcher=mpirun"), std::string::npos) << list.out;

  std::filesystem::remove(log);
  // Case 3 is bug/config_mutation{format=bshd}@2, polluted by its predecessor in the pool.
  const auto rep = run(kReplay + " --case 3 --json --db " + path("r.db"));
  const json doc = json::parse(rep.out);
  EXPECT_EQ(doc.at("verdict"), "state_leak") << rep.out.substr(0, 2000);
  const std::string replayed = read_file(log);
  EXPECT_EQ(std::count(replayed.begin(), replayed.end(), '\n'), 1) << replayed;
  EXPECT_NE(replayed.find("launch -np 1"), std::string::npos) << replayed;
  EXPECT_NE(replayed.find("--tag-output"), std::string::npos) << replayed;
  ::unsetenv("CPRR_TEST_LAUNCH_LOG");

  // --launcher local on the replay overrides the recorded one: nothing goes through the wrapper.
  ::setenv("CPRR_TEST_LAUNCH_LOG", log.c_str(), 1);
  std::filesystem::remove(log);
  const auto local = run(kReplay + " --case 3 --json --launcher local --db " + path("r.db"));
  EXPECT_EQ(json::parse(local.out).at("verdict"), "state_leak");
  EXPECT_FALSE(std::filesystem::exists(log));
  ::unsetenv("CPRR_TEST_LAUNCH_LOG");
}

TEST_F(LauncherCli, AWrongTokenIsRefusedAndNothingIsRecordedFromIt) {
  const std::string impostor = path("impostor.log");
  ::setenv("CPRR_TEST_IMPOSTOR_LOG", impostor.c_str(), 1);
  // In a subshell: its own stderr goes to the file, run()'s redirection applies around it.
  const auto rec =
      run("(" + kRecord +
          " --backend cpu --mode fresh --filter "
          "'healthy/all_reduce.*@2' --launcher mpirun --launcher-path " +
          kWrapper + " --json --db " + path("t.db") + " 2>" + path("stderr.txt") + ")");
  ::unsetenv("CPRR_TEST_IMPOSTOR_LOG");
  ASSERT_EQ(rec.code, 0) << rec.out.substr(0, 2000);
  const json doc = json::parse(rec.out);
  EXPECT_EQ(doc.at("unexpected"), 0);
  const std::size_t cases = doc.at("cases").size();
  ASSERT_GT(cases, 0u);
  for (const json& c : doc.at("cases")) {
    for (const json& e : c.at("executions")) {
      EXPECT_EQ(e.at("status"), "pass");
      EXPECT_EQ(e.at("ranks").size(), 2u);  // the two real ranks, and no third
    }
  }
  // The run's one launch refused its impostor agent, said so on stderr, and the impostor learned
  // why.
  const std::string err = read_file(path("stderr.txt"));
  std::size_t refusals = 0;
  for (std::size_t at = 0; (at = err.find("wrong token", at)) != std::string::npos; ++at) {
    ++refusals;
  }
  EXPECT_EQ(refusals, 1u) << err;
  EXPECT_NE(err.find("cprr: refused a rank connection from 127.0.0.1:"), std::string::npos) << err;
  const std::string told = read_file(impostor);
  EXPECT_NE(told.find("refused this agent: wrong token"), std::string::npos) << told;
  EXPECT_NE(told.find("impostor exit 2"), std::string::npos) << told;
  EXPECT_EQ(told.find("impostor exit 0"), std::string::npos) << told;
}

}  // namespace
}  // namespace cprr
