// A rank whose case throws while the others go on, against the real fixture worker: the
// execution is that rank's `fail` with its message, never a hang; ranks that can no longer
// finish (waiting in a collective the thrower never entered, or still running after the
// failure's grace) are released at once or at the grace, and their world is replaced; ranks that
// finish on their own keep it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "recorder/engine/controller.h"
#include "tests/recorder/engine/engine_support.h"

namespace cprr {
namespace {

using namespace engine_test;
using ::testing::HasSubstr;

std::string label(const std::string& what, const std::string& others, int w) {
  return "test/throw_on_one_rank{others=" + others + ",what=" + what + "}@" + std::to_string(w);
}

// The thrower's fail, naming it and what it threw; the others without a result.
void expect_fail_of_rank_1(const ExecutionResult& r, const std::string& what) {
  EXPECT_EQ(r.status, ExecStatus::fail) << r.summary << " / " << r.note;
  EXPECT_TRUE(r.as_expected);
  EXPECT_EQ(r.summary, what == "int" ? "rank 1: the case threw something that is no "
                                       "std::exception (so it has no message)"
                                     : "rank 1: rank 1 threw after collective #0");
  ASSERT_TRUE(r.ranks.at(1).done.has_value());
  EXPECT_EQ(r.ranks[1].done->outcome, RankOutcome::fail);
}

TEST(EngineFailure, RanksWaitingInACollectiveTheThrowerNeverEnteredAreReleasedAtOnce) {
  Controller c(config(kFixture));
  for (const int w : {2, 3}) {
    for (const char* what : {"runtime_error", "int"}) {
      SCOPED_TRACE(label(what, "collective", w));
      const ExecutionResult r = c.run(inst(kFixture, label(what, "collective", w)), Mode::pool);
      expect_fail_of_rank_1(r, what);
      EXPECT_THAT(r.note, HasSubstr("after rank 1 failed, not at the deadline: rank "));
      EXPECT_THAT(r.note,
                  HasSubstr("had entered collective #1 (all_reduce), which rank 1 never did"));
      EXPECT_THAT(r.note, HasSubstr("rank 0 was in body"));
      EXPECT_THAT(r.note, HasSubstr("(waiting in collective #1 all_reduce)"));
      EXPECT_THAT(r.note, HasSubstr("ended with its world, which is replaced"));
      for (int k = 0; k < w; ++k) {
        if (k != 1) {
          EXPECT_FALSE(r.ranks[k].done.has_value()) << "rank " << k;
        }
      }
      const ExecutionResult next = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
      expect_pass(next);
      if (w == 2) {
        EXPECT_NE(next.world_id, r.world_id) << "a released world was reused";
      }
    }
  }
}

TEST(EngineFailure, RanksReachingThatCollectiveLaterAreReleasedWhenTheyEnterIt) {
  Controller c(config(kFixture));
  const ExecutionResult r =
      c.run(inst(kFixture, label("runtime_error", "host_then_collective", 2)), Mode::pool);
  expect_fail_of_rank_1(r, "runtime_error");
  EXPECT_THAT(r.note, HasSubstr("had entered collective #1 (all_reduce), which rank 1 never did"));
  EXPECT_FALSE(r.ranks[0].done.has_value());
}

TEST(EngineFailure, RanksStillRunningAtTheGraceAfterAFailureAreReleasedThen) {
  ControllerConfig cc = config(kFixture);
  cc.after_death = std::chrono::milliseconds(300);
  Controller c(cc);
  const ExecutionResult r = c.run(inst(kFixture, label("runtime_error", "host", 3)), Mode::pool);
  expect_fail_of_rank_1(r, "runtime_error");
  EXPECT_THAT(r.note, HasSubstr("s after rank 1 failed, with ranks 0,2 still running"));
  EXPECT_THAT(r.note, HasSubstr("rank 0 was in body"));
  EXPECT_THAT(r.note, HasSubstr("rank 2 was in body"));
}

TEST(EngineFailure, ARankThatReturnedReleasesAtOnceThoseWaitingInACallItNeverEntered) {
  Controller c(config(kFixture));
  for (const int w : {2, 3}) {
    for (const char* then : {"collective", "host_then_collective"}) {
      const std::string label =
          std::string("test/lone_return{then=") + then + "}@" + std::to_string(w);
      SCOPED_TRACE(label);
      const CaseInstance lone = inst(kFixture, label);
      ASSERT_EQ(lone.info.options.timeout_s, 30);
      for (Mode mode : {Mode::pool, Mode::fresh}) {
        const ExecutionResult r = c.run(lone, mode);
        EXPECT_EQ(r.status, ExecStatus::hang) << r.summary << " / " << r.note;
        EXPECT_TRUE(r.as_expected);
        // The C++ Case API records no call site; Python's does (tests/python/test_lone_return).
        // At W=3, rank 0 or rank 2: whichever the check finds waiting first.
        EXPECT_THAT(r.note, ::testing::ContainsRegex(
                                "after rank 1 returned from the case, not at the deadline: "
                                "rank [02] had entered collective #1 \\(all_reduce\\), which "
                                "rank 1 never did"));
        EXPECT_THAT(r.summary, HasSubstr("rank 1: finished the case"));
        ASSERT_TRUE(r.ranks.at(1).done.has_value());
        EXPECT_EQ(r.ranks[1].done->outcome, RankOutcome::ok);
        EXPECT_FALSE(r.ranks[0].done.has_value());
      }
    }
  }
  // The released world was replaced: the next case passes.
  expect_pass(c.run(inst(kFixture, "test/ok@2"), Mode::pool));
}

TEST(EngineFailure, RanksThatFinishOnTheirOwnKeepTheWorld) {
  Controller c(config(kFixture));
  const ExecutionResult r = c.run(inst(kFixture, label("runtime_error", "finish", 2)), Mode::pool);
  expect_fail_of_rank_1(r, "runtime_error");
  ASSERT_TRUE(r.ranks[0].done.has_value());
  EXPECT_EQ(r.ranks[0].done->outcome, RankOutcome::ok);
  EXPECT_EQ(r.note, "");
  const ExecutionResult next = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
  expect_pass(next);
  EXPECT_EQ(next.world_id, r.world_id) << "a failing case that left its world sound replaced it";
}

}  // namespace
}  // namespace cprr
