// judge_case / summarize / exit_code_for on hand-built executions: which executions count against
// the run and why, the record-time verdict and the fresh-vs-pooled differential.
#include "analysis/judgement.h"

#include <gtest/gtest.h>

#include "tests/analysis/analysis_support.h"

namespace cprr {
namespace {

using test::execution;

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
