// A corpus case recorded with `cprecord --trace DIR` and replayed with `cpreplay --trace FILE`:
// a file for each execution of the case with a verdict, each checked against the trace-event
// format (tests/cli/trace_support.h: ph/ts/dur/pid/tid present; flow ids pair up and bind to an
// op), every op of both ranks on its stream's track, the collective and the race as arrows.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "commands/record_command.h"
#include "schema/record_reader.h"
#include "tests/cli/cli_run.h"
#include "tests/cli/trace_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using trace_test::events;
using trace_test::json;
using trace_test::read_json;
using trace_test::trace_problems;

const std::string kWorker = CPRR_WORKER_PATH;
const std::string kCpreplay = CPRR_CPREPLAY_PATH;

TEST(RecordCommandTrace,
     ARecordedRaceCaseAndItsReplayGiveValidTimelinesWithCollectiveAndRaceArrows) {
  const std::string dir = "/tmp/cprr-trace-test-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  RecordOptions o;
  o.shared.worker = kWorker;
  o.backend = "cpu";
  o.db = dir + "/run.db";
  o.mode = "both";
  o.filter = "^(bug|fixed)/cp_maxlogit_race@2$";
  o.json = true;
  o.shared.trace = dir + "/traces";
  std::ostringstream out, err;
  ASSERT_EQ(run_record(o, out, err, false, false), 0) << err.str();
  EXPECT_THAT(err.str(), HasSubstr("wrote 2 trace(s) to " + o.shared.trace));
  // Only the seeded bug has a verdict; its fresh and pooled executions are traced.
  const json run = json::parse(out.str());
  int64_t bug = 0;
  for (const json& c : run["cases"]) {
    if (c["label"] == "bug/cp_maxlogit_race@2") bug = c["id"];
  }
  ASSERT_NE(bug, 0);
  std::set<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(o.shared.trace))
    files.insert(f.path().filename());
  EXPECT_EQ(files, (std::set<std::string>{fmt::format("case-{}-fresh-1.json", bug),
                                          fmt::format("case-{}-pool-1.json", bug)}));
  const RecordReader reader(o.db);
  const std::size_t ops_per_rank =
      reader.executions(bug).at(0).result.ranks.at(0).done->capture.ops.size();
  const auto check = [&](const std::string& path) {
    SCOPED_TRACE(path);
    const json doc = read_json(path);
    EXPECT_THAT(trace_problems(doc), ::testing::IsEmpty());
    EXPECT_EQ(events(doc, "X").size(), 2 * ops_per_rank) << "every op of both ranks";
    // Ops of one stream never overlap: each starts after the one before it on its track ends.
    std::map<std::pair<int, int>, double> track_end;
    for (const json& x : events(doc, "X")) {
      if (x["tid"] == 0) continue;  // the host track holds waits that span others
      double& end = track_end[{x["pid"], x["tid"]}];
      EXPECT_GE(x["ts"].get<double>() + 1e-3, end) << x.dump();
      end = x["ts"].get<double>() + x["dur"].get<double>();
    }
    EXPECT_EQ(events(doc, "s", "collective").size(), 1u) << "its one all-reduce, joined";
    const auto races = events(doc, "s", "race");
    ASSERT_FALSE(races.empty());
    EXPECT_THAT(races[0]["name"].get<std::string>(), HasSubstr("race on '"));
    EXPECT_THAT(races[0]["args"]["fix"].get<std::string>(), HasSubstr("must wait for an event"));
  };
  for (const std::string& f : files) check(o.shared.trace + "/" + f);
  // cpreplay --case N --trace FILE: the fresh replay's timeline.
  const std::string replayed = dir + "/replay.json";
  const std::string cmd = fmt::format("'{}' --db '{}' --case {} --mode fresh --json --trace '{}'",
                                      kCpreplay, o.db, bug, replayed);
  const test::Cmd replay = test::run(cmd, test::Stderr::as_written);
  ASSERT_LE(replay.code, 1) << "no usage or infrastructure error (2): " << replay.out;
  EXPECT_EQ(json::parse(replay.out)["trace"], replayed);
  check(replayed);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cprr
