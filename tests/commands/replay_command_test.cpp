// The cpreplay verb in-process (run_replay): exactly one of --list, --all and --case, --trace only
// with --case, the shared options checked as cprecord checks them, and a recorded case listed and
// replayed with the worker the run recorded or the one --worker names. The replay machinery's
// verdicts: tests/replayer.
#include "commands/replay_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/cli_options.h"
#include "runtime/error.h"
#include "tests/commands/record_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace record_test;  // NOLINT(google-build-using-namespace): this folder's own helpers

struct Replayed {
  int code = -1;
  std::string out;
  std::string err;
};

Replayed replay(const ReplayCommandOptions& o) {
  std::ostringstream out, err;
  Replayed r;
  r.code = run_replay(o, out, err, /*progress=*/false);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string usage_error(const ReplayCommandOptions& o) {
  try {
    replay(o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// A database holding one recorded run of healthy/noop@2, both modes; made once per test process.
const std::string& recorded_db() {
  static const std::string db = [] {
    RecordOptions o = opts(kWorker, "^healthy/noop@2$");
    o.db = test_db() + ".replay";
    o.mode = "both";
    const Recorded r = record(o);
    EXPECT_EQ(r.code, 0) << r.err;
    return o.db;
  }();
  return db;
}

ReplayCommandOptions of_case(int64_t id) {
  ReplayCommandOptions o;
  o.replay.db = recorded_db();
  o.case_id = id;
  return o;
}

TEST(ReplayCommand, ReadsTheDatabaseCprecordWritesByDefault) {
  EXPECT_EQ(ReplayCommandOptions{}.replay.db, RecordOptions{}.db);
}

TEST(ReplayCommand, ExactlyOneOfListAllAndCase) {
  ReplayCommandOptions none;
  EXPECT_THAT(usage_error(none), HasSubstr("give exactly one of --list, --all and --case ID"));
  ReplayCommandOptions two = of_case(1);
  two.list = true;
  EXPECT_THAT(usage_error(two), HasSubstr("give exactly one of"));
}

TEST(ReplayCommand, TraceGoesWithCaseAndSharedOptionsAreCheckedAsCprecordChecksThem) {
  ReplayCommandOptions all;
  all.replay.db = recorded_db();
  all.all = true;
  all.replay.shared.trace = test_db() + ".trace.json";
  EXPECT_THAT(usage_error(all), HasSubstr("--trace FILE goes with --case ID"));
  ReplayCommandOptions o = of_case(1);
  o.replay.shared.run.timeout_override_s = std::nan("");
  EXPECT_THAT(usage_error(o), HasSubstr("--timeout"));
  o.replay.shared.run.timeout_override_s = 5;
  o.replay.shared.run.standby = kMaxStandby + 1;
  o.replay.launch = LaunchOptions{.kind = LauncherKind::mpirun};
  EXPECT_THAT(usage_error(o), HasSubstr("--standby"));
}

TEST(ReplayCommand, ListsTheRecordedCaseAndReplaysItWithTheRecordedWorker) {
  ReplayCommandOptions list;
  list.replay.db = recorded_db();
  list.list = true;
  const Replayed listed = replay(list);
  EXPECT_EQ(listed.code, 0);
  EXPECT_THAT(listed.out, HasSubstr("healthy/noop@2"));
  ReplayCommandOptions o = of_case(1);
  o.replay.mode = "fresh";
  o.json = true;
  const Replayed r = replay(o);
  EXPECT_EQ(r.code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("verdict"), "reproduced");
  EXPECT_EQ(doc.at("mode"), "fresh");
  EXPECT_EQ(doc.at("replays"), 1);
}

TEST(ReplayCommand, AnotherWorkerIsUsedAndOneThatCannotRunIsRefusedByName) {
  ReplayCommandOptions o = of_case(1);
  o.replay.mode = "fresh";
  o.replay.shared.worker = "/nonexistent/cprr/cpworker";
  try {
    replay(o);
    ADD_FAILURE() << "a missing worker replayed";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/cprr/cpworker"));
  }
  o.replay.shared.worker = kFixture;  // holds no healthy/noop: refused before anything runs
  try {
    replay(o);
    ADD_FAILURE() << "a worker without the case replayed";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("healthy/noop"));
  }
}

// A run recorded with a copy of the worker, which is then rebuilt (a byte appended: still the same
// cases, and still runs): the replay says the worker changed and goes on; --strict refuses.
TEST(ReplayCommand, AWorkerChangedSinceTheRecordIsSaidAndStrictRefusesIt) {
  namespace fs = std::filesystem;
  const fs::path copy = test_db() + ".worker";
  fs::copy_file(kWorker, copy, fs::copy_options::overwrite_existing);
  RecordOptions ro = opts(copy.string(), "^healthy/noop@2$");
  ro.db = test_db() + ".changed";
  ro.mode = "fresh";
  ASSERT_EQ(record(ro).code, 0);
  ReplayCommandOptions o;
  o.replay.db = ro.db;
  o.case_id = 1;
  o.replay.mode = "fresh";
  const Replayed same = replay(o);
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_THAT(same.out, Not(HasSubstr("replayed other code")));

  std::ofstream(copy, std::ios::app) << '\n';
  const Replayed changed = replay(o);
  EXPECT_EQ(changed.code, 0) << changed.err;
  EXPECT_THAT(changed.out, HasSubstr("replayed other code: worker " + copy.string() +
                                     " changed since run 1 was recorded (its content differs)"));
  o.replay.strict = true;
  EXPECT_THAT(usage_error(o), HasSubstr("--strict: not replaying case 1: worker " + copy.string() +
                                        " changed since run 1 was recorded"));
  fs::remove(copy);
  fs::remove(ro.db);
}

}  // namespace
}  // namespace cprr
