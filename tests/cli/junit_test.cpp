// JUnit XML (cprecord --junit): hand-built execution results, parsed back with libxml2 so the
// document is checked by a real XML parser (errors and warnings fail the test), not by substrings.
#include "cli/junit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

// ---- parsing with libxml2 ----

void collect_diagnostic(void* ctx, const char* format, ...) {
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  *static_cast<std::string*>(ctx) += buf;
}

struct Parsed {
  std::unique_ptr<xmlDoc, void (*)(xmlDocPtr)> doc{nullptr, xmlFreeDoc};
  std::string diagnostics;  ///< every error and warning the parser reported
};

Parsed parse(const std::string& xml) {
  Parsed p;
  xmlSetGenericErrorFunc(&p.diagnostics, collect_diagnostic);
  p.doc.reset(xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "junit.xml", nullptr,
                            XML_PARSE_NONET));
  xmlSetGenericErrorFunc(nullptr, nullptr);
  return p;
}

std::vector<xmlNodePtr> children(xmlNodePtr node, const char* name) {
  std::vector<xmlNodePtr> out;
  for (xmlNodePtr c = node->children; c != nullptr; c = c->next) {
    if (c->type == XML_ELEMENT_NODE && xmlStrEqual(c->name, BAD_CAST name)) out.push_back(c);
  }
  return out;
}

// The attribute's value, or "<absent>".
std::string prop(xmlNodePtr node, const char* name) {
  xmlChar* v = xmlGetProp(node, BAD_CAST name);
  if (v == nullptr) return "<absent>";
  std::string out(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return out;
}

std::string content(xmlNodePtr node) {
  xmlChar* v = xmlNodeGetContent(node);
  std::string out(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return out;
}

// ---- hand-built plan and results ----

CaseInstance make_case(uint32_t id, std::string name, Expect expect, int world_size = 2,
                       Params params = {}) {
  CaseInstance inst;
  inst.id = id;
  inst.info.name = std::move(name);
  inst.info.options.expect = expect;
  inst.params = std::move(params);
  inst.world_size = world_size;
  return inst;
}

ExecutionResult make_result(const CaseInstance& inst, uint64_t id, ExecStatus status,
                            Mode mode = Mode::pool, int attempt = 1) {
  ExecutionResult res;
  res.id = id;
  res.case_id = inst.id;
  res.label = inst.label();
  res.mode = mode;
  res.attempt = attempt;
  res.world_id = 1;
  res.pool_position = id;
  res.status = status;
  res.as_expected = meets(status, inst.info.options.expect);
  res.ranks.resize(static_cast<std::size_t>(inst.world_size));
  res.wall_ms = 1500;
  return res;
}

RankResult done(RankOutcome outcome, std::string error = {}) {
  RankResult d;
  d.outcome = outcome;
  d.error = std::move(error);
  return d;
}

const std::string kFailError = "corpus.cpp:12: CPRR_EXPECT(sum == 3) failed: 2 != 3";
const std::string kHangSummary =
    "rank 1 never joined allreduce #3 <tag> & \"quotes\" 'apos'; rank 0 waits in it";
const std::string kInfraSummary = "rank 0: protocol error: frame of 4294967295 bytes";

// Five executions: a pass, an expected crash, an unexpected fail, a hang with hostile tails and
// an infrastructure error.
struct Executions {
  std::vector<CaseInstance> plan;
  std::vector<ExecutionResult> results;
};

Executions five_executions() {
  Executions run;
  run.plan.push_back(make_case(1, "basic/allreduce", Expect::pass));
  run.plan.push_back(make_case(2, "faults/segv", Expect::crash));
  run.plan.push_back(make_case(3, "basic/sum", Expect::pass, 2, {{"n", "4"}}));
  run.plan.push_back(make_case(4, "faults/skip_collective", Expect::pass, 2, {{"tag", "<a&b>"}}));
  run.plan.push_back(make_case(5, "basic/allreduce", Expect::pass, 4));
  const auto& p = run.plan;

  ExecutionResult pass = make_result(p[0], 1, ExecStatus::pass);
  for (RankReport& r : pass.ranks) r.done = done(RankOutcome::ok);
  pass.ranks[0].stdout_tail = "all good\n";
  run.results.push_back(pass);

  ExecutionResult crash = make_result(p[1], 2, ExecStatus::crash, Mode::fresh);
  crash.ranks[0].done = done(RankOutcome::ok);
  crash.ranks[1].exit = ExitInfo{.exit_code = -1, .signal = 11};
  crash.summary = "rank 1 killed by signal 11 (SIGSEGV)";
  run.results.push_back(crash);

  ExecutionResult fail = make_result(p[2], 3, ExecStatus::fail, Mode::fresh, 2);
  fail.ranks[0].done = done(RankOutcome::fail, kFailError);
  fail.ranks[0].stdout_tail = "step 1\nstep 2 partial sum=2\n";
  fail.ranks[0].stderr_tail = "warning: slow\n";
  fail.ranks[1].done = done(RankOutcome::ok);
  fail.summary = "rank 0: " + kFailError;
  run.results.push_back(fail);

  ExecutionResult hang = make_result(p[3], 4, ExecStatus::hang);
  hang.ranks[0].stdout_tail = std::string("before <tag> & \"quotes\" 'apos'\n") +
                              "ctl \x01 esc \x1b[31mred\x1b[0m\n" + "bad utf8 \xff\xfe end\n" +
                              "cut \xe2\x82 short\n" + "euro \xe2\x82\xac ok\n";
  hang.ranks[0].stderr_tail = std::string(5000, 'x') + "\nlast stderr line\n";
  WatchdogStatus w;
  w.execution = 4;
  w.phase = "body";
  w.entered_seq = 3;
  w.entered_kind = "allreduce";
  w.completed_seq = 2;
  w.completed_kind = "allreduce";
  w.running = {"stream 0 (main): allreduce #3"};
  hang.ranks[0].watchdog = w;
  hang.ranks[1].done = done(RankOutcome::ok);
  hang.summary = kHangSummary;
  run.results.push_back(hang);

  ExecutionResult infra = make_result(p[4], 5, ExecStatus::error);
  infra.ranks[0].protocol_error = "frame of 4294967295 bytes";
  infra.ranks[0].exit = ExitInfo{.exit_code = 0, .signal = 9};
  infra.summary = kInfraSummary;
  infra.note = "pooled world 1 replaced: rank 2 exited between cases";
  run.results.push_back(infra);
  return run;
}

RunInfo info_of(double wall_s, std::string db = "cprr.db") {
  RunInfo info;
  info.run_id = 7;
  info.db_arg = std::move(db);
  info.db = "/abs/" + info.db_arg;
  info.wall_s = wall_s;
  return info;
}

// The document cprecord writes: results judged by summarize(), as for the exit code.
std::string to_junit(const Executions& run, double wall_s = 12.5, std::string db = "cprr.db") {
  std::ostringstream out;
  write_junit(out, summarize(run.plan, {}, run.results), run.results,
              info_of(wall_s, std::move(db)));
  return out.str();
}

void junit_file(const std::string& path, const Executions& run, double wall_s) {
  write_junit_file(path, summarize(run.plan, {}, run.results), run.results, info_of(wall_s));
}

// ---- tests ----

TEST(JunitTest, ParserHarnessReportsMalformedXml) {
  // The checks below rely on parse() surfacing parser complaints; prove that it does.
  const Parsed bad = parse("<?xml version=\"1.0\"?><a>\x01</b>");
  EXPECT_FALSE(bad.diagnostics.empty());
}

TEST(JunitTest, DocumentParsesAndCountsExecutions) {
  const std::string xml = to_junit(five_executions());
  EXPECT_TRUE(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")) << xml;
  const Parsed p = parse(xml);
  ASSERT_NE(p.doc, nullptr) << p.diagnostics << "\n" << xml;
  EXPECT_EQ(p.diagnostics, "") << xml;

  xmlNodePtr root = xmlDocGetRootElement(p.doc.get());
  ASSERT_TRUE(xmlStrEqual(root->name, BAD_CAST "testsuites"));
  EXPECT_EQ(prop(root, "name"), "cprr");
  EXPECT_EQ(prop(root, "tests"), "5");
  EXPECT_EQ(prop(root, "failures"), "2");
  EXPECT_EQ(prop(root, "errors"), "1");
  EXPECT_EQ(prop(root, "time"), "12.500");

  const auto suites = children(root, "testsuite");
  ASSERT_EQ(suites.size(), 1u);
  xmlNodePtr suite = suites[0];
  EXPECT_EQ(prop(suite, "name"), "cprr");
  EXPECT_EQ(prop(suite, "tests"), "5");
  EXPECT_EQ(prop(suite, "failures"), "2");
  EXPECT_EQ(prop(suite, "errors"), "1");
  EXPECT_EQ(prop(suite, "skipped"), "0");
  EXPECT_EQ(prop(suite, "time"), "12.500");
  EXPECT_THAT(prop(suite, "timestamp"),
              ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"));
  EXPECT_NE(prop(suite, "hostname"), "<absent>");
  EXPECT_NE(prop(suite, "hostname"), "");
}

TEST(JunitTest, TestcasesNameEveryExecutionAndMarkOnlyUnexpectedOnes) {
  const Parsed p = parse(to_junit(five_executions()));
  ASSERT_NE(p.doc, nullptr) << p.diagnostics;
  EXPECT_EQ(p.diagnostics, "");
  const auto cases =
      children(children(xmlDocGetRootElement(p.doc.get()), "testsuite")[0], "testcase");
  ASSERT_EQ(cases.size(), 5u);

  struct Want {
    std::string classname, name, failure_type, error_type;
  };
  const std::vector<Want> want = {
      {"basic.allreduce", "basic/allreduce@2 [pool #1]", "", ""},
      {"faults.segv", "faults/segv@2 [fresh #1]", "", ""},
      {"basic.sum", "basic/sum{n=4}@2 [fresh #2]", "fail", ""},
      {"faults.skip_collective", "faults/skip_collective{tag=<a&b>}@2 [pool #1]", "hang", ""},
      {"basic.allreduce", "basic/allreduce@4 [pool #1]", "", "error"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(prop(cases[i], "classname"), want[i].classname);
    EXPECT_EQ(prop(cases[i], "name"), want[i].name);
    EXPECT_EQ(prop(cases[i], "time"), "1.500");
    const auto failures = children(cases[i], "failure");
    const auto errors = children(cases[i], "error");
    ASSERT_EQ(failures.size(), want[i].failure_type.empty() ? 0u : 1u);
    ASSERT_EQ(errors.size(), want[i].error_type.empty() ? 0u : 1u);
    if (!failures.empty()) {
      EXPECT_EQ(prop(failures[0], "type"), want[i].failure_type);
    }
    if (!errors.empty()) {
      EXPECT_EQ(prop(errors[0], "type"), want[i].error_type);
    }
  }

  // The plain pass has no children at all; the expected crash says what it saw.
  EXPECT_EQ(cases[0]->children, nullptr);
  const auto sysout = children(cases[1], "system-out");
  ASSERT_EQ(sysout.size(), 1u);
  EXPECT_THAT(content(sysout[0]),
              HasSubstr("expected crash: rank 1 killed by signal 11 (SIGSEGV)"));
}

TEST(JunitTest, FailureTextCarriesRankErrorExitAndTails) {
  const Parsed p = parse(to_junit(five_executions()));
  ASSERT_NE(p.doc, nullptr) << p.diagnostics;
  const auto cases =
      children(children(xmlDocGetRootElement(p.doc.get()), "testsuite")[0], "testcase");
  ASSERT_EQ(cases.size(), 5u);

  xmlNodePtr fail = children(cases[2], "failure").at(0);
  EXPECT_EQ(prop(fail, "message"), "fail: rank 0: " + kFailError);
  const std::string fail_text = content(fail);
  EXPECT_THAT(fail_text, HasSubstr("rank 0: fail"));
  EXPECT_THAT(fail_text, HasSubstr("error: " + kFailError));
  EXPECT_THAT(fail_text, HasSubstr("step 2 partial sum=2\n"));
  EXPECT_THAT(fail_text, HasSubstr("warning: slow\n"));
  EXPECT_THAT(fail_text, HasSubstr("rank 1: ok"));

  xmlNodePtr error = children(cases[4], "error").at(0);
  EXPECT_EQ(prop(error, "message"), "error: " + kInfraSummary);
  const std::string error_text = content(error);
  EXPECT_THAT(error_text, HasSubstr("protocol error: frame of 4294967295 bytes"));
  EXPECT_THAT(error_text, HasSubstr("exit: killed by signal 9"));
  EXPECT_THAT(error_text, HasSubstr("note: pooled world 1 replaced"));
}

TEST(JunitTest, HostileBytesRoundTripOrAreReplaced) {
  const Parsed p = parse(to_junit(five_executions()));
  ASSERT_NE(p.doc, nullptr) << p.diagnostics;
  EXPECT_EQ(p.diagnostics, "");
  const auto cases =
      children(children(xmlDocGetRootElement(p.doc.get()), "testsuite")[0], "testcase");
  ASSERT_EQ(cases.size(), 5u);
  xmlNodePtr hang = children(cases[3], "failure").at(0);

  // Attribute values come back exactly, special characters included.
  EXPECT_EQ(prop(hang, "message"), "hang: " + kHangSummary);
  EXPECT_EQ(prop(cases[3], "name"), "faults/skip_collective{tag=<a&b>}@2 [pool #1]");

  const std::string text = content(hang);
  EXPECT_THAT(text, HasSubstr("before <tag> & \"quotes\" 'apos'\n"));
  EXPECT_THAT(text, HasSubstr("watchdog: phase body, entered #3 allreduce"));
  // Control bytes and invalid UTF-8 are spelled out; valid UTF-8 passes through.
  EXPECT_THAT(text, HasSubstr("ctl \\x01 esc \\x1b[31mred\\x1b[0m\n"));
  EXPECT_THAT(text, HasSubstr("bad utf8 \\xff\\xfe end\n"));
  EXPECT_THAT(text, HasSubstr("cut \\xe2\\x82 short\n"));
  EXPECT_THAT(text, HasSubstr("euro \xe2\x82\xac ok\n"));
  EXPECT_THAT(text, Not(HasSubstr("\x01")));
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  // Only the tail of a long stream is kept.
  EXPECT_THAT(text, HasSubstr("last stderr line\n"));
  EXPECT_THAT(text, HasSubstr("earlier bytes omitted"));
  EXPECT_THAT(text, Not(HasSubstr(std::string(2100, 'x'))));
  EXPECT_LT(text.size(), 6000u);
}

TEST(JunitTest, LongMultilineSummaryBecomesOneShortAttributeLine) {
  Executions run;
  run.plan.push_back(make_case(1, "basic/long", Expect::pass));
  ExecutionResult res = make_result(run.plan[0], 1, ExecStatus::fail);
  res.summary = "first line\nsecond\r\nthird\t" + std::string(1000, 'y');
  res.ranks[0].done = done(RankOutcome::fail, res.summary);
  run.results.push_back(res);
  const Parsed p = parse(to_junit(run));
  ASSERT_NE(p.doc, nullptr) << p.diagnostics;
  EXPECT_EQ(p.diagnostics, "");
  xmlNodePtr tc =
      children(children(xmlDocGetRootElement(p.doc.get()), "testsuite")[0], "testcase").at(0);
  const std::string message = prop(children(tc, "failure").at(0), "message");
  EXPECT_THAT(message, HasSubstr("fail: first line second  third "));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
  EXPECT_LE(message.size(), 320u);
  // The full text is in the element, with its line breaks (CR included).
  EXPECT_THAT(content(children(tc, "failure").at(0)),
              HasSubstr("second\r\nthird\t" + std::string(1000, 'y')));
}

TEST(JunitTest, ExpectationDecidesPassOrFailure) {
  Executions run;
  run.plan.push_back(make_case(1, "faults/hang", Expect::hang));
  run.plan.push_back(make_case(2, "faults/segv", Expect::crash));
  ExecutionResult hang = make_result(run.plan[0], 1, ExecStatus::hang);
  hang.summary = "rank 1 never joined allreduce #1";
  run.results.push_back(hang);
  ExecutionResult passed = make_result(run.plan[1], 2, ExecStatus::pass);  // crash expected
  run.results.push_back(passed);

  const Parsed p = parse(to_junit(run, 1));
  ASSERT_NE(p.doc, nullptr) << p.diagnostics;
  xmlNodePtr suite = children(xmlDocGetRootElement(p.doc.get()), "testsuite")[0];
  EXPECT_EQ(prop(suite, "failures"), "1");
  EXPECT_EQ(prop(suite, "errors"), "0");
  const auto cases = children(suite, "testcase");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_TRUE(children(cases[0], "failure").empty());
  EXPECT_THAT(content(children(cases[0], "system-out").at(0)),
              HasSubstr("expected hang: rank 1 never joined allreduce #1"));
  xmlNodePtr failure = children(cases[1], "failure").at(0);
  EXPECT_EQ(prop(failure, "type"), "pass");
  EXPECT_EQ(prop(failure, "message"), "pass: expected crash");
}

// ---- JUnit and the exit code are one judgement ----

// Every rank completed with one output "out" whose hash is `hash`.
void complete_with(ExecutionResult& res, uint64_t hash, RankOutcome outcome = RankOutcome::ok) {
  for (RankReport& r : res.ranks) {
    r.done = done(outcome, outcome == RankOutcome::ok ? "" : "wrong sum");
    Capture c;
    c.name = "out";
    c.bytes = 8;
    c.digest.whole = hash;
    c.digest.chunks = {hash};
    r.done->capture.outputs.push_back(c);
  }
}

// A seeded state leak (fresh passes, pooled fails with other outputs: what it exists to show) and
// a healthy case whose pooled outputs silently differ from its fresh ones.
Executions seeded_and_divergent() {
  Executions run;
  run.plan.push_back(make_case(1, "bug/leak", Expect::pass));
  run.plan.back().info.options.seeded_bug = "state_leak";
  run.plan.push_back(make_case(2, "healthy/quiet", Expect::pass));
  const auto& p = run.plan;
  ExecutionResult leak_fresh = make_result(p[0], 1, ExecStatus::pass, Mode::fresh);
  complete_with(leak_fresh, 11);
  ExecutionResult leak_pool = make_result(p[0], 2, ExecStatus::fail, Mode::pool);
  complete_with(leak_pool, 12, RankOutcome::fail);
  leak_pool.summary = "rank 0: wrong sum";
  ExecutionResult quiet_fresh = make_result(p[1], 3, ExecStatus::pass, Mode::fresh);
  complete_with(quiet_fresh, 21);
  ExecutionResult quiet_pool = make_result(p[1], 4, ExecStatus::pass, Mode::pool);
  complete_with(quiet_pool, 22);
  run.results = {leak_fresh, leak_pool, quiet_fresh, quiet_pool};
  return run;
}

TEST(JunitTest, ExpectedFailureOfASeededBugPassesAndSaysWhatWasExpected) {
  Executions run = seeded_and_divergent();
  run.plan.pop_back();
  run.results.resize(2);
  EXPECT_EQ(exit_code_for(summarize(run.plan, {}, run.results)), 0);
  const Parsed p = parse(to_junit(run));
  ASSERT_NE(p.doc, nullptr) << p.diagnostics;
  xmlNodePtr suite = children(xmlDocGetRootElement(p.doc.get()), "testsuite")[0];
  EXPECT_EQ(prop(suite, "failures"), "0") << "the exit code is 0, so no testcase may fail";
  EXPECT_EQ(prop(suite, "errors"), "0");
  const auto cases = children(suite, "testcase");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_TRUE(children(cases[1], "failure").empty());
  const std::string out = content(children(cases[1], "system-out").at(0));
  EXPECT_THAT(out, HasSubstr("seeded bug (state_leak), expected to show: fail: rank 0: wrong sum"));
  EXPECT_THAT(out, HasSubstr("fresh and pooled differ, as the seeded bug should"));
}

TEST(JunitTest, UnexpectedDivergenceFailsThePooledTestcaseWithTheReplayCommand) {
  const Executions run = seeded_and_divergent();
  const auto outcomes = summarize(run.plan, {}, run.results);
  EXPECT_EQ(exit_code_for(outcomes), 1);
  const Parsed p = parse(to_junit(run, 1, "runs/ci db.sqlite"));
  ASSERT_NE(p.doc, nullptr) << p.diagnostics;
  xmlNodePtr suite = children(xmlDocGetRootElement(p.doc.get()), "testsuite")[0];
  EXPECT_EQ(prop(suite, "failures"), "1");
  const auto cases = children(suite, "testcase");
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_TRUE(children(cases[2], "failure").empty()) << "the fresh execution is the reference";
  const auto failure = children(cases[3], "failure");
  ASSERT_EQ(failure.size(), 1u);
  EXPECT_EQ(prop(failure[0], "type"), "fresh_vs_pool");
  const std::string message = prop(failure[0], "message");
  EXPECT_THAT(message, HasSubstr("case 2: fresh and pooled differ: rank 0 output 'out'"));
  EXPECT_THAT(message, HasSubstr("cpreplay --db 'runs/ci db.sqlite' --case 2"));
}

// The property behind both tests above, over every hand-built run of this file: a testcase fails
// exactly for the executions that count against the exit code, and the exit code is 0 exactly
// when no testcase fails.
TEST(JunitTest, FailingTestcasesAreExactlyTheExecutionsCountedAgainstTheExitCode) {
  for (const Executions& run : {five_executions(), seeded_and_divergent()}) {
    const auto outcomes = summarize(run.plan, {}, run.results);
    std::set<uint64_t> against;
    for (const CaseOutcome& o : outcomes) {
      for (const auto& [id, why] : o.against) against.insert(id);
    }
    const Parsed p = parse(to_junit(run));
    ASSERT_NE(p.doc, nullptr) << p.diagnostics;
    const auto cases =
        children(children(xmlDocGetRootElement(p.doc.get()), "testsuite")[0], "testcase");
    ASSERT_EQ(cases.size(), run.results.size());
    std::set<uint64_t> failing;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (!children(cases[i], "failure").empty() || !children(cases[i], "error").empty()) {
        failing.insert(run.results[i].id);
      }
    }
    EXPECT_EQ(failing, against);
    EXPECT_EQ(failing.empty(), exit_code_for(outcomes) == 0);
  }
}

class JunitFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cprr_junit_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(JunitFileTest, FileHoldsTheSameDocumentAndNoTempFileRemains) {
  const Executions run = five_executions();
  const fs::path path = dir_ / "report.xml";
  // The timestamp has one-second resolution: the file matches the document written just before
  // or just after it.
  const std::string before = to_junit(run);
  junit_file(path.string(), run, 12.5);
  const std::string after = to_junit(run);
  const std::string file = slurp(path);
  EXPECT_TRUE(file == before || file == after) << file;
  const Parsed p = parse(file);
  ASSERT_NE(p.doc, nullptr) << p.diagnostics;
  EXPECT_EQ(p.diagnostics, "");

  // Overwriting works too, and only the report is left in the directory.
  junit_file(path.string(), run, 12.5);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename());
  EXPECT_THAT(names, ::testing::ElementsAre("report.xml"));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_mode & S_IRGRP, 0u) << "the report must not stay private like a temp file";
}

TEST_F(JunitFileTest, RelativePathWritesIntoTheCurrentDirectory) {
  const Executions run = five_executions();
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  junit_file("rel.xml", run, 1);
  fs::current_path(cwd);
  EXPECT_TRUE(fs::is_regular_file(dir_ / "rel.xml"));
}

TEST_F(JunitFileTest, UnwritablePathThrowsUsageErrorNamingIt) {
  const Executions run = five_executions();
  const std::string path = (dir_ / "no_such_dir" / "report.xml").string();
  try {
    junit_file(path, run, 1);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--junit " + path + ":"));
    EXPECT_THAT(e.what(), HasSubstr("No such file or directory"));
  }
  EXPECT_FALSE(fs::exists(dir_ / "no_such_dir"));

  // A directory where the file should go.
  fs::create_directory(dir_ / "taken");
  const std::string taken = (dir_ / "taken").string();
  EXPECT_THROW(junit_file(taken, run, 1), UsageError);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename());
  EXPECT_THAT(names, ::testing::ElementsAre("taken")) << "no temp file may be left behind";
}

}  // namespace
}  // namespace cprr
