// End-to-end: the two CLIs on the corpus. cprecord --mode both records a subset with the seeded
// state-leak bugs and their twins; cpreplay must call the victims state_leak and name the polluter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "schema/record_reader.h"
#include "schema/store.h"
#include "tests/cli/cli_run.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;

using test::Cmd;
using test::kRecord;
using test::kReplay;
using test::run;
using test::Stderr;

Cmd run_stderr(const std::string& cmdline) { return run(cmdline, Stderr::merged); }

const std::string kFilter =
    "'^(bug|fixed)/(global_rng|config_mutation)|^healthy/noop@2|^healthy/"
    "all_reduce\\{count=1,dtype=i32\\}@2'";

// One recorded run shared by the suite: recording is the expensive part.
class ReplayCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir("cprr-cli"));
    const Cmd r = run(kRecord + " --db " + db() + " --mode both --json --junit " + *dir_ +
                      "/run.xml --filter " + kFilter);
    code_ = r.code;
    doc_ = new nlohmann::json(nlohmann::json::parse(r.out));
    for (const auto& c : (*doc_)["cases"]) (*ids_)[c["label"].get<std::string>()] = c["id"];
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete doc_;
  }
  static std::string db() { return *dir_ + "/run.db"; }
  static int64_t id(const std::string& label) { return ids_->at(label); }

  static nlohmann::json replay(int64_t case_id, int* code) {
    const Cmd r = run(kReplay + " --db " + db() + " --case " + std::to_string(case_id) + " --json");
    *code = r.code;
    return nlohmann::json::parse(r.out);
  }

  static inline std::string* dir_ = nullptr;
  static inline nlohmann::json* doc_ = nullptr;
  static inline std::map<std::string, int64_t>* ids_ = new std::map<std::string, int64_t>();
  static inline int code_ = -1;
};

TEST_F(ReplayCli, RecordBothFlagsTheBugVictimsAndNotTheTwins) {
  EXPECT_EQ(code_, 0) << "seeded bugs are expected to diverge; nothing else may";
  std::set<std::string> flagged;
  for (const auto& c : (*doc_)["cases"]) {
    if (!c["fresh_vs_pool"].is_null()) flagged.insert(c["label"]);
  }
  EXPECT_EQ(flagged, (std::set<std::string>{"bug/global_rng{n=4096}@2", "bug/global_rng{n=4096}@4",
                                            "bug/config_mutation{format=bshd}@2",
                                            "bug/config_mutation{format=bshd}@4"}));
  EXPECT_TRUE((*doc_)["run"].is_number_integer());
  EXPECT_TRUE(std::filesystem::exists(*dir_ + "/run.xml"));
}

TEST_F(ReplayCli, ReplayNamesThePolluterOfTheGlobalRng) {
  int code = 0;
  const auto r = replay(id("bug/global_rng{n=4096}@2"), &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(r["verdict"], "state_leak");
  EXPECT_EQ(r["polluters"], nlohmann::json::array({id("bug/global_rng{n=256}@2")}));
  const auto& d = r["first_divergence"];
  ASSERT_FALSE(d.is_null());
  EXPECT_EQ(d["kind"], "output");
  EXPECT_EQ(d["name"], "sum");
  EXPECT_EQ(d["byte_range"], nlohmann::json::array({0, 16384}));
  // One polluter among N predecessors: at most ceil(log2 N) + 2 delta-debugging replays.
  const auto n = r["predecessors"].get<int>();
  ASSERT_GE(n, 2);
  EXPECT_LE(r["ddmin_replays"].get<int>(), static_cast<int>(std::ceil(std::log2(n))) + 2);
}

TEST_F(ReplayCli, ReplayNamesThePolluterOfTheConfigMutation) {
  int code = 0;
  const auto r = replay(id("bug/config_mutation{format=bshd}@4"), &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(r["verdict"], "state_leak");
  EXPECT_EQ(r["polluters"], nlohmann::json::array({id("bug/config_mutation{format=thd}@4")}));
  EXPECT_EQ(r["recorded"]["pool"], "fail");
  EXPECT_EQ(r["recorded"]["fresh"], "pass");
}

TEST_F(ReplayCli, TwinsAndHealthyCasesReproduce) {
  for (const char* label : {"fixed/global_rng{n=4096}@2", "fixed/config_mutation{format=bshd}@2",
                            "healthy/all_reduce{count=1,dtype=i32}@2"}) {
    int code = 1;
    const auto r = replay(id(label), &code);
    EXPECT_EQ(r["verdict"], "reproduced") << label;
    EXPECT_EQ(code, 0) << label;
    EXPECT_TRUE(r["polluters"].empty()) << label;
    EXPECT_TRUE(r["first_divergence"].is_null()) << label;
  }
}

TEST_F(ReplayCli, ListShowsRunsAndCasesAndWhichDiffer) {
  const Cmd r = run(kReplay + " --db " + db() + " --list --json");
  ASSERT_EQ(r.code, 0);
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["runs"].size(), 1u);
  EXPECT_TRUE(doc["runs"][0]["complete"].get<bool>());
  EXPECT_EQ(doc["cases"].size(), (*doc_)["cases"].size());
  int differ = 0;
  for (const auto& c : doc["cases"]) differ += c["fresh_vs_pool_differs"].get<bool>() ? 1 : 0;
  EXPECT_EQ(differ, 4);
}

// cprecord and cpreplay --list judge one database with one function: on crash cases too (a
// crashed execution's missing results are no fresh-vs-pooled divergence), every case gets the
// same differential flag and expectation from both tools.
TEST(ReplayCliAgreement, RecordAndListAgreeOnEveryCase) {
  const std::string dir = test::temp_dir("cprr-cli");
  const std::string db = dir + "/agree.db";
  const Cmd rec =
      run(kRecord + " --db " + db +
          " --mode both --repeat 2 --json --filter '^bug/segfault_rank@|^healthy/noop@2|"
          "^bug/global_rng'");
  ASSERT_EQ(rec.code, 0) << rec.out;
  const auto recorded = nlohmann::json::parse(rec.out);
  const Cmd list = run(kReplay + " --db " + db + " --list --json");
  ASSERT_EQ(list.code, 0);
  const auto list_doc = nlohmann::json::parse(list.out);
  std::map<int64_t, nlohmann::json> listed;
  for (const auto& c : list_doc["cases"]) listed[c["id"].get<int64_t>()] = c;
  ASSERT_EQ(listed.size(), recorded["cases"].size());
  int flagged = 0;
  for (const auto& c : recorded["cases"]) {
    SCOPED_TRACE(c["label"].get<std::string>());
    const auto& l = listed.at(c["id"].get<int64_t>());
    EXPECT_EQ(l["fresh_vs_pool_differs"].get<bool>(), !c["fresh_vs_pool"].is_null());
    EXPECT_EQ(l["as_expected"], c["as_expected"]);
    flagged += c["fresh_vs_pool"].is_null() ? 0 : 1;
  }
  EXPECT_EQ(flagged, 2) << "the two global_rng victims (n=4096 at W=2 and W=4)";
  std::filesystem::remove_all(dir);
}

TEST_F(ReplayCli, BadInputsExitTwoWithAClearMessage) {
  const std::string dir = test::temp_dir("cprr-cli");
  { std::ofstream(dir + "/text.db") << "this is not a database, just text\n"; }
  {
    Database d = Database::open(dir + "/newer.db", Database::Mode::read_write);
    d.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
  }
  struct Bad {
    std::string args;
    std::string message;
  };
  for (const Bad& b : {Bad{"--db " + dir + "/missing.db --list", "no such file"},
                       Bad{"--db " + dir + "/text.db --list", "not an SQLite database"},
                       Bad{"--db " + dir + "/newer.db --list", "newer"},
                       Bad{"--db " + db() + " --case 999999", "no such case"},
                       Bad{"--db " + db(), "exactly one of --list, --all and --case"}}) {
    const Cmd r = run_stderr(kReplay + " " + b.args);
    EXPECT_EQ(r.code, 2) << b.args << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(b.message)) << b.args;
  }
  const Cmd rec = run_stderr(kRecord + " --db " + dir + "/text.db --filter noop@2");
  EXPECT_EQ(rec.code, 2);
  EXPECT_THAT(rec.out, HasSubstr("not an SQLite database"));
  std::filesystem::remove_all(dir);
}

// A replay that cannot run is an infrastructure error naming the worker, never a verdict.
TEST_F(ReplayCli, AWorkerThatCannotRunIsAnInfrastructureErrorNotAVerdict) {
  const std::string target = std::to_string(id("healthy/noop@2"));
  for (const char* mode : {"fresh", "pool", "both"}) {
    SCOPED_TRACE(mode);
    const Cmd r = run_stderr(kReplay + " --db " + db() + " --worker /bin/true --mode " + mode +
                             " --case " + target);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_THAT(r.out, HasSubstr("worker /bin/true"));
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("nondeterministic")));
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("match the record")));
  }
  // A real worker that lacks the case (another binary) is refused before anything runs.
  const Cmd other = run_stderr(kReplay + " --db " + db() + " --worker " CPRR_FIXTURE_WORKER_PATH +
                               " --case " + target);
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_THAT(other.out, HasSubstr("has no case named healthy/noop"));
}

// An `error` from a world that started (here a reset hook that throws) is the case's: the replay
// runs and gives a verdict (reproduced, failing: exit 1), not an infrastructure error (2).
TEST(ReplayCliCaseError, AnErrorInAStartedWorldGetsAVerdict) {
  const std::string dir = test::temp_dir("cprr-cli");
  const std::string db = dir + "/error.db";
  const Cmd rec = run("CPRR_FIXTURE_RESET_THROWS=1 " + kRecord + " --db " + db + " --worker " +
                      CPRR_FIXTURE_WORKER_PATH + " --mode both --filter '^test/ok@2$'");
  EXPECT_EQ(rec.code, 2) << "cprecord counts an unexpected error against the run as infrastructure";
  const Cmd r = run(kReplay + " --db " + db + " --case 1 --json");
  EXPECT_EQ(r.code, 1) << r.out;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["verdict"], "reproduced");
  EXPECT_EQ(doc["replayed"]["fresh"], "error");
  std::filesystem::remove_all(dir);
}

TEST_F(ReplayCli, VersionTimeoutChecksAndTheRunsJunitAgreeWithItsExitCode) {
  EXPECT_EQ(run(kReplay + " --version").out, std::string("cpreplay ") + CPRR_VERSION + "\n");
  for (const char* t : {"nan", "1e300", "0"}) {
    const Cmd r = run_stderr(kReplay + " --db " + db() + " --timeout " + t + " --case 1");
    EXPECT_EQ(r.code, 2) << t;
    EXPECT_THAT(r.out, ::testing::AnyOf(HasSubstr("must be a positive number of seconds"),
                                        HasSubstr("must be at most")));
  }
  // The recording exited 0 although its seeded bugs' pooled executions fail: their JUnit
  // testcases pass and say what was expected.
  ASSERT_EQ(code_, 0);
  std::ifstream in(*dir_ + "/run.xml");
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(xml, HasSubstr("failures=\"0\" errors=\"0\""));
  EXPECT_THAT(xml, HasSubstr("seeded bug (state_leak), expected to show"));
}

// A recorder killed mid-run keeps every execution it completed, and the run shows incomplete.
// Starts cprecord on test/ok then test/stall (a minute long) and returns once test/ok is
// committed and the stall's body has started (it makes CPRR_TEST_STARTED's file), so a signal
// sent then lands mid-case, with the stall's world up.
// Its worlds' directories go to `tmp` (TMPDIR), away from other tests' sweeps under ctest -j.
pid_t start_recorder_into_the_stall(const std::string& db, const std::string& tmp,
                                    const std::string& out = "/dev/null") {
  std::filesystem::create_directories(tmp);
  const std::string cmd = kRecord + " --db " + db + " --worker " CPRR_FIXTURE_WORKER_PATH +
                          " --json --timeout 120 --filter '^test/(ok|stall)@2$' > " + out +
                          " 2>/dev/null";
  const pid_t pid = ::fork();
  if (pid == 0) {
    // exec: the recorder keeps the shell's pid, the one the test signals and looks for.
    const std::string env = "TMPDIR=" + tmp + " CPRR_TEST_STARTED=" + tmp + "/stall-started";
    ::execl("/bin/sh", "sh", "-c", (env + " exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool committed = false;
  for (int i = 0; i < 2400 && !committed && pid > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // why: the commit's poll
    try {
      Database d = Database::open(db, Database::Mode::read_only);
      Statement st(d, "SELECT count(*) FROM execution");
      committed = st.step() && st.int64(0) >= 1;
    } catch (const std::exception&) {
    }
  }
  EXPECT_TRUE(committed) << "the first execution was never committed";
  bool started = false;
  for (int i = 0; i < 2400 && !started && committed; ++i) {
    started = std::filesystem::exists(tmp + "/stall-started");
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // why: its poll
  }
  EXPECT_TRUE(started) << "the stall never started";
  return pid;
}

// The per-world directories of a recorder's worlds in the temp directory `tmp`.
std::vector<std::string> world_dirs_of(pid_t recorder, const std::string& tmp) {
  std::vector<std::string> out;
  const std::string prefix = "cprr-world-" + std::to_string(recorder) + "-";
  for (const auto& e : std::filesystem::directory_iterator(tmp)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  return out;
}

TEST(ReplayCliCrash, KilledRecorderLeavesCompletedExecutionsAndAnIncompleteRun) {
  const std::string dir = test::temp_dir("cprr-cli");
  const std::string db = dir + "/killed.db";
  const std::string tmp = dir + "/tmp";
  const pid_t pid = start_recorder_into_the_stall(db, tmp);
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const RecordReader reader(db);
  const auto runs = reader.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].finished_at.has_value());
  EXPECT_FALSE(runs[0].exit_code.has_value());
  const auto cases = reader.cases();
  ASSERT_EQ(cases.size(), 2u);
  const auto execs = reader.executions(cases[0].id);
  ASSERT_EQ(execs.size(), 1u);
  EXPECT_EQ(execs[0].result.status, ExecStatus::pass);
  EXPECT_TRUE(reader.executions(cases[1].id).empty());
  const Cmd list = run(kReplay + " --db " + db + " --list");
  EXPECT_THAT(list.out, HasSubstr("INCOMPLETE"));
  // A killed recorder cannot remove its worlds' directories; the next run removes them, since
  // their owner is gone.
  EXPECT_THAT(world_dirs_of(pid, tmp), ::testing::Not(::testing::IsEmpty()));
  const Cmd next = run("TMPDIR=" + tmp + " " + kRecord + " --db " + db +
                       " --worker " CPRR_FIXTURE_WORKER_PATH + " --filter '^test/ok@2$'");
  EXPECT_EQ(next.code, 0);
  EXPECT_THAT(world_dirs_of(pid, tmp), ::testing::IsEmpty());
  std::filesystem::remove_all(dir);
}

// Ctrl-C mid-run: the running case's ranks are killed, what ran is recorded and reported, the run
// is finished with exit code 130 (and the process exits 130), and no world directory is left.
TEST(ReplayCliCrash, InterruptedRecorderFinishesTheRunAndCleansUp) {
  const std::string dir = test::temp_dir("cprr-cli");
  const std::string db = dir + "/interrupted.db";
  const std::string tmp = dir + "/tmp";
  const pid_t pid = start_recorder_into_the_stall(db, tmp, dir + "/out.json");
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "cprecord died of the signal instead of handling it";
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const RecordReader reader(db);
  const auto runs = reader.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].finished_at.has_value());
  EXPECT_EQ(runs[0].exit_code, 130);
  const auto cases = reader.cases();
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(reader.executions(cases[0].id).size(), 1u);
  // The stall had started (start_recorder_into_the_stall): ended by the interrupt, not by its
  // minute, it left no execution.
  EXPECT_TRUE(reader.executions(cases[1].id).empty()) << "the interrupted stall says nothing";
  EXPECT_FALSE(cases[0].judgement.has_value()) << "a run cut short judges nothing";
  std::ifstream json(dir + "/out.json");
  const auto doc = nlohmann::json::parse(json);
  EXPECT_EQ(doc["exit_code"], 130) << "the document agrees with the process";
  EXPECT_EQ(doc["cases"].size(), 1u);
  EXPECT_THAT(world_dirs_of(pid, tmp), ::testing::IsEmpty());
  std::filesystem::remove_all(dir);
}

// Two recorders writing one database at the same time lose nothing.
TEST(ReplayCliConcurrency, TwoRecordersShareOneDatabase) {
  const std::string dir = test::temp_dir("cprr-cli");
  const std::string db = dir + "/shared.db";
  const std::string cmd =
      kRecord + " --db " + db + " --mode both --repeat 3 --filter '^healthy/noop@2$' > /dev/null";
  std::thread a([&] { EXPECT_EQ(run(cmd).code, 0); });
  std::thread b([&] { EXPECT_EQ(run(cmd).code, 0); });
  a.join();
  b.join();
  const RecordReader reader(db);
  const auto runs = reader.runs();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& r : runs) EXPECT_EQ(r.exit_code, 0);
  int executions = 0;
  for (const auto& c : reader.cases())
    executions += static_cast<int>(reader.executions(c.id).size());
  EXPECT_EQ(executions, 2 * 3 * 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cprr
