// cprr::classify on fabricated rank reports: every status, which fault wins when ranks disagree,
// which rank the summary names, and what I/O the controller is told to do. Each test compares the
// whole judgement, so a status right for the wrong reason (a missing kill, a stray query) fails.
#include "analysis/classify.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <ostream>

#include "data/text_forms.h"
#include "tests/analysis/rank_reports.h"

namespace cprr {

// Lets gtest print a judgement that differs from the expected one.
void PrintTo(const Classification& c, std::ostream* os) {
  *os << "{" << status_name(c.status) << ", \"" << c.summary << "\", query=" << c.needs_status_query
      << ", released_by=" << c.released_by << ", kill=" << c.kill_world
      << ", interrupted=" << c.interrupted << ", note=\"" << c.note << "\"}";
}

namespace {

using namespace rank_reports;
using Judged = Classification;
constexpr auto pass = ExecStatus::pass, fail = ExecStatus::fail, crash = ExecStatus::crash,
               hang = ExecStatus::hang, error = ExecStatus::error;

TEST(Classify, EveryRankDoneIsAPassThatKeepsTheWorld) {
  EXPECT_EQ(classify({passed(), passed(), passed()}, false), Judged{.status = pass});
}

TEST(Classify, AFailedBodyIsAFailThatKeepsTheWorldNamingTheFirstFailingRank) {
  EXPECT_EQ(classify({passed(), failed("x != 3"), failed("y != 4")}, false),
            (Judged{.status = fail, .summary = "rank 1: x != 3"}));
}

TEST(Classify, AHarnessErrorIsAnErrorThatKillsTheWorld) {
  EXPECT_EQ(classify({passed(), errored("unknown case foo")}, false),
            (Judged{.status = error, .summary = "rank 1: unknown case foo", .kill_world = true}));
}

TEST(Classify, AnErrorWinsOverAFailOnAnEarlierRank) {
  EXPECT_EQ(classify({failed("x != 3"), errored("backend broken")}, false),
            (Judged{.status = error, .summary = "rank 1: backend broken", .kill_world = true}));
}

TEST(Classify, ARankThatDiedIsACrashNamingHowItDied) {
  EXPECT_EQ(
      classify({passed(), killed_by(SIGSEGV)}, false),
      (Judged{
          .status = crash, .summary = "rank 1 killed by signal 11 (SIGSEGV)", .kill_world = true}));
}

TEST(Classify, ADeathWinsOverEveryOtherFaultAndOverAStop) {
  EXPECT_EQ(
      classify({silent(), broken("garbage"), errored("e"), failed("f"), killed_by(SIGKILL)}, true),
      (Judged{
          .status = crash, .summary = "rank 4 killed by signal 9 (SIGKILL)", .kill_world = true}));
}

TEST(Classify, ARankThatReportedThenExitedDidNotCrash) {
  RankReport exited = passed();
  exited.exit = ExitInfo{.exit_code = 0};
  EXPECT_EQ(classify({passed(), exited}, false), Judged{.status = pass});
}

TEST(Classify, ABrokenChannelIsACrashNamingTheProtocolError) {
  EXPECT_EQ(classify({passed(), broken("bytes that are no frame")}, false),
            (Judged{.status = crash,
                    .summary = "rank 1: protocol error: bytes that are no frame",
                    .kill_world = true}));
}

TEST(Classify, ABrokenChannelWinsOverASilentRankAndAnError) {
  EXPECT_EQ(
      classify({silent(), errored("e"), broken("eof mid-case")}, false),
      (Judged{
          .status = crash, .summary = "rank 2: protocol error: eof mid-case", .kill_world = true}));
}

TEST(Classify, ASilentRankIsAHangThatAsksTheWatchdogsBeforeTheKill) {
  // No summary yet: diagnose_hang writes it from the watchdogs' answers.
  EXPECT_EQ(classify({passed(), silent(), silent()}, false),
            (Judged{.status = hang, .needs_status_query = true, .kill_world = true}));
}

TEST(Classify, AFailWhileOthersStillRunIsThatFailReleasingThemAndEndingTheWorld) {
  // Rank 1 raised before a collective rank 0 waits in: rank 1's failure, not a hang.
  EXPECT_EQ(classify({silent(), failed("ValueError: bad"), passed()}, false),
            (Judged{.status = fail,
                    .summary = "rank 1: ValueError: bad",
                    .released_by = 1,
                    .kill_world = true}));
}

TEST(Classify, EveryRankSkippingIsASkipThatKeepsTheWorld) {
  EXPECT_EQ(classify({skipped("needs 2 GPUs"), skipped("needs 2 GPUs")}, false),
            (Judged{.status = ExecStatus::skip, .summary = "skipped: needs 2 GPUs"}));
}

TEST(Classify, ARankThatSkipsAloneFailsTheExecutionNamingWhoRanIt) {
  EXPECT_EQ(classify({passed(), skipped("no data"), passed()}, false),
            (Judged{.status = fail,
                    .summary = "rank 1 skipped the case (no data) while ranks 0,2 "
                               "ran it"}));
  // The others wait in a collective it never enters: its skip releases them, not a hang.
  EXPECT_EQ(classify({silent(), skipped("no data")}, false),
            (Judged{.status = fail,
                    .summary = "rank 1 skipped the case (no data) while rank 0 ran it",
                    .released_by = 1,
                    .kill_world = true}));
  // A fail wins over a skip: it is what went wrong.
  EXPECT_EQ(classify({skipped("no data"), failed("x != 3")}, false),
            (Judged{.status = fail, .summary = "rank 1: x != 3"}));
}

// A rank whose body failed after these collectives (seq, kind).
RankReport failed_after(std::vector<std::pair<uint64_t, std::string>> collectives) {
  RankReport rep = finished_after(std::move(collectives));
  rep.done->outcome = RankOutcome::fail;
  rep.done->error = "ValueError: bad";
  return rep;
}

TEST(Classify, AFinishedRankWithACollectiveTheFailedOneNeverEnteredEndsTheWorld) {
  // NCCL, or an async op nobody waited for: rank 0 returned with #1 still pending.
  EXPECT_EQ(
      classify({finished_after({{0, "all_reduce"}, {1, "all_reduce"}}),
                failed_after({{0, "all_reduce"}})},
               false),
      (Judged{.status = fail,
              .summary = "rank 1: ValueError: bad",
              .kill_world = true,
              .note = "rank 0 called collective #1 (all_reduce), which rank 1 never entered before "
                      "it failed, so it can never complete: the world is replaced"}));
  // Every collective of the others was one the failed rank entered too: the world stays.
  EXPECT_EQ(
      classify({finished_after({{0, "all_reduce"}}), failed_after({{0, "all_reduce"}})}, false),
      (Judged{.status = fail, .summary = "rank 1: ValueError: bad"}));
}

TEST(Classify, ThePendingCollectiveIsJudgedAgainstTheFailedRankThatEnteredFewest) {
  // Rank 0 failed after #1, rank 1 after #0: rank 0's #1 can never complete.
  EXPECT_EQ(
      classify({failed_after({{0, "barrier"}, {1, "broadcast"}}), failed_after({{0, "barrier"}})},
               false),
      (Judged{.status = fail,
              .summary = "rank 0: ValueError: bad",
              .kill_world = true,
              .note = "rank 0 called collective #1 (broadcast), which rank 1 never entered "
                      "before it failed, so it can never complete: the world is replaced"}));
}

TEST(Classify, AnErrorWhileOthersStillRunWinsOverAFail) {
  EXPECT_EQ(classify({failed("f"), silent(), errored("backend broken")}, false),
            (Judged{.status = error,
                    .summary = "rank 2: backend broken",
                    .released_by = 2,
                    .kill_world = true}));
}

TEST(Classify, ASummaryShowsAPythonFailuresExceptionLineNotItsFirst) {
  EXPECT_EQ(classify({passed(), failed("Traceback (most recent call last):\n"
                                       "  File \"/w/test_x.py\", line 9, in body\n"
                                       "    raise ValueError('bad')\n"
                                       "ValueError: bad\n")},
                     false),
            (Judged{.status = fail, .summary = "rank 1: ValueError: bad (test_x.py:9)"}));
}

TEST(Classify, AStopWinsOverAFailWhileOthersStillRun) {
  EXPECT_EQ(classify({failed("f"), silent()}, true),
            (Judged{.status = error,
                    .summary = "interrupted while rank 1 was still running the case",
                    .kill_world = true,
                    .interrupted = true}));
}

TEST(Classify, ASilentRankAfterAStopIsAnInterruptionWithoutAQuery) {
  EXPECT_EQ(classify({passed(), silent(), silent()}, true),
            (Judged{.status = error,
                    .summary = "interrupted while rank 1 was still running the case",
                    .kill_world = true,
                    .interrupted = true}));
}

TEST(Classify, AStopWithEveryRankAnsweredIsNoInterruption) {
  EXPECT_EQ(classify({passed(), failed("x != 3")}, true),
            (Judged{.status = fail, .summary = "rank 1: x != 3"}));
  EXPECT_EQ(classify({passed(), passed()}, true), Judged{.status = pass});
}

}  // namespace
}  // namespace cprr
