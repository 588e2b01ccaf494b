// The cprecord binary as scripts meet it: --help lists every option, a line per execution when
// stderr is no terminal, --json's stdout one document, exit code 2 for usage errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/commands/record_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace record_test;  // NOLINT(google-build-using-namespace): this file's own helpers

TEST(RecordCommand, BinaryHelpListsEveryOption) {
  const test::Cmd p = test::run(quoted(kCprecord) + " --help", test::Stderr::merged);
  EXPECT_EQ(p.code, 0) << p.out;
  for (const char* opt : {"--worker", "--backend", "--mode", "--filter", "--exclude", "--shard",
                          "--fail-fast", "--rerun-failed", "--repeat", "--timeout", "--json",
                          "--list", "--placement", "--db", "--junit", "--merge", "--by-time"}) {
    EXPECT_THAT(p.out, HasSubstr(opt)) << p.out;
  }
  EXPECT_THAT(p.out, HasSubstr("Exit codes"));
}

TEST(RecordCommand, BinaryJobsHelpAndParserAgree) {
  const test::Cmd help = test::run(quoted(kCprecord) + " --help", test::Stderr::merged);
  EXPECT_THAT(help.out, HasSubstr("--jobs N|auto=auto")) << help.out;
  const std::string base = quoted(kCprecord) + " --db " + test_db() + ".jobs-parse --list";
  const test::Cmd word = test::run(base + " --jobs abc", test::Stderr::merged);
  EXPECT_EQ(word.code, 2) << word.out;
  EXPECT_THAT(word.out, HasSubstr("'abc' is not a number: give N from 1 to 1024, or auto"));
  const test::Cmd zero = test::run(base + " --jobs 0", test::Stderr::merged);
  EXPECT_EQ(zero.code, 2) << zero.out;
  EXPECT_THAT(zero.out, HasSubstr("0 is not from 1 to 1024"));
  const test::Cmd automatic = test::run(base + " --jobs auto", test::Stderr::merged);
  EXPECT_EQ(automatic.code, 0) << automatic.out;
}

TEST(RecordCommand, BinaryJobsBeyondTheCoresSayTheyShareThem) {
  // One core (taskset), three jobs: each job is pinned to that core in turn, and says so.
  const test::Cmd p = test::run("taskset -c 0 " + quoted(kCprecord) + " --db " + test_db() +
                                    ".jobs-share --jobs 3 --mode fresh --filter '^healthy/noop@2$'",
                                test::Stderr::merged);
  EXPECT_EQ(p.code, 0) << p.out;
  EXPECT_THAT(p.out, HasSubstr("cprecord: 3 jobs on 1 core(s): they share the cores")) << p.out;
  EXPECT_THAT(p.out, Not(HasSubstr("each on its own cores"))) << p.out;
}

TEST(RecordCommand, BinaryLogsALinePerExecutionWhenStderrIsNoTerminalAndNamesTheSlowest) {
  // stderr to stdout through a pipe: not a TTY, as in a CI log. The lines come as executions
  // finish, before the table.
  const test::Cmd p =
      test::run(quoted(kCprecord) + " --db " + test_db() + " --mode both --filter '^healthy/noop@'",
                test::Stderr::merged);
  EXPECT_EQ(p.code, 0) << p.out;
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
  const test::Cmd js = test::run(
      quoted(kCprecord) + " --db " + test_db() + " --json --filter '^healthy/noop@2$' 2>/dev/null",
      test::Stderr::as_written);
  EXPECT_NO_THROW(EXPECT_TRUE(json::parse(js.out).is_object())) << js.out;
}

TEST(RecordCommand, BinaryJsonStdoutIsOneDocumentDespiteBanners) {
  // No --worker: cprecord finds the cpworker next to itself. The corpus worker prints an NCCL
  // banner at start and banner_flood floods fd 1 and 2; none of it may reach cprecord's stdout.
  const test::Cmd p = test::run(quoted(kCprecord) + " --db " + test_db() +
                                    " --json --filter 'banner_flood.*@2|noop@2' 2>/dev/null",
                                test::Stderr::as_written);
  EXPECT_EQ(p.code, 0);
  EXPECT_THAT(p.out, Not(HasSubstr("NCCL")));
  json doc;
  ASSERT_NO_THROW(doc = json::parse(p.out)) << p.out.substr(0, 2000);  // strict: one document
  EXPECT_EQ(doc.at("cases").size(), 2u);
  EXPECT_EQ(doc.at("exit_code"), 0);
}

TEST(RecordCommand, BinaryMapsUsageErrorsToExitCodeTwo) {
  const test::Cmd bad = test::run(
      quoted(kCprecord) + " --worker " + quoted(kWorker) + " --filter '('", test::Stderr::merged);
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.out, HasSubstr("cprecord: --filter '('"));
  const test::Cmd cuda =
      test::run(quoted(kCprecord) + " --backend cuda --filter noop", test::Stderr::merged);
  EXPECT_EQ(cuda.code, 2);
  EXPECT_THAT(cuda.out, HasSubstr("--backend cuda"));
  const test::Cmd unexpected =
      test::run(quoted(kCprecord) + " --db " + test_db() + " --worker " + quoted(kFixture) +
                    " --filter '^test/fail_expect@' >/dev/null",
                test::Stderr::merged);
  EXPECT_EQ(unexpected.code, 1);
}

// Standby worlds through a launcher: its node agents start them one at a time, ahead of their
// cases, and every case passes as it does locally.
TEST(RecordCommand, StandbyWorldsStartThroughALaunchersNodeAgents) {
  if (test::run("command -v mpirun >/dev/null").code != 0) {
    GTEST_SKIP() << "Open MPI's mpirun is not on PATH (tools/setup.sh installs openmpi-bin)";
  }
  const test::Cmd r = test::run(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + kCprecord +
      " --standby 2 --launcher mpirun --mode fresh --backend cpu --json --db " + test_db() +
      " --filter '^healthy/all_reduce\\{count=1,.*@2$'");
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 3000);
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("launcher"), "mpirun");
  EXPECT_EQ(doc.at("unexpected"), 0);
  EXPECT_GE(doc.at("cases").size(), 4u);
}

}  // namespace
}  // namespace cprr
