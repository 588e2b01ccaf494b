// world_startup_phases: the ranks' reported steps laid along the controller's marks of a world's
// start, adding up to it.
#include "recorder/engine/world_startup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cprr {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;

const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);

std::vector<std::string> names(const std::vector<StartupPhase>& phases) {
  std::vector<std::string> out;
  for (const StartupPhase& p : phases) out.push_back(p.name);
  return out;
}

double ms_of(const std::vector<StartupPhase>& phases, const std::string& name) {
  for (const StartupPhase& p : phases) {
    if (p.name == name) return p.ms;
  }
  ADD_FAILURE() << "no phase " << name;
  return -1;
}

TEST(WorldStartup, TheLastRankToSayHelloAndTheLastToJoinExplainTheWorldsStart) {
  // Rank 0: spawned at 1 ms, hello at 300 (its own steps 250 of them), joined at 900.
  // Rank 1: spawned at 2 ms, hello at 400 (its own steps 320), joined at 800.
  RankStart r0{t0 + milliseconds(1),
               t0 + milliseconds(300),
               t0 + milliseconds(900),
               {{"rank set-up", 50}, {"cuda context", 200}},
               {{"nccl communicator", 450}}};
  RankStart r1{t0 + milliseconds(2),
               t0 + milliseconds(400),
               t0 + milliseconds(800),
               {{"rank set-up", 70}, {"cuda context", 250}},
               {{"nccl communicator", 350}}};
  const auto phases = world_startup_phases(t0, t0 + milliseconds(1000), {r0, r1});
  EXPECT_THAT(names(phases),
              ElementsAre("spawn ranks", "exec and load", "rank set-up", "cuda context",
                          "nccl communicator", "messages and waiting"));
  EXPECT_DOUBLE_EQ(ms_of(phases, "spawn ranks"), 2);     // until rank 1 (last hello) was spawned
  EXPECT_DOUBLE_EQ(ms_of(phases, "exec and load"), 78);  // 398 - 320 of its own steps
  EXPECT_DOUBLE_EQ(ms_of(phases, "cuda context"), 250);
  EXPECT_DOUBLE_EQ(ms_of(phases, "nccl communicator"), 450);  // rank 0 joined last
  EXPECT_DOUBLE_EQ(total_ms(phases), 1000) << "the steps must add up to the world's start";
}

TEST(WorldStartup, StepsLongerThanTheControllerSawAreNeverNegative) {
  // A rank that reports more than the controller measured (clocks are per process): nothing
  // goes below zero, and what the controller could not place is not invented.
  RankStart r{t0, t0 + milliseconds(10), t0 + milliseconds(20), {{"rank set-up", 50}}, {}};
  const auto phases = world_startup_phases(t0, t0 + milliseconds(20), {r});
  for (const StartupPhase& p : phases) EXPECT_GE(p.ms, 0) << p.name;
  EXPECT_DOUBLE_EQ(ms_of(phases, "exec and load"), 0);
  EXPECT_DOUBLE_EQ(ms_of(phases, "messages and waiting"), 0);
}

TEST(WorldStartup, AWorldWithoutRanksIsAllWaiting) {
  const auto phases = world_startup_phases(t0, t0 + milliseconds(5), {});
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(phases[0].name, "messages and waiting");
  EXPECT_DOUBLE_EQ(phases[0].ms, 5);
}

RankReport reported(std::vector<StartupPhase> first_use, std::string pool) {
  RankReport r;
  r.done = RankResult{};
  r.done->first_use = std::move(first_use);
  r.done->symmetric_pool = std::move(pool);
  return r;
}

TEST(FirstUse, TheRankThatPaidMostInsideTheCaseIsTheCasesFirstUse) {
  const std::vector<RankReport> ranks = {
      reported({{"nccl communicator (waited for)", 40}, {"symmetric arena", 200}}, "w"),
      reported({{"nccl communicator (waited for)", 300}, {"symmetric arena", 190}}, "w"),
      reported({}, "w")};
  const auto phases = first_use_phases(ranks);
  ASSERT_THAT(names(phases), ElementsAre("nccl communicator (waited for)", "symmetric arena"));
  EXPECT_DOUBLE_EQ(ms_of(phases, "nccl communicator (waited for)"), 300);
  EXPECT_TRUE(first_use_phases({reported({}, "w"), RankReport{}}).empty())
      << "nothing was left to first use, or a rank did not report";
}

TEST(FirstUse, ThePoolAfterTheCaseIsWhatEveryRankReportedElseTheWorldsStartLine) {
  EXPECT_EQ(pool_after_case({reported({}, "NCCL window"), reported({}, "NCCL window")}, "not made"),
            "NCCL window");
  EXPECT_EQ(pool_after_case({reported({}, "NCCL window"), reported({}, "plain")}, "not made"),
            "rank 0: NCCL window; rank 1: plain");
  EXPECT_EQ(pool_after_case({reported({}, "NCCL window"), RankReport{}}, "not made"), "not made")
      << "a rank that crashed said nothing of its pool";
  EXPECT_EQ(pool_after_case({reported({}, "NCCL window"), reported({}, "")}, "at start"),
            "at start");
}

TEST(PhaseClock, LapsTimeConsecutiveStepsAndRestartSkipsAGap) {
  PhaseClock clock(std::chrono::steady_clock::now() - milliseconds(30));
  clock.lap("first");
  clock.restart();
  clock.lap("second");
  const auto phases = clock.take();
  ASSERT_THAT(names(phases), ElementsAre("first", "second"));
  EXPECT_GE(phases[0].ms, 30);
  EXPECT_LT(phases[1].ms, phases[0].ms);
  EXPECT_TRUE(clock.take().empty()) << "take() hands the steps over";
}

}  // namespace
}  // namespace cprr
