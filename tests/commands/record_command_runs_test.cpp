// The cprecord verb over whole runs: --fail-fast and Ctrl-C store what ran, --rerun-failed runs
// what the latest run had not as expected, exact seeds, --junit checked before the run, a
// fresh-vs-pooled divergence judged once everywhere, colour only where unexpected, and --standby.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "commands/record_command.h"
#include "recorder/launch/interrupt.h"
#include "runtime/error.h"
#include "schema/record_reader.h"
#include "tests/commands/record_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using namespace record_test;  // NOLINT(google-build-using-namespace): this file's own helpers

// How many executions `db` holds for run `run_id`: what the store kept of a run.
std::size_t stored_executions(const std::string& db, int64_t run_id) {
  const RecordReader reader(db);
  std::size_t n = 0;
  for (const RecordedCase& c : reader.cases()) {
    if (c.run_id == run_id) n += reader.executions(c.id, RecordReader::Detail::captures).size();
  }
  return n;
}

// How many executions the --json document reports.
std::size_t reported_executions(const json& doc) {
  std::size_t n = 0;
  for (const json& c : doc.at("cases")) n += c.at("executions").size();
  return n;
}

TEST(RecordCommand, FailFastStopsAfterTheFirstCaseNotAsExpectedAndRecordsWhy) {
  // Catalog order: test/fail_expect (fails, expected to pass), then test/fail_as_expected.
  RecordOptions o = opts(kFixture, "^test/(fail_expect|fail_as_expected)@2$");
  o.db = test_db() + ".failfast";
  const Recorded all = record(o);
  EXPECT_EQ(json::parse(all.out).at("cases").size(), 2u) << "without the flag everything runs";
  EXPECT_TRUE(json::parse(all.out).at("stopped").is_null());
  o.fail_fast = true;
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 1);
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc.at("cases").size(), 1u) << "the second case never ran";
  EXPECT_EQ(doc.at("cases")[0].at("label"), "test/fail_expect@2");
  EXPECT_THAT(doc.at("stopped").get<std::string>(),
              HasSubstr("--fail-fast: case 3 (test/fail_expect@2) was not as expected"));
  EXPECT_THAT(r.err, HasSubstr("stopped by --fail-fast"));
  // The store says the same: finished (not incomplete), stopped, the case judged.
  const auto runs = RecordReader(o.db).runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs[1].finished_at.has_value());
  EXPECT_EQ(runs[1].stopped, doc.at("stopped").get<std::string>());
  EXPECT_FALSE(runs[0].stopped.has_value());
  // Every execution the report judged is in the store (they are committed on a writer thread).
  EXPECT_EQ(stored_executions(o.db, runs[1].id), reported_executions(doc));
  // A failure in the plan's last case stops nothing: the plan was done.
  RecordOptions last = opts(kFixture, "^test/(ok|fail_expect)@2$");
  last.db = test_db() + ".failfast-last";
  last.fail_fast = true;
  EXPECT_TRUE(json::parse(record(last).out).at("stopped").is_null());
}

TEST(RecordCommand, AnInterruptedRunStoresEveryExecutionItReportsBeforeItEnds) {
  // The 12th execution of test/interrupt_recorder in its pooled world sends SIGINT to this
  // process (the ranks' parent) mid-run; the executions before it may still be queued for the
  // writer thread then.
  InterruptWatch watch;
  RecordOptions o = opts(kFixture, "^test/interrupt_recorder\\{");
  o.db = test_db() + ".interrupt";
  o.repeat = 20;
  o.shared.interrupt = &watch;
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 128 + SIGINT);
  EXPECT_THAT(r.err, HasSubstr("interrupted by SIGINT"));
  const json doc = json::parse(r.out);
  EXPECT_GE(reported_executions(doc), 11u) << "the executions before the signal all ran";
  EXPECT_LT(reported_executions(doc), 20u) << "the run stopped early";
  const auto runs = RecordReader(o.db).runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].exit_code, 128 + SIGINT) << "finished, with the signal's exit code";
  EXPECT_EQ(stored_executions(o.db, runs[0].id), reported_executions(doc));
  EXPECT_EQ(doc.at("interrupted_by"), "SIGINT");
}

TEST(RecordCommand, AnInterruptedRunsTableSaysSoInsteadOfAllAsExpected) {
  InterruptWatch watch;
  RecordOptions o = opts(kFixture, "^test/interrupt_recorder\\{", /*as_json=*/false);
  o.db = test_db() + ".interrupt-table";
  o.repeat = 20;
  o.shared.interrupt = &watch;
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 128 + SIGINT);
  EXPECT_THAT(r.out, HasSubstr("cases: interrupted by SIGINT, 0 unexpected before it;"));
  EXPECT_THAT(r.out, Not(HasSubstr("all as expected")));
}

TEST(RecordCommand, ACppSkipOnEveryRankIsASkipAndOnOneRankAFailNamingIt) {
  RecordOptions o = opts(kFixture, "^test/skip_(everywhere|alone)@2$");
  o.db = test_db() + ".skips";
  o.mode = "both";
  o.shared.run.timeout_override_s = 60;
  o.junit = test_db() + ".skips.xml";
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 0) << r.out << r.err;  // a skip is no failure; the lone skip is expected
  const json doc = json::parse(r.out);
  const json* everywhere = find_case(doc, "test/skip_everywhere@2");
  ASSERT_NE(everywhere, nullptr);
  EXPECT_EQ(everywhere->at("status"), "skip");
  EXPECT_TRUE(everywhere->at("as_expected").get<bool>());
  for (const json& e : everywhere->at("executions")) {
    EXPECT_EQ(e.at("summary"), "skipped: needs 8 GPUs");
    EXPECT_EQ(e.at("ranks")[1].at("outcome"), "skip");
  }
  const json* alone = find_case(doc, "test/skip_alone@2");
  ASSERT_NE(alone, nullptr);
  for (const json& e : alone->at("executions")) {
    EXPECT_EQ(e.at("status"), "fail");  // released by the skip, not a hang at the deadline
    EXPECT_THAT(e.at("summary").get<std::string>(),
                StartsWith("rank 1 skipped the case (no shard for rank 1) while rank 0 ran it"));
  }
  std::ifstream xml(o.junit);
  const std::string junit((std::istreambuf_iterator<char>(xml)), {});
  EXPECT_THAT(junit, HasSubstr("skipped=\"2\""));
  EXPECT_THAT(junit, HasSubstr("<skipped message=\"skipped: needs 8 GPUs\"/>"));
}

TEST(RecordCommand, RerunFailedRunsOnlyWhatTheLatestRunHadNotAsExpected) {
  RecordOptions o = opts(kFixture, "^test/(ok|fail_expect|fail_as_expected)@2$");
  o.db = test_db() + ".rerun";
  EXPECT_EQ(record(o).code, 1);  // test/fail_expect fails unexpectedly
  RecordOptions rerun = opts(kFixture, "");
  rerun.db = o.db;
  rerun.rerun_failed = true;
  const Recorded again = record(rerun);
  EXPECT_EQ(again.code, 1);
  const json doc = json::parse(again.out);
  ASSERT_EQ(doc.at("cases").size(), 1u);
  EXPECT_EQ(doc.at("cases")[0].at("label"), "test/fail_expect@2");
  // --filter still narrows it.
  RecordOptions narrowed = rerun;
  narrowed.filter = "^test/ok";
  EXPECT_THROW(record(narrowed), UsageError) << "no case left";
  // A latest run with nothing unexpected leaves nothing to rerun: exit 0, said on stderr.
  RecordOptions clean = opts(kFixture, "^test/ok@2$");
  clean.db = o.db;
  EXPECT_EQ(record(clean).code, 0);
  const Recorded nothing = record(rerun);
  EXPECT_EQ(nothing.code, 0);
  EXPECT_TRUE(nothing.out.empty());
  EXPECT_THAT(nothing.err, HasSubstr("nothing to rerun"));
  RecordOptions missing = rerun;
  missing.db = test_db() + ".never-written";
  try {
    record(missing);
    ADD_FAILURE() << "a missing --db accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--rerun-failed: " + missing.db + " does not exist"));
  }
}

TEST(RecordCommand, SeedsAreExactForJsonConsumers) {
  RecordOptions o = opts(kWorker, "", true);
  o.list = true;
  const json doc = json::parse(record(o).out);
  ASSERT_GT(doc.at("plan").size(), 50u);
  for (const json& c : doc.at("plan")) {
    const uint64_t seed = c.at("seed").get<uint64_t>();
    EXPECT_LE(seed, kMaxSeed) << c.at("label");
    EXPECT_EQ(static_cast<uint64_t>(static_cast<double>(seed)), seed) << "a double must hold it";
  }
}

TEST(RecordCommand, UnwritableJunitIsFoundBeforeTheRun) {
  RecordOptions o = opts(kFixture, "^test/ok@");
  o.db = test_db() + ".junit-precheck";
  o.junit = "/nonexistent-cprr-dir/report.xml";
  try {
    record(o);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--junit /nonexistent-cprr-dir/report.xml"));
    EXPECT_THAT(e.what(), HasSubstr("No such file or directory"));
  }
  EXPECT_NE(::access(o.db.c_str(), F_OK), 0) << "the run must not have started";
}

// test/reset_hook outputs a counter its pooled process keeps: fresh 1, 1; pooled 1, 2. The
// unexpected divergence fails the run (1), is red in the table, names its replay command with the
// non-default --db, fails exactly the pooled execution's JUnit testcase, and every row shows its
// try.
TEST(RecordCommand, DivergenceIsOneJudgementInExitCodeTableJsonAndJunit) {
  const std::string xml = test_db() + ".xml";
  RecordOptions o = opts(kFixture, "^test/reset_hook@", false);
  o.mode = "both";
  o.repeat = 2;
  o.junit = xml;
  std::ostringstream out, err;
  const int code = run_record(o, out, err, false, /*color=*/true);
  EXPECT_EQ(code, 1);
  const std::string table = out.str();
  EXPECT_THAT(table, HasSubstr("cpreplay --db " + test_db() + " --case "));
  EXPECT_THAT(table, HasSubstr("\033[1;31m")) << "the diverging execution is painted as a failure";
  std::istringstream lines(table);
  int tries_2 = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("test/reset_hook@2  pool     2") != std::string::npos) ++tries_2;
  }
  EXPECT_EQ(tries_2, 1) << table;
  const test::Cmd junit = test::run("cat " + xml, test::Stderr::as_written);
  EXPECT_THAT(junit.out, HasSubstr("failures=\"1\""));  // pooled try 2, which diverged and varied
  EXPECT_THAT(junit.out, HasSubstr("cpreplay --db " + test_db() + " --case "));
  std::remove(xml.c_str());

  o.json = true;
  o.junit.clear();
  const json doc = json::parse(record(o).out);
  const json& c = doc.at("cases").at(0);
  ASSERT_EQ(c.at("executions").size(), 4u);
  int unexpected = 0;
  for (const json& e : c.at("executions")) {
    EXPECT_TRUE(e.contains("attempt"));
    // As in the store: the status meets the case's expect (every try passed, as expected)...
    EXPECT_EQ(e.at("as_expected").get<bool>(), e.at("status") == "pass") << e.dump();
    unexpected += e.at("counts_against_run").get<bool>() ? 1 : 0;
  }
  // ... while the run's judgement holds the one that diverged against it.
  EXPECT_EQ(unexpected, 1) << "only the diverging pooled execution counts against the run";
}

// An expected failure is not painted as one; an unexpected one is.
TEST(RecordCommand, OnlyUnexpectedRowsArePaintedRed) {
  for (const auto& [filter, red] : {std::pair<std::string, bool>{"^test/fail_as_expected@", false},
                                    {"^test/fail_expect@", true}}) {
    std::ostringstream out, err;
    run_record(opts(kFixture, filter, false), out, err, false, /*color=*/true);
    EXPECT_EQ(out.str().find("\033[1;31mfail") != std::string::npos, red) << out.str();
  }
}

}  // namespace
}  // namespace cprr

namespace cprr {
namespace {

// Per case label: its status and every execution's, as --json reports them.
std::map<std::string, std::string> statuses(const std::string& doc_text) {
  const json doc = json::parse(doc_text);  // kept: a range-for over a temporary's member dangles
  std::map<std::string, std::string> out;
  for (const json& c : doc.at("cases")) {
    std::string line = c.at("status").get<std::string>();
    for (const json& e : c.at("executions")) line += " " + e.at("status").get<std::string>();
    out[c.at("label").get<std::string>()] = line;
  }
  return out;
}

TEST(RecordCommand, StandbyWorldsGiveTheSameResultsInFreshWorldsOfTheirOwn) {
  RecordOptions o = opts(kWorker, "noop|all_reduce|segfault|skip_collective");
  o.mode = "fresh";
  o.shared.run.timeout_override_s = 2;
  o.db = test_db() + ".standby0";
  const Recorded plain = record(o);
  o.shared.run.standby = 3;
  o.db = test_db() + ".standby3";
  const Recorded ahead = record(o);
  EXPECT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(ahead.code, 0) << ahead.err;
  EXPECT_EQ(statuses(plain.out), statuses(ahead.out));
  // Every execution had a world of its own.
  std::set<int64_t> worlds;
  std::size_t executions = 0;
  const json doc = json::parse(ahead.out);
  for (const json& c : doc.at("cases")) {
    for (const json& e : c.at("executions")) {
      ++executions;
      worlds.insert(e.at("world").get<int64_t>());
    }
  }
  EXPECT_EQ(worlds.size(), executions);
}

}  // namespace
}  // namespace cprr
