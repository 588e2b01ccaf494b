// Running cprecord's plan (commands/record_run.h) against scripted worlds
// (tests/recorder/engine/fake_world.h): every repeat of every case in every mode, in plan order
// or in --shuffle's order per repeat, each execution in the store once run_plan returns, and
// --fail-fast stopping after the first case that is not as expected.
#include "commands/record_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "recorder/engine/plan.h"
#include "schema/record_reader.h"
#include "tests/analysis/rank_reports.h"
#include "tests/recorder/engine/fake_world.h"

namespace cprr {
namespace {

using fake_world::FakeWorlds;
using fake_world::Script;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

CaseInstance instance(uint32_t id, const std::string& name) {
  CaseInstance i;
  i.id = id;
  i.info.name = name;
  i.world_size = 2;
  i.seed = id;
  return i;
}

class RecordRunTest : public ::testing::Test {
 protected:
  RecordRunTest() {
    std::filesystem::remove(db_);
    for (uint32_t i = 1; i <= 5; ++i) cases_.push_back(instance(i, "test/c" + std::to_string(i)));
  }
  ~RecordRunTest() override { std::filesystem::remove(db_); }

  // Runs `plan` over scripted worlds into a new run of db_; returns what run_plan returned. The
  // plan's case_ids refer to case_ids_, which the store fills here, as cprecord's do.
  PlanRun run(RecordPlan plan) {
    ControllerConfig cc;
    cc.worker = "fake-worker";
    cc.retire_in_background = false;
    Controller controller(cc, std::make_unique<FakeWorlds>(script_));
    RecordWriter writer(
        db_,
        RunMeta{BackendKind::cpu, {Mode::fresh, Mode::pool}, Placement::best_fit, "fake-worker"});
    case_ids_ = writer.add_cases(plan.cases);
    std::ostringstream err;
    PlanRun ran = run_plan(plan, controller, writer, ProgressStyle::lines, err);
    progress_ = err.str();
    return ran;
  }
  // The case names in the order the worlds were asked to run them.
  std::vector<std::string> started() const {
    std::vector<std::string> names;
    for (const RunCase& r : script_->started) names.push_back(r.name);
    return names;
  }

  const std::string db_ = "/tmp/cprr-record-run-test-" + std::to_string(::getpid()) + ".db";
  std::vector<CaseInstance> cases_;
  std::vector<int64_t> case_ids_;
  std::shared_ptr<Script> script_ = std::make_shared<Script>();
  std::string progress_;
};

TEST_F(RecordRunTest, EveryRepeatOfEveryCaseInEveryModeInPlanOrderAndAllStored) {
  const std::vector<CaseInstance> two(cases_.begin(), cases_.begin() + 2);
  const std::vector<Mode> modes{Mode::fresh, Mode::pool};
  const PlanRun ran = run(RecordPlan{two, case_ids_, modes, /*repeat=*/2});
  EXPECT_THAT(started(), ElementsAre("test/c1", "test/c1", "test/c2", "test/c2", "test/c1",
                                     "test/c1", "test/c2", "test/c2"));
  ASSERT_EQ(ran.results.size(), 8u);
  EXPECT_EQ(ran.results[0].mode, Mode::fresh);
  EXPECT_EQ(ran.results[1].mode, Mode::pool);
  EXPECT_EQ(ran.results[4].attempt, 2) << "the second repeat";
  EXPECT_FALSE(ran.stopped.has_value());
  // Committed before run_plan returned: the store holds every execution of both cases.
  const RecordReader reader(db_);
  EXPECT_EQ(reader.executions(case_ids_[0]).size(), 4u);
  EXPECT_EQ(reader.executions(case_ids_[1]).size(), 4u);
  // Not a TTY: a line per execution as it finishes.
  EXPECT_THAT(progress_, HasSubstr("test/c2@2"));
}

TEST_F(RecordRunTest, ShuffleRunsEachRepeatInItsOwnOrderDrawnFromTheSeed) {
  const uint64_t seed = 12345;
  run(RecordPlan{cases_,
                 case_ids_,
                 {Mode::pool},
                 /*repeat=*/2,
                 Placement::best_fit,
                 /*fail_fast=*/false,
                 seed});
  std::vector<std::string> want;
  for (int rep = 0; rep < 2; ++rep) {
    for (std::size_t i : shuffled_order(cases_.size(), seed, rep)) {
      want.push_back(cases_[i].info.name);
    }
  }
  EXPECT_EQ(started(), want);
  EXPECT_NE(std::vector<std::string>(want.begin(), want.begin() + 5),
            std::vector<std::string>(want.begin() + 5, want.end()))
      << "each repeat its own order";
}

TEST_F(RecordRunTest, FailFastStopsAfterTheFirstCaseNotAsExpectedWithEveryModeOfIt) {
  // The first case passes, the second fails in its fresh execution; its pooled one still runs
  // (a case is judged on all its modes), then nothing more.
  script_->collects.push_back(fake_world::every_rank(rank_reports::passed()));
  script_->collects.push_back(fake_world::every_rank(rank_reports::passed()));
  script_->collects.push_back(fake_world::rank0(rank_reports::failed("wrong sum")));
  const PlanRun ran = run(RecordPlan{
      cases_, case_ids_, {Mode::fresh, Mode::pool}, 1, Placement::best_fit, /*fail_fast=*/true});
  EXPECT_THAT(started(), ElementsAre("test/c1", "test/c1", "test/c2", "test/c2"));
  ASSERT_EQ(ran.results.size(), 4u);
  ASSERT_TRUE(ran.stopped.has_value());
  EXPECT_THAT(*ran.stopped, HasSubstr("--fail-fast: case"));
  EXPECT_THAT(*ran.stopped, HasSubstr("test/c2@2"));
}

}  // namespace
}  // namespace cprr
