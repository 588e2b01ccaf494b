// cprecord --json (print_json) on a hand-judged case: each execution's transport and GPUs, and a
// fresh-vs-pooled divergence across transports flagged as such and not counted against the run.
#include "cli/report.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/report_table.h"
#include "tests/analysis/analysis_support.h"

namespace cprr {
namespace {

TEST(Report, JsonCarriesEachExecutionsTransportAndFlagsADivergenceAcrossThem) {
  CaseInstance inst;
  inst.id = 1;
  inst.info.name = "t/case";
  inst.world_size = 2;
  ExecutionResult f = test::through(test::execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"}),
                                    kCollectivesNccl);
  f.rank_gpus = "0,1";
  ExecutionResult p = test::through(test::execution(2, Mode::pool, ExecStatus::pass, {"a", "X"}),
                                    kCollectivesGlooStaged);
  p.rank_gpus = "0,0";
  std::ostringstream out;
  print_json(out, {judge_case(inst, 7, {&f, &p})}, RunInfo{});
  const auto doc = nlohmann::json::parse(out.str());
  const auto& c = doc["cases"][0];
  EXPECT_EQ(c["executions"][0]["collectives"], "nccl");
  EXPECT_EQ(c["executions"][0]["rank_gpus"], "0,1");
  EXPECT_EQ(c["executions"][1]["collectives"], "gloo_staged");
  EXPECT_EQ(c["executions"][1]["rank_gpus"], "0,0");
  EXPECT_TRUE(c["fresh_vs_pool"]["across_transports"].get<bool>());
  EXPECT_NE(c["fresh_vs_pool"]["detail"].get<std::string>().find(
                "across transports (expected nccl, got gloo_staged)"),
            std::string::npos)
      << c["fresh_vs_pool"];
  EXPECT_TRUE(c["as_expected"].get<bool>());
  EXPECT_FALSE(c["executions"][1].contains("unexpected"));
  EXPECT_EQ(doc["unexpected"], 0);
}

// Start-up a case paid at first use (a CUDA world's NCCL wait, its symmetric pool) is in the
// JSON apart from the world's start, and the table says how many executions paid it.
TEST(Report, StartUpPaidAtFirstUseIsReportedApartFromTheWorldsStart) {
  CaseInstance inst;
  inst.id = 1;
  inst.info.name = "t/case";
  inst.world_size = 2;
  ExecutionResult f = test::execution(1, Mode::fresh, ExecStatus::pass, {"a", "b"});
  f.startup_phases = {{"cuda context", 400}};
  f.first_use_phases = {{"nccl communicator (waited for)", 300}, {"symmetric arena", 200}};
  ExecutionResult p = test::execution(2, Mode::pool, ExecStatus::pass, {"a", "b"});
  f.case_id = p.case_id = inst.id;
  const std::vector<CaseOutcome> outcomes = {judge_case(inst, 7, {&f, &p})};
  std::ostringstream json;
  print_json(json, outcomes, RunInfo{});
  const auto doc = nlohmann::json::parse(json.str());
  const auto& fresh = doc["cases"][0]["executions"][0];
  ASSERT_EQ(fresh["first_use_phases"].size(), 2u);
  EXPECT_EQ(fresh["first_use_phases"][1]["phase"], "symmetric arena");
  EXPECT_EQ(fresh["first_use_phases"][1]["ms"], 200);
  EXPECT_EQ(fresh["startup_phases"].size(), 1u);
  EXPECT_TRUE(doc["cases"][0]["executions"][1]["first_use_phases"].empty());
  std::ostringstream table;
  print_table(table, {f, p}, outcomes, RunInfo{}, false);
  EXPECT_NE(table.str().find("start-up left to first use: paid inside 1 execution, median "),
            std::string::npos)
      << table.str();
}

// An execution with two races: the first is the finding (replays confirm it); the other is in
// --json's race "more" and on an "also:" line of the table, said to be not replayed.
TEST(Report, AnExecutionsOtherRacesAreReportedBesideTheFirst) {
  CaseInstance inst;
  inst.id = 1;
  inst.info.name = "t/case";
  inst.world_size = 1;
  ExecutionResult f = test::execution(1, Mode::fresh, ExecStatus::pass, {"a"});
  f.case_id = inst.id;
  CaseCapture& c = f.ranks[0].done->capture;
  c.allocs = {AllocRecord{0, false, 1, "x", "device", 64, 0, 0},
              AllocRecord{1, false, 2, "y", "device", 64, 64, 0}};
  c.ops = {OpRecord{0, 1, "kernel", "write x", {}, {1}, -1},
           OpRecord{1, 0, "kernel", "read x", {1}, {}, -1},
           OpRecord{2, 1, "kernel", "write y", {}, {2}, -1},
           OpRecord{3, 0, "kernel", "read y", {2}, {}, -1}};
  const std::vector<CaseOutcome> outcomes = {judge_case(inst, 7, {&f})};
  std::ostringstream json;
  print_json(json, outcomes, RunInfo{});
  const auto race = nlohmann::json::parse(json.str())["cases"][0]["race"];
  EXPECT_EQ(race["second"]["name"], "read x") << race;
  ASSERT_EQ(race["more"].size(), 1u) << race;
  EXPECT_EQ(race["more"][0]["second"]["name"], "read y");
  EXPECT_EQ(race["more"][0]["buffer"], "y");
  std::ostringstream table;
  print_table(table, {f}, outcomes, RunInfo{}, false);
  EXPECT_NE(table.str().find("  also: rank 0 stream 1 op #2 (kernel 'write y') and rank 0 "
                             "stream 0 op #3 (kernel 'read y') race on bytes [0, 64) of 'y'"),
            std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("(not replayed)"), std::string::npos);
}

}  // namespace
}  // namespace cprr
