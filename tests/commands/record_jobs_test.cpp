// cprecord --jobs in-process: worlds side by side give the verdicts and expectations one world at
// a time gives, each world's executions stay one job's (its cores, its pool order), and a pooled
// case of a --jobs run replays after the cases that really preceded it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "commands/replay_command.h"
#include "recorder/launch/interrupt.h"
#include "schema/record_reader.h"
#include "tests/commands/record_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace record_test;  // NOLINT(google-build-using-namespace): this file's own helpers

// Passing, failing, crashing, leaking (config_mutation: a pooled case fails after its twin
// mutated the config) and racing cases at W=2 and 4.
const char* const kJobsPlan =
    "^(healthy/(noop|broadcast|all_reduce\\{count=1,dtype=f32|two_stream_pipeline\\{n=4096)|"
    "(bug|fixed)/(segfault_rank|uninitialized_read|config_mutation|cp_maxlogit_race)|"
    "fault/throw_before_collective)";

struct JobsRun {
  std::string db;
  int code = -1;
  std::string err;
};

JobsRun record_with_jobs(int jobs, const std::string& mode) {
  RecordOptions o = opts(kWorker, kJobsPlan, false);
  o.db = test_db() + ".jobs" + std::to_string(jobs) + mode;
  o.mode = mode;
  o.jobs = jobs;
  const Recorded r = record(o);
  return JobsRun{o.db, r.code, r.err};
}

// Each case's judgement and the statuses of its executions by mode, by label. The jobs' parts of
// the pooled plan meet between two cases, so a grid point that leaks state (config_mutation's
// thd before its bshd) meets its later points in one world, as with one job.
std::map<std::string, std::string> judged(const std::string& db) {
  const RecordReader reader(db);
  std::map<std::string, std::string> out;
  for (const RecordedCase& c : reader.cases()) {
    std::map<std::string, std::string> statuses;
    for (const RecordedExecution& e : reader.executions(c.id, RecordReader::Detail::captures)) {
      statuses[std::string(mode_name(e.result.mode))] = status_name(e.result.status);
    }
    out[c.instance.label()] =
        fmt::format("verdict {} as_expected {}: fresh={} pool={}",
                    c.judgement ? c.judgement->verdict.value_or("-") : "?",
                    c.judgement && c.judgement->as_expected, statuses["fresh"], statuses["pool"]);
  }
  return out;
}

TEST(RecordJobs, TwoJobsGiveTheVerdictsAndStatusesOfOneInBothModes) {
  const JobsRun one = record_with_jobs(1, "both");
  const JobsRun two = record_with_jobs(2, "both");
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(two.code, 0) << two.err;
  EXPECT_THAT(two.err, StartsWith("cprecord: 2 jobs, each on its own cores: cpus "));
  const std::map<std::string, std::string> want = judged(one.db);
  EXPECT_GT(want.size(), 15u);
  EXPECT_EQ(judged(two.db), want);
}

TEST(RecordJobs, EachWorldIsOneJobsAndItsPooledCasesReplayAfterTheirRealPredecessors) {
  const JobsRun two = record_with_jobs(2, "pool");
  ASSERT_EQ(two.code, 0) << two.err;
  const RecordReader reader(two.db);
  std::map<uint64_t, std::set<std::string>> devices_of_world;
  std::set<std::string> devices;
  std::vector<RecordedCase> with_predecessors;
  for (const RecordedCase& c : reader.cases()) {
    for (const RecordedExecution& e : reader.executions(c.id, RecordReader::Detail::captures)) {
      devices_of_world[e.result.world_id].insert(e.result.devices);
      devices.insert(e.result.devices);
      EXPECT_THAT(e.result.devices, StartsWith("cpus ")) << c.instance.label();
      // The cases before it in its world ran in that world's job, in pool order.
      for (const RecordedCase& p : reader.predecessors(e)) {
        EXPECT_LT(p.instance.id, c.instance.id) << "a job's pool runs its part in plan order";
      }
      if (!reader.predecessors(e).empty()) with_predecessors.push_back(c);
    }
  }
  EXPECT_EQ(devices.size(), 2u) << "two jobs, two places";
  for (const auto& [world, places] : devices_of_world) {
    EXPECT_EQ(places.size(), 1u) << "world " << world << " ran in one job";
  }
  ASSERT_FALSE(with_predecessors.empty());
  ReplayCommandOptions ro;
  ro.replay.db = two.db;
  ro.replay.pin = true;
  ro.case_id = with_predecessors.back().id;
  std::ostringstream out, err;
  EXPECT_EQ(run_replay(ro, out, err, /*progress=*/true), 0) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr(with_predecessors.back().instance.label()));
  EXPECT_THAT(err.str(), HasSubstr("--pin: the replays run on cpus ")) << "pinned as recorded";
}

TEST(RecordJobs, FailFastStopsEveryJobAndEveryReportedExecutionIsStored) {
  RecordOptions o = opts(kFixture, "^test/(ok|fail_expect)@2$");
  o.db = test_db() + ".jobs-fail-fast";
  o.mode = "fresh";
  o.repeat = 10;
  o.jobs = 2;
  o.fail_fast = true;
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 1) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_THAT(doc.at("stopped").get<std::string>(), HasSubstr("(test/fail_expect@2) was not"));
  std::size_t reported = 0;
  for (const json& c : doc.at("cases")) reported += c.at("executions").size();
  EXPECT_LT(reported, 20u) << "the jobs stopped";
  const RecordReader reader(o.db);
  std::size_t stored = 0;
  for (const RecordedCase& c : reader.cases()) {
    if (c.run_id == reader.latest_run("test").id) {
      stored += reader.executions(c.id, RecordReader::Detail::captures).size();
    }
  }
  EXPECT_EQ(stored, reported);
}

TEST(RecordJobs, AnInterruptionStopsEveryJobAndWhatRanIsStored) {
  // Rank 0 of a pooled world's 12th execution signals this process; 23 repeats in two jobs give
  // the first job's pooled world 11 and the second's 12: one signal (a second would end the
  // process at once, as a second Ctrl-C does).
  InterruptWatch watch;
  RecordOptions o = opts(kFixture, "^test/interrupt_recorder\\{");
  o.db = test_db() + ".jobs-interrupt";
  o.repeat = 23;
  o.jobs = 2;
  o.shared.interrupt = &watch;
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 128 + SIGINT);
  const json doc = json::parse(r.out);
  std::size_t reported = 0;
  for (const json& c : doc.at("cases")) reported += c.at("executions").size();
  EXPECT_GE(reported, 11u);
  EXPECT_LT(reported, 23u);
  const RecordReader reader(o.db);
  EXPECT_EQ(reader.executions(reader.cases().back().id, RecordReader::Detail::captures).size(),
            reported);
}

}  // namespace
}  // namespace cprr
