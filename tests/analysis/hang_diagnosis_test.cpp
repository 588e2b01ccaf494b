// cprr::diagnose_hang on fabricated watchdog answers and collective logs: who never joined which
// collective, a rank whose watchdog gave no answer, ranks that finished.
#include "analysis/hang_diagnosis.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/analysis/rank_reports.h"

namespace cprr {
namespace {

using namespace rank_reports;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(DiagnoseHang, NamesTheRankThatNeverJoinedTheCollectiveOthersWaitIn) {
  const std::string d =
      diagnose_hang({waiting("body", 3, "all_reduce", 2), waiting("body", 2, "all_reduce", 2),
                     waiting("body", 3, "all_reduce", 2)});
  EXPECT_THAT(d, StartsWith("hang: rank 1 never joined collective #3 (all_reduce)"));
  EXPECT_THAT(
      d, HasSubstr("rank 0: in body (waiting in collective #3 all_reduce), last collective #3"));
  EXPECT_THAT(d, HasSubstr("rank 1: in body, last collective #2"));
}

TEST(DiagnoseHang, NamesEveryRankBehindTogether) {
  const std::string d =
      diagnose_hang({waiting("body", 5, "broadcast", 4), waiting("body", 4, "all_gather", 4),
                     waiting("body", -1, "", -1)});
  EXPECT_THAT(d, HasSubstr("ranks 1,2 never joined collective #5 (broadcast)"));
  EXPECT_THAT(d, HasSubstr("rank 2: in body, last collective #-1"));
}

TEST(DiagnoseHang, AFinishedRankCountsTheLastCollectiveOfItsLog) {
  const std::string d = diagnose_hang(
      {finished_after({{0, "barrier"}, {1, "all_to_all_v"}}), waiting("body", 0, "barrier", 0)});
  EXPECT_THAT(d, HasSubstr("rank 1 never joined collective #1 (all_to_all_v)"));
  EXPECT_THAT(d, HasSubstr("rank 0: finished the case, last collective #1"));
}

// Two groups with a member behind: rank 1 waits in group 2 for rank 3, which finished without
// joining; rank 0 has not reached group 1's call yet (a late rank on a loaded host), which rank
// 1 entered. The finished rank is named first, though its group's number is higher.
TEST(DiagnoseHang, AMemberThatFinishedWithoutJoiningIsNamedBeforeOneThatIsLate) {
  const CollectiveRecord tp{.seq = 0, .kind = "all_reduce", .group = 1, .members = 0b0011};
  const CollectiveRecord dp{.seq = 0, .kind = "all_reduce", .group = 2, .members = 0b1010};
  RankReport late = waiting("body", -1, "", -1);
  RankReport in_dp = waiting("body", -1, "", -1);
  in_dp.entered = {tp, dp};
  const std::string d = diagnose_hang({late, in_dp, passed(), passed()});
  EXPECT_THAT(d, StartsWith("hang: group 2 (ranks 1,3): rank 3 never joined collective #0 "
                            "(all_reduce); group 1 (ranks 0,1): rank 0 never joined"));
}

TEST(DiagnoseHang, ARankWithoutAWatchdogAnswerIsNamedAsSilentNotAsNeverJoined) {
  const std::string d = diagnose_hang(
      {waiting("body", 2, "all_reduce", 1), silent(), waiting("body", 2, "all_reduce", 1)});
  EXPECT_THAT(d, HasSubstr("rank 1 gave no answer from the watchdog"));
  EXPECT_THAT(d, HasSubstr("rank 1: no answer from its watchdog"));
  EXPECT_THAT(d, Not(HasSubstr("never joined")));
}

TEST(DiagnoseHang, ASilentRankDoesNotHideTheOneBehind) {
  const std::string d = diagnose_hang(
      {silent(), waiting("body", 7, "all_reduce", 6), waiting("body", 6, "all_reduce", 6)});
  EXPECT_THAT(d, HasSubstr("rank 0 gave no answer from the watchdog"));
  EXPECT_THAT(d, HasSubstr("rank 2 never joined collective #7 (all_reduce)"));
  EXPECT_THAT(d, Not(HasSubstr("rank 0 never joined")));
  EXPECT_THAT(d, Not(HasSubstr("ranks 0")));
}

TEST(DiagnoseHang, RanksThatAllFinishedNeverJoinedNothing) {
  const std::string d =
      diagnose_hang({finished_after({{0, "barrier"}}), finished_after({{0, "barrier"}})});
  EXPECT_EQ(d,
            "hang: rank 0: finished the case, last collective #0; "
            "rank 1: finished the case, last collective #0");
}

TEST(DiagnoseHang, WithoutAnyCollectiveNoRankIsBehind) {
  const std::string d = diagnose_hang({waiting("body", -1, "", -1), waiting("reset", -1, "", -1)});
  EXPECT_THAT(d, Not(HasSubstr("never joined")));
  EXPECT_THAT(d, HasSubstr("rank 1: in reset, last collective #-1"));
}

TEST(DiagnoseHang, SaysWhatEachBusyStreamIsRunning) {
  const std::string d = diagnose_hang(
      {waiting("drain", 0, "all_reduce", 0, {"stream 1 (compute): spin", "stream 2 (copy): copy"}),
       waiting("body", 0, "all_reduce", 0)});
  EXPECT_THAT(d, HasSubstr("rank 0: in drain: stream 1 (compute): spin; stream 2 (copy): copy, "
                           "last collective #0"));
}

TEST(DescribeReleased, SaysWhatEachRankWithoutAResultWasDoingWhenTheOtherFailed) {
  EXPECT_EQ(describe_released({waiting("body", 1, "all_reduce", 0), failed("ValueError: bad"),
                               waiting("drain", 0, "all_reduce", 0), silent()},
                              1),
            "rank 0 was in body (waiting in collective #1 all_reduce); rank 2 was in drain; "
            "rank 3 gave no answer from its watchdog when rank 1 failed: they were ended with "
            "its world, which is replaced");
}

// The flight record is written before a call starts, the watchdog's numbers once it has (CI saw
// a status taken in between): the rank waits in the call its record has.
TEST(DescribeReleased, ARankWhoseFlightRecordIsAheadOfItsWatchdogWaitsInTheRecordsCall) {
  RankReport ahead = waiting("body", 0, "all_reduce", 0);
  ahead.entered = {CollectiveRecord{.seq = 0, .kind = "all_reduce"},
                   CollectiveRecord{.seq = 1, .kind = "all_gather"}};
  EXPECT_THAT(describe_released({ahead, failed("ValueError: bad")}, 1),
              HasSubstr("rank 0 was in body (waiting in collective #1 all_gather)"));
  ahead.entered.pop_back();  // the record agrees with the watchdog: #0 is done
  EXPECT_THAT(describe_released({ahead, failed("ValueError: bad")}, 1),
              HasSubstr("rank 0 was in body when rank 1 failed"));
}

TEST(DescribeReleased, NamesNoRankThatReportedDiedOrBrokeItsChannel) {
  EXPECT_EQ(describe_released({passed(), failed("f"), killed_by(9), broken("eof")}, 1), "");
  EXPECT_EQ(describe_released({failed("f"), waiting("body", 0, "barrier", -1)}, 0),
            "rank 1 was in body (waiting in collective #0 barrier) when rank 0 failed: it was "
            "ended with its world, which is replaced");
}

}  // namespace
}  // namespace cprr
