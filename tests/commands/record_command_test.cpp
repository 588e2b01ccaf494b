// The cprecord verb in-process (run_record): the JSON document, --filter, --exclude, --shard,
// --shuffle, --repeat and fresh mode, exit codes and usage errors. Whole runs:
// record_command_runs_test.cpp; the binary: record_command_binary_test.cpp.
#include "commands/record_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "recorder/launch/interrupt.h"
#include "runtime/error.h"
#include "schema/record_reader.h"
#include "tests/commands/record_support.h"

namespace cprr {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using namespace record_test;  // NOLINT(google-build-using-namespace): this file's own helpers

TEST(RecordCommand, JsonDocumentDescribesEveryCase) {
  RecordOptions o = opts(kWorker, "noop|segfault");
  o.db = test_db() + ".describe";  // its own file: its cases are ids 1..4
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 0) << r.out;  // the crashes are expected
  EXPECT_TRUE(r.err.empty()) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("tool"), "cprecord");
  EXPECT_EQ(doc.at("worker"), kWorker);
  EXPECT_EQ(doc.at("backend"), "cpu");
  EXPECT_EQ(doc.at("mode"), "pool");
  EXPECT_EQ(doc.at("exit_code"), 0);
  EXPECT_EQ(doc.at("unexpected"), 0);
  ASSERT_EQ(doc.at("cases").size(), 4u);
  for (const json& c : doc.at("cases")) {
    for (const char* key : {"id", "name", "label", "status", "verdict", "expect", "as_expected",
                            "executions", "world_size", "seed", "params"}) {
      EXPECT_TRUE(c.contains(key)) << key << " missing in " << c.dump();
    }
    EXPECT_TRUE(c.at("as_expected").get<bool>());
    ASSERT_EQ(c.at("executions").size(), 1u);
    EXPECT_EQ(c.at("executions")[0].at("ranks").size(), c.at("world_size").get<std::size_t>());
  }
  const json* noop = find_case(doc, "healthy/noop@2");
  ASSERT_NE(noop, nullptr);
  EXPECT_EQ(noop->at("name"), "healthy/noop");
  EXPECT_EQ(noop->at("status"), "pass");
  EXPECT_TRUE(noop->at("verdict").is_null());
  const json* crash = find_case(doc, "bug/segfault_rank@4");
  ASSERT_NE(crash, nullptr);
  EXPECT_EQ(crash->at("status"), "crash");
  EXPECT_EQ(crash->at("verdict"), "crash");
  EXPECT_EQ(crash->at("expect"), "crash");
  const json& dead = crash->at("executions")[0].at("ranks")[3];
  EXPECT_EQ(dead.at("outcome"), "died");
  EXPECT_EQ(dead.at("signal"), 11);
  // Ids are the plan positions: unique and 1-based.
  std::set<int> ids;
  for (const json& c : doc.at("cases")) ids.insert(c.at("id").get<int>());
  EXPECT_EQ(ids, (std::set<int>{1, 2, 3, 4}));
}

TEST(RecordCommand, FilterSelectsCasesByLabel) {
  RecordOptions o = opts(kWorker, "^healthy/all_reduce\\{count=1,", false);
  o.list = true;
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 0);
  // 4 dtypes x 2 world sizes, nothing else.
  std::istringstream lines(r.out);
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    EXPECT_THAT(line, HasSubstr("healthy/all_reduce{count=1,dtype="));
  }
  EXPECT_EQ(n, 8) << r.out;

  RecordOptions one_case = opts(kWorker, "^healthy/all_gather\\{count=4099\\}@2$");
  one_case.db = test_db() + ".filter";  // its own file: the first case recorded there is id 1
  const Recorded one = record(one_case);
  ASSERT_EQ(one.code, 0);
  const json doc = json::parse(one.out);
  ASSERT_EQ(doc.at("cases").size(), 1u);
  EXPECT_EQ(doc.at("cases")[0].at("params"), json({{"count", "4099"}}));
  EXPECT_EQ(doc.at("cases")[0].at("id"), 1);
}

TEST(RecordCommand, RepeatAndFreshModeAreReported) {
  RecordOptions o = opts(kWorker, "cp_ring\\{block=1024\\}@2");
  o.repeat = 3;
  o.mode = "fresh";
  const Recorded r = record(o);
  ASSERT_EQ(r.code, 0) << r.out;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("mode"), "fresh");
  ASSERT_EQ(doc.at("cases").size(), 1u);
  const json& c = doc.at("cases")[0];
  EXPECT_TRUE(c.at("verdict").is_null()) << "a deterministic case was flagged";
  ASSERT_EQ(c.at("executions").size(), 3u);
  std::set<uint64_t> worlds;
  for (const json& e : c.at("executions")) {
    EXPECT_EQ(e.at("mode"), "fresh");
    worlds.insert(e.at("world").get<uint64_t>());
    EXPECT_EQ(e.at("ranks")[1].at("outputs")[0].at("hash"),
              c.at("executions")[0].at("ranks")[1].at("outputs")[0].at("hash"));
  }
  EXPECT_EQ(worlds.size(), 3u);
}

TEST(RecordCommand, OutputsThatVaryAcrossPooledRepeatsAreNondeterministic) {
  // test/reset_hook outputs a global no hook resets: 1, 2 in one pooled process; 1, 1 fresh.
  RecordOptions o = opts(kFixture, "^test/reset_hook@");
  o.repeat = 2;
  const Recorded pooled = record(o);
  EXPECT_EQ(pooled.code, 1);
  const json doc = json::parse(pooled.out);
  const json& c = doc.at("cases").at(0);
  EXPECT_EQ(c.at("status"), "pass");
  EXPECT_EQ(c.at("verdict"), "nondeterministic");
  EXPECT_FALSE(c.at("as_expected").get<bool>());
  o.mode = "fresh";
  const Recorded fresh = record(o);
  EXPECT_EQ(fresh.code, 0);
  EXPECT_TRUE(json::parse(fresh.out).at("cases").at(0).at("verdict").is_null());
}

TEST(RecordCommand, JsonCarriesExitCodesAndSignalsOfDeadRanks) {
  const Recorded r = record(opts(kFixture, "^test/exit_mid_case"));
  EXPECT_EQ(r.code, 0);  // the case expects its crash
  const json doc = json::parse(r.out);
  const json& c = doc.at("cases").at(0);
  EXPECT_EQ(c.at("status"), "crash");
  EXPECT_EQ(c.at("verdict"), "crash");
  const json& dead = c.at("executions")[0].at("ranks")[1];
  EXPECT_EQ(dead.at("outcome"), "died");
  EXPECT_EQ(dead.at("exit_code"), 7);
  EXPECT_EQ(dead.at("signal"), 0);
  EXPECT_EQ(c.at("executions")[0].at("ranks")[0].at("outcome"), "ok");
}

TEST(RecordCommand, ExitCodeOneWhenACaseFailsUnexpectedly) {
  const Recorded r = record(opts(kFixture, "^test/fail_expect@"));
  EXPECT_EQ(r.code, 1);
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("exit_code"), 1);
  EXPECT_EQ(doc.at("unexpected"), 1);
  const json& c = doc.at("cases").at(0);
  EXPECT_EQ(c.at("status"), "fail");
  EXPECT_FALSE(c.at("as_expected").get<bool>());
  EXPECT_THAT(c.at("executions")[0].at("summary").get<std::string>(),
              HasSubstr("rank 1 was told to fail"));
  EXPECT_EQ(c.at("executions")[0].at("ranks")[1].at("outcome"), "fail");

  // The same failure where the case expects it: 0.
  EXPECT_EQ(record(opts(kFixture, "^test/fail_as_expected@")).code, 0);
  // And the human table for the unexpected one still says why.
  const Recorded table = record(opts(kFixture, "^test/fail_expect@", false));
  EXPECT_EQ(table.code, 1);
  EXPECT_THAT(table.out, HasSubstr("test/fail_expect@2"));
  EXPECT_THAT(table.out, HasSubstr("fail"));
}

TEST(RecordCommand, ExitCodeTwoOnlyForInfrastructure) {
  // A worker whose ranks cannot start is an `error` execution: returned as 2, not thrown.
  ::setenv("CPRR_FIXTURE_FAIL_START", "1", 1);
  const Recorded infra = record(opts(kFixture, "^test/ok@"));
  ::unsetenv("CPRR_FIXTURE_FAIL_START");
  EXPECT_EQ(infra.code, 2);
  const json doc = json::parse(infra.out);
  EXPECT_EQ(doc.at("exit_code"), 2);
  EXPECT_EQ(doc.at("cases").at(0).at("status"), "error");
  EXPECT_THAT(doc.at("cases").at(0).at("executions")[0].at("summary").get<std::string>(),
              HasSubstr("failed to start"));

  // A case that breaks its rank's control channel is that case's crash (1), not the run's
  // infrastructure (2); the next case in the pool runs in a new world and passes.
  // (Plan order: ok, corrupt_control; twice, so the second ok runs after a corruption.)
  RecordOptions o = opts(kFixture, "^test/corrupt_control\\{kind=huge_length\\}|^test/ok@");
  o.repeat = 2;
  const Recorded broken = record(o);
  EXPECT_EQ(broken.code, 1) << broken.out;
  const json b = json::parse(broken.out);
  const json* corrupt = find_case(b, "test/corrupt_control{kind=huge_length}@2");
  ASSERT_NE(corrupt, nullptr);
  EXPECT_EQ(corrupt->at("status"), "crash");
  const json* ok = find_case(b, "test/ok@2");
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->at("status"), "pass") << "the case after the broken channel must pass";
  EXPECT_EQ(ok->at("executions").size(), 2u);
}

TEST(RecordCommand, UsageErrorsThrowUsageError) {
  auto usage_error_of = [](const RecordOptions& o) -> std::string {
    try {
      record(o);
    } catch (const UsageError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not a UsageError: ") + e.what();
    }
    return "no exception";
  };
  EXPECT_THAT(usage_error_of(opts(kWorker, "(")), HasSubstr("--filter '('"));
  EXPECT_THAT(usage_error_of(opts(kWorker, "^nothing matches this$")),
              HasSubstr("no case matches"));
  RecordOptions cuda = opts(kWorker, "noop");
  cuda.backend = "cuda";
  EXPECT_THAT(usage_error_of(cuda), HasSubstr("--backend cuda"));
  RecordOptions missing = opts("/nonexistent/cprr/cpworker", "noop");
  EXPECT_THAT(usage_error_of(missing), HasSubstr("/nonexistent/cprr/cpworker"));
  RecordOptions placement = opts(kWorker, "noop");
  placement.placement = "first_fit";
  EXPECT_THAT(usage_error_of(placement), HasSubstr("--placement first_fit"));
  // UsageError messages are about the input: no source location in front.
  EXPECT_THAT(usage_error_of(opts(kWorker, "(")), ::testing::StartsWith("--filter"));
}

// ---- the contract scripts rely on ----

TEST(RecordCommand, BadTimeoutsAndRepeatsAreRefusedInWordsBeforeAnythingRuns) {
  const std::string db = test_db() + ".bad-values";
  for (const char* arg : {"--timeout nan", "--timeout 1e10", "--timeout 1e300", "--timeout inf",
                          "--timeout 0", "--timeout -1", "--repeat 0", "--repeat -3"}) {
    SCOPED_TRACE(arg);
    const test::Cmd p = test::run(quoted(kCprecord) + " --db " + db + " --filter noop@2 " + arg,
                                  test::Stderr::merged);
    EXPECT_EQ(p.code, 2) << p.out;
    EXPECT_THAT(p.out, ::testing::AnyOf(HasSubstr("must be a positive number of seconds"),
                                        HasSubstr("must be at most 604800 seconds"),
                                        HasSubstr("must be a whole number from 1")));
    EXPECT_LT(p.out.size(), 200u) << "no 309-digit range";
    EXPECT_NE(::access(db.c_str(), F_OK), 0) << "nothing may be recorded";
  }
  // In-process callers get the same words as a UsageError.
  RecordOptions o = opts(kFixture, "^test/ok@");
  o.shared.run.timeout_override_s = std::nan("");
  EXPECT_THROW(record(o), UsageError);
  o.shared.run.timeout_override_s = 1e10;
  EXPECT_THROW(record(o), UsageError);
}

// A deadline beyond what the steady clock can hold saturates at the documented maximum instead of
// overflowing into the past (which made every case "hang" within milliseconds).
TEST(RecordCommand, HugeDeadlinesSaturateInsteadOfExpiringAtOnce) {
  ControllerConfig cc;
  cc.worker = kFixture;
  for (double s : {1e10, 1e300}) {
    cc.run.timeout_override_s = s;
    Controller c(cc);
    const CaseInstance ok = expand(fetch_catalog(kFixture), std::regex("^test/ok@2$")).at(0);
    const ExecutionResult r = c.run(ok, Mode::pool);
    EXPECT_EQ(r.status, ExecStatus::pass) << s << ": " << r.summary;
  }
}

TEST(RecordCommand, VersionAndDefaultsAreShown) {
  const test::Cmd v = test::run(quoted(kCprecord) + " --version", test::Stderr::merged);
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out, std::string("cprecord ") + CPRR_VERSION + "\n");
  const test::Cmd h = test::run(quoted(kCprecord) + " --help", test::Stderr::merged);
  for (const char* d : {"--db TEXT=cprr.db", "=pool", "--repeat INT:N=1", "=best_fit", "=auto"}) {
    EXPECT_THAT(h.out, HasSubstr(d));
  }
}

TEST(RecordCommand, ListSaysItsNumbersArePlanPositionsAndHonoursJson) {
  RecordOptions o = opts(kWorker, "^healthy/noop@", false);
  o.list = true;
  const Recorded text = record(o);
  EXPECT_EQ(text.code, 0);
  EXPECT_THAT(text.out, HasSubstr("plan    1  healthy/noop@2  expect=pass"));
  o.json = true;
  const Recorded js = record(o);
  EXPECT_EQ(js.code, 0);
  const json doc = json::parse(js.out);
  ASSERT_EQ(doc.at("plan").size(), 2u);
  EXPECT_EQ(doc.at("plan")[1].at("plan_id"), 2);
  EXPECT_EQ(doc.at("plan")[1].at("label"), "healthy/noop@4");
}

// The labels of `o`'s plan (--list --json).
std::vector<std::string> planned(RecordOptions o) {
  o.list = true;
  o.json = true;
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> labels;
  if (r.out.empty()) return labels;
  const json doc = json::parse(r.out);  // kept: a range-for over a temporary's member dangles
  for (const auto& c : doc.at("plan")) labels.push_back(c.at("label"));
  return labels;
}

TEST(RecordCommand, ExcludeDropsMatchingLabelsAfterTheFilter) {
  RecordOptions o = opts(kWorker, "^healthy/(noop|broadcast)");
  const auto all = planned(o);
  o.exclude = "noop|@4$";
  const auto kept = planned(o);
  ASSERT_FALSE(kept.empty());
  for (const std::string& label : kept) {
    EXPECT_THAT(label, StartsWith("healthy/broadcast")) << label;
    EXPECT_THAT(label, EndsWith("@2")) << label;
  }
  EXPECT_LT(kept.size(), all.size());
  RecordOptions everything = opts(kWorker, "noop");
  everything.exclude = "noop";
  everything.list = true;
  EXPECT_THROW(record(everything), UsageError) << "nothing left is bad usage";
}

// The shard rule is plan.cpp's (tests/recorder/engine/plan_test.cpp); here, that --shard reaches
// it.
TEST(RecordCommand, ShardsOfThePlanTogetherAreThePlan) {
  const RecordOptions base = opts(kWorker, "^healthy/");
  const auto all = planned(base);
  std::multiset<std::string> joined;
  for (int i = 1; i <= 3; ++i) {
    RecordOptions o = base;
    o.shard = std::to_string(i) + "/3";
    const auto part = planned(o);
    EXPECT_LT(part.size(), all.size()) << o.shard;
    joined.insert(part.begin(), part.end());
  }
  EXPECT_EQ(joined, std::multiset<std::string>(all.begin(), all.end()));
}

// The plan positions of a run's cases in the order they ran (execution ids grow as they run).
std::vector<int64_t> run_order(const std::string& db, int64_t run_id) {
  const RecordReader reader(db);
  std::vector<std::pair<int64_t, int64_t>> ran;  // execution id, plan position
  for (const RecordedCase& c : reader.cases()) {
    if (c.run_id != run_id) continue;
    for (const RecordedExecution& e : reader.executions(c.id, RecordReader::Detail::captures)) {
      ran.emplace_back(e.id, c.instance.id);
    }
  }
  std::sort(ran.begin(), ran.end());
  std::vector<int64_t> out;
  for (const auto& [execution, position] : ran) out.push_back(position);
  return out;
}

TEST(RecordCommand, ShuffleRunsTheSeedsOrderRecordsTheSeedAndReplaysAfterTheRealPredecessors) {
  RecordOptions o = opts(kWorker, "^healthy/(noop|all_reduce|broadcast|all_gather).*@2$");
  o.db = test_db() + ".shuffle";
  o.mode = "pool";
  o.shuffle = "12345";
  const Recorded r = record(o);
  ASSERT_EQ(r.code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("shuffle_seed"), 12345);
  const std::size_t n = doc.at("cases").size();
  ASSERT_GE(n, 4u);
  std::vector<int64_t> expected;
  for (std::size_t i : shuffled_order(n, 12345, 0)) expected.push_back(static_cast<int64_t>(i) + 1);
  EXPECT_EQ(run_order(o.db, 1), expected) << "the cases ran in the seed's order";
  EXPECT_FALSE(std::is_sorted(expected.begin(), expected.end()));
  EXPECT_EQ(RecordReader(o.db).runs().at(0).shuffle_seed, 12345u);
  EXPECT_EQ(record(o).code, 0);
  EXPECT_EQ(run_order(o.db, 2), expected) << "the same seed, the same order";
  // The last case to run in the pooled world is replayed after every case that really ran
  // before it, not after the cases before it in the plan.
  const int64_t last = expected.back();
  const test::Cmd replay = test::run(quoted(kCpreplay) + " --db " + cprr::quoted(o.db) +
                                         " --case " + std::to_string(last) + " --mode pool --json",
                                     test::Stderr::as_written);
  EXPECT_EQ(replay.code, 0) << replay.out;
  EXPECT_EQ(json::parse(replay.out).at("predecessors"), n - 1) << replay.out;
  // A bare --shuffle draws a seed, records it and says how to run the order again.
  o.shuffle = "random";
  o.json = false;
  const Recorded fresh = record(o);
  const std::optional<uint64_t> seed = RecordReader(o.db).runs().at(2).shuffle_seed;
  ASSERT_TRUE(seed.has_value());
  EXPECT_THAT(fresh.out, HasSubstr(fmt::format("--shuffle={} runs it again", *seed)));
  o.shuffle = "soon";
  try {
    record(o);
    ADD_FAILURE() << "a bad seed accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--shuffle=soon: the seed must be a whole number"));
  }
}

TEST(RecordCommand, ABadShardIsRefusedAndAnEmptyOneHasNothingToDo) {
  for (const char* bad : {"0/3", "4/3", "1/0", "2", "a/b", "1/3x", "/3", ""}) {
    RecordOptions o = opts(kWorker, "noop");
    o.shard = bad;
    o.list = true;
    if (std::string(bad).empty()) {
      EXPECT_EQ(record(o).code, 0) << "no --shard: everything";
      continue;
    }
    try {
      record(o);
      ADD_FAILURE() << bad << " accepted";
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("--shard ") + bad));
    }
  }
  // One case over 50 shards: most hold nothing, which is a job with nothing to do, not an error.
  int empty = 0;
  for (int i = 1; i <= 50; ++i) {
    RecordOptions o = opts(kWorker, "^healthy/noop@2$");
    o.shard = std::to_string(i) + "/50";
    const Recorded r = record(o);
    EXPECT_EQ(r.code, 0);
    if (r.err.find("holds none of the 1 planned case(s)") != std::string::npos) {
      ++empty;
      EXPECT_TRUE(json::parse(r.out).at("cases").empty()) << "its report: a run of no case";
    }
  }
  EXPECT_EQ(empty, 49);
}

}  // namespace
}  // namespace cprr
