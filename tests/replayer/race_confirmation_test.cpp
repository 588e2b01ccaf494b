// confirm_race against a scripted case: a fake replay whose outputs are wrong exactly when the
// race's second op can overtake its first (the first op delayed, no host sync between them), so
// each dynamic check's logic is tested without timing.
#include "replayer/race_confirmation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/analysis/analysis_support.h"

namespace cprr {
namespace {

RaceFinding race_on(int32_t first_rank, uint64_t first_seq, int32_t second_rank,
                    uint64_t second_seq) {
  RaceFinding f;
  f.race.first = RaceOp{first_rank, 1, first_seq, "kernel", "writer"};
  f.race.second = RaceOp{second_rank, 0, second_seq, "kernel", "reader"};
  f.race.overlaps.push_back(RaceOverlap{});
  return f;
}

// The scripted case: wrong output when the first op is delayed and nothing syncs the host
// between the two ops on the second op's rank (or the streams are one).
struct Script {
  RaceFinding finding;
  bool racy = true;
  int runs = 0;
  int lucky_run = 0;  ///< the run (counted from 1) whose wrong outputs come out right by luck

  ExecutionResult operator()(const Perturbation& p) {
    ++runs;
    const Race& r = finding.race;
    const bool delayed_first = std::find(p.delay_ops.begin(), p.delay_ops.end(),
                                         OpSite{r.first.rank, r.first.seq}) != p.delay_ops.end();
    const bool synced = std::any_of(p.sync_after.begin(), p.sync_after.end(), [&](OpSite s) {
      return (s.rank == -1 || s.rank == r.second.rank) && s.seq >= r.first.seq &&
             s.seq < r.second.seq;
    });
    const bool ordered = p.one_stream && r.first.rank == r.second.rank;
    const bool wrong = racy && delayed_first && !synced && !ordered && runs != lucky_run;
    return test::execution(static_cast<uint64_t>(runs) + 100, Mode::fresh, ExecStatus::pass,
                           {wrong ? "stale" : "right", "right"});
  }
};

TEST(RaceConfirmation, ARaceOnOneRankIsConfirmedByEveryCheckAndBisectedToItsOps) {
  Script script{race_on(0, 6, 0, 9)};
  const ExecutionResult recorded =
      test::execution(1, Mode::fresh, ExecStatus::pass, {"stale", "right"});
  const RaceConfirmation c = confirm_race(script.finding, {&recorded}, 20,
                                          [&](const Perturbation& p, int) { return script(p); });
  EXPECT_EQ(c.confirmed_by,
            (std::vector<std::string>{"serialization", "amplification", "sync_bisection"}));
  EXPECT_EQ(c.amplifying_seed, 1u) << "seed 1 delays the first op";
  ASSERT_TRUE(c.sync_edge.has_value());
  EXPECT_EQ(*c.sync_edge, (OpSite{0, 8})) << "the last boundary before the second op";
  EXPECT_TRUE(c.sync_agrees);
  EXPECT_EQ(c.replays, script.runs);
  EXPECT_LE(c.replays, 17) << "serial 1, one more unperturbed 1, amplification 1, base 1, "
                              "all-syncs 1, log2(20) bisection steps, twice each that reads right";
}

// Only a "right" reading can be luck (a host stalled past the delay lets the ops land in order
// unsynced): a bisection step that reads right once by luck, beyond the edge, must not move it.
TEST(RaceConfirmation, ABisectionStepThatReadsRightByLuckDoesNotMoveTheEdge) {
  for (int lucky_run = 1; lucky_run <= 20; ++lucky_run) {
    Script script{race_on(0, 6, 0, 9)};
    script.lucky_run = lucky_run;
    const ExecutionResult recorded =
        test::execution(1, Mode::fresh, ExecStatus::pass, {"stale", "right"});
    const RaceConfirmation c = confirm_race(script.finding, {&recorded}, 20,
                                            [&](const Perturbation& p, int) { return script(p); });
    SCOPED_TRACE(fmt::format("the run that reads right by luck: #{}", lucky_run));
    ASSERT_TRUE(c.sync_edge.has_value());
    EXPECT_EQ(*c.sync_edge, (OpSite{0, 8}));
  }
  // Read once, the lucky step moves the edge: run 6 is the first bisection step (after the
  // serialized run, one more unperturbed, seed 1, the delay alone and all-syncs), 9, past it.
  Script once{race_on(0, 6, 0, 9)};
  once.lucky_run = 6;
  const ExecutionResult recorded =
      test::execution(1, Mode::fresh, ExecStatus::pass, {"stale", "right"});
  const RaceConfirmation c = confirm_race(
      once.finding, {&recorded}, 20, [&](const Perturbation& p, int) { return once(p); },
      ConfirmOptions{.right_tries = 1});
  ASSERT_TRUE(c.sync_edge.has_value());
  EXPECT_NE(*c.sync_edge, (OpSite{0, 8})) << "the script's luck must reach the bisection";
}

// A candidate (an access of unknown direction) on one rank is shown only when the bisection
// puts the outputs' cause between its ops; across ranks, and for a race of known directions,
// any check shows it; no check, nothing.
TEST(RaceConfirmation, ACandidateOnOneRankIsShownOnlyWhenTheBisectionAgrees) {
  Race exact = race_on(0, 6, 0, 9).race;
  Race candidate = exact;
  candidate.candidate = true;
  Race across = race_on(0, 6, 1, 9).race;
  across.candidate = true;
  RaceConfirmation c;
  c.confirmed_by = {"serialization", "amplification"};
  EXPECT_TRUE(c.shows(exact));
  EXPECT_FALSE(c.shows(candidate)) << "no bisection";
  EXPECT_TRUE(c.shows(across));
  c.sync_edge = OpSite{0, 11};
  EXPECT_FALSE(c.shows(candidate)) << "bisected elsewhere";
  c.sync_agrees = true;
  EXPECT_TRUE(c.shows(candidate));
  c.confirmed_by.clear();
  EXPECT_FALSE(c.shows(candidate));
  EXPECT_FALSE(c.shows(exact));
}

TEST(RaceConfirmation, ARaceAcrossRanksIsConfirmedByAmplificationAndNotBisected) {
  Script script{race_on(0, 8, 1, 12)};
  const ExecutionResult recorded =
      test::execution(1, Mode::fresh, ExecStatus::pass, {"right", "right"});
  const RaceConfirmation c = confirm_race(script.finding, {&recorded}, 30,
                                          [&](const Perturbation& p, int) { return script(p); });
  EXPECT_EQ(c.confirmed_by, (std::vector<std::string>{"amplification"}));
  EXPECT_FALSE(c.sync_edge.has_value());
  EXPECT_EQ(c.replays, 2);
}

// A race whose recorded order is always the lost one: a write on a stream that
// serializing does not reach (a Triton kernel's own), read at once on another; delaying either
// op only keeps the read first. Only holding the read until the write completed (the fix applied)
// changes the outputs.
struct LostOrder {
  RaceFinding finding = race_on(0, 6, 0, 9);
  int runs = 0;

  ExecutionResult operator()(const Perturbation& p) {
    ++runs;
    const Race& r = finding.race;
    const bool held = std::any_of(p.sync_after.begin(), p.sync_after.end(), [&](OpSite s) {
      return (s.rank == -1 || s.rank == r.second.rank) && s.seq >= r.first.seq &&
             s.seq < r.second.seq;
    });
    return test::execution(static_cast<uint64_t>(runs) + 100, Mode::fresh, ExecStatus::pass,
                           {held ? "right" : "stale", "right"});
  }
};

TEST(RaceConfirmation, ARaceAlwaysLostTheSameWayIsConfirmedByApplyingTheFix) {
  LostOrder script;
  script.finding.race.candidate = true;  // a launch of unknown direction
  const ExecutionResult recorded =
      test::execution(1, Mode::fresh, ExecStatus::pass, {"stale", "right"});
  const RaceConfirmation c = confirm_race(script.finding, {&recorded}, 20,
                                          [&](const Perturbation& p, int) { return script(p); });
  EXPECT_EQ(c.confirmed_by, (std::vector<std::string>{"fix_applied"}))
      << fmt::format("{}", fmt::join(c.log, "\n"));
  EXPECT_TRUE(c.shows(script.finding.race));
  EXPECT_EQ(c.recorded_order,
            "the recorded runs took rank 0 stream 0 op #9 (kernel 'reader') before rank 0 stream "
            "1 op #6 (kernel 'writer') had completed: 2 unperturbed runs agree, and holding it "
            "until then changes the outputs");
  EXPECT_EQ(c.replays, script.runs);
  EXPECT_EQ(c.replays, 1 + 2) << "serial, one more unperturbed run, the fix: no seeds after it";
}

TEST(RaceConfirmation, TheFixAppliedConfirmsNothingWhereTheUnperturbedRunsDisagree) {
  LostOrder script;
  script.finding.race.candidate = true;
  const ExecutionResult stale =
      test::execution(1, Mode::fresh, ExecStatus::pass, {"stale", "right"});
  const ExecutionResult right =
      test::execution(2, Mode::fresh, ExecStatus::pass, {"right", "right"});
  const RaceConfirmation c = confirm_race(script.finding, {&stale, &right}, 20,
                                          [&](const Perturbation& p, int) { return script(p); });
  EXPECT_FALSE(c.shows(script.finding.race));
  EXPECT_TRUE(std::find(c.confirmed_by.begin(), c.confirmed_by.end(), "fix_applied") ==
              c.confirmed_by.end());
  EXPECT_TRUE(c.recorded_order.empty());
  EXPECT_TRUE(std::any_of(c.log.begin(), c.log.end(), [](const std::string& l) {
    return l.find("already disagree with each other") != std::string::npos;
  })) << fmt::format("{}", fmt::join(c.log, "\n"));
  EXPECT_EQ(c.replays, 1 + 8) << "no replay of the fix, then the seeds";
}

// A serialized run that fails where the recorded runs passed (serializing broke the case: its
// outputs are missing) is no reference: every other run would "differ" from it. Where a recorded
// run failed too, a failing serialized run is still compared with (the race may be why).
TEST(RaceConfirmation, ASerializedRunThatFailsWhereTheRecordedRunsPassedIsNoReference) {
  const RaceFinding finding = race_on(0, 2, 0, 5);
  int runs = 0;
  const auto broken = [&](const Perturbation& p, int) {
    ++runs;
    return test::execution(100 + runs, Mode::fresh,
                           p.one_stream ? ExecStatus::fail : ExecStatus::pass,
                           {p.one_stream ? "" : "right", "right"});
  };
  const ExecutionResult passed =
      test::execution(1, Mode::fresh, ExecStatus::pass, {"right", "right"});
  const RaceConfirmation c = confirm_race(finding, {&passed}, 10, broken);
  EXPECT_TRUE(c.confirmed_by.empty());
  EXPECT_EQ(c.replays, 3) << "no amplification against a broken reference: the serialized "
                             "run, one more unperturbed run and the fix applied";
  ASSERT_FALSE(c.log.empty());
  EXPECT_NE(c.log[0].find("broke the case itself"), std::string::npos) << c.log[0];

  runs = 0;
  const ExecutionResult failed =
      test::execution(1, Mode::fresh, ExecStatus::fail, {"stale", "right"});
  const RaceConfirmation compared = confirm_race(finding, {&failed}, 10, broken);
  EXPECT_GT(compared.replays, 1);
}

TEST(RaceConfirmation, OpsThatNeverMisbehaveConfirmNothingAfterKSeeds) {
  Script script{race_on(0, 2, 0, 5)};
  script.racy = false;
  const ExecutionResult recorded =
      test::execution(1, Mode::fresh, ExecStatus::pass, {"right", "right"});
  const RaceConfirmation c = confirm_race(
      script.finding, {&recorded}, 10, [&](const Perturbation& p, int) { return script(p); },
      ConfirmOptions{.seeds = 5});
  EXPECT_TRUE(c.confirmed_by.empty());
  EXPECT_EQ(c.seeds_run, 5);
  EXPECT_EQ(c.replays, 6 + 2) << "the serialized run and five seeds; no bisection without a "
                                 "seed; one more unperturbed run and the fix applied";
  EXPECT_TRUE(c.recorded_order.empty());
}

// --standby: every replay says how many more are certain to follow it, whatever it shows; a world
// started ahead for one that never comes is wasted. Over scripted races of every shape (one rank
// or two, the first op on a stream or the host, racy or not, short and long op logs), what each
// replay promised must come, and a bisected race must promise some.
TEST(RaceConfirmation, EachReplayPromisesOnlyReplaysThatCome) {
  for (const bool same_rank : {true, false}) {
    for (const bool host_first : {false, true}) {
      for (const bool racy : {true, false}) {
        for (const uint64_t ops : {2u, 3u, 5u, 10u, 20u, 33u}) {
          for (const int seeds : {1, 3, 8}) {
            const uint64_t second = ops - 1;
            Script script{race_on(0, second / 2, same_rank ? 0 : 1, second)};
            if (host_first) script.finding.race.first.stream = -1;
            script.racy = racy;
            std::vector<int> promised;
            const ExecutionResult recorded =
                test::execution(1, Mode::fresh, ExecStatus::pass, {"right", "right"});
            const RaceConfirmation c = confirm_race(
                script.finding, {&recorded}, ops,
                [&](const Perturbation& p, int then) {
                  promised.push_back(then);
                  return script(p);
                },
                ConfirmOptions{.seeds = seeds});
            SCOPED_TRACE(fmt::format("same rank {}, host first {}, racy {}, {} ops, {} seeds: {}",
                                     same_rank, host_first, racy, ops, seeds,
                                     fmt::join(promised, " ")));
            ASSERT_EQ(static_cast<int>(promised.size()), c.replays);
            for (std::size_t i = 0; i < promised.size(); ++i) {
              EXPECT_GE(promised[i], 0);
              EXPECT_LE(promised[i], static_cast<int>(promised.size() - 1 - i))
                  << "replay " << i << " promised a replay that never came";
            }
            if (c.sync_edge && ops >= 10) {
              EXPECT_GE(
                  std::count_if(promised.begin(), promised.end(), [](int n) { return n > 0; }), 2)
                  << "a bisection knows some of the replays it will make";
            }
          }
        }
      }
    }
  }
}

TEST(RaceConfirmation, TheSeedsAndTheBisectionPromiseWhatTheyAreSureOf) {
  Script script{race_on(0, 6, 0, 9)};
  const ExecutionResult recorded =
      test::execution(1, Mode::fresh, ExecStatus::pass, {"stale", "right"});
  std::vector<int> promised;
  const RaceConfirmation c =
      confirm_race(script.finding, {&recorded}, 20, [&](const Perturbation& p, int then) {
        promised.push_back(then);
        return script(p);
      });
  ASSERT_TRUE(c.sync_edge.has_value());
  // A promise is a floor: the runs that follow each one are never fewer than it said (standby
  // worlds started for runs that never come would be waste). The bisection of 19 boundaries is
  // sure of steps ahead of it, so some promise is more than one: a floor of 0 everywhere would
  // keep the promise and start nothing ahead.
  ASSERT_FALSE(promised.empty());
  for (std::size_t k = 0; k < promised.size(); ++k) {
    EXPECT_LE(promised[k], static_cast<int>(promised.size() - 1 - k))
        << "run " << k << " promised more runs than followed";
  }
  EXPECT_GE(*std::max_element(promised.begin(), promised.end()), 2)
      << "the bisection promised nothing it was sure of";
}

}  // namespace
}  // namespace cprr
