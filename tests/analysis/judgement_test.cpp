// judge_case / summarize / exit_code_for on hand-built executions: which executions count against
// the run and why, the record-time verdict and the fresh-vs-pooled differential.
#include "analysis/judgement.h"

#include <gtest/gtest.h>

#include "tests/analysis/analysis_support.h"

namespace cprr {
namespace {

using test::execution;
using test::through;

CaseInstance instance(Expect expect = Expect::pass, std::string seeded_bug = {}) {
  CaseInstance inst;
  inst.id = 1;
  inst.info.name = "t/case";
  inst.info.options.expect = expect;
  inst.info.options.seeded_bug = std::move(seeded_bug);
  inst.world_size = 2;
  return inst;
}

TEST(Judgement, AllPassingIsAsExpectedWithNoVerdict) {
  const CaseInstance inst = instance();
  const ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"});
  const ExecutionResult p = execution(2, Mode::pool, ExecStatus::pass, {"a", "b"});
  const CaseOutcome o = judge_case(inst, 42, {&f, &p});
  EXPECT_TRUE(o.as_expected);
  EXPECT_TRUE(o.against.empty());
  EXPECT_FALSE(o.verdict.has_value());
  EXPECT_FALSE(o.differential.has_value());
  EXPECT_EQ(o.case_id, 42);
  EXPECT_EQ(exit_code_for({o}), 0);
}

TEST(Judgement, MissedExpectationCountsThatExecutionOnly) {
  const CaseInstance inst = instance(Expect::crash);
  const ExecutionResult crashed = execution(1, Mode::fresh, ExecStatus::crash, {"a", "b"});
  const ExecutionResult passed = execution(2, Mode::pool, ExecStatus::pass, {"a", "b"});
  const CaseOutcome o = judge_case(inst, 1, {&crashed, &passed});
  EXPECT_FALSE(o.as_expected);
  ASSERT_EQ(o.against.size(), 1u);
  EXPECT_EQ(o.against.at(2), Against::status);
  EXPECT_EQ(o.status, ExecStatus::crash) << "the most severe status";
  EXPECT_EQ(o.verdict, Verdict::crash);
  EXPECT_EQ(exit_code_for({o}), 1);
}

TEST(Judgement, UnexpectedDivergenceCountsThePooledExecution) {
  const CaseInstance inst = instance();
  const ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"});
  const ExecutionResult p = execution(2, Mode::pool, ExecStatus::pass, {"a", "X"});
  const CaseOutcome o = judge_case(inst, 1, {&f, &p});
  ASSERT_TRUE(o.differential.has_value());
  EXPECT_EQ(o.differential->rank, 1);
  EXPECT_EQ(o.against.at(2), Against::differential);
  EXPECT_EQ(o.against.count(1), 0u);
  EXPECT_EQ(exit_code_for({o}), 1);
}

TEST(Judgement, ACaseSkippedWhereverItRanMeetsAnyExpectationAndOwesNothing) {
  for (const CaseInstance& inst : {instance(), instance(Expect::crash, "stream_race")}) {
    const ExecutionResult f = execution(1, Mode::fresh, ExecStatus::skip, {});
    const ExecutionResult p = execution(2, Mode::pool, ExecStatus::skip, {});
    const CaseOutcome o = judge_case(inst, 1, {&f, &p});
    EXPECT_TRUE(o.as_expected) << "a seeded bug that could not run is no missed finding";
    EXPECT_TRUE(o.against.empty());
    EXPECT_EQ(o.status, ExecStatus::skip);
    EXPECT_FALSE(o.verdict.has_value());
    EXPECT_EQ(exit_code_for({o}), 0);
  }
}

TEST(Judgement, ASkipInOneModeOnlyIsAFreshVsPooledDifference) {
  // Skipped pooled, run fresh: what the pooled world kept decided the skip.
  const CaseInstance inst = instance();
  const ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"});
  const ExecutionResult p = execution(2, Mode::pool, ExecStatus::skip, {});
  const CaseOutcome o = judge_case(inst, 1, {&f, &p});
  EXPECT_EQ(o.status, ExecStatus::skip);
  ASSERT_TRUE(o.differential.has_value());
  EXPECT_EQ(o.against.at(2), Against::differential);
  EXPECT_EQ(exit_code_for({o}), 1);
}

TEST(Judgement, SeededBugOwesOnlyCompletion) {
  const CaseInstance inst = instance(Expect::pass, "state_leak");
  const ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"});
  const ExecutionResult p = execution(2, Mode::pool, ExecStatus::fail, {"a", "X"});
  const CaseOutcome shown = judge_case(inst, 1, {&f, &p});
  EXPECT_TRUE(shown.as_expected) << "its divergence and failure are what it exists to show";
  EXPECT_TRUE(shown.differential.has_value());

  const ExecutionResult hung = execution(3, Mode::pool, ExecStatus::hang, {});
  const CaseOutcome broken = judge_case(inst, 1, {&f, &hung});
  EXPECT_FALSE(broken.as_expected);
  EXPECT_EQ(broken.against.at(3), Against::incomplete);
}

TEST(Judgement, OutputsVaryingAcrossRepeatsAreNondeterministic) {
  const CaseInstance inst = instance();
  const ExecutionResult p1 = execution(1, Mode::pool, ExecStatus::pass, {"a"});
  const ExecutionResult p2 = execution(2, Mode::pool, ExecStatus::pass, {"a"});
  const ExecutionResult p3 = execution(3, Mode::pool, ExecStatus::pass, {"b"});
  const CaseOutcome o = judge_case(inst, 1, {&p1, &p2, &p3});
  EXPECT_EQ(o.verdict, Verdict::nondeterministic);
  EXPECT_EQ(o.against.at(3), Against::nondeterministic);
  EXPECT_EQ(o.against.size(), 1u);
  // Differing across modes only is the differential, not nondeterminism.
  const ExecutionResult f = execution(4, Mode::fresh, ExecStatus::pass, {"b"});
  EXPECT_FALSE(judge_case(inst, 1, {&f, &p1}).verdict.has_value());
}

/// A passing execution whose ranks' outputs are `outputs`, its collectives through `transport`.
ExecutionResult passed(uint64_t id, Mode mode, const std::vector<std::string>& outputs,
                       std::string_view transport) {
  return through(execution(id, mode, ExecStatus::pass, outputs), transport);
}

// Fresh through nccl, pooled through gloo_staged: a difference may be reduction order alone, so it
// is reported as across transports and not counted against the run.
TEST(Judgement, ADivergenceAcrossTransportsIsReportedButNotCounted) {
  const CaseInstance inst = instance();
  const ExecutionResult f = passed(1, Mode::fresh, {"a", "b"}, kCollectivesNccl);
  const ExecutionResult p = passed(2, Mode::pool, {"a", "X"}, kCollectivesGlooStaged);
  const CaseOutcome o = judge_case(inst, 1, {&f, &p});
  ASSERT_TRUE(o.differential.has_value());
  EXPECT_EQ(o.differential->transports, "expected nccl, got gloo_staged");
  EXPECT_NE(o.differential->describe().find(
                "; across transports (expected nccl, got gloo_staged): outputs may differ by "
                "reduction order"),
            std::string::npos)
      << o.differential->describe();
  EXPECT_TRUE(o.as_expected);
  EXPECT_TRUE(o.against.empty());
  EXPECT_FALSE(o.verdict.has_value());
  EXPECT_EQ(exit_code_for({o}), 0);
}

// A divergence within one transport is the one reported, even after one across transports.
TEST(Judgement, ADivergenceWithinOneTransportComesBeforeOneAcross) {
  const CaseInstance inst = instance();
  const ExecutionResult f = passed(1, Mode::fresh, {"a", "b"}, kCollectivesNccl);
  const ExecutionResult across = passed(2, Mode::pool, {"a", "X"}, kCollectivesGlooStaged);
  const ExecutionResult within = passed(3, Mode::pool, {"Y", "b"}, kCollectivesNccl);
  const CaseOutcome o = judge_case(inst, 1, {&f, &across, &within});
  ASSERT_TRUE(o.differential.has_value());
  EXPECT_TRUE(o.differential->transports.empty());
  EXPECT_EQ(o.differential->rank, 0);
  EXPECT_EQ(o.against.at(3), Against::differential);
  EXPECT_EQ(o.against.count(2), 0u);
}

TEST(Judgement, RepeatsAcrossTransportsAreNotNondeterministic) {
  const CaseInstance inst = instance();
  const ExecutionResult p1 = passed(1, Mode::pool, {"a"}, kCollectivesNccl);
  const ExecutionResult p2 = passed(2, Mode::pool, {"b"}, kCollectivesGlooStaged);
  const CaseOutcome o = judge_case(inst, 1, {&p1, &p2});
  EXPECT_FALSE(o.verdict.has_value());
  EXPECT_TRUE(o.as_expected);
  const ExecutionResult p3 = passed(3, Mode::pool, {"c"}, kCollectivesGlooStaged);
  EXPECT_EQ(judge_case(inst, 1, {&p1, &p2, &p3}).verdict, Verdict::nondeterministic)
      << "within one transport they still count";
}

/// Gives rank 0 of `e` an op log: a kernel on stream 1 writes buffer 1, a kernel on stream 0
/// reads it, ordered by an event only when `ordered`.
void with_op_log(ExecutionResult& e, bool ordered) {
  CaseCapture& c = e.ranks.at(0).done->capture;
  c.allocs = {AllocRecord{0, false, 1, "x", "device", 64, 0, 0}};
  c.ops.push_back(OpRecord{0, 1, "kernel", "write x", {}, {1}, -1});
  if (ordered) {
    c.ops.push_back(OpRecord{1, 1, "record", "record", {}, {}, 0});
    c.ops.push_back(OpRecord{2, 0, "wait", "wait", {}, {}, 0});
  }
  c.ops.push_back(OpRecord{c.ops.size(), 0, "kernel", "read x", {1}, {}, -1});
}

TEST(Judgement, AStreamRaceInTheOpLogIsTheVerdictEvenWhenOutputsAgree) {
  const CaseInstance inst = instance();
  ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"});
  ExecutionResult p = execution(2, Mode::pool, ExecStatus::pass, {"a", "b"});
  with_op_log(f, /*ordered=*/true);
  with_op_log(p, /*ordered=*/false);
  const CaseOutcome o = judge_case(inst, 1, {&f, &p});
  EXPECT_EQ(o.verdict, Verdict::stream_race);
  ASSERT_TRUE(o.race.has_value());
  EXPECT_EQ(o.race->execution, 2u) << "the fresh execution was ordered";
  EXPECT_EQ(o.race->race.first.name, "write x");
  EXPECT_EQ(o.race->race.second.name, "read x");
  EXPECT_EQ(o.race->executions, 1u);
  EXPECT_EQ(o.against.at(2), Against::race) << "a race in a case that is not a seeded race";
  EXPECT_EQ(exit_code_for({o}), 1);
}

TEST(Judgement, ASeededStreamRaceIsJudgedOnTheRaceBeingFound) {
  const CaseInstance inst = instance(Expect::pass, "stream_race");
  ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"});
  with_op_log(f, /*ordered=*/false);
  const CaseOutcome found = judge_case(inst, 1, {&f});
  EXPECT_TRUE(found.as_expected);
  EXPECT_EQ(found.verdict, Verdict::stream_race);

  ExecutionResult clean = execution(2, Mode::fresh, ExecStatus::pass, {"a", "b"});
  with_op_log(clean, /*ordered=*/true);
  const CaseOutcome missed = judge_case(inst, 1, {&clean});
  EXPECT_FALSE(missed.as_expected);
  EXPECT_EQ(missed.against.at(2), Against::seeded_missed);
  EXPECT_FALSE(missed.verdict.has_value());
}

/// Gives rank 0 of `e` an opaque call on stream 1 handed buffer 1 (an access of unknown
/// direction) and a kernel on stream 0 reading it, unordered; with `exact`, then a kernel on
/// stream 2 writing it (a race of known directions with the read).
void with_opaque_call(ExecutionResult& e, bool exact) {
  CaseCapture& c = e.ranks.at(0).done->capture;
  c.allocs = {AllocRecord{0, false, 1, "x", "device", 64, 0, 0}};
  OpRecord call{0, 1, "native", "lib_fill", {}, {}, -1};
  call.touches = {1};
  c.ops.push_back(call);
  c.ops.push_back(OpRecord{1, 0, "kernel", "read x", {1}, {}, -1});
  if (exact) c.ops.push_back(OpRecord{2, 2, "kernel", "write x", {}, {1}, -1});
}

TEST(Judgement, ARaceCandidateIsNoFindingNorAMissedSeededRaceAndARaceOfKnownDirectionsWins) {
  ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"});
  ExecutionResult p = execution(2, Mode::pool, ExecStatus::pass, {"a", "b"});
  with_opaque_call(f, /*exact=*/false);
  with_opaque_call(p, /*exact=*/false);
  const CaseOutcome healthy = judge_case(instance(), 1, {&f, &p});
  EXPECT_TRUE(healthy.as_expected);
  EXPECT_FALSE(healthy.verdict.has_value());
  ASSERT_TRUE(healthy.race.has_value());
  EXPECT_TRUE(healthy.race->race.candidate);
  EXPECT_EQ(healthy.race->race.first.name, "lib_fill");
  EXPECT_TRUE(healthy.race->race.first.inferred);
  EXPECT_EQ(healthy.race->executions, 2u);
  EXPECT_EQ(exit_code_for({healthy}), 0);

  const CaseOutcome seeded = judge_case(instance(Expect::pass, "stream_race"), 1, {&f});
  EXPECT_TRUE(seeded.as_expected) << "a candidate is not a missed seeded race: cpreplay decides";
  EXPECT_FALSE(seeded.verdict.has_value());

  // A later execution with a race of known directions is the finding, counted as ever.
  ExecutionResult exact = execution(3, Mode::pool, ExecStatus::pass, {"a", "b"});
  with_opaque_call(exact, /*exact=*/true);
  const CaseOutcome o = judge_case(instance(), 1, {&f, &exact});
  ASSERT_TRUE(o.race.has_value());
  EXPECT_FALSE(o.race->race.candidate);
  EXPECT_EQ(o.race->execution, 3u);
  EXPECT_EQ(o.race->race.first.name, "read x");
  EXPECT_EQ(o.race->executions, 2u) << "both executions have a race";
  EXPECT_EQ(o.verdict, Verdict::stream_race);
  EXPECT_EQ(o.against.at(3), Against::race);
}

TEST(Judgement, ALogTheCheckCannotReadIsANoteNotAFinding) {
  const CaseInstance inst = instance();
  ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a"});
  f.ranks.at(0).done->capture.ops.push_back(OpRecord{0, 0, "kernel", "k", {9}, {}, -1});
  const CaseOutcome o = judge_case(inst, 1, {&f});
  EXPECT_FALSE(o.race.has_value());
  ASSERT_EQ(o.race_notes.size(), 1u);
  EXPECT_NE(o.race_notes[0].find("never allocates"), std::string::npos) << o.race_notes[0];
  EXPECT_TRUE(o.as_expected);
}

TEST(Judgement, ASymmetricLayoutThatDiffersAcrossRanksIsAllocatorOrder) {
  const CaseInstance inst = instance();
  ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "a"});
  f.ranks.at(0).done->capture.allocs = {AllocRecord{0, false, 1, "acc", "symmetric", 64, 0, 0}};
  f.ranks.at(1).done->capture.allocs = {AllocRecord{0, false, 1, "acc", "symmetric", 64, 128, 0}};
  const CaseOutcome o = judge_case(inst, 1, {&f});
  EXPECT_EQ(o.verdict, Verdict::allocator_order) << "even though the outputs agree";
  ASSERT_TRUE(o.allocation.has_value());
  EXPECT_EQ(o.allocation->mismatch.b.offset, 128u);
  EXPECT_EQ(o.against.at(1), Against::allocation);

  const CaseOutcome seeded = judge_case(instance(Expect::pass, "allocator_order"), 1, {&f});
  EXPECT_TRUE(seeded.as_expected);
  const ExecutionResult clean = execution(2, Mode::fresh, ExecStatus::pass, {"a", "a"});
  const CaseOutcome missed = judge_case(instance(Expect::pass, "allocator_order"), 1, {&clean});
  EXPECT_EQ(missed.against.at(2), Against::seeded_missed);
}

TEST(Judgement, RanksCallingACollectiveDifferentlyIsACollectiveMismatch) {
  const CaseInstance inst = instance();
  ExecutionResult f = execution(1, Mode::fresh, ExecStatus::pass, {"a", "a"});
  f.ranks.at(0).done->capture.collectives = {
      CollectiveRecord{0, "all_reduce", 0, DType::f32, 64, -1}};
  f.ranks.at(1).done->capture.collectives = {
      CollectiveRecord{0, "all_reduce", 0, DType::f32, 32, -1}};
  const CaseOutcome o = judge_case(inst, 1, {&f});
  EXPECT_EQ(o.verdict, Verdict::collective_mismatch);
  ASSERT_TRUE(o.collective_mismatch.has_value());
  EXPECT_EQ(o.collective_mismatch->mismatch.field, "bytes");
  EXPECT_EQ(o.against.at(1), Against::collective);
  EXPECT_EQ(exit_code_for({o}), 1);
}

// Rank 1 aborted inside collective #0; both flight records hold what each rank entered.
ExecutionResult crashed_in_collective(uint64_t id, uint64_t bytes_rank1) {
  ExecutionResult e = execution(id, Mode::fresh, ExecStatus::crash, {});
  e.ranks.resize(2);
  e.ranks[0].entered = {CollectiveRecord{0, "all_reduce", 0, DType::f32, 64, -1}};
  e.ranks[1].exit = ExitInfo{.exit_code = -1, .signal = 6};
  e.ranks[1].entered = {CollectiveRecord{0, "all_reduce", 0, DType::f32, bytes_rank1, -1}};
  return e;
}

TEST(Judgement, AMismatchInTheFlightRecordsNamesTheCauseOfACrash) {
  const ExecutionResult e = crashed_in_collective(1, 32);
  const CaseOutcome o = judge_case(instance(), 1, {&e});
  EXPECT_EQ(o.status, ExecStatus::crash);
  EXPECT_EQ(o.verdict, Verdict::collective_mismatch) << "the cause, not the symptom";
  ASSERT_TRUE(o.collective_mismatch.has_value());
  EXPECT_EQ(o.collective_mismatch->mismatch.value_b, "32");
  EXPECT_EQ(o.against.at(1), Against::status);
  EXPECT_EQ(exit_code_for({o}), 1);

  // The same records agreeing: a plain crash.
  const ExecutionResult agreed = crashed_in_collective(2, 64);
  const CaseOutcome plain = judge_case(instance(), 1, {&agreed});
  EXPECT_EQ(plain.verdict, Verdict::crash);
  EXPECT_FALSE(plain.collective_mismatch.has_value());
}

TEST(Judgement, ASeededCollectiveMismatchMayCrashWhereTheMismatchExplainsIt) {
  const CaseInstance inst = instance(Expect::pass, "collective_mismatch");
  const ExecutionResult e = crashed_in_collective(1, 32);
  const CaseOutcome o = judge_case(inst, 1, {&e});
  EXPECT_TRUE(o.as_expected) << "the crash is what the seeded mismatch does";
  EXPECT_EQ(o.verdict, Verdict::collective_mismatch);

  // A crash the records do not explain is still an incomplete seeded bug.
  const ExecutionResult unexplained = crashed_in_collective(2, 64);
  const CaseOutcome bad = judge_case(inst, 1, {&e, &unexplained});
  EXPECT_FALSE(bad.as_expected);
  EXPECT_EQ(bad.against.at(2), Against::incomplete);
  EXPECT_EQ(bad.against.count(1), 0u);

  // Another seeded bug gets no such excuse.
  const CaseOutcome leak = judge_case(instance(Expect::pass, "state_leak"), 1, {&e});
  EXPECT_EQ(leak.against.at(1), Against::incomplete);
}

TEST(Judgement, UnexpectedErrorIsInfrastructureAndWinsTheExitCode) {
  const CaseInstance ok = instance();
  ExecutionResult error = execution(1, Mode::pool, ExecStatus::error, {});
  const ExecutionResult fail = execution(2, Mode::pool, ExecStatus::fail, {"a"});
  EXPECT_EQ(exit_code_for({judge_case(ok, 1, {&fail}), judge_case(ok, 2, {&error})}), 2);
}

TEST(Judgement, SummarizeGroupsByPlanIdAndSkipsCasesThatDidNotRun) {
  std::vector<CaseInstance> plan = {instance(), instance()};
  plan[1].id = 2;
  ExecutionResult e = execution(1, Mode::pool, ExecStatus::pass, {"a"});
  e.case_id = 2;
  const auto outcomes = summarize(plan, {100, 200}, {e});
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].case_id, 200);
  EXPECT_EQ(outcomes[0].instance, &plan[1]);
}

}  // namespace
}  // namespace cprr
