// The cprecord verb: run_record in-process (JSON document, filter, exit codes, usage errors) and
// the real binary once for --help, --json purity and the exit code of a usage error.
#include "recorder/record_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "runtime/error.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

const std::string kWorker = CPRR_WORKER_PATH;
const std::string kFixture = CPRR_FIXTURE_WORKER_PATH;
const std::string kCprecord = CPRR_CPRECORD_PATH;

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
    ~Scratch() {
      for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
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
  const Recorded r = record(opts(kWorker, "noop|segfault"));
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

  const Recorded one = record(opts(kWorker, "^healthy/all_gather\\{count=4099\\}@2$"));
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

TEST(RecordCommand, ExitCodeTwoForAnInfrastructureError) {
  // A broken control channel is an `error` execution: returned as 2, not thrown.
  const Recorded r = record(opts(kFixture, "^test/corrupt_control\\{kind=huge_length\\}"));
  EXPECT_EQ(r.code, 2);
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("exit_code"), 2);
  EXPECT_EQ(doc.at("cases").at(0).at("status"), "error");
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

TEST(RecordCommand, BinaryHelpListsEveryOption) {
  const Proc p = shell(quoted(kCprecord) + " --help 2>&1");
  EXPECT_EQ(p.status, 0) << p.out;
  for (const char* opt : {"--worker", "--backend", "--mode", "--filter", "--repeat", "--timeout",
                          "--json", "--list", "--placement", "--db", "--junit"}) {
    EXPECT_THAT(p.out, HasSubstr(opt)) << p.out;
  }
  EXPECT_THAT(p.out, HasSubstr("Exit codes"));
}

TEST(RecordCommand, BinaryJsonStdoutIsOneDocumentDespiteBanners) {
  // No --worker: cprecord finds the cpworker next to itself. The corpus worker prints an NCCL
  // banner at start and banner_flood floods fd 1 and 2; none of it may reach cprecord's stdout.
  const Proc p =
      shell(quoted(kCprecord) + " --db " + test_db() + " --json --filter 'banner_flood.*@2|noop@2' 2>/dev/null");
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
  const Proc unexpected = shell(quoted(kCprecord) + " --db " + test_db() + " --worker " + quoted(kFixture) +
                                " --filter '^test/fail_expect@' >/dev/null 2>&1");
  EXPECT_EQ(unexpected.status, 1);
}

}  // namespace
}  // namespace cprr
