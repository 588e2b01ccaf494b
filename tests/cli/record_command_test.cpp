// The cprecord verb: run_record in-process (JSON document, filter, exit codes, usage errors) and
// the real binary once for --help, --json purity and the exit code of a usage error.
#include "cli/record_command.h"

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
#include "recorder/engine/interrupt.h"
#include "recorder/engine/plan.h"
#include "runtime/error.h"
#include "schema/record_reader.h"

namespace cprr {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using json = nlohmann::json;

const std::string kWorker = CPRR_WORKER_PATH;
const std::string kFixture = CPRR_FIXTURE_WORKER_PATH;
const std::string kCprecord = CPRR_CPRECORD_PATH;
const std::string kCpreplay = CPRR_CPREPLAY_PATH;

struct Recorded {
  int code = -1;
  std::string out;
  std::string err;
};

Recorded record(RecordOptions o) {
  std::ostringstream out, err;
  Recorded r;
  r.code = run_record(o, out, err, /*progress=*/false, /*color=*/false);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// Every recording of this file goes to one scratch database, not to ./cprr.db.
const std::string& test_db() {
  struct Scratch {
    std::string path = "/tmp/cprr-record-command-test-" + std::to_string(::getpid()) + ".db";
    // Removes the scratch file and every sibling a test derived from it (path + ".describe"...).
    ~Scratch() {
      const std::filesystem::path p(path);
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(p.parent_path(), ec)) {
        if (e.path().filename().string().rfind(p.filename().string(), 0) == 0) {
          std::filesystem::remove(e.path(), ec);
        }
      }
    }
  };
  static const Scratch scratch;
  return scratch.path;
}

RecordOptions opts(const std::string& worker, const std::string& filter, bool as_json = true) {
  RecordOptions o;
  o.db = test_db();
  o.worker = worker;
  o.filter = filter;
  o.json = as_json;
  return o;
}

const json* find_case(const json& doc, const std::string& label) {
  for (const json& c : doc.at("cases")) {
    if (c.at("label") == label) return &c;
  }
  return nullptr;
}

// Runs a shell command; returns its exit status and stdout (stderr goes to `err_file` if given).
struct Proc {
  int status = -1;
  std::string out;
};

Proc shell(const std::string& cmd) {
  Proc p;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return p;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) p.out.append(buf, n);
  const int st = ::pclose(f);
  p.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return p;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

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
    const Proc p = shell(quoted(kCprecord) + " --db " + db + " --filter noop@2 " + arg + " 2>&1");
    EXPECT_EQ(p.status, 2) << p.out;
    EXPECT_THAT(p.out, ::testing::AnyOf(HasSubstr("must be a positive number of seconds"),
                                        HasSubstr("must be at most 604800 seconds"),
                                        HasSubstr("must be a whole number from 1")));
    EXPECT_LT(p.out.size(), 200u) << "no 309-digit range";
    EXPECT_NE(::access(db.c_str(), F_OK), 0) << "nothing may be recorded";
  }
  // In-process callers get the same words as a UsageError.
  RecordOptions o = opts(kFixture, "^test/ok@");
  o.timeout_s = std::nan("");
  EXPECT_THROW(record(o), UsageError);
  o.timeout_s = 1e10;
  EXPECT_THROW(record(o), UsageError);
}

// A deadline beyond what the steady clock can hold saturates at the documented maximum instead of
// overflowing into the past (which made every case "hang" within milliseconds).
TEST(RecordCommand, HugeDeadlinesSaturateInsteadOfExpiringAtOnce) {
  ControllerConfig cc;
  cc.worker = kFixture;
  for (double s : {1e10, 1e300}) {
    cc.timeout_override_s = s;
    Controller c(cc);
    const CaseInstance ok = expand(fetch_catalog(kFixture), std::regex("^test/ok@2$")).at(0);
    const ExecutionResult r = c.run(ok, Mode::pool);
    EXPECT_EQ(r.status, ExecStatus::pass) << s << ": " << r.summary;
  }
}

TEST(RecordCommand, VersionAndDefaultsAreShown) {
  const Proc v = shell(quoted(kCprecord) + " --version 2>&1");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out, std::string("cprecord ") + CPRR_VERSION + "\n");
  const Proc h = shell(quoted(kCprecord) + " --help 2>&1");
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

TEST(RecordCommand, ShardsAreDisjointStableAndTogetherThePlan) {
  const RecordOptions base = opts(kWorker, "^healthy/");
  const auto all = planned(base);
  std::multiset<std::string> joined;
  std::vector<std::vector<std::string>> parts;
  for (int i = 1; i <= 3; ++i) {
    RecordOptions o = base;
    o.shard = std::to_string(i) + "/3";
    parts.push_back(planned(o));
    joined.insert(parts.back().begin(), parts.back().end());
    EXPECT_FALSE(parts.back().empty()) << o.shard;
  }
  EXPECT_EQ(joined, std::multiset<std::string>(all.begin(), all.end()))
      << "every case in exactly one shard";
  // A case's shard depends on its label alone: a narrower filter keeps it in its shard.
  RecordOptions narrow = base;
  narrow.filter = "^healthy/all_reduce";
  narrow.shard = "2/3";
  for (const std::string& label : planned(narrow)) {
    EXPECT_NE(std::find(parts[1].begin(), parts[1].end(), label), parts[1].end()) << label;
  }
}

TEST(RecordCommand, ShuffledOrdersArePermutationsFixedByTheSeedAndTheRepeat) {
  const std::vector<std::size_t> a = shuffled_order(40, 7, 0);
  std::vector<std::size_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], i) << "a permutation";
  EXPECT_EQ(a, shuffled_order(40, 7, 0)) << "the seed fixes the order";
  EXPECT_NE(a, shuffled_order(40, 7, 1)) << "each repeat its own order";
  EXPECT_NE(a, shuffled_order(40, 8, 0));
  EXPECT_NE(a, sorted);
  EXPECT_TRUE(shuffled_order(0, 7, 0).empty());
  EXPECT_EQ(parse_shuffle_seed("0"), 0u);
  EXPECT_EQ(parse_shuffle_seed(std::to_string(kMaxSeed)), kMaxSeed);
  for (const char* bad : {"", "-1", "x", "12x", "9007199254740992", "99999999999999999999"}) {
    EXPECT_FALSE(parse_shuffle_seed(bad).has_value()) << bad;
  }
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
  const Proc replay = shell(quoted(kCpreplay) + " --db " + cprr::quoted(o.db) + " --case " +
                            std::to_string(last) + " --mode pool --json");
  EXPECT_EQ(replay.status, 0) << replay.out;
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
    if (r.out.empty()) {
      ++empty;
      EXPECT_THAT(r.err, HasSubstr("holds none of the 1 planned case(s)"));
    }
  }
  EXPECT_EQ(empty, 49);
}

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
  o.interrupt = &watch;
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
  const Proc junit = shell("cat " + xml);
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

TEST(RecordCommand, BinaryHelpListsEveryOption) {
  const Proc p = shell(quoted(kCprecord) + " --help 2>&1");
  EXPECT_EQ(p.status, 0) << p.out;
  for (const char* opt : {"--worker", "--backend", "--mode", "--filter", "--exclude", "--shard",
                          "--fail-fast", "--rerun-failed", "--repeat", "--timeout", "--json",
                          "--list", "--placement", "--db", "--junit"}) {
    EXPECT_THAT(p.out, HasSubstr(opt)) << p.out;
  }
  EXPECT_THAT(p.out, HasSubstr("Exit codes"));
}

TEST(RecordCommand, BinaryLogsALinePerExecutionWhenStderrIsNoTerminalAndNamesTheSlowest) {
  // stderr to stdout through a pipe: not a TTY, as in a CI log. The lines come as executions
  // finish, before the table.
  const Proc p = shell(quoted(kCprecord) + " --db " + test_db() +
                       " --mode both --filter '^healthy/noop@' 2>&1");
  EXPECT_EQ(p.status, 0) << p.out;
  for (const char* line :
       {"[1/4] pass  fresh healthy/noop@2 ", "[2/4] pass  pool  healthy/noop@2 ",
        "[3/4] pass  fresh healthy/noop@4 ", "[4/4] pass  pool  healthy/noop@4 "}) {
    EXPECT_THAT(p.out, HasSubstr(line)) << p.out;
  }
  EXPECT_LT(p.out.find("[4/4]"), p.out.find("case  label")) << "lines before the table";
  EXPECT_THAT(p.out, Not(HasSubstr("\033[K"))) << "no TTY control codes in a log";
  EXPECT_THAT(p.out, HasSubstr("\nslowest: healthy/noop@")) << p.out;
  // Four worlds started (two fresh, two pooled), their largest steps named. Gloo's rendezvous is
  // among a cpu world's largest, though not always the first: spawning or loading the ranks can
  // take longer on a loaded 2-core machine (seen in CI-like runs).
  const std::size_t starts = p.out.find("\nworld starts: 4 worlds, median ");
  ASSERT_NE(starts, std::string::npos) << p.out;
  const std::string line = p.out.substr(starts + 1, p.out.find('\n', starts + 1) - starts - 1);
  EXPECT_THAT(line, HasSubstr(" ms: ")) << line;
  EXPECT_THAT(line, HasSubstr("gloo communicator ")) << line;
  // With --json stdout stays one document; the lines go to stderr only.
  const Proc js = shell(quoted(kCprecord) + " --db " + test_db() +
                        " --json --filter '^healthy/noop@2$' 2>/dev/null");
  EXPECT_NO_THROW(EXPECT_TRUE(json::parse(js.out).is_object())) << js.out;
}

TEST(RecordCommand, BinaryJsonStdoutIsOneDocumentDespiteBanners) {
  // No --worker: cprecord finds the cpworker next to itself. The corpus worker prints an NCCL
  // banner at start and banner_flood floods fd 1 and 2; none of it may reach cprecord's stdout.
  const Proc p = shell(quoted(kCprecord) + " --db " + test_db() +
                       " --json --filter 'banner_flood.*@2|noop@2' 2>/dev/null");
  EXPECT_EQ(p.status, 0);
  EXPECT_THAT(p.out, Not(HasSubstr("NCCL")));
  json doc;
  ASSERT_NO_THROW(doc = json::parse(p.out)) << p.out.substr(0, 2000);  // strict: one document
  EXPECT_EQ(doc.at("cases").size(), 2u);
  EXPECT_EQ(doc.at("exit_code"), 0);
}

TEST(RecordCommand, BinaryMapsUsageErrorsToExitCodeTwo) {
  const Proc bad = shell(quoted(kCprecord) + " --worker " + quoted(kWorker) + " --filter '(' 2>&1");
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.out, HasSubstr("cprecord: --filter '('"));
  const Proc cuda = shell(quoted(kCprecord) + " --backend cuda --filter noop 2>&1");
  EXPECT_EQ(cuda.status, 2);
  EXPECT_THAT(cuda.out, HasSubstr("--backend cuda"));
  const Proc unexpected =
      shell(quoted(kCprecord) + " --db " + test_db() + " --worker " + quoted(kFixture) +
            " --filter '^test/fail_expect@' >/dev/null 2>&1");
  EXPECT_EQ(unexpected.status, 1);
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
  o.timeout_s = 2;
  o.db = test_db() + ".standby0";
  const Recorded plain = record(o);
  o.standby = 3;
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

TEST(RecordCommand, StandbyNeedsTheLocalLauncher) {
  const Proc p = shell(kCprecord +
                       " --standby 1 --launcher mpirun --launcher-path /bin/true "
                       "--db /dev/null 2>&1");
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("--standby needs --launcher local"), std::string::npos) << p.out;
}

}  // namespace
}  // namespace cprr
